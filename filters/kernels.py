"""Compiled per-document n-gram repetition (Gopher): the only heuristic that is sequential by nature
(the duplicate n-gram count skips past each repeat), so it runs as one numba pass over the batch's
word codes instead of a Python loop over strings."""
from __future__ import annotations

import numpy as np
from numba import njit

TOP_NS = (2, 3, 4)
DUP_NS = (5, 6, 7, 8, 9, 10)
_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as int64: multiplicative hash mixing


@njit(cache=True)
def _ngram_hashes(codes, start, count, n):
    out = np.empty(count, dtype=np.int64)
    for i in range(count):
        h = np.int64(n)
        for j in range(n):
            h = (h ^ codes[start + i + j]) * _MIX
            h ^= h >> 29
        out[i] = h
    return out


@njit(cache=True)
def ngram_repetition(codes, lengths, offsets, top_ns, dup_ns):
    """For every document (tokens offsets[d]:offsets[d+1]):

    top[d, k]: characters covered by the most frequent top_ns[k]-gram (its length with single spaces
    between words, times its count; ties go to the n-gram seen first);
    dup[d, k]: characters of dup_ns[k]-grams that repeat an earlier one, scanning left to right and
    jumping past each repeat so no character counts twice (words joined without spaces)."""
    n_docs = len(offsets) - 1
    top = np.zeros((n_docs, len(top_ns)), dtype=np.float64)
    dup = np.zeros((n_docs, len(dup_ns)), dtype=np.float64)
    for d in range(n_docs):
        start = offsets[d]
        m = offsets[d + 1] - start
        for k in range(len(top_ns)):
            n = top_ns[k]
            c = m - n + 1
            if c <= 0:
                continue
            h = _ngram_hashes(codes, start, c, n)
            order = np.argsort(h, kind="mergesort")
            best_count, best_first, run, run_first = 0, 0, 0, 0
            for r in range(c):
                i = order[r]
                if r > 0 and h[i] == h[order[r - 1]]:
                    run += 1
                else:
                    run, run_first = 1, i
                if run > best_count or (run == best_count and run_first < best_first):
                    best_count, best_first = run, run_first
            chars = n - 1
            for j in range(n):
                chars += lengths[start + best_first + j]
            top[d, k] = best_count * chars
        for k in range(len(dup_ns)):
            n = dup_ns[k]
            c = m - n + 1
            if c <= 0:
                continue
            h = _ngram_hashes(codes, start, c, n)
            seen = {np.int64(0)}
            seen.clear()
            i = 0
            total = 0
            while i < c:
                if h[i] in seen:
                    for j in range(n):
                        total += lengths[start + i + j]
                    i += n
                else:
                    seen.add(h[i])
                    i += 1
            dup[d, k] = total
    return top, dup
