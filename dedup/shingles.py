"""Text normalisation and word n-gram shingles for whole Arrow batches.

Normalisation: NFKC, lower case, punctuation and symbols become separators, and every character of a script written without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer,
Myanmar) becomes a token of its own, so for those scripts word n-grams are character n-grams and
mixed text works without a language switch. Tokens are whitespace-separated runs.

Shingles are the n consecutive tokens starting at each position. A document with fewer than n tokens
(but at least one) gets exactly one shingle made of all its tokens, so two identical short documents
still match; a document with no tokens has no shingles and takes no part in near-dup detection.
"""
from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import hash_spans, splitmix64, string_buffers

_NO_SPACE_SCRIPTS = r"([\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}])"
_SHINGLE_MULT = np.uint64(0xD6E8FEB86659FD93)  # odd multiplier that chains token hashes

# Bytes that separate tokens: ASCII whitespace, punctuation and symbols (all of them are \p{P} or \p{S}).
_SEP = np.zeros(256, bool)
_SEP[[ord(c) for c in " \t\n\r\x0b\x0c" + string.punctuation]] = True


def normalize(texts: pa.Array) -> pa.Array:
    """Lower-cased text in which every separator is a space-like byte the tokenizer splits on.

    ASCII rows (most of them) only need `ascii_lower`: their punctuation is split on byte by byte.
    Other rows go through NFKC, Unicode lower case, punctuation/symbol/separator removal and the
    spacing of no-space scripts with RE2. Whitespace is not collapsed; the tokenizer skips runs."""
    texts = texts.fill_null("")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    is_ascii = pc.string_is_ascii(texts)
    out = pc.ascii_lower(texts)
    if pc.all(is_ascii).as_py() is False:
        other = pc.invert(is_ascii)
        t = pc.utf8_lower(pc.utf8_normalize(texts.filter(other), "NFKC"))
        # Only non-ASCII separators here (ASCII ones are split on by byte): far fewer regex matches.
        t = pc.replace_substring_regex(t, r"[^\x00-\x7f\p{L}\p{N}\p{M}]+", " ")
        spaced = pc.match_substring_regex(t, _NO_SPACE_SCRIPTS)
        if pc.any(spaced).as_py():
            t = pc.replace_with_mask(t, spaced, pc.replace_substring_regex(t.filter(spaced), _NO_SPACE_SCRIPTS, r" \1 "))
        out = pc.replace_with_mask(out, other, t.cast(out.type))
    return out


@dataclass
class Tokens:
    """Token hashes of a batch, flattened: doc i owns hashes[offsets[i]:offsets[i+1]]."""

    hashes: np.ndarray  # uint64[T]
    offsets: np.ndarray  # int64[n+1]


def tokenize(texts: pa.Array) -> Tokens:
    """Token spans found with NumPy over the whole byte buffer (a token never crosses a document)."""
    offsets, data = string_buffers(normalize(texts))
    lo, hi = int(offsets[0]), int(offsets[-1])
    sep = _SEP[data[lo:hi]]
    word = ~sep
    prev_sep = np.concatenate([[True], sep[:-1]])
    next_sep = np.concatenate([sep[1:], [True]])
    nonempty = offsets[1:] > offsets[:-1]
    prev_sep[offsets[:-1][nonempty] - lo] = True  # a document's first byte starts a token
    next_sep[offsets[1:][nonempty] - lo - 1] = True  # and its last byte ends one
    starts = np.flatnonzero(word & prev_sep) + lo
    ends = np.flatnonzero(word & next_sep) + lo + 1
    hashes = hash_spans(data, starts, ends)
    return Tokens(hashes, np.searchsorted(starts, offsets).astype(np.int64))


def text_keys(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(64-bit hash of the token sequence, has-tokens) per document: the exact-dedup key, blind to
    case, punctuation and spacing."""
    tok = tokenize(texts)
    return hash_spans(tok.hashes, tok.offsets[:-1], tok.offsets[1:]), np.diff(tok.offsets) > 0


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
