"""MinHash signatures straight from text bytes: lower-case, tokenise, hash, shingle and bin in one
compiled pass per document.

This computes exactly what `tokens.lower` -> `tokens.tokenize` -> `shingles.shingle` ->
`MinHasher.signatures` compute with Arrow and NumPy (a test checks it on real and edge-case text),
but compiled by numba, with no per-byte or per-token temporaries written and re-read: about 4x
faster than the NumPy path on one core. The NumPy modules stay the definition (and serve exact
dedup). `pair_jaccard` verifies candidate pairs with the same shingles: the exact Jaccard of two
documents' shingle sets, as `shingles.jaccard` computes it. `pack_by_top` is the counting pass
with which `components.star_edges` splits a band's keys into parts that sort in cache.

Why numba: the work is a byte-by-byte state machine (UTF-8 decoding, token runs, a ring of the
last n token hashes). NumPy can only express it as ~20 full passes over the batch, each writing a
temporary. numba is a well-kept compiler for exactly this; `cache=True` keeps the machine code under
__pycache__, so workers after the first start without compiling.

All arithmetic is on uint64 and wraps mod 2^64, like NumPy's. Every constant is a NumPy uint64:
numba types a plain Python int as int64, and uint64 (op) int64 gives float64.
"""
from __future__ import annotations

import sys

import numpy as np
from numba import njit

from .hashing import _GOLD, _LEN_MULT, _M1, _M2, _P
from .shingles import _SHINGLE_MULT
from .tokens import COMPAT, LOWER, SOLO

_U = np.uint64
_P64 = _U(_P)
_ONE, _LOW32, _S32 = _U(1), _U(0xFFFFFFFF), _U(32)
_S30, _S27, _S31 = _U(30), _U(27), _U(31)
_SHINGLE_M = _U(_SHINGLE_MULT)
_EMPTY = np.uint32(0xFFFFFFFF)
_FOLD = np.array([c | 0x20 if 0x41 <= c <= 0x5A else c for c in range(256)], np.uint8)
_ASCII_WORD = np.array([chr(c).isascii() and chr(c).isalnum() for c in range(128)], np.int64)


def _without_probes() -> None:
    """Load numba's NumPy implementations and its CFFI typing now, telling two of its probes that
    scipy.linalg and cffi are absent.

    Before its first compile or cache load, numba imports numba.np.arraymath, which imports
    scipy.linalg to see whether BLAS is there (0.3 CPU s: scipy.linalg pulls in numpy.f2py and
    charset_normalizer), and numba.core.typing.cffi_utils, which makes a cffi.FFI() (0.1 CPU s: cffi's
    C parser and pycparser), together a tenth of a whole 150k-document dedup. These kernels use no
    linear algebra and no CFFI: numba's own linear algebra still imports scipy when compiled (only
    np.cov/np.corrcoef fall back to a plain loop), and numba kernels in this process cannot call
    CFFI functions (none in Assay does). Nothing changes for a probe whose module is loaded already."""
    for module, absent in (("numba.np.arraymath", "scipy.linalg"), ("numba.core.typing.cffi_utils", "cffi")):
        if module in sys.modules or absent in sys.modules:
            continue
        sys.modules[absent] = None  # an import of it, or below it, now fails at once
        try:
            __import__(module)
        finally:
            del sys.modules[absent]


_without_probes()


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finaliser (hashing.splitmix64, one value)."""
    z = x + _GOLD
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def _folded(data, j):
    """The byte at j as uint64, ASCII upper case folded by table (no branch on the letter's case)."""
    return _U(_FOLD[data[j]])


@njit(cache=True, inline="always")
def _token_hash(data, s, e):
    """hashing.hash_spans of data[s:e]: its bytes as two little-endian words up to 16 bytes, a
    byte polynomial beyond."""
    n = e - s
    if n > 16:
        poly = _U(0)
        for j in range(s, e):
            poly = poly * _P64 + _folded(data, j) + _ONE
        return _mix(poly ^ _mix(_U(n)))
    first = _U(0)
    for j in range(min(n, 8)):
        first |= _folded(data, s + j) << _U(8 * j)
    h = _mix(first ^ (_U(n) * _LEN_MULT))
    if n <= 8:
        return h
    second = _U(0)
    for j in range(n - 8):
        second |= _folded(data, s + 8 + j) << _U(8 * j)
    return _mix(h ^ second)


@njit(cache=True, inline="always")
def _add_shingle(sig, row, shingle, a, b, k64):
    """One-permutation hashing: the low half of a*x+b picks the bin, the high half is the value."""
    y = shingle * a + b
    slot = ((y & _LOW32) * k64) >> _S32
    # min, not a branch: while a document's bins fill up most shingles win, and the branch on that
    # mispredicted (branchless: kernel 1.18 -> 1.01 CPU s on the 150k-document speed corpus)
    sig[row, slot] = min(np.uint32(y >> _S32), sig[row, slot])


@njit(cache=True, inline="always")
def _token_bounds(data, i, end, table, bounds):
    """Write the start and end of each token of data[i:end] to bounds. Returns (2 x tokens, whether
    some code point is one NFKC changes, whether some non-ASCII one has a lower case).

    ASCII bytes take a branch-free path: a boundary is written at every byte and kept (the count
    advanced) only where word-ness flips. Token edges are too irregular for the branch predictor;
    the plain if/else loop was three times slower."""
    nb, prev, nfkc, upper = 0, 0, False, False
    while i < end:
        c = data[i]
        if c < 0x80:
            w = _ASCII_WORD[c]
            bounds[nb] = i
            nb += w != prev
            prev = w
            i += 1
            continue
        width, cls = 1, 0  # a stray continuation byte counts as a letter, as in tokens.py
        if c >= 0xC0:
            width = 2 if c < 0xE0 else (3 if c < 0xF0 else 4)
            t = table[_decode(data, i, end, width)]
            nfkc |= (t & COMPAT) != 0
            upper |= (t & LOWER) != 0
            cls = t & 3
        if cls == SOLO:  # ends the running token and is a token on its own
            if prev:
                bounds[nb] = i
                nb += 1
            bounds[nb] = i
            bounds[nb + 1] = i + width
            nb += 2
            prev = 0
        else:
            w = 1 if cls == 0 else 0
            bounds[nb] = i
            nb += w != prev
            prev = w
        i += width
    if prev:
        bounds[nb] = end
        nb += 1
    return nb, nfkc, upper


@njit(cache=True, inline="always")
def _decode(data, i, end, width):
    """The code point of the `width`-byte UTF-8 sequence at data[i]."""
    c = data[i]
    cp = c & (0x1F if width == 2 else (0x0F if width == 3 else 0x07))
    for j in range(1, width):
        cp = (cp << 6) | (data[min(i + j, end - 1)] & 0x3F)
    return min(cp, 0x10FFFF)


@njit(cache=True)
def _lowered(data, i, end, lower, out):
    """Copy data[i:end] to out with every non-ASCII code point replaced by lower[cp] (ASCII is
    folded later, when hashed); return the byte count."""
    o = 0
    while i < end:
        c = data[i]
        width = 1 if c < 0xC0 else (2 if c < 0xE0 else (3 if c < 0xF0 else 4))
        cp = _decode(data, i, end, width) if width > 1 else -1
        if cp < 0 or cp >= len(lower) or lower[cp] == cp:
            for j in range(width):
                out[o + j] = data[min(i + j, end - 1)]
            o += width
        else:
            o += _encode(lower[cp], out, o)
        i += width
    return o


@njit(cache=True, inline="always")
def _encode(cp, out, o):
    """Write cp as UTF-8 at out[o]; return its byte count."""
    if cp < 0x80:
        out[o] = cp
        return 1
    if cp < 0x800:
        out[o], out[o + 1] = 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F)
        return 2
    if cp < 0x10000:
        out[o], out[o + 1], out[o + 2] = 0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)
        return 3
    out[o], out[o + 1] = 0xF0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2], out[o + 3] = 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)
    return 4


@njit(cache=True)
def _shingles(data, bounds, nb, ring, m_n, ngram, out):
    """Write the shingle hashes of the tokens data[bounds[2t]:bounds[2t+1]] to out; return their
    count. The shingle of the last `ngram` token hashes h is Horner's sum h_0 M^(n-1) + ... +
    h_(n-1), kept rolling in O(1) per token: acc = acc*M + h_new - h_oldest*M^n."""
    tokens = nb // 2
    ring[:] = 0  # ring[pos] is the oldest of the last `ngram` token hashes
    acc, pos, count = _U(0), 0, 0
    for t in range(tokens):
        h = _token_hash(data, bounds[2 * t], bounds[2 * t + 1])
        acc = acc * _SHINGLE_M + h - ring[pos] * m_n
        ring[pos] = h
        pos = 0 if pos == ngram - 1 else pos + 1
        if t + 1 >= ngram:
            out[count] = _mix(acc ^ _U(ngram))
            count += 1
    if 0 < tokens < ngram:  # a short document: one shingle of all its tokens, zero-padded
        for _ in range(ngram - tokens):
            acc *= _SHINGLE_M
        out[count] = _mix(acc ^ _U(tokens))
        count += 1
    return count


@njit(cache=True)
def _workspace(offsets, ngram):
    """Buffers for one document at a time, sized for the longest: token bounds, a lower-cased copy
    (lower-casing may lengthen a text by half), shingle hashes, the ring of token hashes, M^ngram."""
    longest = 0
    for d in range(len(offsets) - 1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    m_n = _U(1)
    for _ in range(ngram):
        m_n *= _SHINGLE_M
    return (np.empty(2 * longest + 2, np.int64), np.empty(2 * longest + 4, np.uint8),
            np.empty(longest + 2, np.uint64), np.zeros(ngram, np.uint64), m_n)


@njit(cache=True)
def _document_shingles(data, start, end, table, lower, ngram, ws):
    """Shingle hashes of data[start:end] into ws's hash buffer: (count, whether the text holds a
    code point NFKC changes). A document with a non-ASCII capital is lower-cased into the scratch
    buffer first; ASCII case is folded as bytes are hashed."""
    bounds, scratch, hashes, ring, m_n = ws
    nb, compat, upper = _token_bounds(data, start, end, table, bounds)
    if upper:
        n = _lowered(data, start, end, lower, scratch)
        nb, compat, _ = _token_bounds(scratch, 0, n, table, bounds)
        return _shingles(scratch, bounds, nb, ring, m_n, ngram, hashes), compat
    return _shingles(data, bounds, nb, ring, m_n, ngram, hashes), compat


@njit(cache=True, nogil=True)
def oph_signatures(data, offsets, table, lower, ngram, a, b, k):
    """(sig uint32[n, k] before densification, shingles per doc int64[n], needs-NFKC bool[n]).

    data/offsets: the UTF-8 bytes of n documents as stored. table: tokens.class_table(); lower:
    tokens.lower_table(). Tokens are runs of WORD code points; a SOLO one is a token alone."""
    n_docs = len(offsets) - 1
    sig = np.full((n_docs, k), _EMPTY, np.uint32)
    counts = np.zeros(n_docs, np.int64)
    compat = np.zeros(n_docs, np.bool_)
    ws = _workspace(offsets, ngram)
    hashes = ws[2]
    k64 = _U(k)
    for d in range(n_docs):
        counts[d], compat[d] = _document_shingles(data, offsets[d], offsets[d + 1], table, lower, ngram, ws)
        for j in range(counts[d]):
            _add_shingle(sig, d, hashes[j], a, b, k64)
    return sig, counts, compat


@njit(cache=True)
def _set_size(count):
    """Mask of an open-addressing set for `count` values: a power of two at least twice as large."""
    size = 8
    while size < 2 * count:
        size *= 2
    return _U(size - 1)


@njit(cache=True, inline="always")
def _find(values, stamp, gen, mask, h):
    """The slot of h in the set (values, stamp == gen), or the empty slot where it would go."""
    slot = h & mask  # shingle hashes are mixed already: their low bits spread evenly
    while stamp[slot] == gen and values[slot] != h:
        slot = (slot + _ONE) & mask
    return slot


@njit(cache=True, nogil=True)
def pair_jaccard(data, offsets, table, lower, ngram, ia, ib):
    """(exact Jaccard float64[m] of the shingle sets of documents ia[i] and ib[i], needs-NFKC bool[n]
    of the documents seen). The same sets as shingles.shingle_sets; two documents without shingles
    score 0. Document ib[i] goes into a hash set, built once for consecutive pairs that share it (sort
    the pairs by ib); ia[i]'s shingles are made distinct in a second set and looked up in the first.
    A set's slots are valid where their stamp is the set's current generation, so no set is ever
    cleared."""
    ws = _workspace(offsets, ngram)
    hashes = ws[2]
    size = int(_set_size(len(hashes))) + 1
    values_a, values_b = np.empty(size, np.uint64), np.empty(size, np.uint64)
    stamp_a, stamp_b = np.zeros(size, np.int64), np.zeros(size, np.int64)
    jac = np.zeros(len(ia), np.float64)
    compat = np.zeros(len(offsets) - 1, np.bool_)
    nb, mask_b, gen_b = 0, _U(0), 0
    for i in range(len(ia)):
        gen = i + 1
        if i == 0 or ib[i] != ib[i - 1]:
            count, compat[ib[i]] = _document_shingles(data, offsets[ib[i]], offsets[ib[i] + 1], table, lower, ngram, ws)
            mask_b, nb, gen_b = _set_size(count), 0, gen
            for j in range(count):
                slot = _find(values_b, stamp_b, gen_b, mask_b, hashes[j])
                if stamp_b[slot] != gen_b:
                    stamp_b[slot], values_b[slot] = gen_b, hashes[j]
                    nb += 1
        count, compat[ia[i]] = _document_shingles(data, offsets[ia[i]], offsets[ia[i] + 1], table, lower, ngram, ws)
        mask_a, na, inter = _set_size(count), 0, 0
        for j in range(count):
            slot = _find(values_a, stamp_a, gen, mask_a, hashes[j])
            if stamp_a[slot] != gen:  # a shingle of document a not seen before
                stamp_a[slot], values_a[slot] = gen, hashes[j]
                na += 1
                inter += stamp_b[_find(values_b, stamp_b, gen_b, mask_b, hashes[j])] == gen_b
        if na and nb:
            jac[i] = inter / (na + nb - inter)
    return jac, compat


@njit(cache=True, nogil=True)
def densify(sig, probe):
    """minhash._densify_numpy in one pass: each empty bin of a document with some non-empty bin
    copies the first bin along probe[bin] that was non-empty before any filling (in place)."""
    n, k = sig.shape
    empty = np.empty(k, np.bool_)
    for d in range(n):
        filled = 0
        for j in range(k):
            empty[j] = sig[d, j] == _EMPTY
            filled += not empty[j]
        if filled == 0 or filled == k:
            continue
        for j in range(k):
            if empty[j]:
                for t in range(k):
                    src = probe[j, t]
                    if not empty[src]:
                        sig[d, j] = sig[d, src]
                        break


@njit(cache=True, nogil=True)
def pack_by_top(keys, p, bits):
    """(values, bounds): each key's top 64-p bits with its position in the low p bits, grouped by
    the top `bits` bits of the key (positions ascending within a group); the group g is
    values[bounds[g]:bounds[g + 1]]. One counting pass and one scatter, both reading keys in order,
    so the cost per key stays the same however many there are (NumPy's stable argsort of the top
    bits and the gather by it missed cache on every read past a few million keys)."""
    shift = _U(64 - bits) if bits else _U(63)  # a shift by 64 is undefined: keys >> 63 >> 1 is 0
    extra = _U(0) if bits else _ONE
    low = _U(p)
    bounds = np.zeros((1 << bits) + 1, np.int64)
    for i in range(len(keys)):
        bounds[((keys[i] >> shift) >> extra) + _ONE] += 1
    for g in range(1 << bits):
        bounds[g + 1] += bounds[g]
    fill = bounds[:-1].copy()
    out = np.empty(len(keys), np.uint64)
    for i in range(len(keys)):
        g = (keys[i] >> shift) >> extra
        out[fill[g]] = ((keys[i] >> low) << low) | _U(i)
        fill[g] += 1
    return out, bounds
