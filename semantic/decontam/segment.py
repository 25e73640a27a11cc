"""Decontamination over words for scripts written without spaces (`semantic.decontam --segment`).

The normaliser makes every Han and kana character a token of its own, so a 13-gram is 13 words in
English and 13 characters (six or seven words) in Chinese or Japanese. With `segment`, items and
documents are first cut into words by filters/words.py (Chinese, Japanese, Thai), and each Han and
kana character of a word is written, for the normaliser only, as a code point of the supplementary
private-use plane, which it reads as a letter: a segmented word becomes one token, as an English word
is. Thai needs no such step (the normaliser already reads Thai letters as letters; the spaces the
segmenter puts between words separate them). The normaliser itself is untouched, so hashes of text
without those scripts, shipped hash files included, are the same with and without `segment`.

Matches are found in the rewritten text; `to_original` maps their offsets back, which is exact
because the rewriting only inserts spaces and shifts code points one for one.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PLANE = 0xF0000  # supplementary private-use area A: U+F0000..U+FFFFD
_BASE = 0x3000  # Han and kana of the BMP (U+3040..U+FAFF) fit in the plane shifted by this


def _cjk(cp: int) -> bool:
    return 0x3040 <= cp <= 0x30FF or 0x3400 <= cp <= 0x4DBF or 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF


_SHIFT = {cp: _PLANE + cp - _BASE for r in ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
          for cp in range(r[0], r[1] + 1)}


def rewrite(text: str) -> str:
    """A segmented text with its Han and kana shifted into the private-use plane."""
    return text.translate(_SHIFT)


def for_matching(texts: pa.Array, langs: list[str | None] | None = None) -> tuple[list[str], np.ndarray]:
    """(texts as the normaliser should read them, bool per row: rewritten)."""
    from assay.filters import words as W

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = pc.fill_null(texts, "")
    changed = W.needs_segmenting(texts)
    spaced = W.spaced(texts, langs).to_pylist()
    return [rewrite(t) if c else t for t, c in zip(spaced, changed)], changed


def to_original(original: str, rewritten: str) -> np.ndarray:
    """For every character offset of `rewritten` (and its end), the offset in `original`: the
    rewriting inserted spaces and shifted Han and kana one for one."""
    out = np.empty(len(rewritten) + 1, np.int64)
    i = 0
    for j, ch in enumerate(rewritten):
        out[j] = i
        if i < len(original) and (ch == original[i] or (ord(ch) >= _PLANE and _cjk(ord(original[i]))
                                                         and ord(ch) == _SHIFT[ord(original[i])])):
            i += 1
    out[len(rewritten)] = len(original) if i >= len(original) else i
    return out
