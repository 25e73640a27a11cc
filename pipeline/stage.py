"""Stage kinds, the stage contract, typed params and the registry.

A stage is a class with a pydantic `Params` model. Kinds:

* `MapStage`: a pure function from an Arrow table (a batch of one input shard) to a table in the
  stage's output schema plus a `reject_reason` column (null = kept). Runs unchanged on every engine.
* `SourceStage`: turns outside files into documents; its tasks are byte ranges of files.
* `FitApplyStage`: a global stage in the engine-neutral shape: `fit` maps over shards in parallel,
  `reduce` merges the partial results on the driver into an artifact, `apply` is a map stage.
* `GlobalStage`: shuffle-bound work (dedup) with one explicit plan per engine.

What every stage declares (class defaults; a recipe overrides resources, workers and batch_rows):

* `cardinality`: one_to_one, one_to_many (output rows carry `parent_id`) or many_to_many
  (`parent_ids`). The ledger is checked per shard at commit: every input row is rejected with a
  reason or is the parent of output rows.
* `output_kind`: documents (Parquet), tokens (see tokens.py), side (Parquet keyed by `id`, no text)
  or artifact (files only).
* `columns`: the columns it adds, with their Arrow types. They make the output schema; writing a
  column nobody declared is an error.
* `resources` (cpus, gpus, memory_gb), `workers` (0 = as many as the engine has), `batch_rows`.
* `requires`: import names of the packages it needs (`assay validate` checks them).
* `setup()` loads models once per worker; `teardown()` releases them when the stage ends (every
  engine calls it exactly once per worker per stage).
* `self.stats` (a Stats): mergeable statistics per shard, merged into the manifest.

Rejected rows travel in the same table as kept rows, marked by `reject_reason`, so one stream goes
through Spark's mapInArrow or Ray and is split only when written.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Literal, Sequence

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from .schema import PARENT_ID, PARENT_IDS, REJECT_DETAIL, REJECT_REASON
from .stats import Stats

if TYPE_CHECKING:
    from .dataset import Counts, Dataset

Cardinality = Literal["one_to_one", "one_to_many", "many_to_many"]
OutputKind = Literal["documents", "tokens", "side", "artifact", "run"]


class Params(BaseModel):
    """Base for stage params: unknown keys are errors, so a typo in a recipe is caught."""

    model_config = ConfigDict(extra="forbid")


class NoParams(Params):
    pass


class Resources(Params):
    """What one worker of a stage needs; engines size their pools and requests from it."""

    cpus: float = Field(1, gt=0, description="CPU cores per worker")
    gpus: float = Field(0, ge=0, description="GPUs per worker (a local worker gets one device each)")
    memory_gb: float = Field(0, ge=0, description="Memory per worker in GiB (0 = unspecified)")


@dataclass(frozen=True)
class Task:
    """One unit of work, producing exactly one output shard.

    `inputs` are file paths (an input dataset's shard for map stages, raw files for sources);
    `extra` carries per-task settings such as a byte range of a large file or the fit phase."""

    index: int
    inputs: tuple[str, ...]
    extra: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.extra).get(key, default)


class Stage:
    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = NoParams
    version: ClassVar[str] = "1"  # bump when the stage's output changes for the same params
    cardinality: ClassVar[Cardinality] = "one_to_one"
    output_kind: ClassVar[OutputKind] = "documents"
    # Columns the stage adds, with types: they make the output schema, `assay stages` and the report.
    columns: ClassVar[dict[str, pa.DataType]] = {}
    # Class defaults of what a worker needs; a recipe's `resources:`/`workers:`/`batch_rows:` override.
    resources: Resources = Resources()
    workers: int = 0
    batch_rows: int = 5_000
    # A map stage's input shard larger than this (uncompressed) is split by row groups into tasks.
    task_bytes: ClassVar[int] = 64 * 1024 * 1024
    # Import names of packages the stage needs beyond Assay's own; `assay validate` checks them.
    requires: ClassVar[tuple[str, ...]] = ()
    # What the stage reads besides its input datasets, by param: "file" (a model, registry, template,
    # tokenizer or input glob: hashed by content into the stage's identity) or "place" (a folder it
    # writes or caches into: never part of its identity). Recipes resolve both against the recipe's
    # directory and the CLI against the current directory (`path_params` lists them). See identity.py.
    reads: ClassVar[dict[str, str]] = {}
    path_params: ClassVar[tuple[str, ...]] = ()
    # Names besides shards and markers that the stage writes into its output folder (a training run's
    # checkpoints): Assay may clear them, and nothing else, when it replaces the output.
    owned_names: ClassVar[tuple[str, ...]] = ()
    # False for a global stage that may run on files alone (a tokenizer loaded from its file).
    needs_inputs: ClassVar[bool] = True
    # False for a stage that only another command runs (a training run: `assay train`), so the CLI
    # gives it no `assay FAMILY STAGE` command of its own.
    command: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "path_params" in cls.__dict__ and "reads" not in cls.__dict__:
            # a stage that names only path_params (written before `reads`): they are files it reads
            cls.reads = {**{k: v for k, v in cls.reads.items() if k in cls.path_params},
                         **{name: cls.reads.get(name, "file") for name in cls.path_params}}
        cls.path_params = tuple(cls.reads)

    def __init__(self, params: Params | dict | None = None, stage_id: str | None = None,
                 resources: Resources | dict | None = None, workers: int | None = None,
                 batch_rows: int | None = None):
        if params is None:
            params = {}
        self.params = params if isinstance(params, self.Params) else self.Params.model_validate(params)
        self.stage_id = stage_id or self.name
        if resources is not None:
            base = type(self).resources.model_dump()
            given = resources.model_dump(exclude_unset=True) if isinstance(resources, Resources) else resources
            self.resources = Resources.model_validate({**base, **given})
        if workers is not None:
            self.workers = workers
        if batch_rows is not None:
            self.batch_rows = batch_rows
        self.stats = Stats()
        self._ready = False

    # Attributes that prepare() builds once on the driver (an index, a vocabulary): the runner writes
    # them to the output's scratch folder (on the output's file system or store, which every engine's
    # workers reach without a shared disk), and each worker loads them once before setup() instead of
    # building its own.
    shared: ClassVar[tuple[str, ...]] = ()

    def prepare(self) -> None:
        """Driver-side, once before the stage's tasks: build the `shared` attributes."""

    def share(self, scratch: Path) -> None:
        """prepare() on the driver, then publish the shared attributes for the workers."""
        path = scratch / f"shared-{self.stage_id}.npz"
        if not self.shared or (getattr(self, "_shared_path", None) == str(path) and path.exists()):
            return  # nothing to share, or shared already for this output (a fit-then-apply stage's 2nd phase)
        from . import codec
        from .dataset import atomic_write_bytes

        self.prepare()
        atomic_write_bytes(path, codec.dumps({name: getattr(self, name) for name in self.shared}))
        self._shared_path = str(path)

    def _load_shared(self) -> None:
        path = getattr(self, "_shared_path", None)
        if path and any(getattr(self, name, None) is None for name in self.shared):
            from . import codec, storage

            for name, value in codec.loads(storage.read_bytes(path)).items():
                setattr(self, name, value)

    # Lazy, once-per-worker initialisation (models, compiled regexes, ...).
    def setup(self) -> None:
        pass

    def teardown(self) -> None:
        """Release what setup() loaded. Called once per worker when the stage ends."""

    def ensure_setup(self) -> None:
        if not self._ready:
            self._load_shared()
            self.setup()
            self._ready = True

    def close(self) -> None:
        if self._ready:
            self.teardown()
            self._ready = False

    def overrides(self) -> dict[str, Any]:
        """Per-recipe settings that differ from the class defaults (shipped to workers)."""
        out: dict[str, Any] = {}
        cls = type(self)
        if self.resources != cls.resources:
            out["resources"] = self.resources.model_dump()
        if self.workers != cls.workers:
            out["workers"] = self.workers
        if self.batch_rows != cls.batch_rows:
            out["batch_rows"] = self.batch_rows
        return out

    def __getstate__(self) -> dict:
        # Ship params and settings, never loaded models: workers call setup() themselves (and load
        # what the driver shared, by path).
        shared = getattr(self, "_shared_path", None)
        return {"params": self.params.model_dump(mode="json"), "stage_id": self.stage_id, **self.overrides(),
                **({"_shared_path": shared} if shared else {})}

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        shared = state.pop("_shared_path", None)
        self.__init__(state.pop("params"), state.pop("stage_id"), **state)
        if shared:
            self._shared_path = shared

    def read_files(self) -> dict[str, list[str]]:
        """The files (or folders, or globs) this stage reads, by name: its `reads` params of kind "file".
        Override to add what it reads without a param (a bundled default model), as resolved paths."""
        from .identity import FILE, paths_of

        return {name: paths_of(getattr(self.params, name, None)) for name, kind in self.reads.items()
                if kind == FILE and name != "paths"}

    def service_identity(self) -> dict[str, Any] | None:
        """The service this stage calls and the model behind it (None: it calls none)."""
        return None

    @classmethod
    def ref(cls) -> str:
        return f"{cls.__module__}:{cls.__qualname__}"

    def params_json(self) -> str:
        return json.dumps(self.params.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def lineage_columns(cls) -> dict[str, pa.DataType]:
        if cls.cardinality == "one_to_many":
            return {PARENT_ID: pa.string()}
        if cls.cardinality == "many_to_many":
            return {PARENT_IDS: pa.list_(pa.string())}
        return {}

    def output_schema(self, input_schemas: Sequence[pa.Schema]) -> pa.Schema:
        """Schema of kept rows: the (unified) inputs plus the declared columns (replacing same names)."""
        schema = pa.unify_schemas(list(input_schemas), promote_options="permissive") if input_schemas else pa.schema([])
        return add_columns(schema, {**self.columns, **self.lineage_columns()})

    def open_writer(self, out_root: Path, task: Task, schema: pa.Schema):
        """The writer of one task's shard; the output kind decides which."""
        from .dataset import ShardWriter

        return ShardWriter(out_root, task.index, schema, self.stage_id, self.cardinality)

    # ---- what the runner asks of every kind: each kind answers for itself ----

    def check_inputs(self, inputs: Sequence["Dataset"]) -> str | None:
        """Why `inputs` cannot feed this stage (None: they can)."""
        if not inputs and self.needs_inputs:
            return "needs at least one input dataset"
        return None

    def outside_inputs(self) -> tuple[list[str], list[str]]:
        """What it reads besides datasets, as (folders or files named by params, matched files): an
        output may not lie in, on or around them."""
        return [], []

    def input_identity(self) -> list[Any] | None:
        """What identifies its outside input for the fingerprint (None: it reads datasets only)."""
        return None

    def fusable(self) -> bool:
        """Whether it may run inside a fused chain (fusion.py)."""
        return False

    def listed_tasks(self, inputs: Sequence["Dataset"]) -> list[Task]:
        """The tasks the runner lists before it touches the output."""
        return self.tasks(inputs)

    def execute(self, run: Any) -> int:
        """This kind's plan: run the stage into `run.out` (runner.StageRun) and return its shard
        count. By default one task per listed task, each writing its own shard."""
        return run.map(self)

    def check(self) -> list[str]:
        """Problems found without running (missing packages); `assay validate` prints them."""
        import importlib.util

        problems = []
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                problems.append(f"stage {self.stage_id!r} needs the Python package {module!r}, which is not installed")
        return problems


def add_columns(schema: pa.Schema, columns: dict[str, pa.DataType]) -> pa.Schema:
    """`schema` with each column added at the end; an existing column of that name keeps its place
    and takes the declared type."""
    for name, typ in columns.items():
        if name in schema.names:
            schema = schema.set(schema.get_field_index(name), pa.field(name, typ))
        else:
            schema = schema.append(pa.field(name, typ))
    return schema


class MapStage(Stage):
    kind = "map"

    def fusable(self) -> bool:
        return type(self).kind == "map" and self.cardinality == "one_to_one" and self.output_kind == "documents"

    def process(self, table: pa.Table) -> pa.Table:
        """Return the batch in the output schema plus a `reject_reason` column (null = kept)."""
        raise NotImplementedError

    def tasks(self, inputs: Sequence["Dataset"]) -> list[Task]:
        """One task per shard of every input (several inputs mean the union of them); a shard
        holding more than `task_bytes` of uncompressed data is re-sharded into runs of its row
        groups, so one oversized shard upstream does not leave every later stage on one core."""
        tasks: list[Task] = []
        for path in (str(p) for ds in inputs for p in ds.shards()):  # a URL stays a URL (storage.py)
            spans = row_group_spans(path, self.task_bytes)
            if spans is None:
                tasks.append(Task(len(tasks), (path,)))
            else:
                for span in spans:
                    tasks.append(Task(len(tasks), (path,), (("row_groups", span),)))
        return tasks

    def read_batches(self, task: Task, writer) -> Iterator[pa.Table]:
        from . import storage
        from .schema import text_bytes

        note = getattr(writer, "note_inputs", None)
        span = task.get("row_groups")
        groups = list(range(*span)) if span else None
        for path in task.inputs:
            for batch in storage.parquet_file(path).iter_batches(batch_size=self.batch_rows, row_groups=groups):
                table = pa.Table.from_batches([batch])
                if note is not None:
                    note(table)
                else:  # a bare Counts (tests, notebooks)
                    writer.rows_in += table.num_rows
                    writer.bytes_in += text_bytes(table)
                yield table

    def run_task(self, task: Task, writer) -> Iterator[Any]:
        self.ensure_setup()
        for table in self.read_batches(task, writer):
            yield self.process(table)


class SourceStage(Stage):
    """Reads outside files into documents. Params must have `paths` (globs).

    Tasks are bounded: files smaller than `task_bytes` are grouped (up to `files_per_task`), and a
    reader that can split a file (`splittable`, e.g. JSON Lines) gets byte ranges of about
    `task_bytes` each, so one 400 MB file spreads over every core. The split points depend only on
    the file sizes, so tasks are the same on every run and engine."""

    kind = "source"
    files_per_task: ClassVar[int] = 1
    splittable: ClassVar[bool] = False  # read_file honours (start, end) byte ranges
    reads: ClassVar[dict[str, str]] = {"paths": "file"}

    def input_files(self) -> list[str]:
        from .io import expand_paths

        return expand_paths(self.params.paths)

    def name_of(self, path: str) -> str:
        """How rows name the file they came from (row ids, meta, reject details): its path below the
        folder that holds the stage's input folders (`sample/html/*.html.gz` names a file
        `html/a.html.gz`), so the same corpus gives the same rows on local disk or on a store."""
        logical = getattr(self, "_logical", {}).get(path, path)
        if getattr(self, "_input_root", None) is None:
            self._input_root = input_root(getattr(self.params, "paths", None) or [])
        root = self._input_root
        if "://" in logical:  # a URL's credentials never name a row (redact.py)
            from .redact import redact

            logical, root = redact(logical), root and redact(root)
        if root and logical.startswith(root + "/"):
            return logical[len(root) + 1:]
        return logical

    def matched_files(self) -> list[str]:
        """`input_files()`, globbed once per instance: the fingerprint and the tasks share it."""
        if getattr(self, "_matched", None) is None:
            self._matched = self.input_files()
        return self._matched

    def check_inputs(self, inputs: Sequence["Dataset"]) -> str | None:
        return "reads files; it takes no dataset inputs" if inputs else None

    def outside_inputs(self) -> tuple[list[str], list[str]]:
        import glob

        return [str(p) for p in self.params.paths if not glob.has_magic(str(p))], self.matched_files()

    def check(self) -> list[str]:
        problems = [] if self.matched_files() else [f"stage {self.stage_id!r}: no input files match {self.params.paths}"]
        return problems + super().check()

    def execute(self, run: Any) -> int:
        run.manifest["input_files"] = [dict({"shard": t.index, "files": list(t.inputs)}, **dict(t.extra))
                                       for t in run.tasks]  # which files made which shard
        return run.map(self)

    def input_identity(self) -> list[Any]:
        """What identifies the outside input for the fingerprint: (path, content hash) per file by
        default (stat-cached, so an unchanged file is not read again and `touch` changes nothing). A
        source whose files do not say when their content changed (a git repository, a remote listing)
        returns something that does (a commit id, an ETag)."""
        from .identity import file_digest

        folders: dict[str, str] = {}
        return [(f, file_digest(f, folders)) for f in self.matched_files()]

    def tasks(self, inputs: Sequence["Dataset"] = ()) -> list[Task]:
        from . import storage
        from .errors import UserError

        files = self.matched_files()
        if not files:
            raise UserError(f"stage {self.stage_id!r}: no input files match {self.params.paths}")
        tasks: list[Task] = []
        group: list[str] = []
        group_bytes = 0

        def flush() -> None:
            nonlocal group, group_bytes
            if group:
                tasks.append(Task(len(tasks), tuple(group)))
            group, group_bytes = [], 0

        for path in files:
            size = storage.size(path)
            if self.splittable and size > self.task_bytes and _plain(path):
                flush()
                pieces = -(-size // self.task_bytes)
                step = -(-size // pieces)
                for start in range(0, size, step):
                    tasks.append(Task(len(tasks), (path,), (("range", (start, min(start + step, size))),)))
                continue
            if len(group) >= self.files_per_task or (group and group_bytes + size > self.task_bytes):
                flush()
            group.append(path)
            group_bytes += size
        flush()
        return tasks

    def output_schema(self, input_schemas: Sequence[pa.Schema] = ()) -> pa.Schema:
        from .schema import DOC_SCHEMA

        return add_columns(DOC_SCHEMA, self.columns)

    def read_file(self, path: str, byte_range: tuple[int, int] | None = None) -> Iterator[pa.Table]:
        """Yield document tables (with `reject_reason` where a record is bad) for one file, or for
        the records that start inside `byte_range` when the reader is splittable."""
        raise NotImplementedError

    def run_task(self, task: Task, writer) -> Iterator[pa.Table]:
        self.ensure_setup()
        counts = getattr(writer, "counts", writer)  # a shard writer, or a bare Counts (tests, notebooks)
        byte_range = task.get("range")
        for path in self.local_inputs(task, counts):
            tables = self.read_file(path, byte_range) if byte_range else self.read_file(path)
            ordinal = 0
            for table in tables:
                counts.rows_in += table.num_rows
                # ids from (file, ordinal); a splittable reader names positions itself (line
                # numbers), so that its ids do not depend on how the file was cut into tasks
                yield table if self.splittable else with_row_ids(table, self.name_of(path), ordinal)
                ordinal += table.num_rows

    def local_inputs(self, task: Task, counts) -> Iterator[str]:
        """The task's input files in order, each as a local path while the caller reads it, its bytes
        (or its byte range's) counted in `counts.bytes_in`. A file on a store is read from a local copy
        (readers and their libraries take paths); rows still name it by its place among the inputs
        (name_of)."""
        from . import storage

        byte_range = task.get("range")
        for url in task.inputs:
            try:
                size = storage.size(url)
                counts.bytes_in += (byte_range[1] - byte_range[0]) if byte_range else size
            except OSError:
                pass
            with storage.local_copy(url) as local:
                path = str(local)
                self._logical = {path: url} if path != url else {}
                try:
                    yield path
                finally:
                    self._logical = {}


def input_root(patterns: Sequence[str]) -> str | None:
    """The folder above the deepest folder holding every pattern's fixed part (see name_of)."""
    import glob
    import os

    from . import storage

    bases = []
    for pattern in patterns:
        pattern = str(pattern)
        url = storage.is_url(pattern)
        if not url:
            pattern = os.path.abspath(os.path.expanduser(pattern))
        parts = pattern.split("/")
        fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), None)
        if fixed is not None:
            base = "/".join(parts[:fixed])
        else:
            base = pattern.rstrip("/") if storage.is_dir(pattern) else pattern.rsplit("/", 1)[0]
        bases.append(base)
    if not bases:
        return None
    common = bases[0]
    for base in bases[1:]:
        while common and not (base == common or base.startswith(common + "/")):
            common = common.rsplit("/", 1)[0] if "/" in common else ""
    if "://" in common and common.split("://", 1)[1].count("/") < 1:
        return common  # a bucket: nothing above it
    return common.rsplit("/", 1)[0] if "/" in common else None


def with_row_ids(table: pa.Table, origin: str, first: int) -> pa.Table:
    """A source's rows with ids from where they were read (the file, or the file and the byte range's
    start, and the record's ordinal there): unique by construction, whatever the rows hold."""
    from .schema import row_id

    if "id" not in table.column_names or not table.num_rows:
        return table
    ids = pa.array([row_id(origin, first + i) for i in range(table.num_rows)], pa.string())
    return table.set_column(table.column_names.index("id"), "id", ids)


def row_group_spans(path: str, task_bytes: int) -> list[tuple[int, int]] | None:
    """[start, end) runs of row groups of about `task_bytes` uncompressed each, or None when the
    shard is one task. Depends only on the file's footer, so the split is the same on every run."""
    from . import storage

    if storage.size(path) * 2 < task_bytes:  # compressed size: too small to matter, skip the footer
        return None
    meta = storage.parquet_file(path).metadata
    sizes = [meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)]
    if len(sizes) < 2 or sum(sizes) <= task_bytes:
        return None
    spans, start, acc = [], 0, 0
    for i, size in enumerate(sizes):
        if acc and acc + size > task_bytes:
            spans.append((start, i))
            start, acc = i, 0
        acc += size
    spans.append((start, len(sizes)))
    return spans if len(spans) > 1 else None


def _plain(path: str) -> bool:
    """Byte ranges need an uncompressed file (a compressed stream cannot be entered mid-way)."""
    return not path.endswith((".gz", ".zst", ".zstd", ".bz2", ".xz"))


class FitApplyStage(MapStage):
    """A global stage that runs on any engine: fit over shards in parallel, reduce on the driver,
    apply as a map stage.

    Implement `fit(table, state) -> state` (called per batch; state starts as None), `reduce(states)
    -> artifact` (partial states in shard order; must be deterministic), optionally `combine(states)
    -> state` (then the reduce is a tree on the workers), and `apply(table,
    artifact) -> table`. The artifact is saved as JSON in the output's `_artifacts/fit.json`
    (override save_artifact/load_artifact for other formats). Partial states are stored per shard
    under `_fit/` (codec.py: data only, never pickle), so a killed fit resumes shard by shard."""

    kind = "fit_apply"

    def fit(self, table: pa.Table, state: Any) -> Any:
        raise NotImplementedError

    def reduce(self, states: list[Any]) -> Any:
        raise NotImplementedError

    def combine(self, states: list[Any]) -> Any:
        """Optional: fold partial states (in shard order, None for an empty shard) into one state that
        `reduce` takes like any other. A stage that has it is reduced as a tree on the workers, so
        the driver never holds more than a few states (runner.TREE_FAN_IN), whatever the number of
        shards; one without it hands every state to the driver's `reduce`."""
        raise NotImplementedError

    def combines(self) -> bool:
        return type(self).combine is not FitApplyStage.combine

    def execute(self, run: Any) -> int:
        run.manifest["statistics"] = run.fit(self)
        return run.map(self)

    def apply(self, table: pa.Table, artifact: Any) -> pa.Table:
        raise NotImplementedError

    def save_artifact(self, out_root: Path, artifact: Any) -> None:
        from .dataset import write_artifact

        write_artifact(out_root, "fit.json", artifact)

    def load_artifact(self, out_root: Path) -> Any:
        from .dataset import artifact_path

        return json.loads(artifact_path(out_root, "fit.json").read_text())

    def open_writer(self, out_root: Path, task: Task, schema: pa.Schema):
        if task.get("phase") == "fit":
            return PartialWriter(out_root, task.index)
        if getattr(self, "_artifact_root", None) != str(out_root):  # once per worker and output
            self.artifact = self.load_artifact(out_root)
            self._artifact_root = str(out_root)
        return super().open_writer(out_root, task, schema)

    def run_task(self, task: Task, writer) -> Iterator[Any]:
        self.ensure_setup()
        if task.get("phase") == "fit":
            state = None
            for table in self.read_batches(task, writer):
                state = self.fit(table, state)
            yield state
            return
        for table in self.read_batches(task, writer):
            yield self.apply(table, self.artifact)

    def process(self, table: pa.Table) -> pa.Table:
        return self.apply(table, self.artifact)


class PartialWriter:
    """Holds one shard's fit state; committed under `_fit/` (codec.py) with a marker."""

    def __init__(self, out_root: Path, index: int):
        from .dataset import Counts, ShardFiles

        from . import storage

        self.root = storage.as_path(out_root) / "_fit"
        self.files = ShardFiles(self.root, index)
        self.counts = Counts()
        self.state: Any = None

    def note_inputs(self, table: pa.Table) -> None:
        self.counts.rows_in += table.num_rows
        self.counts.rows_out += table.num_rows  # fit reads every row; nothing is rejected

    def write(self, state: Any) -> None:
        self.state = state

    def commit(self):
        from . import codec

        self.files.temp(f"part-{self.files.index:05d}.state").write_bytes(codec.dumps(self.state))
        self.files.commit(self.counts)
        return self.counts

    def abort(self) -> None:
        self.files.abort()


class GlobalStage(Stage):
    """Shuffle-bound work that needs the whole dataset at once. Implement `run_local`; add
    `run_spark` / `run_ray` for the cluster engines. A cluster engine without a plan falls back to the
    local plan with a printed warning, recorded in the manifest."""

    kind = "global"

    def plans(self) -> set[str]:
        return {e for e in ("local", "spark", "ray") if callable(getattr(self, f"run_{e}", None))}

    def listed_tasks(self, inputs: Sequence["Dataset"]) -> list[Task]:
        return []  # its plan makes its own

    def execute(self, run: Any) -> int:
        import sys

        from . import storage

        eng = run.engine
        plan = eng.name if eng.name in self.plans() else "local"
        if plan != eng.name:
            warning = f"stage {self.stage_id!r} has no {eng.name} plan; it ran the local plan on the driver"
            run.manifest["fallback_warning"] = warning
            print(f"warning: {warning}", file=sys.stderr)
        ctx = GlobalContext(run.datasets, run.out, run.schema, self.stage_id, engine=eng, workdir=run.out.parent,
                            fingerprint=run.fingerprint)
        self.ensure_setup()
        try:
            shard_count = getattr(self, f"run_{plan}")(ctx)
        finally:
            self.close()
            if "_local_scratch" in ctx.extra_state:  # the driver's own scratch of a remote output
                storage.rmtree(ctx.extra_state["_local_scratch"])
        run.manifest["plan"] = plan
        if ctx.extra:  # plan statistics (candidate pairs, groups, spilled bytes, ...)
            run.manifest["stats"] = ctx.extra
        return shard_count

    def run_local(self, ctx: "GlobalContext") -> int:
        """Write the output shards through ctx.shard_writer(i) and return how many were written."""
        raise NotImplementedError


@dataclass
class GlobalContext:
    inputs: list["Dataset"]
    out_root: Path
    output_schema: pa.Schema
    stage_id: str
    engine: Any = None  # the engine object (SparkEngine, RayEngine, LocalEngine)
    workdir: Path | None = None
    fingerprint: str = ""  # the run's identity (a checkpoint names the run it belongs to)
    extra: dict[str, Any] = field(default_factory=dict)
    extra_state: dict[str, Any] = field(default_factory=dict, repr=False)  # not for the manifest

    def shard_writer(self, index: int, schema: pa.Schema | None = None):
        from .dataset import ShardWriter

        return ShardWriter(self.out_root, index, schema or self.output_schema, self.stage_id)

    def scratch(self, name: str) -> Path:
        """A scratch directory for the driver's spills and checkpoints: inside the output (removed with
        it), or for an output on a store, a local folder of the driver's (removed when the run ends)."""
        from . import storage

        if storage.is_remote(self.out_root):
            if "_local_scratch" not in self.extra_state:
                self.extra_state["_local_scratch"] = storage.staging_dir("assay-scratch-")
            path = self.extra_state["_local_scratch"] / name
        else:
            path = self.out_root / "_scratch" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def shared_scratch(self, name: str):
        """A scratch folder every worker reaches, for files the engine's tasks hand each other: inside
        the output, on its disk or its store (a cluster may share no local disk), removed with it."""
        from . import storage

        path = self.out_root / "_scratch" / name
        storage.makedirs(path)
        return path


# ---- helpers for writing map stages -------------------------------------------------------------

def with_rejects(table: pa.Table, reasons: Iterable[str | None] | np.ndarray, details: Iterable[str | None] | None = None) -> pa.Table:
    """Attach reject_reason (null keeps the row) and reject_detail columns to a batch."""
    reason_arr = pa.array(list(reasons) if not isinstance(reasons, pa.Array) else reasons, pa.string())
    table = _set_column(table, REJECT_REASON, reason_arr)
    if details is not None:
        table = _set_column(table, REJECT_DETAIL, pa.array(list(details), pa.string()))
    return table


def _set_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


def set_column(table: pa.Table, name: str, values: Any, type: pa.DataType | None = None) -> pa.Table:
    """Add or replace a column, keeping every other column as it was."""
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, type)
    return _set_column(table, name, arr)


# ---- registry ----------------------------------------------------------------------------------

_REGISTRY: dict[str, type[Stage]] = {}
_ALIASES: dict[str, str] = {}  # old names that recipes may still use -> current names


def register(name: str, aliases: Sequence[str] = ()):
    """Register a stage class as `family.stage`; the family part is its CLI group."""

    def deco(cls: type[Stage]) -> type[Stage]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"stage name {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        for alias in aliases:
            _ALIASES[alias] = name
        return cls

    return deco


def registry() -> dict[str, type[Stage]]:
    from .families import load_families

    load_families()
    return dict(sorted(_REGISTRY.items()))


def resolve_stage(uses: str) -> type[Stage]:
    """A registered name (`filter.length`) or an importable `module:Class` path."""
    if ":" in uses:
        module, _, qualname = uses.partition(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if not (isinstance(obj, type) and issubclass(obj, Stage)):
            raise TypeError(f"{uses} is not a Stage class")
        return obj
    stages = registry()
    uses = _ALIASES.get(uses, uses)
    if uses not in stages:
        import difflib

        close = difflib.get_close_matches(uses, stages, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown stage {uses!r}{hint} (see `assay stages`)")
    return stages[uses]
