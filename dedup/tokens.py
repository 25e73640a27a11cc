"""Tokenisation of a whole Arrow batch in NumPy, by Unicode class of each code point.

Text is first lower-cased (ASCII rows with `ascii_lower`, others with `utf8_lower`, and NFKC for the
rows that contain a code point NFKC would change).
Then every code point is classed once through a lookup table:
  SEP   punctuation, symbols, separators, controls (Unicode P*, S*, Z*, Cc, Cf): ends a token;
  SOLO  a letter of a script written without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer,
        Myanmar): a token on its own, so word n-grams there are character n-grams;
  WORD  anything else: runs of WORD code points are tokens.
The UTF-8 decoding, the classes and the token boundaries are array operations over the batch's byte
buffer; no regex and no Python loop per document or token.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import hash_spans, string_buffers

WORD, SEP, SOLO = 0, 1, 2
COMPAT = 4  # flag: NFKC changes this (non-separator) code point, e.g. fullwidth letters, ligatures
_COMPAT_LIMIT = 0x30000  # no compatibility decompositions above this
_SOLO_RANGES = [
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F),  # Myanmar
    (0x1780, 0x17FF), (0x19E0, 0x19FF),  # Khmer
    (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),  # Han radicals, marks
    (0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F),  # Hiragana, Katakana
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x323AF),  # Han
]
_table: np.ndarray | None = None


def class_table() -> np.ndarray:
    """uint8 class of every code point (built once, ~1 MiB)."""
    global _table
    if _table is None:
        table = np.zeros(0x110000, np.uint8)
        # Planes 3-13 and 15-16 hold no punctuation, symbols or separators: skip them (startup time).
        for cp in list(range(_COMPAT_LIMIT)) + list(range(0xE0000, 0xE1000)):
            cat = unicodedata.category(chr(cp))
            if cat[0] in "PSZ" or cat in ("Cc", "Cf"):
                table[cp] = SEP
        for lo, hi in _SOLO_RANGES:
            block = table[lo : hi + 1]
            block[block == WORD] = SOLO
        for cp in range(0x80, _COMPAT_LIMIT):
            if table[cp] != SEP and unicodedata.normalize("NFKC", chr(cp)) != chr(cp):
                table[cp] |= COMPAT
        _table = table
    return _table


def lower(texts: pa.Array, nfkc_rows: np.ndarray | None = None) -> pa.Array:
    """Lower case (`ascii_lower` for ASCII rows, `utf8_lower` for the rest); rows in `nfkc_rows`
    are NFKC-normalised first."""
    texts = texts.fill_null("")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    is_ascii = pc.string_is_ascii(texts)
    out = pc.ascii_lower(texts)
    if pc.all(is_ascii).as_py() is False:
        other = pc.invert(is_ascii)
        out = pc.replace_with_mask(out, other, pc.utf8_lower(texts.filter(other)).cast(out.type))
    if nfkc_rows is not None and len(nfkc_rows):
        mask = np.zeros(len(out), bool)
        mask[nfkc_rows] = True
        fixed = pc.utf8_lower(pc.utf8_normalize(out.filter(mask), "NFKC"))
        out = pc.replace_with_mask(out, pa.array(mask), fixed.cast(out.type))
    return out


def byte_classes(b: np.ndarray) -> np.ndarray:
    """Class of the code point each byte belongs to (continuation bytes share their lead's class)."""
    # ASCII separators are exactly 0x00-0x2F, 0x3A-0x40, 0x5B-0x60, 0x7B-0x7F (controls, space,
    # punctuation, symbols); range tests beat a table lookup by ~3x. Bytes >= 0x80 start as WORD.
    ascii_sep = (b <= 0x2F) | ((b >= 0x3A) & (b <= 0x40)) | ((b >= 0x5B) & (b <= 0x60)) | ((b >= 0x7B) & (b <= 0x7F))
    cls = ascii_sep.view(np.uint8).copy()  # SEP == 1, WORD == 0
    multi = np.flatnonzero(b >= 0xC0)
    if len(multi):
        last = len(b) - 1
        lead = b[multi].astype(np.int64)
        n = np.where(lead < 0xE0, 2, np.where(lead < 0xF0, 3, 4))
        cp = lead & np.where(n == 2, 0x1F, np.where(n == 3, 0x0F, 0x07))
        for k in (1, 2, 3):
            more = n > k
            follow = b[np.minimum(multi + k, last)].astype(np.int64) & 0x3F
            cp = np.where(more, (cp << 6) | follow, cp)
        lead_cls = class_table()[np.minimum(cp, 0x10FFFF)]
        cls[multi] = lead_cls
        for k in (1, 2, 3):  # continuation bytes take their lead's class
            more = n > k
            cls[multi[more] + k] = lead_cls[more]
    return cls


@dataclass
class Tokens:
    """Token hashes of a batch, flattened: doc i owns hashes[offsets[i]:offsets[i+1]]."""

    hashes: np.ndarray  # uint64[T]
    offsets: np.ndarray  # int64[n+1]


def _spans(low: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, ends, doc offsets into the token list, rows holding COMPAT code points)."""
    offsets, data = string_buffers(low)
    lo, hi = int(offsets[0]), int(offsets[-1])
    b = data[lo:hi]
    cls = byte_classes(b)
    compat = np.flatnonzero(cls & COMPAT)
    compat_rows = np.unique(np.searchsorted(offsets, compat + lo, side="right") - 1)
    cls &= 3
    cont = (b & 0xC0) == 0x80
    inside = cls != SEP
    solo = cls == SOLO
    brk = ~(cls == WORD)  # SEP or SOLO: a token boundary on either side of it
    # starts: a non-continuation byte inside a token whose predecessor is a boundary (or it is SOLO)
    start_m = inside & ~cont
    start_m[1:] &= brk[:-1] | solo[1:]
    # ends: a byte inside a token not followed by a continuation byte and followed by a boundary
    end_m = inside.copy()
    end_m[:-1] &= ~cont[1:] & (brk[1:] | solo[:-1])
    nonempty = offsets[1:] > offsets[:-1]
    first, last = offsets[:-1][nonempty] - lo, offsets[1:][nonempty] - lo - 1
    start_m[first] = inside[first]  # documents never share a token
    end_m[last] = inside[last]
    starts = np.flatnonzero(start_m) + lo
    ends = np.flatnonzero(end_m) + lo + 1
    return data, starts, ends, np.searchsorted(starts, offsets).astype(np.int64), compat_rows


def _segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated aranges starts[i] .. starts[i] + lengths[i]."""
    total = int(lengths.sum())
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return shift + np.arange(total, dtype=np.int64)


def tokenize(texts: pa.Array) -> Tokens:
    """Token hashes per document. NFKC runs only on the rows that hold a code point it would change
    (found from the class table), and their tokens are spliced in: the same tokens as NFKC on
    every row, at a fraction of the cost."""
    data, starts, ends, off, rows = _spans(lower(texts))
    tok = Tokens(hash_spans(data, starts, ends), off)
    if len(rows) == 0:
        return tok
    sub_texts = texts.take(pa.array(rows)) if not isinstance(texts, pa.ChunkedArray) else texts.combine_chunks().take(pa.array(rows))
    data, starts, ends, sub_off, _ = _spans(lower(sub_texts, np.arange(len(rows))))
    sub = Tokens(hash_spans(data, starts, ends), sub_off)
    counts = np.diff(tok.offsets)
    old = np.ones(len(counts), bool)
    old[rows] = False
    counts[rows] = np.diff(sub.offsets)
    new_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out = np.empty(int(new_off[-1]), np.uint64)
    keep = np.flatnonzero(old)
    out[_segments(new_off[keep], counts[keep])] = tok.hashes[_segments(tok.offsets[keep], counts[keep])]
    out[_segments(new_off[rows], counts[rows])] = sub.hashes
    return Tokens(out, new_off)


def text_keys(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(64-bit hash of the token sequence, has-tokens) per document: the exact-dedup key, blind to
    case, punctuation and spacing."""
    tok = tokenize(texts)
    return hash_spans(tok.hashes, tok.offsets[:-1], tok.offsets[1:]), np.diff(tok.offsets) > 0
