"""Text normalisation and word n-gram shingles for whole Arrow batches.

Normalisation (all Arrow compute kernels): NFKC, lower case, punctuation and symbols become spaces,
and every character of a script written without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer,
Myanmar) becomes a token of its own, so for those scripts word n-grams are character n-grams and
mixed text works without a language switch. Tokens are whitespace-separated runs.

Shingles are the n consecutive tokens starting at each position. A document with fewer than n tokens
(but at least one) gets exactly one shingle made of all its tokens, so two identical short documents
still match; a document with no tokens has no shingles and takes no part in near-dup detection.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import hash_spans, splitmix64, string_buffers

_NO_SPACE_SCRIPTS = r"([\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}])"
_SHINGLE_MULT = np.uint64(0xD6E8FEB86659FD93)  # odd multiplier that chains token hashes


def normalize(texts: pa.Array) -> pa.Array:
    """Normalised text with single spaces between tokens (the key for exact dedup, too)."""
    t = pc.utf8_normalize(texts.fill_null(""), "NFKC")
    t = pc.utf8_lower(t)
    t = pc.replace_substring_regex(t, r"[\p{P}\p{S}]+", " ")
    t = pc.replace_substring_regex(t, _NO_SPACE_SCRIPTS, r" \1 ")
    t = pc.replace_substring_regex(t, r"\s+", " ")
    return pc.utf8_trim_whitespace(t)


@dataclass
class Tokens:
    """Token hashes of a batch, flattened: doc i owns hashes[offsets[i]:offsets[i+1]]."""

    hashes: np.ndarray  # uint64[T]
    offsets: np.ndarray  # int64[n+1]


def tokenize(texts: pa.Array) -> Tokens:
    norm = normalize(texts)
    n = len(norm)
    lists = pc.split_pattern(norm, " ")
    flat = pc.list_flatten(lists)
    list_off = np.asarray(lists.offsets)[: n + 1].astype(np.int64) - int(lists.offsets[0].as_py())
    offsets, data = string_buffers(flat)
    starts, ends = offsets[:-1], offsets[1:]
    nonempty = ends > starts  # "" (empty document) splits into one empty token
    hashes = hash_spans(data, starts[nonempty], ends[nonempty])
    kept_before = np.concatenate([[0], np.cumsum(nonempty, dtype=np.int64)])
    return Tokens(hashes, kept_before[list_off])


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
    t_total = len(h)
    counts = np.diff(off)
    doc_of_token = np.repeat(np.arange(len(counts)), counts)
    doc_end = off[1:][doc_of_token]
    pos = np.arange(t_total, dtype=np.int64)
    padded = np.concatenate([h, np.zeros(n, np.uint64)])
    acc = np.zeros(t_total, np.uint64)
    for k in range(n):
        # Horner's rule over the window; tokens past the document's end contribute nothing.
        term = np.where(pos + k < doc_end, padded[k : k + t_total], np.uint64(0))
        acc = acc * _SHINGLE_MULT + term
    # Windows that fit, plus the first position of a document shorter than n.
    doc_start = off[:-1][doc_of_token]
    valid = (pos + n <= doc_end) | ((pos == doc_start) & (doc_end - doc_start < n))
    width = np.minimum(doc_end - pos, n).astype(np.uint64)
    hashes = splitmix64(acc[valid] ^ width[valid])
    per_doc = np.bincount(doc_of_token[valid], minlength=len(counts)).astype(np.int64)
    return Shingles(hashes, np.concatenate([[0], np.cumsum(per_doc)]))


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
