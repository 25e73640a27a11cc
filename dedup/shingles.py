"""Word n-gram shingles for whole Arrow batches (tokens come from tokens.py).

Shingles are the n consecutive tokens starting at each position. A document with fewer than n tokens
(but at least one) gets exactly one shingle made of all its tokens, so two identical short documents
still match; a document with no tokens has no shingles and takes no part in near-dup detection.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .hashing import splitmix64
from .tokens import Tokens, tokenize

_SHINGLE_MULT = np.uint64(0xD6E8FEB86659FD93)  # odd multiplier that chains token hashes


@dataclass
class Shingles:
    """Shingle hashes of a batch: doc i owns hashes[offsets[i]:offsets[i+1]] (maybe none)."""

    hashes: np.ndarray  # uint64[S]
    offsets: np.ndarray  # int64[n+1]

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


def shingle(tokens: Tokens, n: int) -> Shingles:
    """Hash of each window of n tokens that lies inside one document (see module doc for short docs)."""
    h, off = tokens.hashes, tokens.offsets
    counts = np.diff(off)
    per_doc = np.where(counts >= n, counts - n + 1, np.minimum(counts, 1))
    out_off = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.int64)
    total = len(h)
    # Full windows: Horner's rule over n shifted views of the whole token array (contiguous passes,
    # no gathers), then drop the windows that would run past their document's last token.
    width = max(total - n + 1, 0)
    acc = h[:width].copy()
    for k in range(1, n):
        acc *= _SHINGLE_MULT
        acc += h[k : k + width]
    ok = np.ones(width, bool)
    ends = off[1:]
    for k in range(1, n):  # the last n-1 starts of each document (all of a short document's)
        pos = ends[ends - k >= off[:-1]] - k
        ok[pos[pos < width]] = False
    full = splitmix64(acc[ok] ^ np.uint64(n))
    short = np.flatnonzero((counts > 0) & (counts < n))
    if len(short) == 0:
        return Shingles(full, out_off)
    # A short document's one shingle: Horner over its tokens, zeros for the missing ones.
    padded = np.concatenate([h, np.zeros(n, np.uint64)])
    start, w = off[short], counts[short]
    acc = np.zeros(len(short), np.uint64)
    for k in range(n):
        acc = acc * _SHINGLE_MULT + np.where(k < w, padded[start + k], np.uint64(0))
    short_hash = splitmix64(acc ^ w.astype(np.uint64))
    # Full windows before each short document = its output offset minus the short ones before it.
    return Shingles(np.insert(full, out_off[short] - np.arange(len(short)), short_hash), out_off)


def shingle_texts(texts: pa.Array, n: int, segmented: bool = False) -> Shingles:
    """Shingles of n tokens; `segmented`: tokens are the words of Chinese, Japanese and Thai, not
    their characters (see tokens.tokenize)."""
    return shingle(tokenize(texts, segmented), n)


def shingle_sets(texts: pa.Array, n: int, segmented: bool = False) -> list[np.ndarray]:
    """Sorted unique shingle hashes per document: the sets exact Jaccard is computed on."""
    sh = shingle_texts(texts, n, segmented)
    return [np.unique(sh.hashes[a:b]) for a, b in zip(sh.offsets[:-1], sh.offsets[1:])]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two sorted unique hash arrays (two empty sets: 0, they share nothing)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)
