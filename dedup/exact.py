"""`dedup.exact`: documents with the same normalised text are duplicates (one band, key = text hash).

The key is a hash of MinHash's token sequence (NFKC, lower case, punctuation and spacing ignored), so
copies that differ only in case, punctuation or spacing count as exact. Texts without a token take
no part.

A document larger than BIG_BYTES is tokenised in pieces cut before ASCII whitespace (never inside a
token or a UTF-8 sequence, and normalisation does not reach across it), and the sequence hash is
carried from piece to piece, so its key is the same as in one pass while memory stays a few times
the piece, not tens of times the document (tokenising holds ~20 temporaries per byte or token).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from assay.pipeline.stage import register

from .base import KeyDedup
from .hashing import _P, _powers, single_array, splitmix64, string_buffers
from .tokens import text_keys, tokenize

BIG_BYTES = 1 << 20  # documents above this are keyed piece by piece
PIECE_BYTES = 1 << 18
_WHITESPACE = np.array([0x20, 0x0A, 0x09, 0x0D], np.uint8)
_MOD = 1 << 64


@register("dedup.exact")
class ExactDedup(KeyDedup):
    """Exact dedup on a hash of the normalised text. Example: `assay dedup exact docs/ out/`."""

    reason: ClassVar[str] = "exact-duplicate"

    def document_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        return document_keys(table.column("text"))


def document_keys(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """`text_keys` for every row, the large ones keyed piece by piece (same keys, bounded memory)."""
    texts = single_array(texts)
    offsets, data = string_buffers(texts)
    big = np.flatnonzero(np.diff(offsets) > BIG_BYTES)
    if len(big) == 0:
        return text_keys(texts)
    keys, valid = np.empty(len(texts), np.uint64), np.empty(len(texts), bool)
    start = 0
    for row in big.tolist() + [len(texts)]:
        if row > start:  # the run of ordinary rows before this large one, in one zero-copy slice
            keys[start:row], valid[start:row] = text_keys(texts.slice(start, row - start))
        if row < len(texts):
            keys[row], valid[row] = _large_key(data[offsets[row]:offsets[row + 1]])
        start = row + 1
    return keys, valid


def _large_key(text: np.ndarray) -> tuple[np.uint64, bool]:
    """The key `text_keys` gives this UTF-8 text, from pieces: the sequence hash is a polynomial
    sum (t_j + 1) P^(L-1-j) over the token hashes t_j (hashing._poly_spans), so appending a piece of
    m tokens is acc * P^m + (the piece's own sum), finished with the token count as in one pass."""
    acc, count = 0, 0
    for piece in _pieces(text):
        arr = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, len(piece)], np.int32)),
                                                        pa.py_buffer(piece)])
        hashes = tokenize(arr).hashes
        m = len(hashes)
        if m:
            weights = _powers(m)[0][::-1]  # P^(m-1) ... P^0
            own = int(np.sum((hashes + np.uint64(1)) * weights, dtype=np.uint64))
            acc = (acc * pow(_P, m, _MOD) + own) % _MOD
            count += m
    length_mix = splitmix64(np.array([count], np.uint64))
    return splitmix64(np.array([acc], np.uint64) ^ length_mix)[0], count > 0


def _pieces(text: np.ndarray):
    """Views of about PIECE_BYTES, each cut before an ASCII whitespace byte (or, in a run without
    one longer than four pieces, before a byte that starts a UTF-8 character)."""
    pos, n = 0, len(text)
    while pos < n:
        cut = min(pos + PIECE_BYTES, n)
        while cut < n and not np.isin(text[cut], _WHITESPACE):
            window = text[cut:min(cut + PIECE_BYTES, n)]
            found = np.flatnonzero(np.isin(window, _WHITESPACE))
            if len(found):
                cut += int(found[0])
                break
            cut += len(window)
            if cut - pos > 4 * PIECE_BYTES:  # no whitespace for a long way: any character boundary
                while cut < n and 0x80 <= text[cut] < 0xC0:
                    cut += 1
                break
        yield text[pos:cut]
        pos = cut
