"""`semantic.cluster`: k-means over document embeddings as a fit-then-apply stage.

Fit: every shard keeps the `sample` documents with the smallest hash of their id (bottom-k sampling),
so the union over shards reduced to the `sample` smallest is a uniform sample of the whole dataset,
the same on every engine and shard layout. Reduce (driver): two-level spherical k-means on that
sample (kmeans.py), and the cluster table. Apply (every shard, in parallel): each document's nearest
centroid as `cluster`, its cosine as `cluster_similarity`.

The cluster table (`_artifacts/clusters.parquet`): cluster, coarse cell, sampled documents,
estimated documents and text bytes in the whole dataset (sample counts scaled up; semantic.rebalance
counts them exactly), top terms, the titles nearest the centroid and the centroid (float16).
Inputs: `[documents, embeddings]` (side.py).
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline import storage
from assay.pipeline.stage import FitApplyStage, Params, Resources, register, set_column

from .side import WithEmbeddings, vector_column

SNIPPET_CHARS = 400


class ClusterParams(Params):
    clusters: int = Field(1024, ge=1, description="Number of clusters k (100K+ is fine: two levels)")
    coarse: int | None = Field(None, ge=1, description="Coarse cells (default: one level up to 4096 clusters, "
                                                       "else sqrt(k))")
    sample: int = Field(100_000, ge=1, description="Documents the centroids are trained on")
    niter: int = Field(20, ge=1, description="k-means iterations per level")
    nredo: int = Field(3, ge=1, description="k-means restarts (the best objective wins)")
    nprobe: int = Field(8, ge=1, description="Coarse cells searched when assigning a document")
    seed: int = Field(0, description="k-means seed")
    top_terms: int = Field(8, ge=0, description="Top terms kept per cluster in the table")
    titles: int = Field(3, ge=0, description="Nearest titles kept per cluster in the table")


@register("semantic.cluster")
class Cluster(WithEmbeddings, FitApplyStage):
    """Cluster documents by embedding (faiss k-means, trained on a sample, every document assigned).

    Example: assay cluster runs/x/docs runs/x/embeddings runs/x/clustered --clusters 4096
    """

    Params = ClusterParams
    columns = {"cluster": pa.int32(), "cluster_similarity": pa.float32()}
    version = "2"  # 2: similarity recomputed in one fixed order (the same bits on every engine)
    resources = Resources(cpus=1, memory_gb=2)
    requires = ("faiss",)

    def fit(self, table: pa.Table, state: dict | None) -> dict:
        from assay.dedup.hashing import hash_strings

        texts = pc.fill_null(table.column("text"), "")
        part = {
            "hash": hash_strings(table.column("id").combine_chunks()),
            "vec": self.batch_vectors.astype(np.float16),
            "bytes": pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64),
            "text": pc.utf8_slice_codeunits(texts, 0, SNIPPET_CHARS).to_pylist(),
            "rows": table.num_rows,
            "total_bytes": int(pc.sum(pc.binary_length(texts)).as_py() or 0),
        }
        return _bottom(self.params.sample, [s for s in (state, part) if s])

    def combine(self, states: list[dict | None]) -> dict | None:
        return _bottom(self.params.sample, [s for s in states if s])

    def reduce(self, states: list[dict | None]) -> dict:
        from . import kmeans, terms

        p = self.params
        sample = _bottom(p.sample, [s for s in states if s])
        if not sample or not len(sample["vec"]):
            return {"centroids": None, "table": None, "summary": {"clusters": 0, "sample": 0, "documents": 0}}
        x = sample["vec"].astype(np.float32)
        cents = kmeans.train(x, p.clusters, p.coarse, p.niter, p.seed, p.nredo)
        cluster, sim = kmeans.Assigner(cents, p.nprobe).assign(x)
        k = cents.k
        counts = np.bincount(cluster, minlength=k)
        sampled_bytes = np.bincount(cluster, weights=sample["bytes"], minlength=k)
        scale = sample["rows"] / len(x)
        top = terms.top_terms(sample["text"], cluster, k, p.top_terms) if p.top_terms else [[] for _ in range(k)]
        nearest: list[list[str]] = [[] for _ in range(k)]
        for i in np.lexsort((-sim, cluster)):
            if len(nearest[cluster[i]]) < p.titles:
                nearest[cluster[i]].append(terms.title(sample["text"][i]))
        table = pa.table({
            "cluster": pa.array(np.arange(k, dtype=np.int32)),
            "coarse": pa.array(cents.parent),
            "sample_documents": pa.array(counts.astype(np.int64)),
            "est_documents": pa.array(np.round(counts * scale).astype(np.int64)),
            "est_bytes": pa.array(np.round(sampled_bytes * scale).astype(np.int64)),
            "top_terms": pa.array(top, pa.list_(pa.string())),
            "titles": pa.array(nearest, pa.list_(pa.string())),
            "centroid": vector_column(cents.fine),
        })
        summary = {"clusters": k, "requested": p.clusters, "coarse": len(cents.coarse), "sample": len(x),
                   "documents": sample["rows"], "bytes": sample["total_bytes"],
                   "mean_similarity": round(float(sim.mean()), 4)}
        return {"centroids": cents, "table": table, "summary": summary}

    def save_artifact(self, out_root: Path, artifact: dict) -> None:
        import io

        import pyarrow.parquet as pq

        from assay.pipeline.dataset import write_artifact

        cents = artifact["centroids"]
        if cents is not None:
            buf = io.BytesIO()
            np.savez(buf, coarse=cents.coarse, fine=cents.fine, parent=cents.parent)
            write_artifact(out_root, "kmeans.npz", buf.getvalue())
            buf = io.BytesIO()
            pq.write_table(artifact["table"], buf, compression="zstd")
            write_artifact(out_root, "clusters.parquet", buf.getvalue())
        write_artifact(out_root, "fit.json", json.dumps(artifact["summary"], indent=2))

    def load_artifact(self, out_root: Path) -> Any:
        from assay.pipeline.dataset import artifact_path

        from .kmeans import Assigner, Centroids

        path = artifact_path(out_root, "kmeans.npz")
        if not path.exists():  # an empty input: nothing to assign
            return None
        data = np.load(io.BytesIO(storage.read_bytes(path)))
        return Assigner(Centroids(data["coarse"], data["fine"], data["parent"]), self.params.nprobe)

    def apply(self, table: pa.Table, artifact: Any) -> pa.Table:
        cluster, sim = artifact.assign(self.batch_vectors)
        self.stats.histogram("cluster_similarity", sim, np.linspace(-1, 1, 21))
        table = set_column(table, "cluster", pa.array(cluster, pa.int32()))
        return set_column(table, "cluster_similarity", pa.array(sim, pa.float32()))


def _bottom(size: int, parts: list[dict]) -> dict | None:
    """The `size` rows with the smallest id hashes over several partial samples (ties: hash order is
    total for distinct ids), with the row and byte totals of everything seen."""
    if not parts:
        return None
    hashes = np.concatenate([p["hash"] for p in parts])
    keep = np.argsort(hashes, kind="stable")[:size]
    texts = [t for p in parts for t in p["text"]]
    return {
        "hash": hashes[keep],
        "vec": np.concatenate([p["vec"] for p in parts])[keep],
        "bytes": np.concatenate([p["bytes"] for p in parts])[keep],
        "text": [texts[i] for i in keep],
        "rows": sum(p["rows"] for p in parts),
        "total_bytes": sum(p["total_bytes"] for p in parts),
    }
