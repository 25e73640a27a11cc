"""`semantic.semdedup`: semantic deduplication inside clusters (SemDeDup): within each k-means cluster,
a document whose embedding has cosine > 1 - eps with an earlier document of the cluster is a
duplicate of it.

"Earlier" is the order of the id hash, so the kept document is the same on every engine. Fit: every
shard hands over (cluster, id hash, vector) of its documents; reduce (driver): per cluster, block-wise
inner products, and every document whose best match among the earlier ones reaches the threshold
is marked with that document's id; apply: marked documents are rejected as `semantic_duplicate`
(detail: the id they duplicate) or, with `remove: false`, only annotated in `semdup_of`.

The driver holds every vector (768 bytes a document at 384 float16 dimensions: 0.8 GB per million
documents); beyond that the grouping needs a shuffle by cluster, which this stage does not do.
Inputs: `[clustered documents, embeddings]`.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline.errors import UserError
from assay.pipeline.stage import FitApplyStage, Params, register, set_column, with_rejects

from .side import WithEmbeddings

BLOCK = 2048  # rows of the similarity matrix computed at once


class SemDedupParams(Params):
    eps: float = Field(0.05, gt=0, lt=1, description="Duplicates have cosine > 1 - eps")
    remove: bool = Field(True, description="Reject duplicates (else only annotate semdup_of)")


def duplicates_in(vectors: np.ndarray, threshold: float) -> np.ndarray:
    """For rows in their order: the index of the earliest earlier row with similarity > threshold,
    or -1."""
    out = np.full(len(vectors), -1, np.int64)
    for start in range(0, len(vectors), BLOCK):
        block = vectors[start:start + BLOCK] @ vectors[: start + BLOCK].T
        for r in range(block.shape[0]):
            earlier = block[r, : start + r]
            hit = np.nonzero(earlier > threshold)[0]
            if len(hit):
                out[start + r] = hit[0]
    return out


@register("semantic.semdedup")
class SemDedup(WithEmbeddings, FitApplyStage):
    """Remove near-identical documents by embedding, inside each cluster (SemDeDup).

    Example: assay semantic semdedup runs/x/clustered runs/x/embeddings runs/x/semdedup --eps 0.03
    """

    Params = SemDedupParams
    columns = {"semdup_of": pa.string()}

    def fit(self, table: pa.Table, state: dict | None) -> dict:
        from assay.dedup.hashing import hash_strings

        if "cluster" not in table.column_names:
            raise UserError(f"stage {self.stage_id!r}: its input has no `cluster` column; run semantic.cluster first")
        part = {"cluster": pc.fill_null(table.column("cluster"), -1).to_numpy(zero_copy_only=False).astype(np.int64),
                "hash": hash_strings(table.column("id").combine_chunks()),
                "id": table.column("id").to_pylist(), "vec": self.batch_vectors.astype(np.float16)}
        if state is None:
            return part
        return {k: (state[k] + part[k]) if k == "id" else np.concatenate([state[k], part[k]]) for k in part}

    def reduce(self, states: list[dict | None]) -> dict[str, str]:
        parts = [s for s in states if s]
        if not parts:
            return {}
        cluster = np.concatenate([p["cluster"] for p in parts])
        hashes = np.concatenate([p["hash"] for p in parts])
        ids = [i for p in parts for i in p["id"]]
        vec = np.concatenate([p["vec"] for p in parts])
        order = np.lexsort((hashes, cluster))
        bounds = np.flatnonzero(np.r_[True, cluster[order][1:] != cluster[order][:-1], True])
        dup_of: dict[str, str] = {}
        for a, b in zip(bounds[:-1], bounds[1:]):
            members = order[a:b]
            if cluster[members[0]] < 0 or len(members) < 2:
                continue
            first = duplicates_in(vec[members].astype(np.float32), 1 - self.params.eps)
            for row in np.nonzero(first >= 0)[0]:
                dup_of[ids[members[row]]] = ids[members[first[row]]]
        return dup_of

    def save_artifact(self, out_root: Path, artifact: dict[str, str]) -> None:
        from assay.pipeline.dataset import write_artifact

        write_artifact(out_root, "fit.json", json.dumps({"duplicates": len(artifact), "of": artifact}, sort_keys=True))

    def load_artifact(self, out_root: Path) -> dict[str, str]:
        from assay.pipeline.dataset import artifact_path

        return json.loads(artifact_path(out_root, "fit.json").read_text())["of"]

    def apply(self, table: pa.Table, artifact: dict[str, str]) -> pa.Table:
        of = [artifact.get(i) for i in table.column("id").to_pylist()]
        table = set_column(table, "semdup_of", pa.array(of, pa.string()))
        self.stats.count("duplicates", sum(1 for x in of if x))
        if not self.params.remove:
            return table
        return with_rejects(table, ["semantic_duplicate" if x else None for x in of], of)
