"""Pipeline recipes: YAML validated by pydantic, with errors that name the file, the key and what was
expected. Relative `paths` in stage params resolve against the recipe file's directory."""
from __future__ import annotations

import difflib
import os
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .engines.base import EngineOptions
from .errors import UserError
from .io import resolve_path_params
from .stage import Resources, SourceStage, Stage, resolve_stage

EngineName = Literal["local", "spark", "ray"]


class RecipeError(UserError):
    """A user error in a recipe: printed as one line, never as a traceback."""


class StageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    uses: str
    inputs: list[str] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    engine: EngineName | None = None
    # Per-stage overrides of the stage class's defaults (what one worker needs, how many, batch size).
    resources: Resources | None = None
    workers: int | None = Field(None, ge=0)
    batch_rows: int | None = Field(None, ge=1)
    _base_dir: Path | None = None

    def build(self) -> Stage:
        cls = resolve_stage(self.uses)
        params = dict(self.params)
        if self._base_dir is not None:  # every stage's path params, not only sources'
            params = resolve_path_params(params, getattr(cls, "path_params", ()), self._base_dir)
        return cls(params, stage_id=self.id, resources=self.resources, workers=self.workers,
                   batch_rows=self.batch_rows)


class InputSpec(BaseModel):
    """A named outside input: sugar for a source stage (`uses` defaults to read.jsonl)."""

    model_config = ConfigDict(extra="forbid")
    uses: str = "read.jsonl"
    params: dict[str, Any] = Field(default_factory=dict)
    engine: EngineName | None = None
    resources: Resources | None = None
    workers: int | None = Field(None, ge=0)
    batch_rows: int | None = Field(None, ge=1)


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    workdir: str | None = None
    engine: EngineName = "local"
    engine_options: EngineOptions = Field(default_factory=EngineOptions)
    # Run chains of one-to-one map stages as one read and one write per shard (pipeline/fusion.py).
    fuse: bool = False
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    stages: list[StageSpec] = Field(default_factory=list)
    _base_dir: Path | None = None

    @model_validator(mode="after")
    def _default_workdir(self) -> "Recipe":
        if self.workdir is None:
            self.workdir = str(Path("runs") / self.name)
        return self

    def all_specs(self) -> list[StageSpec]:
        sources = [StageSpec(id=name, uses=spec.uses, params=spec.params, engine=spec.engine, resources=spec.resources,
                             workers=spec.workers, batch_rows=spec.batch_rows) for name, spec in self.inputs.items()]
        return sources + list(self.stages)

    def stage_spec(self, stage_id: str) -> StageSpec:
        for spec in self.all_specs():
            if spec.id == stage_id:
                spec._base_dir = getattr(self, "_base_dir", None)
                return spec
        raise KeyError(stage_id)

    def graph(self) -> dict[str, set[str]]:
        return {spec.id: set(spec.inputs) for spec in self.all_specs()}

    def order(self) -> list[str]:
        # static_order is deterministic for a given recipe; ties keep recipe order.
        ts = TopologicalSorter()
        for spec in self.all_specs():
            ts.add(spec.id, *spec.inputs)
        return list(ts.static_order())

    def ancestors(self, stage_id: str) -> set[str]:
        graph, seen, todo = self.graph(), set(), [stage_id]
        while todo:
            for parent in graph[todo.pop()]:
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return seen

    def descendants(self, stage_id: str) -> set[str]:
        graph = self.graph()
        return {node for node in graph if stage_id in self.ancestors(node)}


def _loc(loc: tuple, data: dict) -> str:
    out = ""
    node: Any = data
    for part in loc:
        if isinstance(part, int):
            ident = node[part].get("id") if isinstance(node, list) and part < len(node) and isinstance(node[part], dict) else None
            out += f"[{part}]" + (f" (id {ident!r})" if ident else "")
        else:
            out += ("." if out else "") + str(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _friendly(err: dict, data: dict, known: list[str]) -> str:
    where = _loc(err["loc"], data)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        key = str(err["loc"][-1])
        close = difflib.get_close_matches(key, known, n=1)
        msg = "unknown key" + (f"; did you mean {close[0]!r}?" if close else f"; expected one of {', '.join(known)}")
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif "input" in err and not isinstance(err["input"], (dict, list)):
        msg += f" (got {_shown(err['input'])})"
    return f"{where}: {msg}"


# A recipe is a small hand-written file: past these limits it is a mistake (or an attack), and checking
# it would otherwise cost unbounded time (YAML aliases can expand exponentially) or recursion depth.
MAX_RECIPE_BYTES = 1 << 20
MAX_RECIPE_NODES = 100_000
MAX_RECIPE_DEPTH = 50


def _check_shape(data: Any, path: Path) -> None:
    """Count nodes as they would be expanded (aliases included) and bound depth; a YAML alias loop
    (`&a [*a]`) shows up as depth past the limit."""
    nodes, todo = 0, [(data, 1)]
    while todo:
        node, depth = todo.pop()
        nodes += 1
        if nodes > MAX_RECIPE_NODES:
            raise RecipeError(f"{path}: recipe expands to more than {MAX_RECIPE_NODES} values (YAML aliases?)")
        if depth > MAX_RECIPE_DEPTH:
            raise RecipeError(f"{path}: recipe nests deeper than {MAX_RECIPE_DEPTH} levels")
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                raise RecipeError(f"{path}: {node[:40]!r}: a \\u escape makes a lone surrogate, which is not text") from None
        elif isinstance(node, dict):
            todo.extend((child, depth + 1) for pair in node.items() for child in pair)
        elif isinstance(node, (list, tuple, set)):
            todo.extend((child, depth + 1) for child in node)


def _check_flow_depth(text: str, path: Path) -> None:
    """PyYAML takes seconds on thousands of nested `[`/`{` before it fails: refuse them up front
    (brackets inside quoted strings count too; no real recipe comes near the limit)."""
    depth = 0
    for m in re.finditer(r"[\[\]{}]", text):
        depth += 1 if m.group() in "[{" else -1
        if depth > 4 * MAX_RECIPE_DEPTH:
            raise RecipeError(f"{path}: recipe nests deeper than {MAX_RECIPE_DEPTH} levels")


def _one_line(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= 1000 else message[:997] + "..."


def load_recipe(path: str | os.PathLike) -> Recipe:
    """Read, parse and validate a recipe file; every problem is one RecipeError line naming the file."""
    from .io import check_regular_file
    from .storage import config_file

    path = config_file(path, "recipe")
    try:
        check_regular_file(path)  # before open(): opening a FIFO would block
        with open(path, "rb") as fh:
            raw = fh.read(MAX_RECIPE_BYTES + 1)
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read recipe: {exc.strerror or exc}") from None
    if len(raw) > MAX_RECIPE_BYTES:
        raise RecipeError(f"{path}: recipe is larger than {MAX_RECIPE_BYTES >> 20} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    _check_flow_depth(text, path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise RecipeError(_one_line(f"{path}: {where}invalid YAML: {getattr(exc, 'problem', None) or exc}")) from None
    except RecursionError:
        raise RecipeError(f"{path}: invalid YAML: nested too deeply") from None
    except Exception as exc:  # e.g. ValueError for a date like 2024-13-45 that the YAML resolver accepts
        raise RecipeError(_one_line(f"{path}: invalid YAML: {type(exc).__name__}: {exc}")) from None
    _check_shape(data, path)
    try:
        return parse_recipe(data, path)
    except RecipeError as exc:
        raise RecipeError(_one_line(str(exc))) from None
    except RecursionError:
        raise RecipeError(f"{path}: recipe nests too deeply") from None


def parse_recipe(data: Any, path: Path | str = "<recipe>") -> Recipe:
    path = Path(path)
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: expected a mapping with keys name, inputs, stages; got {type(data).__name__}")
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        known = list(Recipe.model_fields)
        if len(err["loc"]) >= 3 and err["loc"][0] == "stages":
            known = list(StageSpec.model_fields)
        elif len(err["loc"]) >= 2 and err["loc"][0] == "engine_options":
            known = list(EngineOptions.model_fields)
        raise RecipeError(f"{path}: {_friendly(err, data, known)}") from None
    recipe._base_dir = path.resolve().parent if path.exists() else Path.cwd()
    # One rule for relative paths: written in a file, relative to that file (inputs, models and a
    # `workdir:` key alike); given on the command line or left to the default (runs/<name>), relative to
    # the directory assay runs in.
    if "workdir" in data and data.get("workdir") and "://" not in recipe.workdir and \
            not Path(os.path.expanduser(recipe.workdir)).is_absolute():
        recipe.workdir = str(recipe._base_dir / os.path.expanduser(recipe.workdir))
    _check_graph(recipe, path)
    return recipe


# Files a run writes beside its stage folders: no stage may be named like them.
RESERVED_IDS = frozenset({"report.html", "_run.json"})


def _check_graph(recipe: Recipe, path: Path) -> None:
    specs = recipe.all_specs()
    ids = [s.id for s in specs]
    seen: set[str] = set()
    for sid in ids:
        if not sid.strip("."):  # `.` and `..` would name the workdir itself or its parent
            raise RecipeError(f"{path}: stage id {sid!r} names a folder, not a stage; choose another id")
        if sid in RESERVED_IDS:
            raise RecipeError(f"{path}: stage id {sid!r} is the name of a file Assay writes in the workdir; "
                              "choose another id")
        if sid in seen:
            raise RecipeError(f"{path}: stage id {sid!r} is used twice (inputs and stage ids share one namespace)")
        seen.add(sid)
    for index, spec in enumerate(recipe.stages):
        where = f"stages[{index}] (id {spec.id!r})"
        try:
            cls = resolve_stage(spec.uses)
        except Exception as exc:  # importing a `module:Class` runs that module: anything can come out
            raise RecipeError(f"{path}: {where}.uses: {_uses_error(exc)}") from None
        _check_params(cls, spec, path, where)
        for name in spec.inputs:
            if name not in seen:
                close = difflib.get_close_matches(name, ids, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known ids: {', '.join(ids)}"
                raise RecipeError(f"{path}: {where}.inputs: unknown input {name!r}{hint}")
        if issubclass(cls, SourceStage) and spec.inputs:
            raise RecipeError(f"{path}: {where}: {spec.uses} reads files (params.paths) and takes no inputs")
        if not issubclass(cls, SourceStage) and not spec.inputs:
            raise RecipeError(f"{path}: {where}.inputs: {spec.uses} needs at least one input")
    for name, spec in recipe.inputs.items():
        where = f"inputs.{name}"
        try:
            cls = resolve_stage(spec.uses)
        except Exception as exc:  # importing a `module:Class` runs that module: anything can come out
            raise RecipeError(f"{path}: {where}.uses: {_uses_error(exc)}") from None
        if not issubclass(cls, SourceStage):
            raise RecipeError(f"{path}: {where}.uses: {spec.uses} is not a reader (source stage)")
        _check_params(cls, spec, path, where)
    try:
        recipe.order()
    except CycleError as exc:
        raise RecipeError(f"{path}: stages form a cycle: {' -> '.join(exc.args[1])}") from None


def _check_params(cls: type[Stage], spec, path: Path, where: str) -> None:
    try:
        cls.Params.model_validate(spec.params)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(err["loc"][-1]), list(cls.Params.model_fields), n=1)
            msg = f"unknown param for {cls.name}" + (f"; did you mean {close[0]!r}?" if close else
                                                   f"; it takes {', '.join(cls.Params.model_fields) or 'no params'}")
        elif err["type"] == "missing":
            msg = f"required param of {cls.name} is missing"
        elif not isinstance(err.get("input"), (dict, list)):
            msg += f" (got {_shown(err.get('input'))})"
        raise RecipeError(f"{path}: {where}.params.{loc}: {msg}") from None


def preflight(recipe: Recipe) -> list[str]:
    """What would stop the run part-way, found before anything runs: input globs that match no
    file, packages a stage needs that are missing."""
    problems: list[str] = []
    for stage_id in recipe.order():
        problems += recipe.stage_spec(stage_id).build().check()
    return problems


def _uses_error(exc: Exception) -> str:
    if isinstance(exc, (KeyError, ImportError, AttributeError, TypeError)) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return f"{type(exc).__name__}: {exc}"
