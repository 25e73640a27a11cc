"""A dataset on disk: zstd Parquet shards, a manifest that marks it complete, and rejects kept beside it.

Layout of a dataset directory::

    part-00000.parquet ...        kept rows, one file per shard (task)
    _rejects/part-00000.parquet   rows a stage rejected, with reject_stage / reject_reason / reject_detail
    _shards/part-00000.json       per-shard commit marker with that shard's counts (resume unit)
    _run.json                     fingerprint of the run that is filling this directory
    _manifest.json                written last: the dataset is complete once it exists

Every file is written under a temporary name and renamed into place, so a killed run leaves either a
whole shard or none of it.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .schema import REJECT_DETAIL, REJECT_REASON, REJECT_STAGE, conform, text_bytes

MANIFEST = "_manifest.json"
RUN_FILE = "_run.json"
REJECTS_DIR = "_rejects"
SHARDS_DIR = "_shards"
ROW_GROUP_ROWS = 20_000


def shard_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


@dataclass
class Counts:
    """The ledger of one shard or one stage: rows and bytes in, out, and rejected per reason."""

    rows_in: int = 0
    bytes_in: int = 0
    rows_out: int = 0
    bytes_out: int = 0
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rows_rejected(self) -> int:
        return sum(r["rows"] for r in self.rejected.values())

    @property
    def bytes_rejected(self) -> int:
        return sum(r["bytes"] for r in self.rejected.values())

    def add_rejects(self, reason: str, rows: int, nbytes: int) -> None:
        slot = self.rejected.setdefault(reason, {"rows": 0, "bytes": 0})
        slot["rows"] += rows
        slot["bytes"] += nbytes

    def merge(self, other: "Counts") -> None:
        self.rows_in += other.rows_in
        self.bytes_in += other.bytes_in
        self.rows_out += other.rows_out
        self.bytes_out += other.bytes_out
        for reason, slot in other.rejected.items():
            self.add_rejects(reason, slot["rows"], slot["bytes"])

    def balanced(self) -> bool:
        return self.rows_in == self.rows_out + self.rows_rejected

    def to_json(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "bytes_in": self.bytes_in,
            "rows_out": self.rows_out,
            "bytes_out": self.bytes_out,
            "rows_rejected": self.rows_rejected,
            "bytes_rejected": self.bytes_rejected,
            "rejected": dict(sorted(self.rejected.items())),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Counts":
        return cls(
            rows_in=data["rows_in"],
            bytes_in=data["bytes_in"],
            rows_out=data["rows_out"],
            bytes_out=data["bytes_out"],
            rejected={k: dict(v) for k, v in data.get("rejected", {}).items()},
        )


class Dataset:
    """Read side of a dataset directory. Works on complete datasets and (for resume) partial ones."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Dataset({str(self.path)!r})"

    @property
    def manifest(self) -> dict[str, Any] | None:
        return read_json(self.path / MANIFEST)

    @property
    def complete(self) -> bool:
        return (self.path / MANIFEST).exists()

    def shards(self) -> list[Path]:
        return sorted(self.path.glob("part-*.parquet"))

    def reject_shards(self) -> list[Path]:
        return sorted((self.path / REJECTS_DIR).glob("part-*.parquet"))

    @property
    def schema(self) -> pa.Schema:
        shards = self.shards()
        if not shards:
            raise FileNotFoundError(f"{self.path}: no part-*.parquet shards (is this an Assay dataset?)")
        return pq.read_schema(shards[0])

    def iter_batches(self, batch_size: int = ROW_GROUP_ROWS, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        for shard in self.shards():
            yield from pq.ParquetFile(shard).iter_batches(batch_size=batch_size, columns=columns)

    def read(self, columns: list[str] | None = None) -> pa.Table:
        return _read_files(self.shards(), columns)

    def read_rejects(self) -> pa.Table:
        return _read_files(self.reject_shards(), None)

    def count(self) -> int:
        return sum(pq.ParquetFile(s).metadata.num_rows for s in self.shards())


def _read_files(files: list[Path], columns: list[str] | None) -> pa.Table:
    if not files:
        return pa.table({})
    tables = [pq.read_table(f, columns=columns) for f in files]
    return pa.concat_tables(tables, promote_options="permissive")


class ShardWriter:
    """Writes one shard of a dataset: kept rows and rejects streamed to temp files, renamed on commit.

    Rows arrive as tables with the stage's output schema plus `reject_reason` (null = kept) and
    optionally `reject_detail`. Nothing is visible under the final names until `commit()`.
    """

    def __init__(self, root: Path, index: int, schema: pa.Schema, stage_id: str):
        self.root = Path(root)
        self.index = index
        self.schema = schema
        self.stage_id = stage_id
        self.counts = Counts()
        self._out: pq.ParquetWriter | None = None
        self._rej: pq.ParquetWriter | None = None
        self._tag = f".tmp-{os.getpid()}"
        name = shard_name(index)
        self._out_path = self.root / name
        self._rej_path = self.root / REJECTS_DIR / name
        self._out_tmp = self.root / f".{name}{self._tag}"
        self._rej_tmp = self.root / REJECTS_DIR / f".{name}{self._tag}"
        self.reject_schema = _reject_schema(schema)

    def add_input(self, rows: int, nbytes: int) -> None:
        self.counts.rows_in += rows
        self.counts.bytes_in += nbytes

    def write(self, table: pa.Table) -> None:
        """Split `table` on its reject_reason column and append each side to its file."""
        if table.num_rows == 0:
            return
        if REJECT_REASON in table.column_names:
            reasons = table.column(REJECT_REASON)
            rejected_mask = pc.is_valid(reasons)
            if pc.any(rejected_mask).as_py():
                self._write_rejects(table.filter(rejected_mask))
                table = table.filter(pc.invert(rejected_mask))
        kept = conform(table, self.schema)
        if kept.num_rows:
            self.counts.rows_out += kept.num_rows
            self.counts.bytes_out += text_bytes(kept)
            self._writer_out().write_table(kept, row_group_size=ROW_GROUP_ROWS)

    def _write_rejects(self, rejects: pa.Table) -> None:
        if REJECT_DETAIL not in rejects.column_names:
            rejects = rejects.append_column(REJECT_DETAIL, pa.nulls(rejects.num_rows, pa.string()))
        rejects = rejects.append_column(REJECT_STAGE, pa.array([self.stage_id] * rejects.num_rows, pa.string()))
        rejects = conform(rejects, self.reject_schema)
        grouped = rejects.group_by(REJECT_REASON).aggregate([([], "count_all")])
        for reason, n in zip(grouped.column(REJECT_REASON).to_pylist(), grouped.column("count_all").to_pylist()):
            part = rejects.filter(pc.equal(rejects.column(REJECT_REASON), reason))
            self.counts.add_rejects(reason, n, text_bytes(part))
        if self._rej is None:
            self._rej_tmp.parent.mkdir(parents=True, exist_ok=True)
            self._rej = pq.ParquetWriter(self._rej_tmp, self.reject_schema, compression="zstd")
        self._rej.write_table(rejects, row_group_size=ROW_GROUP_ROWS)

    def _writer_out(self) -> pq.ParquetWriter:
        if self._out is None:
            self._out = pq.ParquetWriter(self._out_tmp, self.schema, compression="zstd")
        return self._out

    def commit(self) -> Counts:
        self._writer_out()  # an empty shard is still a shard: readers see the schema
        self._out.close()
        os.replace(self._out_tmp, self._out_path)
        if self._rej is not None:
            self._rej.close()
            os.replace(self._rej_tmp, self._rej_path)
        atomic_write_text(self.root / SHARDS_DIR / f"part-{self.index:05d}.json", json.dumps(self.counts.to_json()))
        return self.counts

    def abort(self) -> None:
        for writer in (self._out, self._rej):
            if writer is not None:
                writer.close()
        for tmp in (self._out_tmp, self._rej_tmp):
            tmp.unlink(missing_ok=True)


def _reject_schema(schema: pa.Schema) -> pa.Schema:
    fields = [f for f in schema if f.name not in (REJECT_REASON, REJECT_DETAIL, REJECT_STAGE)]
    return pa.schema(
        fields
        + [
            pa.field(REJECT_STAGE, pa.string()),
            pa.field(REJECT_REASON, pa.string()),
            pa.field(REJECT_DETAIL, pa.string()),
        ]
    )


def done_shards(root: Path) -> dict[int, Counts]:
    """Shards already committed in a (possibly partial) dataset directory."""
    done = {}
    for marker in sorted((Path(root) / SHARDS_DIR).glob("part-*.json")):
        index = int(marker.stem.split("-")[1])
        if (Path(root) / shard_name(index)).exists():
            done[index] = Counts.from_json(json.loads(marker.read_text()))
    return done


def prepare_output(root: Path, fingerprint: str) -> None:
    """Make `root` ready for a run with this fingerprint: keep its shards if they came from the same
    run (resume), wipe it if they came from a different one, and drop stale temp files."""
    root = Path(root)
    run = read_json(root / RUN_FILE)
    if run is not None and run.get("fingerprint") != fingerprint:
        shutil.rmtree(root)
    elif run is None and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    for tmp in list(root.glob(".*.tmp-*")) + list(root.glob(f"{REJECTS_DIR}/.*.tmp-*")):
        tmp.unlink(missing_ok=True)
    atomic_write_text(root / RUN_FILE, json.dumps({"fingerprint": fingerprint}))


def finalize(root: Path, manifest: dict[str, Any], shard_count: int) -> dict[str, Any]:
    """Sum the shard ledgers into the manifest and write it; this marks the dataset complete."""
    root = Path(root)
    done = done_shards(root)
    missing = sorted(set(range(shard_count)) - set(done))
    if missing:
        raise RuntimeError(f"{root}: shards {missing[:10]} were not committed")
    for extra in set(done) - set(range(shard_count)):  # left over from a larger earlier run
        (root / shard_name(extra)).unlink(missing_ok=True)
        (root / REJECTS_DIR / shard_name(extra)).unlink(missing_ok=True)
        (root / SHARDS_DIR / f"part-{extra:05d}.json").unlink(missing_ok=True)
    total = Counts()
    for index in range(shard_count):
        total.merge(done[index])
    if not total.balanced():
        raise RuntimeError(
            f"{root}: ledger does not balance: {total.rows_in} in != {total.rows_out} out + {total.rows_rejected} rejected"
        )
    manifest = dict(manifest, shards=shard_count, counts=total.to_json())
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return manifest


def write_table(table: pa.Table, root: str | os.PathLike, shards: int = 1, stage_id: str = "input") -> Path:
    """Write an in-memory table as a complete dataset of `shards` near-equal shards.

    For building inputs in tests, benchmarks and notebooks; the fingerprint is the content's hash,
    so an equal table gives an equal, skippable input downstream."""
    import hashlib

    root = Path(root)
    digest = hashlib.sha256()
    for batch in table.to_batches():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as stream:
            stream.write_batch(batch)
        digest.update(sink.getvalue().to_pybytes())
    fingerprint = f"{stage_id}-{shards}-{digest.hexdigest()[:24]}"
    prepare_output(root, fingerprint)
    step = -(-table.num_rows // shards) if table.num_rows else 0
    for i in range(shards):
        part = table.slice(i * step, step) if step else table.slice(0, 0)
        writer = ShardWriter(root, i, table.schema, stage_id)
        writer.add_input(part.num_rows, text_bytes(part))
        writer.write(part)
        writer.commit()
    finalize(root, {"stage": stage_id, "stage_id": stage_id, "fingerprint": fingerprint, "kind": "input",
                    "engine": "none", "wall_seconds": 0}, shards)
    return root
