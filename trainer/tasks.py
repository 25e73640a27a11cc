"""Downstream-proxy tasks: benchmark items in one schema, where they come from, and named suites.

An item is `{id, benchmark, split, context, choices, gold, kind, meta}`, the schema of the project's
eval pack: `choices` are scored as continuations of the prompt (prompts.py), `gold` indexes them, and
`kind` is `multiple_choice` (pick one of several), `cloze` (LAMBADA: a one-element list holding the
gold continuation) or `generation` (TriviaQA, NQ-open, MBPP: the reference answer scored as a gold
continuation, no sampling).

Where a task's items come from:

* a shipped name (`arc_easy`, ..., `mmlu_redux`, see SHIPPED): a fixed subset of the benchmark that
  travels with Assay in `tasks_data/` (sources and licences in its NOTICE), so a bare clone scores
  them with no other data;
* a path or URL (read through pipeline/storage): a file in the schema (.jsonl, optionally .gz/.zst),
  an upstream file format (upstream.py: detected from the records, or named with `upstream:`), or
  for MMLU a folder or glob of CSV files.

Every task is capped at `items` items (DEFAULT_ITEMS unless a suite or the caller says otherwise; 0 =
every item): the ones whose
sha256 of `benchmark/id` is smallest, kept in file order. The cap depends only on ids, so the same
items are scored whatever the file order, and a shipped subset (made with the same rule) is exactly
what the cap takes from the full benchmark: `--tasks default` gives the same figures on a bare clone
as on the full data.

A suite is a named list (SUITES), a comma list of task names or `name=PATH` entries, or a YAML/JSON
file `{name, items, tasks: [name | {name, path, upstream, labels, split, items}]}`.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from assay.pipeline import storage
from assay.pipeline.errors import UserError

KINDS = ("multiple_choice", "cloze", "generation")
DATA = Path(__file__).resolve().parent / "tasks_data"
DEFAULT_ITEMS = 500

# Shipped task -> its standard split and the name of its entry in the decontamination registry
# (semantic/decontam/benchmarks/registry.yaml).
SHIPPED = {
    "arc_easy": "test", "arc_challenge": "test", "boolq": "validation", "copa": "validation",
    "csqa": "validation", "hellaswag": "validation", "lambada_openai": "test", "mbpp": "test",
    "mmlu_redux": "test", "nq_open": "validation", "openbookqa": "test", "piqa": "validation",
    "siqa": "validation", "triviaqa": "validation", "winogrande": "validation",
}
REGISTRY_NAMES = {name: name for name in SHIPPED} | {"mmlu_redux": "mmlu-redux"}

# Provisional: every shipped task, until benchmarks/ranking.py's decision accuracy and signal-to-noise
# per task and metric choose the default (issue #42). `olmes` is OLMES's ten multiple-choice tasks.
OLMES = ["arc_challenge", "arc_easy", "boolq", "csqa", "hellaswag", "mmlu_redux", "openbookqa", "piqa", "siqa",
         "winogrande"]
SUITES = {
    "default": sorted(SHIPPED),
    "olmes": OLMES,
    "mc": sorted(OLMES + ["copa"]),
    "continuation": ["lambada_openai", "mbpp", "nq_open", "triviaqa"],
}


@dataclass
class Item:
    id: str
    benchmark: str
    split: str
    context: str
    choices: list[str]
    gold: int
    kind: str
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"id": self.id, "benchmark": self.benchmark, "split": self.split, "context": self.context,
               "choices": self.choices, "gold": self.gold, "kind": self.kind}
        return out | ({"meta": self.meta} if self.meta else {})

    def text(self) -> str:
        """What a model is asked about (for decontamination): the context, and the options of a
        multiple-choice item, one a line; never the gold continuation of a cloze/generation item."""
        return "\n".join([self.context, *self.choices]) if self.kind == "multiple_choice" else self.context


@dataclass
class Task:
    name: str
    items: list[Item]
    source: str  # "shipped" or the path / URL the items were read from
    total: int  # items in the source, before the cap
    excluded: dict[str, int] = field(default_factory=dict)  # items the loader left out, by reason

    @property
    def kind(self) -> str:
        kinds = {it.kind for it in self.items}
        return kinds.pop() if len(kinds) == 1 else "mixed"


@dataclass
class Suite:
    name: str
    tasks: list[Task]
    items: int | None  # the per-task cap it was loaded with (0 or None: every item)

    def describe(self) -> dict:
        return {"name": self.name, "items_cap": self.items,
                "tasks": {t.name: {"source": t.source, "items": len(t.items), "total": t.total,
                                   **({"excluded": t.excluded} if t.excluded else {})} for t in self.tasks}}


def item_from_record(rec: Any, where: str, default_benchmark: str = "") -> Item:
    """One schema record, checked: a one-line UserError naming `where` for anything malformed."""
    if not isinstance(rec, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    missing = [k for k in ("context", "choices", "gold") if k not in rec]
    if missing:
        raise UserError(f"{where}: missing {', '.join(missing)} (the task schema is id, benchmark, split, "
                        "context, choices, gold, kind, meta)")
    choices, gold, kind = rec["choices"], rec["gold"], rec.get("kind", "multiple_choice")
    if not isinstance(rec["context"], str):
        raise UserError(f"{where}: context must be a string")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise UserError(f"{where}: choices must be a non-empty list of strings")
    if kind not in KINDS:
        raise UserError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
        raise UserError(f"{where}: gold {gold!r} does not index the {len(choices)} choices")
    if kind != "multiple_choice" and len(choices) != 1:
        raise UserError(f"{where}: a {kind} item holds its one gold continuation in choices")
    if kind == "multiple_choice" and len(choices) < 2:
        raise UserError(f"{where}: a multiple_choice item needs at least two choices")
    meta = rec.get("meta") or {}
    if not isinstance(meta, dict):
        raise UserError(f"{where}: meta must be an object")
    return Item(str(rec.get("id", where)), str(rec.get("benchmark") or default_benchmark), str(rec.get("split", "")),
                rec["context"], choices, gold, kind, meta)


def read_lines(path: str) -> list[str]:
    """The lines of a local or remote file, .gz/.zst decompressed (by suffix)."""
    from assay.pipeline.io import open_binary

    target = storage.as_path(path)
    if not storage.exists(target):
        raise UserError(f"{path}: no such task file")
    with storage.local_copy(target) as local, open_binary(local) as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    # "\n" only: str.splitlines also breaks at U+2028 and the like, which JSON strings may hold.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and not lines[-1] else lines


def read_jsonl(path: str) -> list[tuple[int, Any]]:
    """(line number, record) of every non-blank line."""
    out = []
    for n, line in enumerate(read_lines(path), 1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{n}: not JSON ({exc.msg})") from None
    return out


def cap_items(items: list[Item], cap: int | None) -> list[Item]:
    """The `cap` items with the smallest sha256 of benchmark/id, in their original order (None or 0:
    every item)."""
    if not cap or len(items) <= cap:
        return list(items)
    rank = sorted(range(len(items)), key=lambda i: hashlib.sha256(f"{items[i].benchmark}/{items[i].id}".encode()).digest())
    keep = set(rank[:cap])
    return [it for i, it in enumerate(items) if i in keep]


def load_task(name: str, path: str | None = None, items: int | None = DEFAULT_ITEMS, upstream: str = "auto",
              labels: str | None = None, split: str | None = None) -> Task:
    """A task by its shipped name, or read from `path` (a file, folder, glob or URL) in the schema or
    an upstream format (upstream.py), capped at `items`."""
    if path is None:
        if name not in SHIPPED:
            raise UserError(f"task {name!r}: not a shipped task ({', '.join(sorted(SHIPPED))}); give its path as "
                            f"{name}=PATH or in a suite file")
        file = DATA / f"{name}.jsonl.zst"
        if not file.exists():
            raise UserError(f"task {name!r}: {file} is missing from this installation")
        records = [item_from_record(r, f"{file}:{n}", name) for n, r in read_jsonl(str(file))]
        return Task(name, cap_items(records, items), "shipped", len(records))
    from .upstream import convert

    found, excluded = convert(path, name, upstream=upstream, labels=labels, split=split)
    if not found:
        raise UserError(f"task {name!r}: {path} holds no items")
    ids = [it.id for it in found]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise UserError(f"task {name!r}: {path}: item id {dup!r} occurs more than once")
    return Task(name, cap_items(found, items), str(path), len(found), excluded)


def _entries(spec: Any, where: str) -> list[dict]:
    if isinstance(spec, str):
        spec = [part.strip() for part in spec.split(",") if part.strip()]
    if not isinstance(spec, list) or not spec:
        raise UserError(f"{where}: tasks must be a suite name, a comma list or a list of tasks")
    out = []
    for entry in spec:
        if isinstance(entry, str):
            name, sep, path = entry.partition("=")
            out.append({"name": name.strip(), **({"path": path.strip()} if sep else {})})
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            unknown = set(entry) - {"name", "path", "upstream", "labels", "split", "items"}
            if unknown:
                raise UserError(f"{where}: task {entry['name']!r}: unknown key(s) {', '.join(sorted(unknown))} "
                                "(name, path, upstream, labels, split, items)")
            out.append(dict(entry))
        else:
            raise UserError(f"{where}: a task entry is a name, NAME=PATH, or a mapping with a name")
    return out


def _is_spec_file(value: str) -> bool:
    return value.endswith((".yaml", ".yml", ".json")) and "," not in value


def _relative(base: Path | None, value: str) -> str:
    value = os.path.expanduser(value)
    if base is None or storage.is_url(value) or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def load_suite(spec: Any, items: int | None = None, base: str | Path | None = None) -> Suite:
    """A suite from a named suite, a comma list (`arc_easy,piqa`, `mine=/data/mine.jsonl`), a YAML/JSON
    spec file, or the spec's parsed form (a list of entries, or a mapping with `tasks`). Relative paths
    resolve against `base` (a spec file's own folder). The cap per task: an entry's own `items`, else
    `items` when given (0 = every item), else the suite file's `items`, else DEFAULT_ITEMS."""
    base = Path(base) if base is not None else None
    name = "custom"
    if isinstance(spec, str) and spec in SUITES:
        spec, name = SUITES[spec], spec
    elif isinstance(spec, list) and not spec:
        raise UserError("tasks: the list of tasks is empty")
    elif isinstance(spec, (str, Path)) and _is_spec_file(str(spec)):
        file = Path(_relative(base, str(spec)))
        from .config import _read_yaml  # YAML is a superset of JSON

        data = _read_yaml(file, "task suite")
        if not isinstance(data, dict) or "tasks" not in data:
            raise UserError(f"{file}: a task suite file is a mapping with `tasks` (and optionally name, items)")
        unknown = set(data) - {"name", "tasks", "items"}
        if unknown:
            raise UserError(f"{file}: unknown key(s) {', '.join(sorted(unknown))} (name, tasks, items)")
        return _suite(data, items, file.parent, str(file), file.stem)
    elif isinstance(spec, dict):
        return _suite(spec, items, base, "tasks", "custom")
    if isinstance(spec, str) and "," not in spec and "=" not in spec and spec not in SHIPPED:
        raise UserError(f"tasks {spec!r}: not a suite ({', '.join(SUITES)}), a shipped task "
                        f"({', '.join(sorted(SHIPPED))}), a comma list or a .yaml/.json suite file")
    cap = DEFAULT_ITEMS if items is None else items
    return Suite(name, _load_entries(_entries(spec, "tasks"), cap, base), cap)


def _suite(data: dict, items: int | None, base: Path | None, where: str, default_name: str) -> Suite:
    cap = items if items is not None else data.get("items", DEFAULT_ITEMS)
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
        raise UserError(f"{where}: items must be a whole number (0 or null: every item)")
    tasks = data["tasks"]
    if isinstance(tasks, str) and tasks in SUITES:
        tasks = SUITES[tasks]
    return Suite(str(data.get("name") or default_name), _load_entries(_entries(tasks, where), cap, base), cap)


def _load_entries(entries: list[dict], cap: int | None, base: Path | None) -> list[Task]:
    names = [e["name"] for e in entries]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise UserError(f"task {dup!r} is listed twice")
    tasks = []
    for e in entries:
        path = _relative(base, e["path"]) if e.get("path") else None
        labels = _relative(base, e["labels"]) if e.get("labels") else None
        tasks.append(load_task(e["name"], path, e.get("items", cap), e.get("upstream", "auto"), labels, e.get("split")))
    return tasks


def suite_items(suite: Suite) -> Iterable[tuple[str, Item]]:
    for task in suite.tasks:
        for it in task.items:
            yield task.name, it


def absolute_spec(spec: Any, base: str | Path) -> Any:
    """`spec` with its relative paths (a suite file, NAME=PATH entries, `path` and `labels`) resolved
    against `base`, the folder of the config that names it. A suite file's own entries stay relative
    to that file."""
    base = Path(base)
    if isinstance(spec, str):
        if spec in SUITES:
            return spec
        if _is_spec_file(spec):
            return _relative(base, spec)
        return ",".join(absolute_spec([e], base)[0] for e in (p.strip() for p in spec.split(",")) if e)
    if isinstance(spec, list):
        out = []
        for e in spec:
            if isinstance(e, str):
                name, sep, path = e.partition("=")
                out.append(f"{name.strip()}={_relative(base, path.strip())}" if sep else e)
            elif isinstance(e, dict):
                out.append({k: _relative(base, v) if k in ("path", "labels") and isinstance(v, str) else v
                            for k, v in e.items()})
            else:
                out.append(e)
        return out
    if isinstance(spec, dict) and "tasks" in spec:
        tasks = spec["tasks"]
        return dict(spec, tasks=tasks if isinstance(tasks, str) and tasks in SUITES else absolute_spec(tasks, base))
    return spec


def suite_files(spec: Any) -> list[str]:
    """Every file a suite spec (with absolute paths, see absolute_spec) reads: what a training run's
    identity depends on besides its data."""
    if isinstance(spec, str) and spec in SUITES:
        return [str(DATA / f"{name}.jsonl.zst") for name in SUITES[spec]]
    if isinstance(spec, str) and _is_spec_file(spec):
        from .config import _read_yaml

        data = _read_yaml(Path(spec), "task suite")
        inner = absolute_spec(data, Path(spec).parent) if isinstance(data, dict) else {}
        return [spec, *suite_files(inner)]
    if isinstance(spec, dict):
        return suite_files(spec.get("tasks", []))
    files = []
    for e in _entries(spec, "tasks"):
        if e.get("path"):
            files += [e["path"]] + ([e["labels"]] if e.get("labels") else [])
        elif e["name"] in SHIPPED:
            files.append(str(DATA / f"{e['name']}.jsonl.zst"))
    return files
