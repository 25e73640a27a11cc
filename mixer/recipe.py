"""Mixture recipes: training stages in order, each drawing a token budget from named sources.

A mixture is YAML validated by pydantic; a mistake is one line naming the file, the key and what was
expected (the same style as pipeline recipes). Relative source and tokenizer paths resolve against
the mixture file's directory.

    name: mini
    seed: 7
    tokenizer: {train: {vocab_size: 4096}}       # or {path: tokenizer.json}
    meta: {fields: [content_type, lang, domain, source]}
    sources:
      web:  {path: ../../runs/demo/deduped, content_types: [web], max_epochs: 2}
      code: {path: ../../runs/demo/deduped, content_types: [code]}
    stages:
      - id: pretrain
        tokens: 200000
        seq_len: 512
        mix: {web: 3, code: 1}                     # weights, normalised to the non-replay share
        tiers: {web: [High, Medium-High, Medium]}
        fim_rate: 0.1
      - id: anneal
        tokens: 50000
        seq_len: 1024
        mix: {code: {weight: 1, min_tokens: 50}}
        replay: {share: 0.2, from: [pretrain]}
        mask_roles: [scaffold]
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assay.pipeline.errors import UserError
from assay.pipeline.recipe import _friendly
from assay.pipeline.schema import CONTENT_TYPES
from assay.pipeline.storage import as_path, is_url

TIERS = ("High", "Medium-High", "Medium", "Medium-Low", "Low")
ROLES = ("context", "scaffold", "system", "user", "assistant", "tool")
META_FIELDS = ("content_type", "lang", "domain", "topic", "source", "url")  # topic: quality.topics writes it
# What a built mixture's folder holds beside its stages (build.py): no stage id may name one of them.
BUILD_FILES = ("tokenizer", "tokenizer.json", "plan.json", "report.html")


class MixtureError(UserError):
    """A mistake in a mixture file, printed as one line."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainTokenizer(Strict):
    vocab_size: int = Field(8192, ge=300, le=1 << 20, description="BPE vocabulary size, special tokens included")
    sample_docs: int = Field(20_000, ge=1, description="Documents sampled (by id hash) from the mixture's sources")


class TokenizerSpec(Strict):
    """Exactly one of `path` (a tokenizer.json) or `train` (a byte-level BPE trained at build time)."""

    path: str | None = None
    train: TrainTokenizer | None = None
    # Names of the special tokens in a loaded tokenizer; missing ones are added.
    bos: str = "<|bos|>"
    eos: str = "<|eos|>"
    pad: str = "<|pad|>"

    @model_validator(mode="after")
    def _one(self) -> "TokenizerSpec":
        if (self.path is None) == (self.train is None):
            raise ValueError("give exactly one of `path` (a tokenizer.json) or `train` (vocab_size, sample_docs)")
        return self


class MetaSpec(Strict):
    """The metadata prefix: `key: value` pairs of these fields (null ones left out) between the
    meta special tokens. `meta.KEY` reads KEY from the document's meta JSON."""

    fields: list[str] = Field(default_factory=lambda: ["content_type", "lang", "domain", "source"])

    @model_validator(mode="after")
    def _known(self) -> "MetaSpec":
        for name in self.fields:
            if name not in META_FIELDS and not name.startswith("meta."):
                raise ValueError(f"unknown meta field {name!r}; expected one of {', '.join(META_FIELDS)} or meta.KEY")
        return self


class SourceSpec(Strict):
    """A dataset from a pipeline run, optionally narrowed to some content types or source names."""

    path: str
    content_types: list[str] | None = None
    sources: list[str] | None = None
    max_epochs: float | None = Field(None, gt=0, description="Cap on passes over this source in any stage")

    @model_validator(mode="after")
    def _types(self) -> "SourceSpec":
        for ct in self.content_types or ():
            if ct not in CONTENT_TYPES:
                raise ValueError(f"unknown content type {ct!r}; expected one of {', '.join(CONTENT_TYPES)}")
        return self


class MixEntry(Strict):
    weight: float = Field(gt=0)
    min_tokens: int | None = Field(None, ge=0, description="Keep documents with at least this many text tokens")
    max_tokens: int | None = Field(None, ge=1, description="Keep documents with at most this many text tokens")
    max_epochs: float | None = Field(None, gt=0)


class ReplaySpec(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    share: float = Field(gt=0, lt=1, description="Fraction of the stage's tokens replayed from earlier stages")
    from_: list[str] = Field(alias="from", min_length=1, description="Earlier stages whose sources are replayed")


class StageSpec(Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    tokens: int = Field(gt=0, description="Token budget (non-padding tokens)")
    seq_len: int = Field(ge=16, description="Context length: every row holds exactly this many tokens")
    mix: dict[str, float | MixEntry] = Field(min_length=1)
    replay: ReplaySpec | None = None
    tiers: dict[str, list[str]] = Field(default_factory=dict, description="Tiers kept per content type")
    code_max_hits: int | None = Field(None, ge=0, description="Keep documents with code_hits <= N")
    cluster_rebalance: bool = False
    min_tokens: int = Field(1, ge=0)
    max_tokens: int | None = Field(None, ge=1)
    max_epochs: float | None = Field(None, gt=0)
    fim_rate: float = Field(0.0, ge=0, le=1)
    long_docs: Literal["split", "crop"] = Field(
        "split", description="A document longer than a row: split into whole rows and a rest, continuing "
        "across rows (every token kept), or crop it to one row (its tail dropped)")
    meta: bool = True
    mask_roles: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _folder_name(cls, value: str) -> str:  # each stage is built into OUT/<id>
        if value in (".", ".."):
            raise ValueError(f"{value!r} names no folder of its own; choose another stage id")
        if value in BUILD_FILES or value.startswith(("tokenized-", "_")):
            raise ValueError(f"{value!r} is a name the build uses for its own files; choose another stage id")
        return value

    @model_validator(mode="after")
    def _check(self) -> "StageSpec":
        if self.tokens < self.seq_len:
            raise ValueError(f"tokens ({self.tokens}) is less than one row of seq_len {self.seq_len}")
        for ct, kept in self.tiers.items():
            if ct not in CONTENT_TYPES:
                raise ValueError(f"tiers: unknown content type {ct!r}; expected one of {', '.join(CONTENT_TYPES)}")
            bad = [t for t in kept if t not in TIERS]
            if bad:
                raise ValueError(f"tiers.{ct}: unknown tier {bad[0]!r}; expected some of {', '.join(TIERS)}")
        for source, value in self.mix.items():  # checked here: a bare weight is no MixEntry until entry()
            weight = value.weight if isinstance(value, MixEntry) else value
            if not weight > 0:
                raise ValueError(f"mix.{source}: weight {weight:g} must be greater than 0 (leave a source out instead)")
        bad_roles = [r for r in self.mask_roles if r not in ROLES]
        if bad_roles:
            raise ValueError(f"mask_roles: unknown role {bad_roles[0]!r}; expected some of {', '.join(ROLES)}")
        return self

    def entry(self, source: str) -> MixEntry:
        value = self.mix[source]
        return value if isinstance(value, MixEntry) else MixEntry(weight=value)


class Mixture(Strict):
    name: str
    description: str = ""
    seed: int = 0
    workdir: str | None = None
    tokenizer: TokenizerSpec
    meta: MetaSpec | None = Field(default_factory=MetaSpec)
    max_epochs: float = Field(1.0, gt=0, description="Default cap on passes over a source in one stage")
    fim_content_types: list[str] = Field(default_factory=lambda: ["code"])
    shard_tokens: int = Field(1 << 24, ge=1024, description="Tokens per output shard (rounded to whole rows)")
    lookahead: int = Field(512, ge=1, description="Pieces the best-fit packer sorts and places together "
                           "(into at most lookahead / 8 open rows)")
    pack_docs: int = Field(250_000, ge=1, description="Input documents per packing task, about: a stage is drawn "
                           "and packed in buckets of documents (by id), one task each, on the engine's workers")
    sources: dict[str, SourceSpec] = Field(min_length=1)
    stages: list[StageSpec] = Field(min_length=1)
    _base_dir: Path | None = None

    def stage(self, stage_id: str) -> StageSpec:
        return next(s for s in self.stages if s.id == stage_id)

    def source_path(self, name: str) -> Path:
        return _resolved(self.sources[name].path, self._base_dir)

    def tokenizer_path(self) -> Path | None:
        if self.tokenizer.path is None:
            return None
        return _resolved(self.tokenizer.path, self._base_dir)


def _resolved(value: str, base: Path | None):
    """A path relative to the mixture file's folder, an absolute path, or a URL (s3://...)."""
    path = as_path(value)
    return path if is_url(value) or path.is_absolute() or base is None else base / path


# ---- loading with one-line errors ----------------------------------------------------------------

def load_mixture(path: str | os.PathLike) -> Mixture:
    from assay.pipeline.storage import config_file

    path = config_file(path, "mixture")
    try:
        text = path.read_text()
    except OSError as exc:
        raise MixtureError(f"{path}: cannot read mixture: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise MixtureError(f"{path}: {where}invalid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse_mixture(data, path)


def parse_mixture(data: Any, path: Path | str = "<mixture>") -> Mixture:
    path = Path(path)
    if not isinstance(data, dict):
        raise MixtureError(f"{path}: expected a mapping with keys name, tokenizer, sources, stages; "
                           f"got {type(data).__name__}")
    try:
        mixture = Mixture.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        err = dict(err, msg=err["msg"].removeprefix("Value error, "))
        raise MixtureError(f"{path}: {_friendly(err, data, _known_keys(err['loc']))}") from None
    mixture._base_dir = path.resolve().parent if path.exists() else Path.cwd()
    _check_references(mixture, path)
    return mixture


def _known_keys(loc: tuple) -> list[str]:
    """The keys allowed where a validation error points, for 'did you mean' hints."""
    model: Any = Mixture
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            model = {"mix": MixEntry, "sources": SourceSpec}.get(str(part), model)
            continue
        model = _model_of(field.annotation)
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _model_of(annotation: Any) -> Any:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _check_references(mixture: Mixture, path: Path) -> None:
    """Names that must point at something: mix keys at sources, replay at earlier stages."""
    seen: list[str] = []
    for index, stage in enumerate(mixture.stages):
        where = f"stages[{index}] (id {stage.id!r})"
        if stage.id in seen:
            raise MixtureError(f"{path}: {where}.id: stage id {stage.id!r} is used twice")
        for name in stage.mix:
            if name not in mixture.sources:
                close = difflib.get_close_matches(name, list(mixture.sources), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; sources are {', '.join(mixture.sources)}"
                raise MixtureError(f"{path}: {where}.mix: unknown source {name!r}{hint}")
        if stage.replay is not None:
            for origin in stage.replay.from_:
                if origin not in seen:
                    earlier = ", ".join(seen) or "none"
                    raise MixtureError(f"{path}: {where}.replay.from: {origin!r} is not an earlier stage; replay "
                                       f"draws only from stages before this one (earlier: {earlier})")
        seen.append(stage.id)
