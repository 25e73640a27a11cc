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
    doc = np.repeat(np.arange(len(counts)), per_doc)
    start = off[:-1][doc] + (np.arange(out_off[-1], dtype=np.int64) - out_off[:-1][doc])
    width = np.minimum(counts[doc], n)
    short = bool((counts[counts > 0] < n).any())
    padded = np.concatenate([h, np.zeros(n, np.uint64)])
    acc = np.zeros(len(start), np.uint64)
    for k in range(n):
        # Horner's rule over the window; a short document's window stops at its last token.
        term = padded[start + k]
        if short:
            term = np.where(k < width, term, np.uint64(0))
        acc = acc * _SHINGLE_MULT + term
    return Shingles(splitmix64(acc ^ width.astype(np.uint64)), out_off)


def shingle_texts(texts: pa.Array, n: int) -> Shingles:
    return shingle(tokenize(texts), n)


def shingle_sets(texts: pa.Array, n: int) -> list[np.ndarray]:
    """Sorted unique shingle hashes per document: the sets exact Jaccard is computed on."""
    sh = shingle_texts(texts, n)
    return [np.unique(sh.hashes[a:b]) for a, b in zip(sh.offsets[:-1], sh.offsets[1:])]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two sorted unique hash arrays (two empty sets: 0, they share nothing)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)
