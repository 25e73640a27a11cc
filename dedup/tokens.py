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
LOWER = 8  # flag: Arrow's utf8_lower changes this non-ASCII code point (see lower_table)
_COMPAT_LIMIT = 0x30000  # no compatibility decompositions above this
_SOLO_RANGES = [
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F),  # Myanmar
    (0x1780, 0x17FF), (0x19E0, 0x19FF),  # Khmer
    (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),  # Han radicals, marks
    (0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F),  # Hiragana, Katakana
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x323AF),  # Han
]
# With word segmentation (filters/words.py puts spaces between words), these are WORD: the
# segmenter's words are the tokens. Lao, Khmer and Myanmar have no segmenter and stay SOLO.
_SEGMENTED_RANGES = [(0x0E00, 0x0E7F)] + _SOLO_RANGES[6:]  # Thai, then Han and kana
_table: np.ndarray | None = None
_word_table: np.ndarray | None = None
_lower: np.ndarray | None = None
CHUNK_BYTES = 1 << 20  # text per NumPy pass (text_chunks)


def class_table() -> np.ndarray:
    """uint8 class of every code point (~1 MiB), built once per Python and Arrow version and kept
    beside the compiled kernels (__pycache__): building it costs 0.4 s of every run's start-up."""
    global _table
    if _table is None:
        _table, _ = _cached_tables()
    return _table


def word_class_table() -> np.ndarray:
    """class_table() for segmented text: Han, kana and Thai letters are WORD (their flags kept)."""
    global _word_table
    if _word_table is None:
        table = class_table().copy()
        for lo, hi in _SEGMENTED_RANGES:
            block = table[lo : hi + 1]
            solo = (block & 3) == SOLO
            block[solo] = block[solo] & ~np.uint8(3)
        _word_table = table
    return _word_table


def tables(segmented: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(class table, lower table) for the compiled kernels; segmented: see word_class_table."""
    return (word_class_table() if segmented else class_table()), lower_table()


def segment(texts: pa.Array, segmented: bool) -> pa.Array:
    """The texts as the tokenizer reads them: with segmentation, spaces between the words of the
    scripts written without them (filters/words.py)."""
    if not segmented:
        return texts
    from assay.filters.words import spaced

    return spaced(texts)


def lower_table() -> np.ndarray:
    """int32 code point -> its lower case by Arrow's `utf8_lower`, below 0x30000 (nothing above has
    case). Taken from Arrow itself, so the compiled kernel lower-cases exactly as `lower` does."""
    global _lower
    if _lower is None:
        _, _lower = _cached_tables()
    return _lower


def _cached_tables() -> tuple[np.ndarray, np.ndarray]:
    """(class table, lower table) from the cache file, or built and saved there. The file's name holds
    the Unicode and Arrow versions they come from; it holds plain arrays (no pickle)."""
    from pathlib import Path

    name = f"code-point-tables-unicode{unicodedata.unidata_version}-arrow{pa.__version__}-v1.npz"
    path = Path(__file__).parent / "__pycache__" / name
    try:
        with np.load(path, allow_pickle=False) as saved:
            return saved["classes"], saved["lower"]
    except (OSError, KeyError, ValueError):
        pass
    lowered = _build_lower_table()
    classes = _build_class_table(lowered)
    from assay.pipeline.dataset import atomic_path

    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, classes=classes, lower=lowered)
    except OSError:  # a read-only install: build the tables in every process
        pass
    return classes, lowered


def _build_class_table(lowered: np.ndarray) -> np.ndarray:
    table = np.zeros(0x110000, np.uint8)
    # Planes 3-13 and 15-16 hold no punctuation, symbols or separators: skip them.
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
    table[: len(lowered)][lowered != np.arange(len(lowered))] |= LOWER
    return table


def _build_lower_table() -> np.ndarray:
    cps = np.r_[np.arange(0x80, 0xD800), np.arange(0xE000, _COMPAT_LIMIT)]
    low = pc.utf8_lower(pa.array([chr(c) for c in cps.tolist()])).to_pylist()
    if any(len(x) != 1 for x in low):  # the kernel maps one code point to one
        raise RuntimeError("Arrow's utf8_lower maps some code point to several; update kernels.py")
    table = np.arange(_COMPAT_LIMIT, dtype=np.int32)
    table[cps] = [ord(x) for x in low]
    return table


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


def _inside(b: np.ndarray, offsets: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inside, split points, bytes of rows holding COMPAT code points) of the byte buffer `b`.

    inside[k]: byte k belongs to a WORD or SOLO code point. Split points are positions strictly
    inside a run of inside bytes where a token must still end and the next begin: document
    boundaries and both sides of every SOLO character."""
    # After lower(), ASCII word bytes are digits and letters; `(b - lo) < n` in wrapping uint8 is a
    # range test in two passes. The |0x20 keeps A-Z words too, should any survive lower-casing.
    # Bytes >= 0x80 start as WORD and are corrected per code point below (a few % of the bytes).
    inside = np.less(b - np.uint8(0x30), 10)
    inside |= np.less((b | np.uint8(0x20)) - np.uint8(0x61), 26)
    inside |= b >= 0x80
    splits = [offsets]
    compat = np.empty(0, np.int64)
    multi = np.flatnonzero(b >= 0xC0) if len(b) and b.max() >= 0xC0 else np.empty(0, np.int64)
    if len(multi):
        last = len(b) - 1
        lead = b[multi].astype(np.int32)
        n = np.where(lead < 0xE0, 2, np.where(lead < 0xF0, 3, 4))
        cp = lead & np.where(n == 2, 0x1F, np.where(n == 3, 0x0F, 0x07))
        for k in (1, 2, 3):
            follow = b[np.minimum(multi + k, last)].astype(np.int32) & 0x3F
            cp = np.where(n > k, (cp << 6) | follow, cp)
        cls = table[np.minimum(cp, 0x10FFFF)]
        compat = multi[(cls & COMPAT) != 0]
        cls &= 3
        sep = np.flatnonzero(cls == SEP)
        for k in range(4):  # a separator's lead and continuation bytes are all outside
            m = sep[n[sep] > k]
            inside[np.minimum(multi[m] + k, last)] = False
        solo = np.flatnonzero(cls == SOLO)
        if len(solo):
            splits += [multi[solo], multi[solo] + n[solo]]
    s = np.sort(np.concatenate(splits))  # a few thousand at most: sort beats np.unique's hashing
    s = s[(s > 0) & (s < len(b))]
    s = s[inside[s - 1] & inside[s]]
    s = s[np.concatenate([s[:1] >= 0, s[1:] != s[:-1]])]
    return inside, s, compat


@dataclass
class Tokens:
    """Token hashes of a batch, flattened: doc i owns hashes[offsets[i]:offsets[i+1]]."""

    hashes: np.ndarray  # uint64[T]
    offsets: np.ndarray  # int64[n+1]


def _spans(low: pa.Array, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, ends, doc offsets into the token list, rows holding COMPAT code points);
    starts/ends index `data`, the row bytes only (a slice's parent buffer is not touched)."""
    offsets, data = string_buffers(low)
    lo, hi = int(offsets[0]), int(offsets[-1])
    b = data[lo:hi]
    offsets = offsets - lo
    inside, splits, compat = _inside(b, offsets, table)
    compat_rows = np.searchsorted(offsets, compat, side="right") - 1  # ascending
    compat_rows = compat_rows[np.concatenate([compat_rows[:1] >= 0, compat_rows[1:] != compat_rows[:-1]])]
    # Tokens are the runs of inside bytes: padded with outside bytes on both sides, the changes of
    # `inside` alternate start, end, start, ... so one flatnonzero gives both.
    edge = np.zeros(len(b) + 1, bool)
    np.not_equal(inside[1:], inside[:-1], out=edge[1:-1])
    if len(b):
        edge[0], edge[-1] = inside[0], inside[-1]
    change = np.flatnonzero(edge)
    starts, ends = change[0::2], change[1::2]
    if len(splits):  # each split point ends one token and starts the next
        starts = np.insert(starts, np.searchsorted(starts, splits), splits)
        ends = np.insert(ends, np.searchsorted(ends, splits), splits)
    return b, starts, ends, np.searchsorted(starts, offsets).astype(np.int64), compat_rows


def tokenize(texts: pa.Array, segmented: bool = False) -> Tokens:
    """Token hashes per document. NFKC runs only on the rows that hold a code point it would change
    (found from the class table), and their tokens are spliced in: the same tokens as NFKC on
    every row, at a fraction of the cost. `segmented`: words of Chinese, Japanese and Thai are
    tokens (filters/words.py), not their characters."""
    texts = segment(texts, segmented)
    table = tables(segmented)[0]
    data, starts, ends, off, rows = _spans(lower(texts), table)
    tok = Tokens(hash_spans(data, starts, ends), off)
    if len(rows) == 0:
        return tok
    sub_texts = texts.take(pa.array(rows)) if not isinstance(texts, pa.ChunkedArray) else texts.combine_chunks().take(pa.array(rows))
    data, starts, ends, sub_off, _ = _spans(lower(sub_texts, np.arange(len(rows))), table)
    sub = Tokens(hash_spans(data, starts, ends), sub_off)
    counts = np.diff(tok.offsets)
    counts[rows] = np.diff(sub.offsets)
    new_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # Splice as whole slices: the untouched rows between two NFKC rows are one contiguous piece.
    pieces, prev = [], 0
    for i, r in enumerate(rows.tolist()):
        pieces += [tok.hashes[tok.offsets[prev] : tok.offsets[r]], sub.hashes[sub.offsets[i] : sub.offsets[i + 1]]]
        prev = r + 1
    pieces.append(tok.hashes[tok.offsets[prev] :])
    return Tokens(np.concatenate(pieces), new_off)


def text_chunks(texts: pa.Array | pa.ChunkedArray, target_bytes: int | None = None):
    """Zero-copy slices of `texts` holding about `target_bytes` of text each (whole rows, at least
    one). Tokenising, shingling and signing a few MiB at a time keeps the ~20 NumPy temporaries
    per byte or token in the CPU caches: ~30% faster than whole 8k-row batches."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    target = target_bytes or CHUNK_BYTES
    offsets, _ = string_buffers(texts)
    i, n = 0, len(texts)
    while i < n:
        j = int(np.searchsorted(offsets, offsets[i] + target, side="right")) - 1
        j = min(max(j, i + 1), n)
        yield texts.slice(i, j - i)
        i = j


def text_keys(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(64-bit hash of the token sequence, has-tokens) per document: the exact-dedup key, blind to
    case, punctuation and spacing."""
    keys, valid = [np.empty(0, np.uint64)], [np.empty(0, bool)]
    for part in text_chunks(texts):
        tok = tokenize(part)
        keys.append(hash_spans(tok.hashes, tok.offsets[:-1], tok.offsets[1:]))
        valid.append(np.diff(tok.offsets) > 0)
    return np.concatenate(keys), np.concatenate(valid)
