"""Shard bookkeeping shared by the plans: global node numbering and writing one annotated shard.

A node is a row's position in the concatenation of all input shards (in input and shard order), so
the same row has the same node id on every engine. Each output shard is the input shard with
`dup_group`/`dup_keep` added, rows in input order, so outputs of different engines compare file by file.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from assay.pipeline import storage
from assay.pipeline.dataset import Counts, ShardWriter
from assay.pipeline.schema import REJECT_DETAIL, REJECT_REASON, text_bytes
from assay.pipeline.stage import set_column

from .columns import DUP_GROUP, DUP_KEEP


@dataclass(frozen=True)
class Shard:
    index: int
    path: str
    offset: int  # node id of the shard's first row
    rows: int
    decoded_bytes: int = 0  # uncompressed size per the Parquet footer: what holding it in memory costs


def list_shards(inputs: Sequence) -> list[Shard]:
    shards, offset = [], 0
    for ds in inputs:
        for path in ds.shards():
            meta = storage.parquet_file(path).metadata
            rows = meta.num_rows
            decoded = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
            shards.append(Shard(len(shards), str(path), offset, rows, decoded))
            offset += rows
    return shards


def iter_shard_batches(shard: Shard, batch_rows: int, columns=None):
    """(first node id, table) for each batch of a shard."""
    node = shard.offset
    if storage.is_url(shard.path):
        source = storage.parquet_file(shard.path)
    else:  # a local file mapped, its column chunks decoded as read rather than buffered ahead
        source = pq.ParquetFile(shard.path, memory_map=True, pre_buffer=False)
    for batch in source.iter_batches(batch_size=batch_rows, columns=columns):
        table = pa.Table.from_batches([batch])
        yield node, table
        node += table.num_rows


def write_shard(
    shard: Shard,
    out_root: Path,
    schema: pa.Schema,
    stage_id: str,
    nodes: np.ndarray,
    keeper_ids: Sequence[str],
    keep: np.ndarray,
    remove: bool,
    reason: str,
    batch_rows: int = 8192,
    batches: Sequence[tuple[int, pa.Table]] | None = None,
) -> Counts:
    """Write the annotated copy of one shard, streaming batch by batch. `nodes` (ascending, inside this
    shard) are the rows in a group of 2+; their group id is `keeper_ids[i]` and `keep[i]` says whether
    they survive. Every other row is its own group (group id = its own id) and kept. `batches`: the
    shard's (first node, table) batches when already in memory; otherwise it is read again."""
    nodes = np.asarray(nodes, np.int64)
    keep = np.asarray(keep, bool)
    keeper_ids = (keeper_ids if isinstance(keeper_ids, pa.Array) else pa.array(list(keeper_ids), pa.string())).cast(pa.string())
    writer = ShardWriter(out_root, shard.index, schema, stage_id)
    try:
        for first, table in batches if batches is not None else iter_shard_batches(shard, batch_rows):
            lo, hi = np.searchsorted(nodes, [first, first + table.num_rows])
            local = nodes[lo:hi] - first
            grouped = np.zeros(table.num_rows, bool)
            grouped[local] = True
            # a row's own id, or its group's keeper id where it is in a group (Arrow, no Python strings)
            group = pc.replace_with_mask(table.column("id").combine_chunks().cast(pa.string()), pa.array(grouped),
                                         keeper_ids.slice(lo, hi - lo))
            keep_col = np.ones(table.num_rows, bool)
            keep_col[local] = keep[lo:hi]
            out = set_column(table, DUP_GROUP, group)
            out = set_column(out, DUP_KEEP, pa.array(keep_col, pa.bool_()))
            if remove:
                group = group.to_pylist()
                drop = (~keep_col).tolist()
                out = set_column(out, REJECT_REASON, pa.array([reason if d else None for d in drop], pa.string()))
                details = [f"{reason} of {g}" if d else None for g, d in zip(group, drop)]
                out = set_column(out, REJECT_DETAIL, pa.array(details, pa.string()))
            writer.add_input(table.num_rows, text_bytes(table))
            writer.write(out)
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


def read_column_at(shards: Sequence[Shard], nodes: np.ndarray, column: str,
                   cache: dict | None = None) -> pa.Array:
    """Values of `column` for the given node ids (ascending, distinct), in that order: taken from
    `cache` (shard index -> its (first node, table) batches, as the local plan holds them) or read
    from the shards that hold them."""
    nodes = np.asarray(nodes, np.int64)
    parts = []
    for shard in shards:
        lo, hi = np.searchsorted(nodes, [shard.offset, shard.offset + shard.rows])
        if lo == hi:
            continue
        if cache is None:
            batches = [(shard.offset, storage.read_parquet(shard.path, columns=[column]))]
        else:
            batches = cache[shard.index]
        for first, table in batches:
            a, b = np.searchsorted(nodes, [first, first + table.num_rows])
            if a < b:
                parts.extend(table.column(column).take(pa.array(nodes[a:b] - first)).chunks)
    if not parts:
        return pa.array([], pa.string())
    if len({p.type for p in parts}) > 1:  # string in some shards, large_string in others
        parts = [p.cast(pa.large_string()) for p in parts]
    return pa.concat_arrays(parts)
