"""MinHash signatures and LSH band keys for whole batches, vectorised with NumPy.

Shingles are hashed to 64 bits (see shingles.py). Each of the `num_perm` permutations is the
bijection v = a*x + b mod 2^32 (a odd) applied to the 32-bit fold x = lo ^ hi of the shingle hash;
a document's signature is the minimum of v over its shingles, one 32-bit value per permutation
(the width datasketch uses). The work is laid out as a (perms x shingles) block of ~8k shingles so
it stays in cache, and reduced per document with `np.minimum.reduceat`: no Python loop per document.

Banding: the signature is cut into `bands` bands of `rows` values; each band is hashed to one 64-bit
key. Two documents are candidates when any band key matches. For Jaccard s the probability of that is
    P(s) = 1 - (1 - s^rows)^bands,
the S-curve whose midpoint is about (1/bands)^(1/rows). `threshold_table` prints it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hashing import splitmix64
from .shingles import Shingles

_BLOCK_SHINGLES = 1 << 13
_KEY_MULT = np.uint64(0xA24BAED4963EE407)


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

    def _perms(self) -> tuple[np.ndarray, np.ndarray]:
        # Derived from the seed alone with a counter-based generator: identical on every machine.
        rng = np.random.Generator(np.random.Philox(self.seed))
        a = rng.integers(1, 1 << 32, self.num_perm, dtype=np.uint64).astype(np.uint32) | np.uint32(1)
        b = rng.integers(0, 1 << 32, self.num_perm, dtype=np.uint64).astype(np.uint32)
        return a[:, None], b[:, None]

    def signatures(self, sh: Shingles) -> np.ndarray:
        """uint32[n_docs, num_perm]; a document without shingles gets all-max values (callers skip it)."""
        a, b = self._perms()
        n = len(sh.offsets) - 1
        out = np.full((n, self.num_perm), np.iinfo(np.uint32).max, np.uint32)
        has = np.flatnonzero(np.diff(sh.offsets) > 0)
        if len(has) == 0:
            return out
        x = sh.hashes
        folded = ((x >> np.uint64(32)) ^ (x & np.uint64(0xFFFFFFFF))).astype(np.uint32)
        doc_starts = sh.offsets[has]
        total = int(sh.offsets[-1])
        i = 0
        buf = np.empty((self.num_perm, _BLOCK_SHINGLES), np.uint32)
        while i < len(has):
            # A block of whole documents holding about _BLOCK_SHINGLES shingles (at least one doc).
            s0 = int(doc_starts[i])
            j = int(np.searchsorted(doc_starts, s0 + _BLOCK_SHINGLES, side="right"))
            j = max(j, i + 1)
            s1 = int(doc_starts[j]) if j < len(has) else total
            width = s1 - s0
            block = buf[:, :width] if width <= buf.shape[1] else np.empty((self.num_perm, width), np.uint32)
            np.multiply(a, folded[None, s0:s1], out=block)
            np.add(block, b, out=block)
            out[has[i:j]] = np.minimum.reduceat(block, doc_starts[i:j] - s0, axis=1).T
            i = j
        return out

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

    def jaccard_estimate(self, sig_a: np.ndarray, sig_b: np.ndarray) -> float:
        return float(np.mean(sig_a == sig_b))
