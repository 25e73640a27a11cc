"""The Ray plan: the local plan's keys, edges, components and keepers, with the heavy passes spread
over the cluster as Ray tasks.

1. Key tasks, one per input shard, run the stage's own `node_info` (so keys are byte-identical to the
   local plan's) and hash-partition their (band, key, node) triples into P partitions, returned as P
   separate objects (`num_returns`): the map side of a shuffle through Ray's object store.
2. Edge tasks, one per partition, take that partition from every key task and emit star edges
   (member -> smallest member of its bucket) per band, exactly the local plan's edges.
3. The driver joins the edges into components with the same union-find (one int64 per document,
   as in the local plan; the data itself never comes to the driver), verifies candidate pairs in
   Ray tasks when asked, and chooses keepers with the local plan's `shard_plans`.
4. Write tasks, one per shard, write the annotated shards on the workers.
"""
from __future__ import annotations

import time

import numpy as np

from assay.pipeline import storage

from .annotate import Shard, iter_shard_batches, list_shards, write_shard
from .components import UnionFind, star_edges
from .local_plan import _VERIFY_CHUNK, read_columns, shard_plans, summarize, verified


def _shard_keys(stage, shard: Shard, partitions: int):
    """Map side: (lengths, scores) of the shard's rows, then one int64 array [m, 3] of
    (band, key, node) per partition."""
    import pyarrow.parquet as pq

    p = stage.params
    length = np.zeros(shard.rows, np.int64)
    score = np.full(shard.rows, np.nan) if p.keep == "quality" else None
    parts: list[list[np.ndarray]] = [[] for _ in range(partitions)]
    cols = read_columns(stage, storage.parquet_file(shard.path).schema_arrow)
    for first, table in iter_shard_batches(shard, p.batch_rows, columns=cols):
        info = stage.node_info(table)
        local = np.arange(first - shard.offset, first - shard.offset + table.num_rows)
        length[local] = info.length
        if score is not None and info.score is not None:
            score[local] = info.score
        keys = info.keys[info.valid]  # uint64 [m, bands]
        nodes = np.arange(first, first + table.num_rows, dtype=np.int64)[info.valid]
        for band in range(keys.shape[1]):
            k = keys[:, band]
            # splitmix-style mix of (band, key) so partitions are balanced whatever the key space
            where = ((k ^ np.uint64(band * 0x9E3779B97F4A7C15 % 2**64)) * np.uint64(0xBF58476D1CE4E5B9)) >> np.uint64(40)
            where = (where % np.uint64(partitions)).astype(np.int64)
            triple = np.stack([np.full(len(k), band, np.int64), k.view(np.int64), nodes], 1)
            for part in range(partitions):
                sel = triple[where == part]
                if len(sel):
                    parts[part].append(sel)
    out = [np.concatenate(p_) if p_ else np.empty((0, 3), np.int64) for p_ in parts]
    return ((length, score), *out)


def _partition_edges(bands: int, *pieces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reduce side: star edges of every (band, key) bucket in this partition."""
    triples = np.concatenate(pieces) if pieces else np.empty((0, 3), np.int64)
    us, vs = [], []
    for band in range(bands):
        sel = triples[triples[:, 0] == band]
        u, v = star_edges(sel[:, 1].view(np.uint64), sel[:, 2])
        us.append(u)
        vs.append(v)
    return (np.concatenate(us), np.concatenate(vs)) if us else (np.empty(0, np.int64), np.empty(0, np.int64))


def run_ray(stage, ctx) -> int:
    t0 = time.perf_counter()
    ray = ctx.engine.ray
    p = stage.params
    shards = list_shards(ctx.inputs)
    if not shards:
        return 0
    n = sum(s.rows for s in shards)
    partitions = max(1, ctx.engine.options.worker_count())
    key_task = ray.remote(num_returns=partitions + 1)(_shard_keys)
    maps = [key_task.remote(stage, shard, partitions) for shard in shards]
    edge_task = ray.remote(_partition_edges)
    edge_refs = [edge_task.remote(stage.n_bands, *[m[1 + part] for m in maps]) for part in range(partitions)]

    length = np.zeros(n, np.int64)
    score = np.full(n, np.nan) if p.keep == "quality" else None
    for shard, (shard_length, shard_score) in zip(shards, ray.get([m[0] for m in maps])):
        length[shard.offset:shard.offset + shard.rows] = shard_length
        if score is not None:
            score[shard.offset:shard.offset + shard.rows] = shard_score
    edges = ray.get(edge_refs)
    u = np.concatenate([e[0] for e in edges]) if edges else np.empty(0, np.int64)
    v = np.concatenate([e[1] for e in edges]) if edges else np.empty(0, np.int64)
    stats = {"candidate_edges": int(len(u)), "verified_edges": None, "partitions": partitions}
    uf = UnionFind(n)
    if stage.verifies:
        pairs = np.unique(np.stack([u, v], 1), axis=0) if len(u) else np.empty((0, 2), np.int64)
        stats["candidate_edges"] = int(len(pairs))
        check = ray.remote(verified)
        chunks = [pairs[lo:lo + _VERIFY_CHUNK] for lo in range(0, len(pairs), _VERIFY_CHUNK)]
        masks = ray.get([check.remote(stage, shards, c[:, 0], c[:, 1]) for c in chunks])
        mask = np.concatenate(masks) if masks else np.ones(0, bool)
        stats["verified_edges"] = int(mask.sum())
        uf.union(pairs[mask, 0], pairs[mask, 1])
    else:
        uf.union(u, v)
    plans = shard_plans(stage, shards, uf.labels(), length, score)
    write = ray.remote(write_shard)
    ray.get([write.remote(shard, ctx.out_root, ctx.output_schema, ctx.stage_id, nodes, gids, keep, p.remove,
                          stage.reason, p.batch_rows) for shard, (nodes, gids, keep) in zip(shards, plans)])
    stats.update(summarize(plans), documents=n, seconds=round(time.perf_counter() - t0, 3))
    ctx.extra["dedup"] = stats
    return len(shards)
