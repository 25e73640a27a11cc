"""A dataset on disk: zstd Parquet shards, a manifest that marks it complete, and rejects kept beside it.

Layout of a dataset directory::

    part-00000.parquet ...        kept rows, one file per shard (task)
    _rejects/part-00000.parquet   rows a stage rejected, with reject_stage / reject_reason / reject_detail
    _shards/part-00000.json       per-shard commit marker with that shard's counts (resume unit)
    _lease.json                   the writer filling this directory: fingerprint, host, pid, heartbeat
    _manifest.json                written last: the dataset is complete once it exists

Every file is written under a temporary name (host, pid and a random part: retries on two hosts over
shared storage never collide), flushed to disk, and renamed into place, and the folder is flushed
after the rename, so a killed run or a crashed host leaves either a whole shard or none of it. One
writer at a time holds an output (its lease); a second is refused with one line.

On an object store (storage.py) there is no rename: a shard's files are written to a local staging
folder and uploaded whole (a PUT is all or nothing) on commit, then its marker; so an object without
a marker (a killed or retried attempt's) is never part of a dataset, and `finalize` removes any.
"""
from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import storage
from .errors import UserError
from .schema import PARENT_ID, PARENT_IDS, REJECT_DETAIL, REJECT_REASON, REJECT_STAGE, conform, text_bytes

MANIFEST = "_manifest.json"
LEASE = "_lease.json"
RUN_FILE = "_run.json"  # a workdir's run log (runner.py); inside a dataset only in folders older Assays wrote
REJECTS_DIR = "_rejects"
SHARDS_DIR = "_shards"
ROW_GROUP_ROWS = 20_000
PENDING_ROWS = 2_000  # kept rows gathered before one Parquet write
PENDING_BYTES = 32 * 1024 * 1024
EXAMPLES_PER_REASON = 3  # rejected rows per reason kept in the manifest for the report
# Bin edges of the per-source document length histograms (UTF-8 bytes of `text`): powers of two
# from 16 B to 16 MiB, the same on every shard so the bins add.
LENGTH_EDGES = [0.0] + [float(2 ** k) for k in range(4, 25)] + [float("inf")]
EXAMPLE_CHARS = 300


def shard_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def temp_tag() -> str:
    """The suffix of a temporary file: unique across hosts, processes and attempts."""
    import secrets
    import socket

    host = "".join(c if c.isalnum() or c == "-" else "_" for c in socket.gethostname())[:32] or "host"
    return f".tmp-{host}-{os.getpid()}-{secrets.token_hex(4)}"


# Durability: data and folders are flushed before a commit becomes visible, so a commit survives a
# host crash, not only a killed process. ASSAY_FSYNC=0 turns it off (scratch runs on slow disks).
FSYNC = os.environ.get("ASSAY_FSYNC", "1") != "0"


def fsync_file(path: Path) -> None:
    if FSYNC:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_dir(path: Path) -> None:
    if FSYNC:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass  # some file systems cannot flush a folder; the data itself was flushed
        finally:
            os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, fenced: bool = True) -> None:
    """Write `data` to `path` under a temporary name, flush it, rename it into place, flush the folder
    (on a store: one whole-object PUT, see storage.put_bytes). Inside an output whose lease this
    process holds, only while the lease is still ours (check_fence)."""
    path = storage.as_path(path)
    if storage.is_remote(path):
        if fenced:
            check_fence(path)
        storage.put_bytes(path, data, temp_tag=temp_tag())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{temp_tag()}")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        if FSYNC:
            os.fsync(handle.fileno())
    if fenced:
        try:
            check_fence(path)
        except LeaseLost:
            tmp.unlink(missing_ok=True)
            raise
    os.replace(tmp, path)
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, redacted: bool = True) -> None:
    """atomic_write_bytes of text Assay composed (manifests, markers, run logs, reports), with any
    credential a URL in it carried masked (redact.py); `redacted=False` for a user's data as it is."""
    from .redact import redact

    atomic_write_bytes(path, (redact(text) if redacted else text).encode())


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary name beside the local file `path`, for writers that want a file name (a model's
    save, a streamed export): on a clean exit it is flushed and renamed into place, on an error
    removed. For files outside a stage's output (models, caches, exports): no lease is checked."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{temp_tag()}")
    try:
        yield tmp
        if FSYNC:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def add_bins(total: list[int] | None, counts: list[int]) -> list[int]:
    """Histogram counts added bin by bin (None: nothing yet)."""
    return list(counts) if total is None else [a + b for a, b in zip(total, counts)]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


@dataclass
class Counts:
    """The ledger of one shard or one stage.

    rows_in: input rows; rows_rejected: rows rejected (per reason); rows_parent: input rows that
    became (the parents of) output rows; rows_out: output rows. "Nothing lost" is
    rows_in == rows_parent + rows_rejected for every cardinality. A one-to-one stage has
    rows_out == rows_parent; one-to-many and many-to-many stages create rows (rows_created) and may
    repeat an input (rows_out > rows_parent)."""

    rows_in: int = 0
    bytes_in: int = 0
    rows_out: int = 0
    bytes_out: int = 0
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)
    rows_parent: int | None = None  # None: one-to-one, equal to rows_out
    rows_created: int = 0

    @property
    def rows_rejected(self) -> int:
        return sum(r["rows"] for r in self.rejected.values())

    @property
    def bytes_rejected(self) -> int:
        return sum(r["bytes"] for r in self.rejected.values())

    @property
    def parents(self) -> int:
        return self.rows_out if self.rows_parent is None else self.rows_parent

    def add_rejects(self, reason: str, rows: int, nbytes: int) -> None:
        slot = self.rejected.setdefault(reason, {"rows": 0, "bytes": 0})
        slot["rows"] += rows
        slot["bytes"] += nbytes

    def merge(self, other: "Counts") -> None:
        if self.rows_parent is not None or other.rows_parent is not None:
            self.rows_parent = self.parents + other.parents
        self.rows_in += other.rows_in
        self.bytes_in += other.bytes_in
        self.rows_out += other.rows_out
        self.bytes_out += other.bytes_out
        self.rows_created += other.rows_created
        for reason, slot in other.rejected.items():
            self.add_rejects(reason, slot["rows"], slot["bytes"])

    def balanced(self) -> bool:
        return self.rows_in == self.parents + self.rows_rejected

    def imbalance(self) -> str:
        return (f"{self.rows_in} in != {self.parents} {'out' if self.rows_parent is None else 'parents of output rows'}"
                f" + {self.rows_rejected} rejected")

    def to_json(self) -> dict[str, Any]:
        out = {
            "rows_in": self.rows_in,
            "bytes_in": self.bytes_in,
            "rows_out": self.rows_out,
            "bytes_out": self.bytes_out,
            "rows_rejected": self.rows_rejected,
            "bytes_rejected": self.bytes_rejected,
            "rejected": dict(sorted(self.rejected.items())),
        }
        if self.rows_parent is not None:
            out["rows_parent"] = self.rows_parent
            out["rows_created"] = self.rows_created
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Counts":
        return cls(
            rows_in=data["rows_in"],
            bytes_in=data["bytes_in"],
            rows_out=data["rows_out"],
            bytes_out=data["bytes_out"],
            rejected={k: dict(v) for k, v in data.get("rejected", {}).items()},
            rows_parent=data.get("rows_parent"),
            rows_created=data.get("rows_created", 0),
        )


class LedgerError(RuntimeError):
    """A shard or stage whose rows do not add up: a bug in the stage, never the data's fault."""


class Dataset:
    """Read side of a dataset directory. Works on complete datasets and (for resume) partial ones."""

    def __init__(self, path: str | os.PathLike):
        self.path = storage.as_path(path)

    def __repr__(self) -> str:
        return f"Dataset({str(self.path)!r})"

    @property
    def manifest(self) -> dict[str, Any] | None:
        return read_json(self.path / MANIFEST)

    @property
    def complete(self) -> bool:
        """Its manifest exists and it holds its own rows (a fused chain's middle stage does not)."""
        manifest = self.manifest
        return manifest is not None and not manifest.get("fused_into")

    def incomplete_reason(self) -> str:
        """Why this is not a complete dataset, in words (for one-line errors)."""
        manifest = self.manifest
        if manifest is not None and manifest.get("fused_into"):
            return (f"{self.path} holds no rows of its own: its stage ran fused with the next into "
                    f"{manifest['fused_into']}; give it a consumer in the recipe (or `fuse: false`) and run again")
        return f"{self.path} is not a complete dataset (no {MANIFEST})"

    def shards(self) -> list[Path]:
        return storage.glob(self.path, "part-*.parquet")

    def reject_shards(self) -> list[Path]:
        return storage.glob(self.path / REJECTS_DIR, "part-*.parquet")

    @property
    def schema(self) -> pa.Schema:
        shards = self.shards()
        if not shards:
            raise FileNotFoundError(f"{self.path}: no part-*.parquet shards (is this an Assay dataset?)")
        return storage.parquet_file(shards[0]).schema_arrow

    def iter_batches(self, batch_size: int = ROW_GROUP_ROWS, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        for shard in self.shards():
            yield from storage.parquet_file(shard).iter_batches(batch_size=batch_size, columns=columns)

    def read(self, columns: list[str] | None = None) -> pa.Table:
        return _read_files(self.shards(), columns)

    def read_rejects(self) -> pa.Table:
        return _read_files(self.reject_shards(), None)

    def count(self) -> int:
        return sum(storage.parquet_file(s).metadata.num_rows for s in self.shards())


def _read_files(files: list[Path], columns: list[str] | None) -> pa.Table:
    if not files:
        return pa.table({})
    tables = [storage.read_parquet(f, columns=columns) for f in files]
    return pa.concat_tables(tables, promote_options="permissive")


class ShardFiles:
    """The files of one shard, written under temporary names and renamed together on commit; the
    per-shard marker (`_shards/part-NNNNN.json`, with the ledger, statistics and seconds) is written
    last, so a shard exists for resume exactly when its marker does. Every output kind uses this."""

    def __init__(self, root: Path, index: int):
        self.root = storage.as_path(root)
        self.index = index
        self._tag = temp_tag()
        self._pending: list[tuple[Path, Path]] = []  # (temp, final)
        self._handles: list[Any] = []
        self.stats: dict[str, Any] | None = None
        self.seconds: float | None = None
        # A remote output's files are written to a local staging folder and uploaded on commit.
        self._staging: Path | None = storage.staging_dir() if storage.is_remote(self.root) else None

    def temp_of(self, name: str) -> Path:
        """The temporary path already registered for `name`."""
        final = self.root / name
        return next(tmp for tmp, f in self._pending if f == final)

    def temp(self, name: str) -> Path:
        """A (local) temporary path that becomes `root/name` on commit."""
        final = self.root / name
        if self._staging is not None:
            tmp = self._staging / name
        else:
            tmp = final.with_name(f".{final.name}{self._tag}")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        self._pending.append((tmp, final))
        return tmp

    def open_binary(self, name: str):
        handle = open(self.temp(name), "wb")
        self._handles.append(handle)
        return handle

    def commit(self, counts: Counts, extra: dict[str, Any] | None = None) -> None:
        for handle in self._handles:
            handle.close()
        objects = {}
        if self._staging is not None:  # upload each file whole, then the marker that makes them a shard
            for tmp, final in self._pending:
                check_fence(self.root)  # before each upload: never over a new holder's shard
                storage.put_file(tmp, final, temp_tag=self._tag)
                objects[str(final)[len(str(self.root)) + 1:]] = tmp.stat().st_size
            shutil.rmtree(self._staging, ignore_errors=True)
        else:
            for tmp, _ in self._pending:
                fsync_file(tmp)
            check_fence(self.root)  # the last moment the files can still be dropped unseen
            for tmp, final in self._pending:
                os.replace(tmp, final)
            for folder in {final.parent for _, final in self._pending}:
                fsync_dir(folder)
        marker = dict(counts.to_json(), **(extra or {}))
        if objects:  # finalize checks them: an attempt still running must not have replaced them since
            marker["objects"] = objects
        if self.stats:
            marker["stats"] = self.stats
        if self.seconds is not None:
            marker["seconds"] = round(self.seconds, 4)
        atomic_write_text(self.root / SHARDS_DIR / f"part-{self.index:05d}.json", json.dumps(marker))

    def abort(self) -> None:
        for handle in self._handles:
            handle.close()
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)


class ShardWriter:
    """Writes one shard of a document (or side) dataset: kept rows and rejects streamed to temp files,
    renamed on commit.

    Rows arrive as tables with the stage's output schema plus `reject_reason` (null = kept) and
    optionally `reject_detail`. Nothing is visible under the final names until `commit()`, which
    also checks the shard's ledger. A column the schema does not declare is an error, not a drop.
    `cardinality` other than one_to_one makes the writer track ids: every input id must be rejected
    or be the parent (`parent_id` / `parent_ids`) of an output row."""

    def __init__(self, root: Path, index: int, schema: pa.Schema, stage_id: str,
                 cardinality: str = "one_to_one", keep_rows: bool = True):
        self.root = storage.as_path(root)
        self.keep_rows = keep_rows  # False: count kept rows only (a fused chain's middle stage)
        self.index = index
        self.schema = schema
        self.stage_id = stage_id
        self.cardinality = cardinality
        self.counts = Counts()
        self.files = ShardFiles(self.root, index)
        self._out: pq.ParquetWriter | None = None
        self._rej: pq.ParquetWriter | None = None
        name = shard_name(index)
        self._name = name
        self.reject_schema = _reject_schema(schema)
        self._input_ids: Counter | None = None  # a multiset: identical rows may share an id
        self.examples: dict[str, list[dict[str, Any]]] = {}  # a few rejected rows per reason, for reports
        self.sources: dict[str, dict[str, Any]] = {}  # rows out / rejected per `source`, kept lengths
        self._parents: set[str] = set()
        self._rejected_ids: Counter = Counter()
        # Small batches (one file's document) are gathered into row groups of a useful size: one
        # Parquet write per page would cost more than the page's own bookkeeping.
        self._pending: list[pa.Table] = []
        self._pending_rows = self._pending_bytes = 0
        if cardinality != "one_to_one":
            self.counts.rows_parent = 0
            self._input_ids = Counter()

    def add_input(self, rows: int, nbytes: int) -> None:
        self.counts.rows_in += rows
        self.counts.bytes_in += nbytes

    def note_inputs(self, table: pa.Table) -> None:
        """Record a batch of input rows (counts always; ids when the stage creates rows)."""
        self.add_input(table.num_rows, text_bytes(table))
        if self._input_ids is not None and "id" in table.column_names:
            self._input_ids.update(table.column("id").to_pylist())

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
        undeclared = set(table.column_names) - set(self.schema.names) - {REJECT_REASON, REJECT_DETAIL}
        if undeclared:
            raise LedgerError(f"stage {self.stage_id!r} wrote undeclared column(s) {sorted(undeclared)}; "
                              "declare them in the stage's `columns`")
        kept = conform(table, self.schema)
        if kept.num_rows:
            self._count_sources(kept, "out")
            self.counts.rows_out += kept.num_rows
            self.counts.bytes_out += text_bytes(kept)
            if self._input_ids is not None:
                self._note_parents(kept)
            if self.keep_rows:
                self._pending.append(kept)
                self._pending_rows += kept.num_rows
                self._pending_bytes += kept.nbytes
                if self._pending_rows >= PENDING_ROWS or self._pending_bytes >= PENDING_BYTES:
                    self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = self._pending[0] if len(self._pending) == 1 else pa.concat_tables(self._pending)
            self._writer_out().write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def _note_parents(self, kept: pa.Table) -> None:
        if PARENT_ID in kept.column_names:
            parents = kept.column(PARENT_ID).to_pylist()
            self._parents.update(parents)
            self.counts.rows_created += sum(1 for p, i in zip(parents, kept.column("id").to_pylist()) if p != i)
        elif PARENT_IDS in kept.column_names:
            for ids in kept.column(PARENT_IDS).to_pylist():
                self._parents.update(ids or ())
            self.counts.rows_created += kept.num_rows
        else:
            raise LedgerError(f"stage {self.stage_id!r} ({self.cardinality}) wrote rows without {PARENT_ID} or {PARENT_IDS}")

    def _write_rejects(self, rejects: pa.Table) -> None:
        if REJECT_DETAIL not in rejects.column_names:
            rejects = rejects.append_column(REJECT_DETAIL, pa.nulls(rejects.num_rows, pa.string()))
        rejects = rejects.append_column(REJECT_STAGE, pa.array([self.stage_id] * rejects.num_rows, pa.string()))
        if self._input_ids is not None:
            self._rejected_ids.update(rejects.column("id").to_pylist())
        rejects = conform(rejects, self.reject_schema)
        self._count_sources(rejects, "rejected")
        grouped = rejects.group_by(REJECT_REASON).aggregate([([], "count_all")])
        for reason, n in zip(grouped.column(REJECT_REASON).to_pylist(), grouped.column("count_all").to_pylist()):
            part = rejects.filter(pc.equal(rejects.column(REJECT_REASON), reason))
            self.counts.add_rejects(reason, n, text_bytes(part))
            kept_examples = self.examples.setdefault(reason, [])
            for row in part.slice(0, max(0, EXAMPLES_PER_REASON - len(kept_examples))).to_pylist():
                kept_examples.append({"id": row.get("id"), "source": row.get("source"), "detail": row.get(REJECT_DETAIL),
                                      "text": (row.get("text") or "")[:EXAMPLE_CHARS]})
        if self._rej is None:
            self._rej = pq.ParquetWriter(self.files.temp(f"{REJECTS_DIR}/{self._name}"), self.reject_schema,
                                         compression="zstd")
        self._rej.write_table(rejects, row_group_size=ROW_GROUP_ROWS)

    def _writer_out(self) -> pq.ParquetWriter:
        if self._out is None:
            self._out = pq.ParquetWriter(self.files.temp(self._name), self.schema, compression="zstd")
        return self._out

    def _count_sources(self, table: pa.Table, side: str) -> None:
        """Rows per `source`, and for kept rows with text, per source and length bin (the report's
        length histograms): one dictionary encoding of the column for both."""
        if "source" not in table.column_names or not table.num_rows:
            return
        codes = pc.fill_null(table.column("source"), "").combine_chunks().dictionary_encode()
        names = codes.dictionary.to_pylist()
        index = codes.indices.to_numpy(zero_copy_only=False)
        for name, n in zip(names, np.bincount(index, minlength=len(names)).tolist()):
            self.sources.setdefault(name, {"out": 0, "rejected": 0})[side] += n
        if side == "out" and "text" in table.column_names:
            lengths = pc.fill_null(pc.binary_length(table.column("text")), 0).to_numpy(zero_copy_only=False)
            per_source = np.zeros((len(names), len(LENGTH_EDGES) - 1), dtype=np.int64)
            np.add.at(per_source, (index, np.searchsorted(LENGTH_EDGES, lengths, side="right") - 1), 1)
            for name, row in zip(names, per_source.tolist()):
                slot = self.sources[name]
                slot["lengths"] = add_bins(slot.get("lengths"), row)

    def check_ledger(self) -> None:
        if self._input_ids is not None:  # compared as multisets: n rows of one id need n fates
            parents, lost = 0, []
            for row_id, n in self._input_ids.items():
                rejected = min(n, self._rejected_ids.get(row_id, 0))
                if row_id in self._parents:
                    parents += n - rejected
                elif rejected < n:
                    lost.append(row_id)
            self.counts.rows_parent = parents
            if lost:
                raise LedgerError(f"stage {self.stage_id!r} shard {self.index}: {len(lost)} input row(s) neither "
                                  f"rejected nor the parent of an output row, e.g. id {sorted(lost)[0]!r}")
        if not self.counts.balanced():
            raise LedgerError(f"stage {self.stage_id!r} shard {self.index}: ledger does not balance: "
                              + self.counts.imbalance())

    def commit(self) -> Counts:
        self.check_ledger()
        if self.keep_rows:
            self._flush()
            self._writer_out()  # an empty shard is still a shard: readers see the schema
        self.close_writers()
        extra = {}
        if self.examples:
            extra["reject_examples"] = self.examples
        if self.sources:
            extra["sources"] = self.sources
        self.files.commit(self.counts, extra=extra)
        return self.counts

    def close_writers(self) -> None:
        for writer in (self._out, self._rej):
            if writer is not None:
                writer.close()

    def abort(self) -> None:
        self.close_writers()
        self.files.abort()


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


def shard_markers(root: Path) -> dict[int, dict[str, Any]]:
    """The committed shards of a (possibly partial) dataset: index -> marker JSON."""
    done = {}
    for marker in storage.glob(storage.as_path(root) / SHARDS_DIR, "part-*.json"):
        try:
            done[int(marker.stem.split("-")[1])] = json.loads(marker.read_text())
        except (ValueError, OSError):
            continue  # a marker is written atomically; anything unreadable is not ours to trust
    return done


def done_shards(root: Path) -> dict[int, Counts]:
    """Shards already committed in a (possibly partial) dataset directory."""
    return {i: Counts.from_json(m) for i, m in shard_markers(root).items()}


# ---- what Assay owns: never delete anything else ---------------------------------------------------

class OutputRefused(UserError):
    """An output path Assay may not write: printed as one line, nothing touched."""


class OutputBusy(OutputRefused):
    """Another live run holds the output's lease."""


# Names Assay writes inside a dataset directory (shards of every output kind, markers, manifests).
_OWNED_NAMES = {MANIFEST, LEASE, RUN_FILE, REJECTS_DIR, SHARDS_DIR, "_scratch", "_artifacts", "_fit", "_side"}


def _owned(name: str, extra: set[str] = frozenset()) -> bool:
    if name in _OWNED_NAMES or name in extra or name.startswith("part-"):
        return True
    return name.startswith(".") and ".tmp-" in name  # our temporary files


def _record(root: Path) -> dict[str, Any] | None:
    """What says this folder is Assay's: its manifest, else its lease (a run filling it, or killed
    while filling it), else the run file older Assays wrote."""
    for name in (MANIFEST, LEASE, RUN_FILE):
        data = read_json_safe(storage.as_path(root) / name)
        if isinstance(data, dict) and "fingerprint" in data:
            return data
    return None


def is_assay_dataset(root: Path) -> bool:
    """A complete dataset (its manifest) or a partial one (its lease) written by Assay."""
    return _record(storage.as_path(root)) is not None


def read_json_safe(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def check_output(root: Path) -> None:
    """Refuse an output that exists and is not Assay's: a file, or a non-empty directory that is not
    an Assay dataset, or a dataset holding files Assay did not write. Nothing is touched."""
    root = storage.as_path(root)
    if storage.is_remote(root):  # a prefix: "exists" when objects lie below it; a key of that name is a file
        if storage.is_file(root):
            raise OutputRefused(f"{root}: exists and is not a directory Assay created; refusing to write there")
        names = storage.listdir(root)
    else:
        if not root.exists() and not root.is_symlink():
            return
        if not root.is_dir() or root.is_symlink():
            raise OutputRefused(f"{root}: exists and is not a directory Assay created; refusing to write there")
        names = [e.name for e in root.iterdir()]
    if not names:
        return
    record = _record(root)
    if record is None:
        raise OutputRefused(f"{root}: exists, is not empty and is not an Assay dataset; refusing to touch it "
                            "(choose a new output path)")
    extra = set(record.get("owns", ()))
    foreign = sorted(name for name in names if not _owned(name, extra))
    if foreign:
        raise OutputRefused(f"{root}: holds files Assay did not write ({', '.join(foreign[:3])}"
                            f"{', ...' if len(foreign) > 3 else ''}); refusing to touch it")


def clear_dataset(root: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove an Assay dataset's own files (after check_output said they are all ours)."""
    check_output(root)
    root = storage.as_path(root)
    if storage.is_remote(root):
        for name in storage.listdir(root):
            if name not in keep:
                storage.rmtree(root / name)
        return
    for entry in root.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def producer_of(root: Path) -> dict[str, Any] | None:
    """Who made the dataset at `root` (stage, stage id, owning recipe, params digest); a dataset older
    Assays or helpers (write_table) made says only its stage."""
    record = _record(storage.as_path(root))
    if not record:
        return None
    return record.get("producer") or ({"stage": record["stage"], "legacy": True} if record.get("stage") else None)


def check_replace(root: Path, producer: dict[str, Any], force: bool, params: dict[str, Any] | None = None) -> None:
    """Refuse to replace a dataset another stage, another recipe or other params made, unless forced.

    A recipe owns its stage folders (an edited recipe re-runs them); a stage run on its own may redo
    its own output (code, files or upstream changed; or resume) but not another command's. `params`
    (the stage's, in full) are compared with those the dataset records where their digests differ:
    params a newer Assay added or removed do not make the same command "another" one."""
    old = producer_of(root)
    if force or not old:
        return
    if old.get("legacy"):  # who owned it is not recorded: only the same stage may redo it
        if old.get("stage") != producer.get("stage"):
            raise OutputRefused(f"{root}: holds the output of {old.get('stage')}; this run would replace it with "
                                f"{_describe(producer)} (pass --force to replace it, or choose another output)")
        return
    complete = read_json_safe(storage.as_path(root) / MANIFEST) is not None  # else the partial output of a failed run
    same_owner = old.get("owner") == producer.get("owner")
    same = same_owner and (producer.get("owner") is not None or (
        old.get("stage") == producer.get("stage") and (old.get("params") == producer.get("params") or not complete
                                                       or _same_given(_record(storage.as_path(root)), params))))
    if not same:
        raise OutputRefused(f"{root}: holds {_describe(old)}; this run would replace it with {_describe(producer)} "
                            "(pass --force to replace it, or choose another output)")


def _same_given(record: dict[str, Any] | None, params: dict[str, Any] | None) -> bool:
    """Every param both the recorded run and this one have holds the same value."""
    before = (record or {}).get("params")
    if not isinstance(before, dict) or params is None:
        return False
    return all(before[k] == params[k] for k in before.keys() & params.keys())


def _describe(producer: dict[str, Any]) -> str:
    owner = f" of {producer['owner']}" if producer.get("owner") else ""
    return f"the output of {producer.get('stage', '?')}{owner}" + ("" if producer.get("owner") else " with other params")


def prepare_output(root: Path, fingerprint: str, previous: str | None = None) -> None:
    """Make `root` ready for a run with this fingerprint: keep its shards if the run that left them
    had the same fingerprint (`previous`: resume), clear them otherwise, and drop stale temp files.
    Refuses (OutputRefused) any path that holds something Assay did not write. The caller holds the
    output's lease."""
    root = storage.as_path(root)
    check_output(root)
    if storage.is_remote(root):
        if previous != fingerprint:
            clear_dataset(root, keep=(LEASE,))
        storage.remove(root / MANIFEST)
        storage.remove(root / RUN_FILE)
        for name in storage.files_under(root):  # temp names exist only on stores without whole-object PUTs
            if ".tmp-" in name.rsplit("/", 1)[-1]:
                storage.remove(root / name)
        return
    if root.exists() and previous != fingerprint:
        clear_dataset(root, keep=(LEASE,))
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    (root / RUN_FILE).unlink(missing_ok=True)
    for tmp in [p for p in root.rglob(".*.tmp-*") if p.is_file()]:
        tmp.unlink(missing_ok=True)


class Lease:
    """One writer at a time per output: `_lease.json` names the run filling the folder (fingerprint,
    producer, host, pid and the pid's start time, heartbeat). A second writer sees a live lease and is
    refused with one line; a stale one (its pid dead on this host, or its heartbeat older than
    `ttl` seconds from another host) is taken over. A killed run's lease stays behind and says which
    fingerprint its shards belong to, so a rerun with the same fingerprint resumes them.

    Taking a lease is exclusive on one file system: a new lease is created with O_EXCL, and a stale
    one is first renamed aside (only one of two racing writers can rename it).

    On an object store: with conditional writes (S3 and the S3-compatible stores that honour
    `If-None-Match`/`If-Match`), a new lease is created only if none exists, a stale one is replaced
    only if it is still the one read, and each heartbeat only if it is still ours: exactly one of two
    racing writers wins, and a writer whose lease was taken over stops beating and finds out at its
    next `ours()`. Without them (ASSAY_S3_CONDITIONAL=0, or another store): write, wait VERIFY_S,
    read back and keep it only if it still holds our token; two writers starting within VERIFY_S of
    each other can then both believe they won only if the store shows a reader an older object after
    a newer one was read back (no current store does so past a few hundred milliseconds)."""

    HEARTBEAT_S = float(os.environ.get("ASSAY_LEASE_HEARTBEAT_S", "10"))
    TTL_S = float(os.environ.get("ASSAY_LEASE_TTL_S", "60"))
    VERIFY_S = float(os.environ.get("ASSAY_LEASE_VERIFY_S", "1"))

    def __init__(self, root: Path, fingerprint: str, producer: dict[str, Any] | None = None,
                 owns: tuple[str, ...] = ()):
        import secrets

        from .liveness import me

        self.root = storage.as_path(root)
        self.path = self.root / LEASE
        self._etag: str | None = None  # the object we wrote last (conditional stores)
        self.record = {"fingerprint": fingerprint, "producer": producer or {}, "owns": list(owns), **me(),
                       "token": secrets.token_hex(8), "generation": 1, "started": _now(), "heartbeat": _now()}
        self.previous: dict[str, Any] | None = None  # the stale lease taken over, if any
        self._stop = None
        self._thread = None

    @classmethod
    def check_free(cls, root: Path) -> None:
        """Refuse (OutputBusy) when a live run holds `root`; acquire() checks again, atomically."""
        current = read_json_safe(storage.as_path(root) / LEASE)
        if isinstance(current, dict) and _alive(current, cls.TTL_S):
            raise OutputBusy(f"{root}: another Assay run is writing it ({_holder(current)}); wait for it to "
                             "finish or stop it")

    @classmethod
    def clear_stale(cls, root: Path, fingerprint: str, producer: dict[str, Any] | None = None) -> None:
        """A run killed after its manifest was written but before its lease went leaves a complete
        dataset with a stale lease: the run that skips it takes the lease over and gives it up (the
        same exclusive take-over as any run's, so a live holder is never removed)."""
        current = read_json_safe(storage.as_path(root) / LEASE)
        if isinstance(current, dict) and not _alive(current, cls.TTL_S):
            try:
                with cls(root, fingerprint, producer):
                    pass
            except OutputBusy:  # a live run took it in between: its lease, not ours to touch
                pass

    def acquire(self) -> "Lease":
        if storage.is_remote(self.root):
            return self._acquire_remote()
        self.root.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            current = read_json_safe(self.path)
            if self.path.exists() and current is None:
                current = {}  # unreadable (a torn write of a killed Assay): stale
            if current is not None:
                self.check_free(self.root)
                aside = self.root / f".{LEASE}.stale{temp_tag()}"
                try:
                    os.rename(self.path, aside)
                except FileNotFoundError:
                    continue  # someone else took it over first: look again
                aside.unlink(missing_ok=True)
                self.previous = current or None
            self._next_generation()
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(self.record))
                handle.flush()
                if FSYNC:
                    os.fsync(handle.fileno())
            fsync_dir(self.root)
            self._start_heartbeat()
            return self
        raise OutputBusy(f"{self.root}: other Assay runs keep taking it; try again")

    def _acquire_remote(self) -> "Lease":
        for _ in range(5):
            data, etag = storage.read_with_tag(self.path)
            if data is not None:
                try:
                    current = json.loads(data)
                except ValueError:
                    current = {}
                if isinstance(current, dict) and _alive(current, self.TTL_S):
                    self.check_free(self.root)  # one line naming the holder
                    continue  # it ended in between: look again
                self.previous = current if isinstance(current, dict) and current else None
            self._next_generation()
            try:
                self._write_remote(etag if data is not None else None)
            except storage.Conflict:
                continue  # another writer got there first: look again
            self._start_heartbeat()
            return self
        raise OutputBusy(f"{self.root}: other Assay runs keep taking it; try again")

    def _write_remote(self, expected: str | None) -> None:
        """Write our record over the object read (ETag `expected`, None: none): conditionally where the
        store can, else write, wait and read back (see the class doc)."""
        payload = json.dumps(self.record).encode()
        if storage.supports_conditional(self.path):
            self._etag = storage.put_if(self.path, payload, expected) or storage.read_with_tag(self.path)[1]
            if not self.ours():  # a store that ignores the condition (older S3 clones): caught here at least
                raise storage.Conflict(f"{self.path}: another writer's lease replaced ours")
            return
        storage.put_bytes(self.path, payload)
        import time

        time.sleep(self.VERIFY_S)
        if not self.ours():
            raise storage.Conflict(f"{self.path}: another writer's lease replaced ours")

    def _next_generation(self) -> None:
        """One more than the lease taken over: how many holders the output has had (for a reader of the
        lease after a take-over)."""
        before = (self.previous or {}).get("generation")
        self.record["generation"] = (before if isinstance(before, int) else 0) + 1

    def previous_fingerprint(self) -> str | None:
        """The fingerprint whose shards the folder holds, if a killed run left them."""
        if self.previous and self.previous.get("fingerprint"):
            return self.previous["fingerprint"]
        legacy = read_json_safe(self.root / RUN_FILE)  # a partial dataset an older Assay left
        return legacy.get("fingerprint") if isinstance(legacy, dict) and "fingerprint" in legacy else None

    def ours(self) -> bool:
        current = _read_lease(self.path)
        return isinstance(current, dict) and current.get("token") == self.record["token"]

    def _start_heartbeat(self) -> None:
        import threading

        _FENCES[_fence_key(self.root)] = self.record["token"]
        self._stop = threading.Event()

        def beat() -> None:
            while not self._stop.wait(self.HEARTBEAT_S):
                if not self.ours():
                    return
                self.record["heartbeat"] = _now()
                try:
                    self._rewrite(self.record)
                except storage.Conflict:
                    return  # taken over: ours() says so to whoever asks
                except OSError:
                    pass

        self._thread = threading.Thread(target=beat, name="assay-lease", daemon=True)
        self._thread.start()

    def release(self, finished: bool = True) -> None:
        """Give the output up: a finished run removes its lease (the manifest now speaks for the folder);
        a failed one leaves it marked released, still naming the fingerprint of the shards it left."""
        if self._stop is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._stop = None
        if _FENCES.get(_fence_key(self.root)) == self.record["token"]:
            del _FENCES[_fence_key(self.root)]
        if self.ours():
            if finished:
                storage.remove(self.path)
            else:
                try:
                    self._rewrite(dict(self.record, released=True))
                except storage.Conflict:
                    pass

    def _rewrite(self, record: dict[str, Any]) -> None:
        """Replace our lease object (only while it is still ours, where the store can say)."""
        if storage.is_remote(self.path) and storage.supports_conditional(self.path) and self._etag:
            self._etag = storage.put_if(self.path, json.dumps(record).encode(), self._etag) or self._etag
        else:
            atomic_write_bytes(self.path, json.dumps(record).encode(), fenced=False)

    def __enter__(self) -> "Lease":
        return self.acquire()

    def __exit__(self, exc_type, *exc) -> None:
        self.release(finished=exc_type is None)


def _now() -> float:
    import time

    return round(time.time(), 3)


def _alive(lease: dict[str, Any], ttl: float) -> bool:
    """The lease's writer runs: its process, where this one can look it up (liveness.checkable), else
    a heartbeat younger than `ttl`."""
    import time

    from .liveness import checkable, running

    if lease.get("released"):
        return False
    if checkable(lease):
        return running(int(lease["pid"]), lease.get("pid_start"))
    beat = lease.get("heartbeat")
    return isinstance(beat, (int, float)) and time.time() - beat < ttl


def _holder(lease: dict[str, Any]) -> str:
    """Who holds a lease, for a message: host, pid and since when, in local time."""
    import time

    since = lease.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return f"host {lease.get('host')}, pid {lease.get('pid')}, since {when}"


# ---- fencing: a writer that lost its lease commits nothing more -----------------------------------

class LeaseLost(OutputRefused):
    """This run's lease on its output was taken over (the run was paused past it, or its heartbeats
    did not arrive): another run writes there now, so this one stops without writing."""


# The lease token this process writes each output under: the driver's, set when it takes the lease;
# a worker's, from the stage it was sent (execute_task). Every commit inside such an output first
# checks the output's lease still holds that token.
_FENCES: dict[str, str] = {}


def _fence_key(root) -> str:
    root = storage.as_path(root)
    return str(root) if storage.is_remote(root) else os.path.abspath(root)


def held_fences() -> dict[str, str]:
    return dict(_FENCES)


def hold_fences(fences: dict[str, str] | None) -> None:
    _FENCES.update(fences or {})


def _read_lease(path) -> Any:
    """The lease record; absent or unreadable looked at three times over half a second first (some
    S3 servers show an object being overwritten as missing for a moment)."""
    import time

    for _ in range(3):
        current = read_json_safe(path)
        if current is not None or not storage.is_remote(path):
            return current
        time.sleep(0.25)
    return None


def check_fence(path) -> None:
    """Raise LeaseLost when `path` lies in an output whose lease this process held and no longer
    holds. Read right before the write it guards, so the one window left is that read's."""
    if not _FENCES:
        return
    key = _fence_key(path)
    for root, token in list(_FENCES.items()):
        if key == root or key.startswith(root.rstrip("/") + "/"):
            current = _read_lease(storage.as_path(root) / LEASE)
            if not (isinstance(current, dict) and current.get("token") == token):
                who = f" ({_holder(current)})" if isinstance(current, dict) else ""
                raise LeaseLost(f"{root}: this run lost its lease on the output (paused past it?) and another "
                                f"run took it over{who}; stopping without writing more")


def finalize(root: Path, manifest: dict[str, Any], shard_count: int) -> dict[str, Any]:
    """Sum the shard ledgers and statistics into the manifest and write it; this marks the dataset
    complete."""
    from .stats import merge_stats

    root = storage.as_path(root)
    markers = shard_markers(root)
    missing = sorted(set(range(shard_count)) - set(markers))
    if missing:
        raise LedgerError(f"{root}: shards {missing[:10]} were not committed")
    _drop_uncommitted(root, markers, shard_count)
    total = Counts()
    for index in range(shard_count):
        total.merge(Counts.from_json(markers[index]))
    if not total.balanced():
        raise LedgerError(f"{root}: ledger does not balance: {total.imbalance()}")
    ordered = [markers[i] for i in range(shard_count)]
    stats = merge_stats([manifest.get("statistics")] + [m.get("stats") for m in ordered])
    if stats:
        manifest = dict(manifest, statistics=stats)
    seconds = [m["seconds"] for m in ordered if "seconds" in m]
    if seconds:
        manifest = dict(manifest, shard_seconds={"sum": round(sum(seconds), 3), "max": round(max(seconds), 3),
                                                 "mean": round(sum(seconds) / len(seconds), 4)})
    examples: dict[str, list] = {}
    sources: dict[str, dict[str, Any]] = {}
    for marker in ordered:
        for reason, rows in marker.get("reject_examples", {}).items():
            examples.setdefault(reason, []).extend(rows[: EXAMPLES_PER_REASON - len(examples.get(reason, []))])
        for source, slot in marker.get("sources", {}).items():
            total_slot = sources.setdefault(source, {"out": 0, "rejected": 0})
            for side in ("out", "rejected"):
                total_slot[side] += slot.get(side, 0)
            if "lengths" in slot:
                total_slot["lengths"] = add_bins(total_slot.get("lengths"), slot["lengths"])
    if examples:
        manifest = dict(manifest, reject_examples=dict(sorted(examples.items())))
    if sources:
        manifest = dict(manifest, sources=dict(sorted(sources.items())))
    for key in ("tokens", "loss_tokens"):  # token shards' totals
        if any(key in m for m in ordered):
            manifest = dict(manifest, **{f"total_{key}": sum(int(m.get(key, 0)) for m in ordered)})
    manifest = dict(manifest, shards=shard_count, counts=total.to_json())
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return manifest


def _shard_index(name: str) -> int | None:
    """NNNNN of a `part-NNNNN...` file name."""
    if not name.startswith("part-"):
        return None
    digits = name[5:].split(".", 1)[0]
    return int(digits) if digits.isdigit() else None


def _drop_uncommitted(root, markers: dict[int, dict[str, Any]], shard_count: int) -> None:
    """Remove shard files that are not part of the dataset: left over from a larger earlier run, or
    uploaded by an attempt killed before its marker. On a store, also check that each committed
    shard's objects are still the sizes its marker recorded (a zombie attempt overwriting them after
    the commit is a failure, never silent)."""
    for extra in set(markers) - set(range(shard_count)):
        storage.remove(root / SHARDS_DIR / f"part-{extra:05d}.json")
    if storage.is_remote(root):
        files = storage.files_under(root)
        for name in files:
            index = _shard_index(name.rsplit("/", 1)[-1])
            if index is not None and index >= shard_count and not name.startswith(("_fit/", "_scratch/")):
                storage.remove(root / name)
        for index in range(shard_count):
            for name, size in (markers[index].get("objects") or {}).items():
                if files.get(name) != size:
                    raise LedgerError(f"{root}: shard {index}'s {name} is {files.get(name)} bytes, its commit said "
                                      f"{size} (another attempt of that task still writing?); run again")
        return
    for folder in (root, root / REJECTS_DIR):
        for path in folder.glob("part-*") if folder.is_dir() else ():
            index = _shard_index(path.name)
            if index is not None and index >= shard_count and path.is_file():
                path.unlink(missing_ok=True)


# ---- artifacts: files a stage produces besides shards (thresholds, centroids, a tokenizer) ---------

ARTIFACTS_DIR = "_artifacts"


def write_artifact(root: Path, name: str, data: bytes | str | Any) -> Path:
    """Write an artifact atomically: bytes and str as they are, anything else as JSON."""
    path = storage.as_path(root) / ARTIFACTS_DIR / name
    storage.makedirs(path.parent)
    if not isinstance(data, (bytes, str)):
        data = json.dumps(data, indent=1, sort_keys=True, default=_json_default)
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)
    return path


def artifact_path(root: Path, name: str) -> Path:
    return storage.as_path(root) / ARTIFACTS_DIR / name


def read_artifact(root: Path, name: str) -> bytes:
    return storage.read_bytes(artifact_path(root, name))


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def write_table(table: pa.Table, root: str | os.PathLike, shards: int = 1, stage_id: str = "input") -> Path:
    """Write an in-memory table as a complete dataset of `shards` near-equal shards.

    For building inputs in tests, benchmarks and notebooks; the fingerprint is the content's hash,
    so an equal table gives an equal, skippable input downstream."""
    import hashlib

    root = storage.as_path(root)
    digest = hashlib.sha256()
    for batch in table.to_batches():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as stream:
            stream.write_batch(batch)
        digest.update(sink.getvalue().to_pybytes())
    fingerprint = f"{stage_id}-{shards}-{digest.hexdigest()[:24]}"
    check_output(root)
    if (read_json_safe(root / MANIFEST) or {}).get("fingerprint") == fingerprint:
        return root  # written already
    with Lease(root, fingerprint) as lease:
        prepare_output(root, fingerprint, lease.previous_fingerprint())
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
