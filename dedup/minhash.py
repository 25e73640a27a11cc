"""MinHash signatures and LSH band keys for whole batches, vectorised with NumPy.

Signatures use one-permutation hashing (OPH, Li, Owen & Zhang 2012) with optimal densification
(Shrivastava 2017) instead of `num_perm` separate permutations, so the cost is O(shingles), not
O(shingles x num_perm). Each 64-bit shingle hash x goes through y = a*x + b mod 2^64 (a odd, from
`seed`): the low 32 bits of y pick one of `num_perm` bins, the high 32 bits are its value, and a
document's signature is the minimum value per bin (`np.minimum.at` over (document, bin) slots).
A bin no shingle fell into copies the value of the first non-empty bin along that bin's own fixed
random probe order (the same for every document), which keeps P(bin i agrees) = Jaccard for
documents with fewer shingles than bins. OPH samples without replacement, so its Jaccard estimate
is at least as accurate as `num_perm` independent permutations; tests check it against datasketch.

Banding: the signature is cut into `bands` bands of `rows` values; each band is hashed to one 64-bit
key. Two documents are candidates when any band key matches. For Jaccard s the probability of that is
    P(s) = 1 - (1 - s^rows)^bands,
the S-curve whose midpoint is about (1/bands)^(1/rows). `threshold_table` prints it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from .hashing import single_array, splitmix64, string_buffers
from .kernels import densify, oph_signatures
from .shingles import Shingles
from .tokens import lower, segment, tables

_KEY_MULT = np.uint64(0xA24BAED4963EE407)
_EMPTY = np.uint32(0xFFFFFFFF)  # an empty bin (a real minimum equal to it, p = 2^-32, is refilled alike)
_LOW32, _S32 = np.uint64(0xFFFFFFFF), np.uint64(32)
_PROBE_BLOCK = 1 << 16  # empty (doc, bin) slots resolved per pass of the full probe: bounds the temporaries


@lru_cache(maxsize=16)
def _oph_params(k: int, seed: int) -> tuple[np.uint64, np.uint64, np.ndarray]:
    """(a, b, probe order int64[k, k]) from the seed alone, via a counter-based generator: identical
    on every machine and engine."""
    rng = np.random.Generator(np.random.Philox(seed))
    a = np.uint64(int(rng.integers(0, 1 << 63, dtype=np.uint64)) * 2 + 1)
    b = np.uint64(int(rng.integers(0, 1 << 63, dtype=np.uint64)) * 2 + int(rng.integers(0, 2)))
    probe = np.argsort(rng.random((k, k)), axis=1, kind="stable")
    return a, b, probe


def _densify_numpy(sig: np.ndarray, probe: np.ndarray) -> None:
    """Fill each empty bin of each document that has some non-empty bin, in place (see module doc).
    The definition, kept for `signatures`; `text_signatures` runs the compiled kernels.densify."""
    k = sig.shape[1]
    flat = sig.reshape(-1)
    empty = flat == _EMPTY
    slot = np.flatnonzero(empty)
    if len(slot) == 0:
        return
    doc, col = np.divmod(slot, k)
    some = np.bincount(doc, minlength=sig.shape[0]) < k  # documents with shingles
    keep = some[doc]
    slot, doc, col = slot[keep], doc[keep], col[keep]
    base = doc * k
    src = np.empty(len(slot), np.int64)
    todo = np.arange(len(slot))
    for t in range(4):  # most empty bins resolve within a few probes: cheap gathers first
        j = base[todo] + probe[col[todo], t]
        hit = ~empty[j]
        src[todo[hit]] = j[hit]
        todo = todo[~hit]
    for lo in range(0, len(todo), _PROBE_BLOCK):  # the rest: the whole probe order at once
        part = todo[lo : lo + _PROBE_BLOCK]
        order = base[part, None] + probe[col[part]]
        first = np.argmax(~empty[order], axis=1)
        src[part] = order[np.arange(len(part)), first]
    flat[slot] = flat[src]  # sources are non-empty bins, untouched by this assignment


def s_curve(s: float | np.ndarray, bands: int, rows: int):
    """Probability that a pair with Jaccard s shares at least one band."""
    return 1.0 - (1.0 - np.asarray(s, dtype=float) ** rows) ** bands


def threshold(bands: int, rows: int) -> float:
    """The approximate Jaccard at which the S-curve is steepest, (1/b)^(1/r)."""
    return (1.0 / bands) ** (1.0 / rows)


def threshold_table(bands: int, rows: int, points=(0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)) -> str:
    cells = "  ".join(f"J={s:.2f}: {s_curve(s, bands, rows):.3f}" for s in points)
    return f"{bands} bands x {rows} rows, threshold ~{threshold(bands, rows):.2f}; P(candidate): {cells}"


@dataclass(frozen=True)
class MinHasher:
    num_perm: int = 112
    bands: int = 14
    rows: int = 8
    seed: int = 1

    def __post_init__(self):
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")

    def signatures(self, sh: Shingles) -> np.ndarray:
        """uint32[n_docs, num_perm]; a document without shingles gets all-max values (callers skip it)."""
        k = self.num_perm
        a, b, probe = _oph_params(k, self.seed)
        n = len(sh.offsets) - 1
        sig = np.full(n * k, _EMPTY, np.uint32)
        y = sh.hashes * a
        y += b
        slot = np.repeat(np.arange(0, n * k, k, dtype=np.uint64), np.diff(sh.offsets))
        # bin = floor(low32(y) * k / 2^32): multiply-shift, uniform over the k bins
        slot += ((y & _LOW32) * np.uint64(k)) >> _S32
        np.minimum.at(sig, slot, (y >> _S32).astype(np.uint32))
        sig = sig.reshape(n, k)
        _densify_numpy(sig, probe)
        return sig

    def text_signatures(self, texts: pa.Array, ngram: int, segmented: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(signatures, shingles per document) of texts, the same as
        `signatures(shingle_texts(texts, ngram, segmented))`, computed by the compiled kernel (kernels.py)."""
        k = self.num_perm
        a, b, probe = _oph_params(k, self.seed)
        tables_ = tables(segmented)
        texts = segment(single_array(texts), segmented)
        offsets, data = string_buffers(texts)
        sig, counts, compat = oph_signatures(data, offsets, *tables_, ngram, a, b, k)
        rows = np.flatnonzero(compat)
        if len(rows):  # rows with code points NFKC changes: normalise them and sign them again
            offsets, data = string_buffers(lower(texts.take(pa.array(rows)), np.arange(len(rows))))
            sig[rows], counts[rows], _ = oph_signatures(data, offsets, *tables_, ngram, a, b, k)
        densify(sig, probe)
        return sig, counts

    def band_keys(self, sig: np.ndarray) -> np.ndarray:
        """uint64[n_docs, bands]: one hash per band of `rows` signature values (band index mixed in)."""
        n = sig.shape[0]
        keys = np.empty((n, self.bands), np.uint64)
        for band in range(self.bands):
            acc = np.full(n, band + 1, np.uint64)
            for r in range(band * self.rows, (band + 1) * self.rows):
                acc = acc * _KEY_MULT + sig[:, r].astype(np.uint64)
            keys[:, band] = splitmix64(acc)
        return keys
