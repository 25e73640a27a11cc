"""Stage kinds, typed params and the registry.

A stage is a class with a pydantic `Params` model. Three kinds:

* `MapStage`: a pure function from an Arrow table (a batch of one input shard) to a table in the
  stage's output schema plus a `reject_reason` column (null = kept). Runs unchanged on every engine.
* `SourceStage`: turns outside files into documents; its tasks are groups of files, not shards.
* `GlobalStage`: needs the whole dataset (dedup, clustering, calibration); it has one plan per engine.

Rejected rows travel in the same table as kept rows, marked by `reject_reason`, so one stream goes
through Spark's mapInArrow or Ray's map_batches and is split only when written.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from .schema import REJECT_DETAIL, REJECT_REASON, text_bytes

if TYPE_CHECKING:
    from .dataset import Counts, Dataset


class Params(BaseModel):
    """Base for stage params: unknown keys are errors, so a typo in a recipe is caught."""

    model_config = ConfigDict(extra="forbid")


class NoParams(Params):
    pass


@dataclass(frozen=True)
class Task:
    """One unit of work, producing exactly one output shard.

    `inputs` are file paths (an input dataset's shard for map stages, raw files for sources).
    """

    index: int
    inputs: tuple[str, ...]
    extra: tuple[tuple[str, Any], ...] = ()


class Stage:
    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = NoParams
    version: ClassVar[str] = "1"  # bump when the stage's output changes for the same params
    # Columns the stage adds; documented in `assay stages` and used by the report.
    adds_columns: ClassVar[tuple[str, ...]] = ()
    # True when setup() loads a model worth keeping warm: Ray then runs the stage in an actor pool.
    holds_model: ClassVar[bool] = False

    def __init__(self, params: Params | dict | None = None, stage_id: str | None = None):
        if params is None:
            params = {}
        self.params = params if isinstance(params, self.Params) else self.Params.model_validate(params)
        self.stage_id = stage_id or self.name
        self._ready = False

    # Lazy, once-per-worker initialisation (models, compiled regexes, ...).
    def setup(self) -> None:
        pass

    def ensure_setup(self) -> None:
        if not self._ready:
            self.setup()
            self._ready = True

    def __getstate__(self) -> dict:
        # Ship params, never loaded models: workers call setup() themselves.
        return {"params": self.params.model_dump(mode="json"), "stage_id": self.stage_id}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["params"], state["stage_id"])

    @classmethod
    def ref(cls) -> str:
        return f"{cls.__module__}:{cls.__qualname__}"

    def params_json(self) -> str:
        return json.dumps(self.params.model_dump(mode="json"), sort_keys=True)

    def output_schema(self, input_schemas: Sequence[pa.Schema]) -> pa.Schema:
        """Schema of kept rows; default: the (unified) input schema, i.e. a filter."""
        return pa.unify_schemas(list(input_schemas), promote_options="permissive")


class MapStage(Stage):
    kind = "map"
    batch_rows: ClassVar[int] = 5_000

    def process(self, table: pa.Table) -> pa.Table:
        """Return the batch in the output schema plus a `reject_reason` column (null = kept)."""
        raise NotImplementedError

    def tasks(self, inputs: Sequence["Dataset"]) -> list[Task]:
        """One task per shard of every input: several inputs mean the union of them."""
        paths = [str(p) for ds in inputs for p in ds.shards()]
        return [Task(i, (p,)) for i, p in enumerate(paths)]

    def run_task(self, task: Task, counts: "Counts") -> Iterator[pa.Table]:
        import pyarrow.parquet as pq

        self.ensure_setup()
        for path in task.inputs:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=self.batch_rows):
                table = pa.Table.from_batches([batch])
                counts.rows_in += table.num_rows
                counts.bytes_in += text_bytes(table)
                yield self.process(table)


class SourceStage(Stage):
    """Reads outside files into documents. Params must have `paths` (globs); tasks group files."""

    kind = "source"
    files_per_task: ClassVar[int] = 1
    # Params holding file-system paths: recipes resolve them against the recipe's directory and the
    # CLI against the current directory, so workers with another working directory see the same files.
    path_params: ClassVar[tuple[str, ...]] = ("paths",)

    def input_files(self) -> list[str]:
        from .io import expand_paths

        return expand_paths(self.params.paths)

    def matched_files(self) -> list[str]:
        """`input_files()`, globbed once per instance: the fingerprint and the tasks share it."""
        if getattr(self, "_matched", None) is None:
            self._matched = self.input_files()
        return self._matched

    def tasks(self, inputs: Sequence["Dataset"] = ()) -> list[Task]:
        files = self.matched_files()
        if not files:
            raise FileNotFoundError(f"stage {self.stage_id!r}: no input files match {self.params.paths}")
        step = self.files_per_task
        return [Task(i, tuple(files[j : j + step])) for i, j in enumerate(range(0, len(files), step))]

    def output_schema(self, input_schemas: Sequence[pa.Schema] = ()) -> pa.Schema:
        from .schema import DOC_SCHEMA

        return DOC_SCHEMA

    def read_file(self, path: str) -> Iterator[pa.Table]:
        """Yield document tables (with `reject_reason` where a record is bad) for one file."""
        raise NotImplementedError

    def run_task(self, task: Task, counts: "Counts") -> Iterator[pa.Table]:
        import os

        self.ensure_setup()
        for path in task.inputs:
            try:
                counts.bytes_in += os.path.getsize(path)
            except OSError:
                pass
            for table in self.read_file(path):
                counts.rows_in += table.num_rows
                yield table


class GlobalStage(Stage):
    """A stage that needs the whole dataset. Implement `run_local`; add `run_spark` / `run_ray` when a
    distributed plan earns its place. The runner falls back to the local plan (and records that in
    the manifest) when the requested engine has no plan."""

    kind = "global"

    def plans(self) -> set[str]:
        return {e for e in ("local", "spark", "ray") if callable(getattr(self, f"run_{e}", None))}

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
    extra: dict[str, Any] = field(default_factory=dict)

    def shard_writer(self, index: int, schema: pa.Schema | None = None):
        from .dataset import ShardWriter

        return ShardWriter(self.out_root, index, schema or self.output_schema, self.stage_id)

    def scratch(self, name: str) -> Path:
        """A scratch directory inside the output (removed with it) for spills and checkpoints."""
        path = self.out_root / "_scratch" / name
        path.mkdir(parents=True, exist_ok=True)
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

# Modules whose import registers the built-in stages. Later stage families append here.
BUILTIN_MODULES = [
    "assay.pipeline.readers",
    "assay.filters.basic",
    "assay.extractors",
    "assay.dedup",
]


def register(name: str):
    def deco(cls: type[Stage]) -> type[Stage]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"stage name {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def load_builtin_stages() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


def registry() -> dict[str, type[Stage]]:
    load_builtin_stages()
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
    if uses not in stages:
        import difflib

        close = difflib.get_close_matches(uses, stages, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown stage {uses!r}{hint} (see `assay stages`)")
    return stages[uses]
