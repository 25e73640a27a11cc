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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import UserError
from .schema import PARENT_ID, PARENT_IDS, REJECT_DETAIL, REJECT_REASON, REJECT_STAGE, conform, text_bytes

MANIFEST = "_manifest.json"
RUN_FILE = "_run.json"
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


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def add_bins(total: list[int] | None, counts: list[int]) -> list[int]:
    """Histogram counts added bin by bin (None: nothing yet)."""
    return list(counts) if total is None else [a + b for a, b in zip(total, counts)]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


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


class ShardFiles:
    """The files of one shard, written under temporary names and renamed together on commit; the
    per-shard marker (`_shards/part-NNNNN.json`, with the ledger, statistics and seconds) is written
    last, so a shard exists for resume exactly when its marker does. Every output kind uses this."""

    def __init__(self, root: Path, index: int):
        self.root = Path(root)
        self.index = index
        self._tag = f".tmp-{os.getpid()}"
        self._pending: list[tuple[Path, Path]] = []  # (temp, final)
        self._handles: list[Any] = []
        self.stats: dict[str, Any] | None = None
        self.seconds: float | None = None

    def temp(self, name: str) -> Path:
        """A temporary path that becomes `root/name` on commit."""
        final = self.root / name
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
        for tmp, final in self._pending:
            os.replace(tmp, final)
        marker = dict(counts.to_json(), **(extra or {}))
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
        self.root = Path(root)
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
        self._input_ids: set[str] | None = None
        self.examples: dict[str, list[dict[str, Any]]] = {}  # a few rejected rows per reason, for reports
        self.sources: dict[str, dict[str, Any]] = {}  # rows out / rejected per `source`, kept lengths
        self._parents: set[str] = set()
        self._rejected_ids: set[str] = set()
        # Small batches (one file's document) are gathered into row groups of a useful size: one
        # Parquet write per page would cost more than the page's own bookkeeping.
        self._pending: list[pa.Table] = []
        self._pending_rows = self._pending_bytes = 0
        if cardinality != "one_to_one":
            self.counts.rows_parent = 0
            self._input_ids = set()

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
        if self._input_ids is not None:
            lost = self._input_ids - self._parents - self._rejected_ids
            self.counts.rows_parent = len(self._input_ids & self._parents)
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
    for marker in sorted((Path(root) / SHARDS_DIR).glob("part-*.json")):
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


# Names Assay writes inside a dataset directory (shards of every output kind, markers, manifests).
_OWNED_NAMES = {MANIFEST, RUN_FILE, REJECTS_DIR, SHARDS_DIR, "_scratch", "_artifacts", "_fit", "_side"}


def _owned(entry: Path) -> bool:
    name = entry.name
    if name in _OWNED_NAMES or name.startswith("part-"):
        return True
    return name.startswith(".") and ".tmp-" in name  # our temporary files


def is_assay_dataset(root: Path) -> bool:
    """A complete dataset (its manifest) or a partial one (its run file) written by Assay."""
    for name in (MANIFEST, RUN_FILE):
        data = read_json_safe(root / name)
        if isinstance(data, dict) and "fingerprint" in data:
            return True
    return False


def read_json_safe(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def check_output(root: Path) -> None:
    """Refuse an output that exists and is not Assay's: a file, or a non-empty directory that is not
    an Assay dataset, or a dataset holding files Assay did not write. Nothing is touched."""
    root = Path(root)
    if not root.exists() and not root.is_symlink():
        return
    if not root.is_dir() or root.is_symlink():
        raise OutputRefused(f"{root}: exists and is not a directory Assay created; refusing to write there")
    entries = list(root.iterdir())
    if not entries:
        return
    if not is_assay_dataset(root):
        raise OutputRefused(f"{root}: exists, is not empty and is not an Assay dataset; refusing to touch it "
                            "(choose a new output path)")
    foreign = sorted(e.name for e in entries if not _owned(e))
    if foreign:
        raise OutputRefused(f"{root}: holds files Assay did not write ({', '.join(foreign[:3])}"
                            f"{', ...' if len(foreign) > 3 else ''}); refusing to touch it")


def clear_dataset(root: Path) -> None:
    """Remove an Assay dataset's own files (after check_output said they are all ours)."""
    check_output(root)
    for entry in Path(root).iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def prepare_output(root: Path, fingerprint: str) -> None:
    """Make `root` ready for a run with this fingerprint: keep its shards if they came from the same
    run (resume), clear it if they came from a different one, and drop stale temp files. Refuses
    (OutputRefused) any path that holds something Assay did not write."""
    root = Path(root)
    check_output(root)
    run = read_json_safe(root / RUN_FILE)
    if root.exists() and not (isinstance(run, dict) and run.get("fingerprint") == fingerprint):
        clear_dataset(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    for tmp in [p for p in root.rglob(".*.tmp-*") if p.is_file()]:
        tmp.unlink(missing_ok=True)
    atomic_write_text(root / RUN_FILE, json.dumps({"fingerprint": fingerprint, "assay": "dataset"}))


def finalize(root: Path, manifest: dict[str, Any], shard_count: int) -> dict[str, Any]:
    """Sum the shard ledgers and statistics into the manifest and write it; this marks the dataset
    complete."""
    from .stats import merge_stats

    root = Path(root)
    markers = shard_markers(root)
    missing = sorted(set(range(shard_count)) - set(markers))
    if missing:
        raise LedgerError(f"{root}: shards {missing[:10]} were not committed")
    for extra in set(markers) - set(range(shard_count)):  # left over from a larger earlier run
        for path in list(root.glob(f"part-{extra:05d}*")) + list(root.glob(f"{REJECTS_DIR}/part-{extra:05d}*")):
            path.unlink(missing_ok=True)
        (root / SHARDS_DIR / f"part-{extra:05d}.json").unlink(missing_ok=True)
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


# ---- artifacts: files a stage produces besides shards (thresholds, centroids, a tokenizer) ---------

ARTIFACTS_DIR = "_artifacts"


def write_artifact(root: Path, name: str, data: bytes | str | Any) -> Path:
    """Write an artifact atomically: bytes and str as they are, anything else as JSON."""
    path = Path(root) / ARTIFACTS_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(data, (bytes, str)):
        data = json.dumps(data, indent=1, sort_keys=True, default=_json_default)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)
    return path


def artifact_path(root: Path, name: str) -> Path:
    return Path(root) / ARTIFACTS_DIR / name


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
