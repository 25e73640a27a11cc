"""`assay export`: a dataset as JSON Lines (plain, gzip or zstd by suffix) or as one Parquet file,
streamed batch by batch.

The file is written under a temporary name and renamed (OUT on a store: written locally, then
uploaded whole); an existing OUT is replaced only with
`--force` and only if its first line looks like what this command writes (a JSON object with an
`id`), so a user's file is never overwritten by accident."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from . import storage
from .dataset import Dataset, atomic_path
from .errors import UserError


def _opener(path: Path):
    name = path.name
    if name.endswith(".gz"):
        return lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=6)
    if name.endswith((".zst", ".zstd")):
        import io

        import zstandard

        return lambda p: io.TextIOWrapper(zstandard.ZstdCompressor(level=6).stream_writer(open(p, "wb")), encoding="utf-8")
    if name.endswith(".jsonl") or name.endswith(".json"):
        return lambda p: open(p, "w", encoding="utf-8")
    raise UserError(f"{path}: expected a .jsonl, .jsonl.gz, .jsonl.zst or .parquet file name")


def _ours(path: Path) -> bool:
    """Only replace a file that starts like an export: a JSON object with an id (a Parquet file
    with an `id` column)."""
    if path.name.endswith(".parquet"):
        try:
            import pyarrow.parquet as pq

            return "id" in pq.read_schema(path).names
        except Exception:  # not Parquet: not ours
            return False
    try:
        from .io import open_binary

        with open_binary(path) as fh:
            first = json.loads(fh.readline())
        return isinstance(first, dict) and "id" in first
    except Exception:  # unreadable, not JSON, not ours: refuse
        return False


def export_jsonl(dataset: str | os.PathLike, out: str | os.PathLike, rejects: bool = False, force: bool = False) -> int:
    ds, out = Dataset(dataset), storage.as_path(out)
    if not ds.complete:
        raise UserError(f"{dataset}: not a complete dataset (no _manifest.json)")
    opener = None if out.name.endswith(".parquet") else _opener(out)
    if storage.exists(out) and not (force and storage.is_file(out) and _ours_anywhere(out)):
        raise UserError(f"{out}: exists; refusing to overwrite it" + ("" if force else " (use --force for an earlier export)"))
    files = ds.reject_shards() if rejects else ds.shards()
    staging = storage.staging_dir("assay-export-") if storage.is_remote(out) else None
    try:
        with atomic_path(staging / out.name if staging else out) as tmp:
            rows = _write_parquet(files, tmp, ds.schema) if opener is None else _write_jsonl(files, tmp, opener)
        if staging is not None:
            storage.put_file(staging / out.name, out)
    finally:
        if staging is not None:
            storage.rmtree(staging)
    return rows


def _write_jsonl(files: list, tmp: Path, opener) -> int:
    rows = 0
    with opener(tmp) as fh:
        for path in files:
            for batch in storage.parquet_file(path).iter_batches(batch_size=2_000):
                for row in batch.to_pylist():
                    if isinstance(row.get("meta"), str):
                        try:
                            row["meta"] = json.loads(row["meta"])
                        except ValueError:
                            pass
                    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                    rows += 1
    return rows


def _ours_anywhere(path) -> bool:
    with storage.local_copy(path) as local:
        return _ours(local)


def _write_parquet(files, tmp: Path, schema) -> int:
    """All shards as one zstd Parquet file, for tools that want a single file."""
    import pyarrow.parquet as pq

    rows = 0
    writer = None
    try:
        for path in files:
            for batch in storage.parquet_file(path).iter_batches(batch_size=20_000):
                if writer is None:
                    writer = pq.ParquetWriter(tmp, batch.schema, compression="zstd")
                writer.write_batch(batch)
                rows += batch.num_rows
        if writer is None:  # no rows: still a file with the schema
            writer = pq.ParquetWriter(tmp, schema, compression="zstd")
    finally:
        if writer is not None:
            writer.close()
    return rows
