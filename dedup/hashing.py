"""Vectorised 64-bit hashing of whole Arrow string arrays with NumPy: no Python loop per string.

A string of up to 16 bytes is hashed from its bytes read as two 64-bit words. A longer string's
hash is a polynomial over its bytes, sum b_j * P^(e-1-j) mod 2^64, finished by the
splitmix64 mixer together with the length. The polynomial of any span [s, e) falls out of one prefix
sum over the whole byte buffer: with Q = P^-1 mod 2^64 (P is odd, so it exists),
    sum_{j=s}^{e-1} b_j P^(e-1-j) = P^(e-1) * (C[e] - C[s]),   C[k] = sum_{j<k} b_j Q^j,
and NumPy's uint64 arithmetic wraps mod 2^64, which is exactly the ring we want. The value depends
only on the span's bytes, so every engine and every batching gives the same hashes.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

_P = 0x9E3779B97F4A7C15  # odd, so invertible mod 2^64
_Q = pow(_P, -1, 1 << 64)
_CHUNK_BYTES = 1 << 23  # bytes hashed per NumPy pass: bounds the temporaries to ~3 x 64 MiB

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)

_pow_cache: dict[str, np.ndarray] = {"p": np.ones(1, np.uint64), "q": np.ones(1, np.uint64)}


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijection on uint64 that spreads every input bit over the output.
    In place on one fresh array plus one scratch array: this runs on every token and shingle."""
    z = x + _GOLD
    t = z >> _S30
    z ^= t
    z *= _M1
    np.right_shift(z, _S27, out=t)
    z ^= t
    z *= _M2
    np.right_shift(z, _S31, out=t)
    z ^= t
    return z


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P^k and Q^k for k < n (cached and grown on demand; cumprod wraps mod 2^64)."""
    if len(_pow_cache["p"]) < n:
        size = max(n, 2 * len(_pow_cache["p"]))
        for key, base in (("p", _P), ("q", _Q)):
            arr = np.full(size, base, np.uint64)
            arr[0] = 1
            _pow_cache[key] = np.cumprod(arr, dtype=np.uint64)
    return _pow_cache["p"][:n], _pow_cache["q"][:n]


def single_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One Array; a ChunkedArray of one chunk (a column of one batch) is returned without a copy,
    which `combine_chunks` would make."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else pa.concat_arrays(arr.chunks)
    return arr


def string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64[n+1], data uint8) of a string/binary array without copying the bytes."""
    arr = single_array(arr)
    if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
        off_type = np.int32
    elif pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        off_type = np.int64
    else:
        raise TypeError(f"expected a string array, got {arr.type}")
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], off_type)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    # Null slots may hold garbage spans in principle; Arrow writers make them empty, and we hash
    # them as the empty string, which callers treat as "no value".
    return offsets, data


def hash_spans(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hashes of the spans data[starts[i]:ends[i]] (ascending, non-overlapping). `data` is
    bytes (uint8) or any unsigned integers, e.g. token hashes to hash a whole token sequence.

    Byte spans of up to 16 bytes (most words) are read as two unaligned 64-bit words and mixed,
    about twice as fast as the polynomial, which handles everything longer."""
    if data.dtype != np.uint8 or len(starts) == 0:
        return _poly_spans(data, starts, ends)
    lengths = ends - starts
    # Every span through the short path (cheaper than splitting the arrays), then the long ones
    # (a few %) are overwritten.
    out = _short_spans(data, starts, lengths)
    long = np.flatnonzero(lengths > 16)
    if len(long):
        # Gather the long spans into one compact buffer first: the prefix sum then only runs over
        # their bytes, not over everything between them.
        long_starts, long_len = starts[long], lengths[long]
        bounds = np.concatenate([[0], np.cumsum(long_len)])
        shift = np.repeat(long_starts - bounds[:-1], long_len)
        compact = data[shift + np.arange(bounds[-1], dtype=np.int64)]
        out[long] = _poly_spans(compact, bounds[:-1], bounds[1:])
    return out


_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_LEN_MULT = np.uint64(0xC2B2AE3D27D4EB4F)


def _short_spans(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    padded = np.concatenate([data, np.zeros(16, np.uint8)])
    # A uint64 view at every byte offset (unaligned reads are fine on the CPUs NumPy runs on).
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    first = words[starts]
    first &= _MASKS[np.minimum(lengths, 8)]
    first ^= lengths.astype(np.uint64) * _LEN_MULT
    out = splitmix64(first)
    long = np.flatnonzero(lengths > 8)
    if len(long):
        second = words[starts[long] + 8] & _MASKS[np.minimum(lengths[long] - 8, 8)]
        out[long] = splitmix64(out[long] ^ second)
    return out


def _poly_spans(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    n = len(starts)
    out = np.empty(n, np.uint64)
    if n == 0:
        return out
    i = 0
    while i < n:
        # Take spans until the chunk holds _CHUNK_BYTES (always at least one span).
        base = int(starts[i])
        j = int(np.searchsorted(ends, base + _CHUNK_BYTES, side="right"))
        j = max(j, i + 1)
        top = int(ends[j - 1])
        p_pow, q_pow = _powers(top - base + 1)
        seg = data[base:top].astype(np.uint64) + np.uint64(1)  # +1: a zero value still counts
        prefix = np.zeros(top - base + 1, np.uint64)
        np.cumsum(seg * q_pow[: top - base], out=prefix[1:])
        s = starts[i:j] - base
        e = ends[i:j] - base
        poly = p_pow[np.maximum(e - 1, 0)] * (prefix[e] - prefix[s])
        out[i:j] = splitmix64(poly ^ splitmix64((e - s).astype(np.uint64)))
        i = j
    return out


def hash_strings(arr: pa.Array) -> np.ndarray:
    """64-bit hash of every string of an Arrow array (nulls hash like the empty string)."""
    offsets, data = string_buffers(arr)
    return hash_spans(data, offsets[:-1], offsets[1:])
