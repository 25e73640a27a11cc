"""The benchmark registry: a YAML file naming each benchmark, its files and the fields holding its text.

    benchmarks:
      - {name: gsm8k, paths: [data/gsm8k/test.jsonl], fields: [question]}
      - {name: mmlu, paths: ["mmlu/*.csv"], fields: [question, choices], date: 2020-09-07}
      - {name: aime24, hashes: aime24.tokens.npz, date: 2024-02-01}

Files are JSON Lines (.jsonl, optionally .gz/.zst), JSON (a list of records), CSV (delimiter and
encoding detected per file unless given) or Parquet. An item's text is its fields joined by newlines.
`hashes` names a file of pre-normalised token hashes instead (for benchmarks whose terms do not let
us ship the text; `build_registry.py` writes them). Relative paths resolve against the YAML file.
`date` (or `date_field` per item) lets a run check only benchmarks released on or after a cutoff.
"""
from __future__ import annotations

from assay.pipeline.codec import plain_data

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from assay.pipeline.errors import UserError
from assay.pipeline.io import expand_paths, open_binary

SHIPPED = Path(__file__).resolve().parent / "benchmarks" / "registry.yaml"


class BenchmarkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    paths: list[str] = Field(default_factory=list, description="Files or globs holding the items")
    fields: list[str] = Field(default_factory=list, description="Fields whose values make an item's text")
    id_field: str | None = Field(None, description="Field holding the item id (default: file and row number)")
    format: Literal["auto", "jsonl", "json", "csv", "parquet"] = "auto"
    csv_delimiter: str | None = Field(None, description="CSV delimiter (default: detected per file)")
    hashes: str | None = Field(None, description="A token-hash file (.npz) instead of paths and fields")
    date: dt.date | None = Field(None, description="Release date of the whole benchmark")
    date_field: str | None = Field(None, description="Field holding each item's date (ISO)")
    license: str | None = None
    source: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "BenchmarkSpec":
        if bool(self.hashes) == bool(self.paths):
            raise ValueError("give either `paths` (with `fields`) or `hashes`")
        if self.paths and not self.fields:
            raise ValueError("`fields` must name at least one field holding the item text")
        return self


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    benchmarks: list[BenchmarkSpec]


def load_registry(path: str | Path | None = None) -> tuple[Registry, Path]:
    """The parsed registry and its directory; None means the registry shipped with Assay."""
    from assay.pipeline.storage import config_file

    path = config_file(path, "benchmark registry") if path else SHIPPED  # it names files relative to it
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UserError(f"{path}: cannot read benchmark registry: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    try:
        registry = Registry.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = {"extra_forbidden": "unknown key", "missing": "required key is missing"}.get(err["type"], err["msg"])
        raise UserError(f"{path}: {where}: {msg}") from None
    names = [b.name for b in registry.benchmarks]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise UserError(f"{path}: benchmark {dup!r} is listed twice")
    return registry, path.resolve().parent


@plain_data  # shared with workers through the output's scratch folder (pipeline/codec.py)
@dataclass
class Items:
    """Benchmark items in registry order. An item has a text, or (hash-only benchmarks) token hashes."""

    benchmarks: list[str] = field(default_factory=list)  # benchmark name per item
    ids: list[str] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)
    token_hashes: dict[int, np.ndarray] = field(default_factory=dict)  # item index -> hashes (hash-only)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, benchmark: str, item_id: str, text: str | None, hashes: np.ndarray | None = None) -> None:
        if hashes is not None:
            self.token_hashes[len(self.ids)] = hashes
        self.benchmarks.append(benchmark)
        self.ids.append(item_id)
        self.texts.append(text)


def load_items(registry: Registry, base: Path, only: list[str] | None = None,
               since: dt.date | None = None) -> Items:
    """Every item of the selected benchmarks; with `since`, only items dated on or after it (items
    without a date are always kept: an unknown date is no alibi)."""
    known = {b.name for b in registry.benchmarks}
    missing = sorted(set(only or ()) - known)
    if missing:
        raise UserError(f"unknown benchmark(s) {missing}; the registry has {sorted(known)}")
    items = Items()
    for spec in registry.benchmarks:
        if only and spec.name not in only:
            continue
        if spec.hashes:
            _add_hashed(items, spec, base, since)
            continue
        files = expand_paths([p if Path(p).is_absolute() else str(base / p) for p in spec.paths])
        if not files:
            raise UserError(f"benchmark {spec.name!r}: no file matches {spec.paths}")
        for path in files:
            for row_no, record in enumerate(_records(path, spec)):
                date = _date(record.get(spec.date_field)) if spec.date_field else spec.date
                if since and date and date < since:
                    continue
                text = _text(record, spec.fields)
                if not text:
                    continue
                item_id = record.get(spec.id_field) if spec.id_field else None
                item_id = str(item_id) if item_id is not None else f"{Path(path).name}:{row_no}"
                items.add(spec.name, item_id, text)
    return items


def _add_hashed(items: Items, spec: BenchmarkSpec, base: Path, since: dt.date | None) -> None:
    from .normalize import NORMALIZER_VERSION

    path = Path(spec.hashes) if Path(spec.hashes).is_absolute() else base / spec.hashes
    try:
        data = np.load(path, allow_pickle=False)
    except OSError as exc:
        raise UserError(f"benchmark {spec.name!r}: cannot read {path}: {exc}") from None
    if int(data["normalizer_version"]) != NORMALIZER_VERSION:
        raise UserError(f"benchmark {spec.name!r}: {path} was built by normaliser v{int(data['normalizer_version'])}, "
                        f"this Assay uses v{NORMALIZER_VERSION}; rebuild it with build_registry.py")
    offsets, hashes, ids = data["offsets"], data["hashes"], data["ids"]
    dates = data["dates"] if "dates" in data.files else None
    for i, item_id in enumerate(ids.tolist()):
        date = _date(str(dates[i])) if dates is not None and dates[i] else spec.date
        if since and date and date < since:
            continue
        items.add(spec.name, str(item_id), None, hashes[offsets[i]:offsets[i + 1]])


def _date(value: Any) -> dt.date | None:
    if value in (None, ""):
        return None
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def _text(record: dict, fields: list[str]) -> str:
    parts = []
    for name in fields:
        value = record.get(name)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            parts.extend(str(v) for v in value if v is not None)
        else:
            parts.append(str(value))
    return "\n".join(p for p in parts if p.strip())


def _format(path: str, spec: BenchmarkSpec) -> str:
    if spec.format != "auto":
        return spec.format
    name = path.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    for fmt, endings in (("jsonl", (".jsonl", ".ndjson")), ("json", (".json",)), ("csv", (".csv", ".tsv")),
                         ("parquet", (".parquet",))):
        if name.endswith(endings):
            return fmt
    raise UserError(f"benchmark {spec.name!r}: cannot tell the format of {path}; set `format:`")


def _records(path: str, spec: BenchmarkSpec) -> Iterator[dict]:
    fmt = _format(path, spec)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
        return
    with open_binary(path) as fh:
        raw = fh.read()
    if fmt == "jsonl":
        for line in raw.decode("utf-8").split("\n"):  # not splitlines: U+2028 may sit inside a string
            if line.strip():
                yield json.loads(line)
    elif fmt == "json":
        data = json.loads(raw)
        if isinstance(data, dict):  # {"data": [...]} or {id: record}
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else [dict(v, **({"id": k} if "id" not in v else {}))
                                                     for k, v in data.items() if isinstance(v, dict)]
        yield from data
    else:
        text = _decode(raw)
        delimiter = spec.csv_delimiter or _sniff(text, path)
        yield from csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)


def _decode(raw: bytes) -> str:
    """UTF-8 (with or without BOM), else the most likely encoding (files in one set vary)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(raw).best()
        return str(best) if best is not None else raw.decode("latin-1")


def _sniff(text: str, path: str) -> str:
    header = text[: text.find("\n")] if "\n" in text else text
    counts = {d: header.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=counts.get)
    if not counts[best]:
        raise UserError(f"{path}: cannot detect the CSV delimiter from the header; set `csv_delimiter:`")
    return best
