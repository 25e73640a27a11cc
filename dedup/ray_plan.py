"""The Ray plan: the local plan's keys, edges, components and keepers as waves of Ray tasks that pass
hash partitions to each other through the object store. The driver holds object references and a
few counters, never a per-document array, so its memory does not grow with the corpus.

1. Key tasks, one per input shard, run the stage's own `node_info` (keys byte-identical to the local
   plan's), keep the shard's lengths and scores as one object, and hash-partition their (band, key,
   node) triples into P pieces (`num_returns`): the map side of a shuffle.
2. Edge tasks, one per partition, emit the star edges (member -> smallest member of its bucket) of
   every band, the local plan's edges, as (hi, lo) pairs partitioned by hi; a pair found in several
   bands is one pair, and with `verify_threshold` each pair is checked there, once.
3. Connected components by large-star / small-star rounds (Kiveris et al., 2014; the Spark plan's
   iteration), each round three waves of P tasks; the driver reads one `changed` flag per partition.
   At the fixed point every edge is (node, smallest node of its component): the local label.
4. Label tasks send (node, root) to the group of shards holding the node; member tasks attach the
   keep policy's key and the document id and send them to the root's partition; keeper tasks choose
   each component's keeper as `components.choose_keepers` does; write tasks write each shard with the
   shared `write_shard`, on the workers.
"""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from assay.pipeline import storage

from .annotate import Shard, iter_shard_batches, list_shards, write_shard
from .components import star_edges
from .hashing import splitmix64
from .local_plan import read_columns, verified

_EMPTY_EDGES = np.empty((0, 2), np.int64)
_PARTITION_BYTES = 256 << 20  # (band, key, node) triples an edge task holds at most, roughly


def _part(values: np.ndarray, parts: int) -> np.ndarray:
    """The partition of each int64/uint64 value (a hash, so consecutive nodes spread evenly)."""
    return (splitmix64(np.asarray(values).astype(np.uint64)) % np.uint64(parts)).astype(np.int64)


def _split(rows, where: np.ndarray, parts: int) -> list:
    """`rows` (an array or an Arrow table) cut into `parts` pieces by the partition `where` of each row."""
    order = np.argsort(where, kind="stable")
    bounds = np.searchsorted(where[order], np.arange(parts + 1))
    if isinstance(rows, pa.Table):
        return [rows.take(pa.array(order[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
    return [rows[order[a:b]] for a, b in zip(bounds[:-1], bounds[1:])]


def _unique_edges(edges: np.ndarray) -> np.ndarray:
    """Distinct (a, b) rows, sorted by (a, b): a canonical form two rounds can be compared in."""
    if len(edges) == 0:
        return _EMPTY_EDGES
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    new = np.ones(len(edges), bool)
    new[1:] = np.any(edges[1:] != edges[:-1], axis=1)
    return edges[new]


def _concat(pieces) -> np.ndarray:
    pieces = [p for p in pieces if len(p)]
    return np.concatenate(pieces) if pieces else _EMPTY_EDGES


def _min_per(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys ascending, min of values per key)."""
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.empty(0, np.int64)
    return k[starts], np.minimum.reduceat(v, starts) if len(k) else v


# ---- 1-2: keys and candidate edges -------------------------------------------------------------

def _shard_keys(stage, shard: Shard, partitions: int):
    """Map side: the shard's (lengths, scores), then one int64 array [m, 3] of (band, key, node) per
    partition."""
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
            triple = np.stack([np.full(len(k), band, np.int64), k.view(np.int64), nodes], 1)
            for part, piece in enumerate(_split(triple, _part(k ^ np.uint64(band), partitions), partitions)):
                if len(piece):
                    parts[part].append(piece)
    out = [np.concatenate(p_) if p_ else np.empty((0, 3), np.int64) for p_ in parts]
    return ((length, score), *out)


def _partition_edges(stage, shards: list[Shard], partitions: int, *pieces: np.ndarray):
    """Reduce side: the distinct star edges (hi, lo) of every (band, key) bucket in this partition,
    verified when the stage asks, cut into pieces by hi. Returns (candidate count, *pieces): star edges
    summed over bands, or distinct pairs checked when verifying, as the local plan counts them."""
    triples = np.concatenate(pieces) if pieces else np.empty((0, 3), np.int64)
    found = []
    for band in np.unique(triples[:, 0]).tolist():
        sel = triples[triples[:, 0] == band]
        u, v = star_edges(sel[:, 1].view(np.uint64), sel[:, 2])
        found.append(np.stack([u, v], 1))
    del triples
    edges = _concat(found)
    candidates = len(edges)
    edges = _unique_edges(edges)
    if stage.verifies and len(edges):
        candidates = len(edges)
        edges = edges[verified(stage, shards, edges[:, 0], edges[:, 1])]
    return (candidates, len(edges)), *_split(edges, _part(edges[:, 0], partitions), partitions)


# ---- 3: connected components -------------------------------------------------------------------

def _spread(partitions: int, old: np.ndarray, *pieces: np.ndarray):
    """Start of a round: this partition's edges (hi, lo), distinct and sorted; whether they differ
    from the previous round's; and each edge in both directions partitioned by its first node (the
    adjacency large-star reads). Returns (edges, changed, *pieces)."""
    edges = _unique_edges(_concat(pieces))
    both = np.concatenate([edges, edges[:, ::-1]])
    changed = len(edges) != len(old) or not np.array_equal(edges, old)
    return edges, changed, *_split(both, _part(both[:, 0], partitions), partitions)


def _large_star(partitions: int, *pieces: np.ndarray):
    """Each node u of this partition links every larger neighbour v to m(u) = min(u, N(u)).
    Out: (v, m(u)) partitioned by v, the larger end."""
    adj = _concat(pieces)
    nodes, m = _min_per(adj[:, 0], adj[:, 1])
    m = np.minimum(m, nodes)
    larger = adj[adj[:, 1] > adj[:, 0]]
    out = np.stack([larger[:, 1], m[np.searchsorted(nodes, larger[:, 0])]], 1)
    return _split(out, _part(out[:, 0], partitions), partitions)


def _small_star(partitions: int, *pieces: np.ndarray):
    """Edges (u, v) with v < u, gathered at u: u and each of its smaller neighbours link to the
    smallest of them, m. Out: (x, m) for x != m, partitioned by x, the larger end."""
    edges = _unique_edges(_concat(pieces))
    nodes, m = _min_per(edges[:, 0], edges[:, 1])
    out = np.concatenate([np.stack([nodes, m], 1),
                          np.stack([edges[:, 1], m[np.searchsorted(nodes, edges[:, 0])]], 1)])
    out = out[out[:, 0] != out[:, 1]]
    return _split(out, _part(out[:, 0], partitions), partitions)


def connected_components(ray, pieces: list[list], partitions: int) -> tuple[list, int]:
    """pieces[j]: references to the pieces of partition j's edges (hi, lo). Returns references to
    each partition's converged edges, (node, smallest node of its component), and the rounds run.
    Repeated until a round leaves every partition's edges as they were."""
    spread = _tasks(ray, _spread, partitions + 2)
    large, small = _tasks(ray, _large_star, partitions), _tasks(ray, _small_star, partitions)
    old: list = [_EMPTY_EDGES] * partitions
    rounds = 0
    while True:
        spreads = [spread(partitions, old[j], *pieces[j]) for j in range(partitions)]
        if not any(ray.get([s[1] for s in spreads])):
            return [s[0] for s in spreads], rounds
        rounds += 1
        larges = [large(partitions, *[s[2 + j] for s in spreads]) for j in range(partitions)]
        smalls = [small(partitions, *[lg[j] for lg in larges]) for j in range(partitions)]
        old = [s[0] for s in spreads]
        pieces = [[sm[j] for sm in smalls] for j in range(partitions)]


# ---- 4: keepers and output ---------------------------------------------------------------------

def _labels(bounds: np.ndarray, edges: np.ndarray):
    """(node, root) for every node of this partition's converged edges and for their roots, cut by
    the group of shards holding the node (`bounds`: first node of each group, then the total)."""
    pairs = np.concatenate([edges, np.repeat(edges[:, 1:], 2, axis=1)])
    return _split(pairs, np.searchsorted(bounds, pairs[:, 0], side="right") - 1, len(bounds) - 1)


def _members(keep: str, shards: list[Shard], partitions: int, *args):
    """The grouped nodes of a group of shards with what choosing the keeper needs: (root, primary
    key, node, id) partitioned by root. args: each shard's (lengths, scores), then the label pieces.
    The primary key ranks like components.choose_keepers: lower is better, ties to the smaller node."""
    infos, pieces = args[:len(shards)], args[len(shards):]
    pairs = _unique_edges(_concat(pieces))  # a node has one root: distinct rows are distinct nodes
    node, root = pairs[:, 0], pairs[:, 1]
    primary = np.zeros(len(node))
    ids = []
    for shard, (length, score) in zip(shards, infos):
        lo, hi = np.searchsorted(node, [shard.offset, shard.offset + shard.rows])
        local = node[lo:hi] - shard.offset
        if keep == "longest":
            primary[lo:hi] = -length[local]
        elif keep == "quality" and score is not None:
            primary[lo:hi] = -np.nan_to_num(score[local], nan=-np.inf)
        ids.append(pq.read_table(shard.path, columns=["id"]).column("id").take(pa.array(local)).combine_chunks())
    table = pa.table({"root": root, "primary": primary, "node": node, "id": pa.concat_arrays(ids)})
    return len(node), *_split(table, _part(root, partitions), partitions)


def _keepers(bounds: np.ndarray, *pieces: pa.Table):
    """Each component's keeper (lowest primary key, then smallest node) and, for every member,
    (node, keeper id, keep) cut by the group of shards holding the node. Returns ((groups, removed), *pieces)."""
    table = pa.concat_tables(pieces)
    root, node = table.column("root").to_numpy(), table.column("node").to_numpy()
    order = np.lexsort((node, table.column("primary").to_numpy(), root))
    root, node = root[order], node[order]
    first = np.r_[True, root[1:] != root[:-1]] if len(root) else np.zeros(0, bool)
    keeper_row = order[np.flatnonzero(first)[np.cumsum(first) - 1]]
    keep = order == keeper_row
    out = pa.table({"node": node, "keeper_id": table.column("id").take(pa.array(keeper_row)), "keep": keep})
    where = np.searchsorted(bounds, node, side="right") - 1
    return (int(first.sum()), int((~keep).sum())), *_split(out, where, len(bounds) - 1)


def _write_group(stage, shards: list[Shard], out_root, schema, stage_id, *pieces: pa.Table) -> int:
    """Write the annotated copy of each shard of a group; returns the rows written."""
    table = pa.concat_tables(pieces)
    table = table.take(pa.array(np.argsort(table.column("node").to_numpy(), kind="stable")))
    node = table.column("node").to_numpy()
    p, rows = stage.params, 0
    for shard in shards:
        lo, hi = np.searchsorted(node, [shard.offset, shard.offset + shard.rows])
        part = table.slice(lo, hi - lo)
        counts = write_shard(shard, out_root, schema, stage_id, node[lo:hi], part.column("keeper_id").to_pylist(),
                             part.column("keep").to_numpy(), p.remove, stage.reason, p.batch_rows)
        rows += counts.rows_in
    return rows


def _tasks(ray, fn, returns: int):
    """fn as a Ray task with `returns` results: calling it submits the task and gives the list of
    result references (a list of one too, where Ray would give the reference itself)."""
    if returns == 1:
        one = ray.remote(lambda *a: fn(*a)[0])
        return lambda *a: [one.remote(*a)]
    remote = ray.remote(num_returns=returns)(fn)
    return lambda *a: list(remote.remote(*a))


def run_ray(stage, ctx) -> int:
    t0 = time.perf_counter()
    ray = ctx.engine.ray
    shards = list_shards(ctx.inputs)
    if not shards:
        return 0
    n = shards[-1].offset + shards[-1].rows
    # Enough partitions that an edge task's triples stay near _PARTITION_BYTES, and one per worker.
    P = max(ctx.engine.options.worker_count(), -(-n * stage.n_bands * 24 // _PARTITION_BYTES))
    keys = _tasks(ray, _shard_keys, P + 1)
    maps = [keys(stage, shard, P) for shard in shards]
    infos = [m[0] for m in maps]
    edges = _tasks(ray, _partition_edges, P + 1)
    found = [edges(stage, shards, P, *[m[1 + j] for m in maps]) for j in range(P)]
    del maps
    counts = ray.get([f[0] for f in found])
    components, rounds = connected_components(ray, [[f[1 + j] for f in found] for j in range(P)], P)
    del found

    # Groups of consecutive shards: one member task and one write task each.
    G = min(len(shards), P)
    cut = np.linspace(0, len(shards), G + 1).round().astype(int)
    groups = [shards[a:b] for a, b in zip(cut[:-1], cut[1:])]
    bounds = np.array([g[0].offset for g in groups] + [n], np.int64)
    labels = _tasks(ray, _labels, G)
    labelled = [labels(bounds, c) for c in components]
    members = _tasks(ray, _members, P + 1)
    first = np.r_[0, np.cumsum([len(g) for g in groups])]
    grouped = [members(stage.params.keep, g, P, *infos[first[i]:first[i + 1]], *[lb[i] for lb in labelled])
               for i, g in enumerate(groups)]
    keepers = _tasks(ray, _keepers, G + 1)
    chosen = [keepers(bounds, *[m[1 + j] for m in grouped]) for j in range(P)]
    write = ray.remote(_write_group)
    written = [write.remote(stage, g, ctx.out_root, ctx.output_schema, ctx.stage_id, *[c[1 + i] for c in chosen])
               for i, g in enumerate(groups)]
    rows = sum(ray.get(written))
    if rows != n:
        raise RuntimeError(f"ray plan wrote {rows} of {n} rows")
    decided = ray.get([c[0] for c in chosen])
    ctx.extra["dedup"] = {
        "candidate_edges": int(sum(c for c, _ in counts)),
        "verified_edges": int(sum(k for _, k in counts)) if stage.verifies else None,
        "partitions": P, "rounds": rounds,
        "in_groups": int(sum(ray.get([m[0] for m in grouped]))),
        "groups": int(sum(g for g, _ in decided)), "removed": int(sum(r for _, r in decided)),
        "documents": n, "seconds": round(time.perf_counter() - t0, 3),
    }
    return len(shards)
