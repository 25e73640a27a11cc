"""The Spark plan: the same keys, edges, components and keepers as the local plan, as DataFrame jobs.

1. `mapInArrow` over the input shards runs the stage's own `node_info` (so keys are byte-identical to
   the local plan's) and emits one row per taking-part document: node, shard, id, length, score, keys.
   The result is written to scratch Parquet, which cuts the lineage and lets Spark spill (for an
   output on a store, which promises no shared disk, a local checkpoint in the executors instead).
2. Band buckets by groupBy(band, key); each bucket gives star edges (member -> smallest member),
   exactly the local plan's edges. Optional verification joins both texts and calls the stage's
   `verify_mask` in `mapInArrow`.
3. Connected components with the large-star / small-star iteration (Kiveris et al., 2014) on
   DataFrames, checkpointed every round; it converges to stars around each component's smallest node,
   the local union-find's label. No GraphFrames.
4. Keepers by groupBy(component) over (policy key, node), then `groupBy(shard).applyInArrow` writes
   each output shard with the shared `write_shard`, on the executors.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline import storage

from .annotate import Shard, iter_shard_batches, list_shards, write_shard
from .local_plan import read_columns

_NODE_SCHEMA = "node long, shard int, id string, length long, score double, keys array<long>"


def _node_rows(stage, shards: list[Shard]):
    """mapInArrow body: task rows (shard indices) in, one row per taking-part document out."""
    import pyarrow.parquet as pq

    def run(batches):
        for batch in batches:
            for idx in batch.column("shard").to_pylist():
                shard = shards[idx]
                cols = read_columns(stage, storage.parquet_file(shard.path).schema_arrow) + ["id"]
                for first, table in iter_shard_batches(shard, stage.params.batch_rows, columns=list(dict.fromkeys(cols))):
                    info = stage.node_info(table)
                    keep = np.flatnonzero(info.valid)
                    if len(keep) == 0:
                        continue
                    keys = np.ascontiguousarray(info.keys[keep]).view(np.int64)
                    score = info.score[keep] if info.score is not None else np.full(len(keep), np.nan)
                    offsets = pa.array(np.arange(0, keys.size + 1, keys.shape[1], dtype=np.int32))
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array(first + keep, pa.int64()),
                            pa.array(np.full(len(keep), idx, np.int32)),
                            table.column("id").take(pa.array(keep)).combine_chunks(),
                            pa.array(info.length[keep], pa.int64()),
                            pa.array(score, pa.float64()),
                            pa.ListArray.from_arrays(offsets, pa.array(keys.ravel(), pa.int64())),
                        ],
                        names=["node", "shard", "id", "length", "score", "keys"],
                    )

    return run


def _text_rows(shards: list[Shard], batch_rows: int):
    def run(batches):
        for batch in batches:
            for idx in batch.column("shard").to_pylist():
                for first, table in iter_shard_batches(shards[idx], batch_rows, columns=["text"]):
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(np.arange(first, first + table.num_rows), pa.int64()), table.column("text").combine_chunks()],
                        names=["node", "text"],
                    )

    return run


def _verify_rows(stage):
    def run(batches):
        for batch in batches:
            ok = stage.verify_mask(batch.column("ta"), batch.column("tb"))
            yield pa.RecordBatch.from_arrays([batch.column("a"), batch.column("b"), pa.array(ok)], names=["a", "b", "ok"])

    return run


def connected_components(edges, checkpoint):
    """edges(a, b) -> (node, root) for every node on an edge; root = smallest node of its component.

    Large-star: each node u links every larger neighbour to m(u) = min(N(u) + u). Small-star: each
    node u links every smaller-or-equal neighbour (and itself) to the smallest of them. Repeated until
    an iteration leaves the edge set unchanged, the graph is a star per component around its minimum."""
    from pyspark.sql import functions as F

    e = edges.select(F.greatest("a", "b").alias("u"), F.least("a", "b").alias("v")).where("u != v").distinct()
    e = checkpoint(e)
    rounds = 0
    while True:
        rounds += 1
        both = e.unionByName(e.select(F.col("v").alias("u"), F.col("u").alias("v")))
        m = both.groupBy("u").agg(F.least(F.min("v"), F.col("u")).alias("m"))
        large = both.join(m, "u").where(F.col("v") > F.col("u")).select(F.col("v").alias("u"), F.col("m").alias("v"))
        large = large.distinct()
        m2 = large.groupBy("u").agg(F.min("v").alias("m"))
        small = large.join(m2, "u").select(F.col("v").alias("x"), "m").unionByName(m2.select(F.col("u").alias("x"), "m"))
        small = small.where("x != m").select(F.greatest("x", "m").alias("u"), F.least("x", "m").alias("v")).distinct()
        small = checkpoint(small)
        same = small.count() == e.count() and small.join(e, ["u", "v"], "left_anti").limit(1).count() == 0
        e = small
        if same:
            break
    roots = e.select(F.col("v").alias("node"), F.col("v").alias("root")).distinct()
    return e.select(F.col("u").alias("node"), F.col("v").alias("root")).unionByName(roots), rounds


def run_spark(stage, ctx) -> int:
    from pyspark.sql import functions as F

    spark = ctx.engine.spark
    p = stage.params
    shards = list_shards(ctx.inputs)
    if not shards:
        return 0
    tasks = spark.createDataFrame([(s.index,) for s in shards], "shard int").repartition(len(shards))
    node_rows = tasks.mapInArrow(_node_rows(stage, shards), _NODE_SCHEMA)
    if storage.is_remote(ctx.out_root):
        # An output on a store promises no disk the driver and the executors share (Spark writes no
        # s3:// without hadoop-aws): checkpoints stay in the executors' block managers, which spill
        # to each executor's own local folder.
        def checkpoint(df):
            return df.localCheckpoint(eager=True)

        nodes = checkpoint(node_rows)
    else:
        scratch = ctx.scratch(f"{stage.stage_id}-spark")
        spark.sparkContext.setCheckpointDir(str(scratch / "checkpoints"))

        def checkpoint(df):
            return df.checkpoint(eager=True)

        nodes_path = str(scratch / "nodes")
        node_rows.write.mode("overwrite").parquet(nodes_path)
        nodes = spark.read.parquet(nodes_path)

    bands = nodes.select("node", F.posexplode("keys").alias("band", "key"))
    heads = bands.groupBy("band", "key").agg(F.min("node").alias("head"), F.count("*").alias("n")).where("n > 1")
    edges = (
        bands.join(heads, ["band", "key"]).where("node != head")
        .select(F.col("node").alias("a"), F.col("head").alias("b")).distinct()
    )
    if stage.verifies:
        edges = checkpoint(edges)
        involved = edges.select(F.col("a").alias("node")).unionByName(edges.select(F.col("b").alias("node"))).distinct()
        texts = tasks.mapInArrow(_text_rows(shards, p.batch_rows), "node long, text string").join(involved, "node")
        pairs = (
            edges.join(texts.select(F.col("node").alias("a"), F.col("text").alias("ta")), "a")
            .join(texts.select(F.col("node").alias("b"), F.col("text").alias("tb")), "b")
            .select("a", "b", "ta", "tb")
        )
        edges = pairs.mapInArrow(_verify_rows(stage), "a long, b long, ok boolean").where("ok").select("a", "b")

    labels, _rounds = connected_components(edges, checkpoint)
    info = labels.join(nodes.select("node", "shard", "id", "length", "score"), "node")
    if p.keep == "longest":
        primary = -F.col("length").cast("double")
    elif p.keep == "quality":
        primary = F.when(F.col("score").isNull() | F.isnan("score"), F.lit(float("inf"))).otherwise(-F.col("score"))
    else:
        primary = F.lit(0.0)  # first: the smallest node, which is the root
    keepers = (
        info.groupBy("root").agg(F.min(F.struct(primary.alias("p"), F.col("node").alias("n"))).alias("best"))
        .select("root", F.col("best.n").alias("keeper"))
    )
    keeper_ids = nodes.select(F.col("node").alias("keeper"), F.col("id").alias("keeper_id"))
    annotations = (
        info.join(keepers, "root").join(keeper_ids, "keeper")
        .select("shard", "node", "keeper_id", (F.col("node") == F.col("keeper")).alias("keep"))
    )
    markers = spark.createDataFrame([(s.index, -1, None, True) for s in shards], "shard int, node long, keeper_id string, keep boolean")
    writer = _shard_writer(stage, shards, ctx)
    written = annotations.unionByName(markers).groupBy("shard").applyInArrow(writer, "shard int, rows long").collect()
    if len(written) != len(shards):
        raise RuntimeError(f"spark plan wrote {len(written)} of {len(shards)} shards")
    return len(shards)


def _shard_writer(stage, shards: list[Shard], ctx):
    out_root, schema, stage_id = ctx.out_root, ctx.output_schema, ctx.stage_id
    remove, reason, batch_rows = stage.params.remove, stage.reason, stage.params.batch_rows

    def write(table: pa.Table) -> pa.Table:
        idx = table.column("shard")[0].as_py()
        table = table.filter(pc.greater_equal(table.column("node"), 0)).sort_by("node")
        counts = write_shard(
            shards[idx], out_root, schema, stage_id,
            table.column("node").to_numpy(), table.column("keeper_id").to_pylist(),
            table.column("keep").to_numpy(zero_copy_only=False), remove, reason, batch_rows,
        )
        return pa.table({"shard": pa.array([idx], pa.int32()), "rows": pa.array([counts.rows_in], pa.int64())})

    return write
