"""`semantic.semdedup`: semantic deduplication inside clusters (SemDeDup): within each k-means cluster,
a document whose embedding has cosine > 1 - eps with an earlier document of the cluster is a
duplicate of it.

"Earlier" is the order of (id hash, shard, row), so the kept document is the same on every engine,
and of two rows with the same id (the same document twice) the first stays. The plan runs as three
waves of tasks on the engine's workers (`Engine.map`), handing files over in the output's scratch
folder (on the output's disk or store, which every worker reaches); the driver lists shards and adds up counts, and never holds a vector:
1. per shard: each document's (cluster, id hash, shard, row, id, vector) into one of B bucket files
   by cluster, so a cluster's documents meet in one bucket;
2. per bucket: cluster by cluster, block-wise inner products; every row whose best match among the
   earlier rows reaches the threshold is marked with that row's id, written per shard;
3. per shard: the marks applied by row: marked rows are rejected as `semantic_duplicate` (detail:
   the id they duplicate) or, with `remove: false`, only annotated in `semdup_of`.
A bucket task holds one bucket (768 bytes a document at 384 float16 dimensions; B grows with the
corpus so a bucket stays near 100k documents); one cluster must fit one worker.
Inputs: `[clustered documents, embeddings]`.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.parquet as pq
from pydantic import Field

from assay.pipeline import storage
from assay.pipeline.errors import UserError
from assay.pipeline.stage import GlobalStage, Params, Task, register, set_column, with_rejects

from .side import WithEmbeddings

BLOCK = 2048  # rows of the similarity matrix computed at once
BUCKET_DOCS = 100_000  # documents per bucket task, about


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


class _Rows:
    """Counts what read_batches reads (the bucket pass writes no shard)."""

    def __init__(self):
        self.rows = 0

    def note_inputs(self, table: pa.Table) -> None:
        self.rows += table.num_rows


def _put(path, table: pa.Table, write) -> None:
    """`write(table, sink)` at `path`, a local file or an object on the output's store."""
    if storage.is_remote(path):
        sink = pa.BufferOutputStream()
        write(table, sink)
        storage.put_bytes(path, sink.getvalue().to_pybytes())
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(table, str(path))


def _bucket_file(scratch: Path, bucket: int, shard: int) -> Path:
    return scratch / "buckets" / f"{bucket:05d}" / f"part-{shard:05d}.arrow"


def _verdict_dir(scratch: Path, shard: int) -> Path:
    return scratch / "verdicts" / f"{shard:05d}"


def _bucket_shard(stage: "SemDedup", scratch: Path, buckets: int, task: Task) -> int:
    """Wave 1: one shard's documents with a cluster into bucket files by cluster; returns its rows."""
    from assay.dedup.hashing import hash_strings

    parts, seen, rows = [], _Rows(), 0
    for table in stage.read_batches(task, seen):
        cluster = pc.fill_null(table.column("cluster"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        vec = stage.batch_vectors.astype(np.float16)
        parts.append(pa.table({
            "cluster": cluster, "hash": hash_strings(table.column("id").combine_chunks()),
            "shard": np.full(table.num_rows, task.index, np.int32), "row": np.arange(rows, rows + table.num_rows),
            "id": table.column("id").combine_chunks(),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), vec.shape[1] if vec.ndim == 2 else 0),
        }))
        rows += table.num_rows
    if not parts:
        return 0
    table = pa.concat_tables(parts)
    table = table.filter(pc.greater_equal(table.column("cluster"), 0))
    where = table.column("cluster").to_numpy() % buckets
    for b in np.unique(where).tolist():
        _put(_bucket_file(scratch, b, task.index), table.filter(pa.array(where == b)),
             partial(feather.write_feather, compression="uncompressed"))
    return seen.rows


def _dedup_bucket(threshold: float, scratch: Path, bucket: int) -> int:
    """Wave 2: the duplicates of every cluster in one bucket, written per shard as (row, of);
    returns how many."""
    files = storage.glob(scratch / "buckets" / f"{bucket:05d}", "part-*.arrow")
    if not files:
        return 0
    table = pa.concat_tables([feather.read_table(pa.BufferReader(storage.read_bytes(f))) for f in files])
    cluster, hashes = table.column("cluster").to_numpy(), table.column("hash").to_numpy()
    shard, row = table.column("shard").to_numpy(), table.column("row").to_numpy()
    vec = table.column("vec").combine_chunks()
    vec = vec.flatten().to_numpy(zero_copy_only=False).reshape(len(vec), -1) if len(vec) else np.zeros((0, 0))
    order = np.lexsort((row, shard, hashes, cluster))
    bounds = np.flatnonzero(np.r_[True, cluster[order][1:] != cluster[order][:-1], True])
    dup, of = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        members = order[a:b]
        if len(members) < 2:
            continue
        first = duplicates_in(vec[members].astype(np.float32), threshold)
        hit = np.flatnonzero(first >= 0)
        dup.append(members[hit])
        of.append(members[first[hit]])
    if not dup:
        return 0
    dup, of = np.concatenate(dup), np.concatenate(of)
    marks = pa.table({"shard": shard[dup], "row": row[dup], "of": table.column("id").take(pa.array(of))})
    for s in np.unique(shard[dup]).tolist():
        _put(_verdict_dir(scratch, s) / f"{bucket:05d}.parquet",
             marks.filter(pc.equal(marks.column("shard"), s)).drop(["shard"]), pq.write_table)
    return len(dup)


def _apply_shard(stage: "SemDedup", out_root: Path, schema: pa.Schema, scratch: Path, task: Task) -> int:
    """Wave 3: one output shard, its marked rows rejected (or annotated); returns the duplicates."""
    from assay.pipeline.dataset import ShardWriter
    from assay.pipeline.stats import Stats

    files = storage.glob(_verdict_dir(scratch, task.index), "*.parquet")
    marks = pa.concat_tables([storage.read_parquet(f) for f in files]) if files else None
    of_row = dict(zip(marks.column("row").to_pylist(), marks.column("of").to_pylist())) if marks else {}
    writer = ShardWriter(out_root, task.index, schema, stage.stage_id)
    stats, first = Stats(), 0
    try:
        for table in stage.read_batches(task, writer):
            of = [of_row.get(r) for r in range(first, first + table.num_rows)]
            first += table.num_rows
            table = set_column(table, "semdup_of", pa.array(of, pa.string()))
            stats.count("duplicates", sum(1 for x in of if x))
            if stage.params.remove:
                table = with_rejects(table, ["semantic_duplicate" if x else None for x in of], of)
            writer.write(table)
        writer.files.stats = stats.to_json()
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return len(of_row)


@register("semantic.semdedup")
class SemDedup(WithEmbeddings, GlobalStage):
    """Remove near-identical documents by embedding, inside each cluster (SemDeDup).

    Example: assay semantic semdedup runs/x/clustered runs/x/embeddings runs/x/semdedup --eps 0.03
    """

    Params = SemDedupParams
    columns = {"semdup_of": pa.string()}
    version = "2"  # 2: verdicts per row (a repeated id keeps one row); per-cluster work on the workers

    def run_local(self, ctx) -> int:
        tasks = self.tasks(ctx.inputs)  # checks the inputs pair shard by shard
        if tasks and "cluster" not in ctx.inputs[0].schema.names:
            raise UserError(f"stage {self.stage_id!r}: its input has no `cluster` column; run semantic.cluster first")
        rows = sum(storage.parquet_file(t.inputs[0]).metadata.num_rows for t in tasks)
        engine = ctx.engine
        buckets = max(engine.options.worker_count(), -(-rows // BUCKET_DOCS), 1)
        scratch = ctx.shared_scratch(self.stage_id)
        engine.map(partial(_bucket_shard, self, scratch, buckets), tasks)
        found = engine.map(partial(_dedup_bucket, 1 - self.params.eps, scratch), list(range(buckets)))
        engine.map(partial(_apply_shard, self, ctx.out_root, ctx.output_schema, scratch), tasks)
        self.save_summary(ctx.out_root, {"duplicates": int(sum(found)), "buckets": buckets})
        ctx.extra["semdedup"] = {"documents": rows, "duplicates": int(sum(found)), "buckets": buckets}
        return len(tasks)

    run_spark = run_ray = run_local  # the same waves; Engine.map puts them on that engine's workers

    @staticmethod
    def save_summary(out_root: Path, summary: dict) -> None:
        from assay.pipeline.dataset import write_artifact

        write_artifact(out_root, "fit.json", summary)
