"""`assay mix plan` / `assay mix build`: a mixture file to a directory of staged token datasets.

OUT is a workdir of the one runner (its `_run.json` is the same run log a pipeline workdir has;
`assay report OUT` works on it), and every step is a stage run, so an unchanged mixture re-runs
nothing and a changed one (a source re-curated, a weight edited) re-runs exactly what the change
reaches:

    OUT/tokenizer/              `mix.tokenizer`: _artifacts/tokenizer.json, trained or loaded + specials
    OUT/tokenizer.json          a copy of it, for other mixtures and tools to name (`tokenizer: {path: ...}`)
    OUT/tokenized-<name>/       `mix.tokenize` of each distinct source dataset (any engine)
    OUT/<stage id>/             `mix.pack` of each training stage: token shards + manifest (any engine)
    OUT/plan.json               the plan the stages were built from
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

from assay.pipeline import storage
from assay.pipeline.dataset import Dataset, atomic_write_text, read_json_safe
from assay.pipeline.engines import get_engine
from assay.pipeline.errors import UserError
from assay.pipeline.runner import RUN_LOG, StageResult, check_workdir, run_stage

from .packstage import Pack
from .plan import SlotTotals, plan_mixture, precision_notes, stage_sources
from .recipe import Mixture
from .tokenize import Tokenize
from .tokenizer import SPECIALS, TOKENIZER_JSON, PrepareTokenizer

TOKENIZER_STAGE = "tokenizer"
PLAN_FILE = "plan.json"


def tokenizer_path(out: Path) -> Path:
    """The tokenizer a built mixture used."""
    return storage.as_path(out) / TOKENIZER_STAGE / "_artifacts" / TOKENIZER_JSON


def _publish_tokenizer(out: Path) -> None:
    """OUT/tokenizer.json: the tokenizer stage's artifact where other mixtures (the raw arm, the
    held-out set) and people can find it; rewritten only when it differs."""
    made = tokenizer_path(out).read_bytes()
    published = storage.as_path(out) / TOKENIZER_JSON
    if not published.exists() or published.read_bytes() != made:
        atomic_write_text(published, made.decode(), redacted=False)


def tokenized_name(path: Path) -> str:
    """A readable, collision-free directory name for a source dataset's tokens."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.name)[:40] or "data"
    return f"tokenized-{slug}-{hashlib.sha256(str(storage.resolve(path)).encode()).hexdigest()[:6]}"


def source_paths(mixture: Mixture) -> dict[str, Path]:
    paths = {}
    for name in mixture.sources:
        path = mixture.source_path(name)
        if not Dataset(path).complete:
            raise UserError(f"source {name!r}: {path} is not a complete dataset (no _manifest.json); "
                            "run the pipeline that makes it first (e.g. `make demo`)")
        paths[name] = path
    return paths


def specials(mixture: Mixture) -> dict[str, str]:
    spec = mixture.tokenizer
    return dict(SPECIALS, bos=spec.bos, eos=spec.eos, pad=spec.pad)


def _owner(mixture: Mixture) -> str:
    return f"mixture {mixture.name}"


def tokenize_sources(mixture: Mixture, out: Path, engine: str, options: dict | None,
                     log: Callable[[str], Any], named: str = "OUT") -> dict[str, Path]:
    """Tokenizer first, then every distinct source dataset through `mix.tokenize`; returns
    source name -> tokenized dataset. `named`: how the command took `out`, for its refusals."""
    paths = source_paths(mixture)
    distinct = list(dict.fromkeys(paths.values()))
    order = [TOKENIZER_STAGE] + [tokenized_name(p) for p in distinct] + [s.id for s in mixture.stages]
    check_workdir(out, order, owner=_owner(mixture), named=named, force=None)
    storage.makedirs(out)
    atomic_write_text(out / RUN_LOG, json.dumps({"recipe": _owner(mixture), "kind": "mixture", "order": order},
                                                indent=2))
    spec = mixture.tokenizer
    tok_stage = PrepareTokenizer({"spec": spec.model_dump(mode="json", exclude={"path"}),
                                  "path": str(mixture.tokenizer_path()) if spec.path else None,
                                  "seed": mixture.seed}, stage_id=TOKENIZER_STAGE)
    trained_on = sorted(set(paths.values())) if spec.train is not None else []  # a loaded one reads only its file
    _log_result(run_stage(tok_stage, trained_on, out / TOKENIZER_STAGE, owner=_owner(mixture)), log)
    _publish_tokenizer(out)
    uses_meta = mixture.meta is not None and any(s.meta for s in mixture.stages)
    uses_fim = any(s.fim_rate > 0 for s in mixture.stages)
    params = {"tokenizer": str(storage.resolve(tokenizer_path(out))), "specials": specials(mixture), "seed": mixture.seed,
              "meta_fields": mixture.meta.fields if uses_meta else [],
              "fim_content_types": mixture.fim_content_types if uses_fim else []}
    done: dict[Path, Path] = {}
    for path in distinct:
        name = tokenized_name(path)
        result = run_stage(Tokenize(params, stage_id=name), [path], out / name, engine=engine, options=options,
                           owner=_owner(mixture))
        _log_result(result, log)
        done[path] = out / name
    return {name: done[path] for name, path in paths.items()}


def plan(mixture: Mixture, out: Path, engine: str = "local", options: dict | None = None,
         log: Callable[[str], Any] = print, named: str = "OUT") -> tuple[dict[str, list[SlotTotals]], dict[str, Path]]:
    """Tokenize (cached) and plan; raises PlanError when a budget cannot be met."""
    out = storage.as_path(out)
    tokenized = tokenize_sources(mixture, out, engine, options, log, named)
    slots = plan_mixture(mixture, tokenized, get_engine(engine, options))
    notes = precision_notes(mixture, slots)
    shown = (read_json_safe(out / PLAN_FILE) or {}).get("notes")
    for note in notes if notes != shown else ():  # said when the plan was made, not again on every rerun
        log(f"note: {note}")
    atomic_write_text(out / PLAN_FILE, json.dumps(
        {"mixture": mixture.name, "stages": {sid: [s.summary() for s in ss] for sid, ss in slots.items()},
         "notes": notes}, indent=2, default=float))
    return slots, tokenized


def build(mixture: Mixture, out: str | Path, engine: str = "local", options: dict | None = None,
          log: Callable[[str], Any] = print) -> list[StageResult]:
    """Plan, then pack every stage into OUT/<stage id>."""
    out = storage.as_path(out)
    slots, tokenized = plan(mixture, out, engine, options, log)
    tok_path = storage.resolve(tokenizer_path(out))
    results = []
    for index, stage in enumerate(mixture.stages):
        used = stage_sources(mixture, stage.id)
        inputs = list(dict.fromkeys(tokenized[name] for name in used))
        params = {"mixture": _trimmed(mixture, index, used), "stage": stage.id,
                  "inputs": {name: inputs.index(tokenized[name]) for name in used},
                  "tokenizer": str(tok_path), "specials": specials(mixture)}
        # packed in buckets of documents on the engine's workers (see packstage.py)
        result = run_stage(Pack(params, stage_id=stage.id), inputs, out / stage.id, engine=engine, options=options,
                           owner=_owner(mixture))
        _log_result(result, log)
        results.append(result)
    return results


def _trimmed(mixture: Mixture, index: int, used: list[str]) -> dict[str, Any]:
    """The mixture as one stage sees it: itself, the stages it replays and the sources it draws from,
    so editing another stage leaves this one built."""
    data = mixture.model_dump(mode="json", by_alias=True)
    stage = mixture.stages[index]
    replayed = set(stage.replay.from_) if stage.replay else set()
    data["stages"] = [s for s in data["stages"][:index] if s["id"] in replayed] + [data["stages"][index]]
    data["sources"] = {name: data["sources"][name] for name in used}
    data.pop("description", None)
    return data


def _log_result(result: StageResult, log: Callable[[str], Any]) -> None:
    m = result.manifest
    c = m["counts"]
    state = "skipped (unchanged)" if result.skipped else f"{m['wall_seconds']:.1f}s ({m.get('ran_because', 'ran')})"
    tokens = m.get("total_tokens", 0)
    log(f"  {result.stage_id:<34} {c['rows_in']:>8} docs in  {tokens:>10,} tokens  [{m['engine']}] {state}")
