"""Two-level spherical k-means with faiss, for 100K+ clusters on one machine.

Flat k-means costs n * k * d per iteration and per assignment: at k = 100,000 that is 38 M
multiply-adds per document. Two levels bring it to n * (c + k/c) * d: `coarse` clusters first
(about sqrt(k)), then each coarse cell split into fine clusters in proportion to its share of the
sample. Assignment is an inverted-file search (faiss IndexIVFFlat): the `nprobe` nearest coarse
cells, then the nearest fine centroid among theirs, so a document near a cell border still finds
its best centroid. Vectors are unit length and centroids re-normalised (spherical), so inner
product is cosine similarity.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FLAT_MAX = 4096  # up to this many clusters one level is cheap enough


@dataclass
class Centroids:
    coarse: np.ndarray  # (c, d) float32
    fine: np.ndarray  # (k, d) float32: the clusters
    parent: np.ndarray  # (k,) int32: each fine cluster's coarse cell

    @property
    def k(self) -> int:
        return len(self.fine)


def _kmeans(x: np.ndarray, k: int, niter: int, seed: int, nredo: int = 1) -> np.ndarray:
    import faiss

    if k == 1 or len(x) <= k:
        return _normalize(x.mean(axis=0, keepdims=True)) if k == 1 else _normalize(x[:k].copy())
    # faiss.Kmeans, unrolled: its train() reads the centroids through a SWIG std::vector<float> proxy,
    # and once another SWIG module that wraps the same type is imported (PyMuPDF, the opt-in PDF
    # backend) the proxy is that module's class and faiss's conversion asserts. The index the
    # clustering leaves holds the same centroids.
    d = x.shape[1]
    cp = faiss.ClusteringParameters()
    cp.niter, cp.seed, cp.spherical, cp.nredo, cp.verbose = niter, seed, True, nredo, False
    cp.min_points_per_centroid, cp.max_points_per_centroid = 1, 256
    index = faiss.IndexFlatIP(d)  # what faiss.Kmeans uses for spherical k-means
    faiss.Clustering(d, k, cp).train(np.ascontiguousarray(x, np.float32), index)
    return index.reconstruct_n(0, k).copy()


def _normalize(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _allocate(sizes: np.ndarray, k: int) -> np.ndarray:
    """Fine clusters per coarse cell: proportional to the cell's size (largest remainders), at least
    one per non-empty cell, never more than the cell has points."""
    share = sizes / sizes.sum() * k
    out = np.minimum(np.maximum(np.floor(share).astype(np.int64), (sizes > 0).astype(np.int64)), sizes)
    order = np.argsort(-(share - np.floor(share)), kind="stable")
    i = 0
    while out.sum() < k and i < 10 * len(sizes):
        cell = order[i % len(order)]
        if out[cell] < sizes[cell]:
            out[cell] += 1
        i += 1
    while out.sum() > k:  # only when the minimum of one per cell overshoots
        cell = int(np.argmax(out))
        out[cell] -= 1
    return out


def train(x: np.ndarray, k: int, coarse: int | None = None, niter: int = 20, seed: int = 0,
          nredo: int = 1) -> Centroids:
    """Centroids of `k` clusters (fewer if the sample has fewer points) from unit vectors `x`; each
    k-means runs `nredo` times from different seeds and keeps the best objective (local minima are
    common with few points per cluster)."""
    x = np.ascontiguousarray(x, np.float32)
    k = max(1, min(k, len(x)))
    if coarse is None:
        coarse = k if k <= FLAT_MAX else int(round(math.sqrt(k)))
    coarse = max(1, min(coarse, k))
    top = _kmeans(x, coarse, niter, seed, nredo)
    if coarse == k:
        return Centroids(top, top, np.arange(k, dtype=np.int32))
    cell = _nearest(top, x)
    sizes = np.bincount(cell, minlength=coarse)
    per_cell = _allocate(sizes, k)
    fine, parent = [], []
    for c in range(coarse):
        if per_cell[c] == 0:
            continue
        fine.append(_kmeans(x[cell == c], int(per_cell[c]), niter, seed + 1 + c, nredo))
        parent.append(np.full(int(per_cell[c]), c, np.int32))
    return Centroids(top, np.concatenate(fine), np.concatenate(parent))


def _nearest(centroids: np.ndarray, x: np.ndarray) -> np.ndarray:
    import faiss

    index = faiss.IndexFlatIP(centroids.shape[1])
    index.add(centroids)
    return index.search(np.ascontiguousarray(x, np.float32), 1)[1][:, 0]


class Assigner:
    """Nearest fine centroid of each vector: exact for one level, an IVF search over two."""

    def __init__(self, cents: Centroids, nprobe: int = 8):
        import faiss

        d = cents.fine.shape[1]
        self.flat = faiss.IndexFlatIP(d)
        self.flat.add(cents.fine)
        self.fine = np.ascontiguousarray(cents.fine, np.float64)
        self.index = self.flat
        if len(cents.coarse) < len(cents.fine):
            quantizer = faiss.IndexFlatIP(d)
            quantizer.add(cents.coarse)
            ivf = faiss.IndexIVFFlat(quantizer, d, len(cents.coarse), faiss.METRIC_INNER_PRODUCT)
            ivf.is_trained = True  # the quantizer holds the coarse centroids already
            ivf.add_with_ids(cents.fine, np.arange(len(cents.fine), dtype=np.int64))
            ivf.nprobe = min(nprobe, len(cents.coarse))
            self.index, self._quantizer = ivf, quantizer  # keep the quantizer alive with the index

    def assign(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cluster id int32, cosine similarity float32) per row."""
        x = np.ascontiguousarray(x, np.float32)
        if len(x) == 0:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        sims, ids = self.index.search(x, 1)
        lost = ids[:, 0] < 0  # every probed cell empty of fine centroids: search them all
        if lost.any():
            sims[lost], ids[lost] = self.flat.search(x[lost], 1)
        ids = ids[:, 0]
        # faiss's scores depend on its thread count (summation order), which differs between the local
        # pool, Spark and Ray workers: the similarity is recomputed in one fixed order, so every engine
        # writes the same bits.
        exact = np.einsum("ij,ij->i", x.astype(np.float64), self.fine[ids])
        return ids.astype(np.int32), exact.astype(np.float32)
