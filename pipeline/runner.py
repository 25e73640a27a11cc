"""Run one stage, or a whole recipe as a DAG, with skip-if-unchanged and shard-level resume.

A stage's output directory is complete when its `_manifest.json` exists. Its fingerprint hashes the
stage, its code version, its params and its inputs' fingerprints, so a re-run skips a stage whose
fingerprint is unchanged, and a killed stage resumes at the first uncommitted shard.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from . import __version__
from .dataset import Dataset, ShardWriter, atomic_write_text, done_shards, finalize, prepare_output
from .engines import Engine, EngineOptions, get_engine
from .stage import GlobalContext, GlobalStage, SourceStage, Stage, Task


class StageFailed(RuntimeError):
    pass


@dataclass
class StageResult:
    stage_id: str
    out: Path
    manifest: dict[str, Any]
    skipped: bool


def fingerprint(stage: Stage, inputs: Sequence[Dataset]) -> str:
    parts: dict[str, Any] = {
        "stage": type(stage).ref(),
        "version": stage.version,
        "assay": __version__,
        "params": stage.params_json(),
        "inputs": [(ds.manifest or {}).get("fingerprint") for ds in inputs],
    }
    if isinstance(stage, SourceStage):  # outside files: their identity is part of the input
        files = stage.matched_files()
        parts["files"] = [(f, os.path.getsize(f), int(os.path.getmtime(f))) for f in files]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _as_engine(engine: Engine | str | None, options: EngineOptions | dict | None) -> Engine:
    if isinstance(engine, Engine):
        return engine
    return get_engine(engine or "local", options)


def run_stage(stage: Stage, inputs: Sequence[Dataset | str | os.PathLike], out: str | os.PathLike,
              engine: Engine | str | None = "local", options: EngineOptions | dict | None = None,
              force: bool = False, progress: bool = False) -> StageResult:
    """Run `stage` over `inputs` into dataset directory `out` and return its manifest."""
    out = Path(out)
    datasets = [ds if isinstance(ds, Dataset) else Dataset(ds) for ds in inputs]
    for ds in datasets:
        if not ds.complete:
            raise StageFailed(f"stage {stage.stage_id!r}: input {ds.path} is not a complete dataset (no _manifest.json)")
    if isinstance(stage, SourceStage) and datasets:
        raise StageFailed(f"stage {stage.stage_id!r} ({stage.name}) reads files; it takes no dataset inputs")
    if not isinstance(stage, SourceStage) and not datasets:
        raise StageFailed(f"stage {stage.stage_id!r} ({stage.name}) needs at least one input dataset")
    fp = fingerprint(stage, datasets)
    existing = Dataset(out).manifest
    if existing and existing.get("fingerprint") == fp and not force:
        return StageResult(stage.stage_id, out, existing, skipped=True)
    if force and out.exists():
        shutil.rmtree(out)
    eng = _as_engine(engine, options)
    tasks = [] if isinstance(stage, GlobalStage) else stage.tasks(datasets)  # list inputs before touching `out`
    prepare_output(out, fp)
    started = time.time()
    manifest: dict[str, Any] = {
        "stage": stage.name or type(stage).ref(),
        "stage_id": stage.stage_id,
        "kind": stage.kind,
        "params": stage.params.model_dump(mode="json"),
        "fingerprint": fp,
        "code_version": f"assay {__version__}, {stage.name or type(stage).ref()} v{stage.version}",
        "inputs": [{"path": str(ds.path), "fingerprint": (ds.manifest or {}).get("fingerprint")} for ds in datasets],
        "engine": eng.describe(),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if isinstance(stage, SourceStage):  # the input-file manifest: which files made which shard
        manifest["input_files"] = [{"shard": t.index, "files": list(t.inputs)} for t in tasks]
    schema = stage.output_schema([ds.schema for ds in datasets])
    if isinstance(stage, GlobalStage):
        plan = eng.name if eng.name in stage.plans() else "local"
        ctx = GlobalContext(datasets, out, schema, stage.stage_id, engine=eng, workdir=out.parent)
        stage.ensure_setup()
        shard_count = getattr(stage, f"run_{plan}")(ctx)
        manifest["plan"] = plan
        if ctx.extra:  # plan statistics (candidate pairs, groups, spilled bytes, ...)
            manifest["stats"] = ctx.extra
    else:
        shard_count = max(len(tasks), 1)
        if not tasks:  # an empty input still yields a dataset with a schema
            ShardWriter(out, 0, schema, stage.stage_id).commit()
        done = done_shards(out)
        pending = [t for t in tasks if t.index not in done]
        manifest["resumed_shards"] = len(tasks) - len(pending)
        _run_tasks(eng, stage, pending, out, schema, progress, total=len(tasks), already=len(tasks) - len(pending))
    manifest["wall_seconds"] = round(time.time() - started, 3)
    manifest["output_columns"] = schema.names
    manifest = finalize(out, manifest, shard_count)
    shutil.rmtree(out / "_scratch", ignore_errors=True)
    return StageResult(stage.stage_id, out, manifest, skipped=False)


def _run_tasks(eng: Engine, stage: Stage, tasks: list[Task], out: Path, schema, progress: bool,
               total: int, already: int) -> None:
    if not progress:
        eng.run_tasks(stage, tasks, out, schema)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("shards"), TimeElapsedColumn(), transient=True) as bar:
        handle = bar.add_task(f"{stage.stage_id} ({eng.name})", total=total, completed=already)
        eng.run_tasks(stage, tasks, out, schema, on_done=lambda *_: bar.advance(handle))


# ---- recipes -----------------------------------------------------------------------------------

def run_recipe(recipe, workdir: str | os.PathLike | None = None, engine: str | None = None,
               options: dict | None = None, start: str | None = None, until: str | None = None,
               progress: bool = False, log=print) -> list[StageResult]:
    """Run a validated `Recipe` (see recipe.py) stage by stage in dependency order."""
    from .recipe import Recipe

    assert isinstance(recipe, Recipe)
    root = Path(workdir or recipe.workdir)
    root.mkdir(parents=True, exist_ok=True)
    order = recipe.order()
    selected = _select(order, recipe, start, until)
    engine_name = engine or recipe.engine
    engine_opts = recipe.engine_options.model_copy(update=options or {})
    results: list[StageResult] = []
    run_log: dict[str, Any] = {"recipe": recipe.name, "order": order, "engine": engine_name, "stages": {}}
    for stage_id in order:
        if stage_id not in selected:
            continue
        spec = recipe.stage_spec(stage_id)
        stage = spec.build()
        inputs = [Dataset(root / name) for name in spec.inputs]
        for ds in inputs:
            if not ds.complete:
                raise StageFailed(f"stage {stage_id!r}: its input {ds.path.name!r} has not run yet; run without --from")
        eng_name = spec.engine or engine_name
        result = run_stage(stage, inputs, root / stage_id, engine=eng_name, options=engine_opts,
                           force=bool(start) and stage_id in selected, progress=progress)
        counts = result.manifest["counts"]
        state = "skipped (unchanged)" if result.skipped else f"{result.manifest['wall_seconds']:.1f}s"
        log(f"  {stage_id:<20} {counts['rows_in']:>8} in  {counts['rows_out']:>8} out  "
            f"{counts['rows_rejected']:>7} rejected  [{result.manifest['engine']}] {state}")
        results.append(result)
        run_log["stages"][stage_id] = {"skipped": result.skipped, "engine": result.manifest["engine"]}
    atomic_write_text(root / "_run.json", json.dumps(run_log, indent=2))
    return results


def _select(order: list[str], recipe, start: str | None, until: str | None) -> set[str]:
    for name, value in (("--from", start), ("--until", until)):
        if value and value not in order:
            raise StageFailed(f"{name} {value!r}: no such stage; stages are {', '.join(order)}")
    selected = set(order)
    if until:  # the stage and everything it depends on
        selected = recipe.ancestors(until) | {until}
    if start:  # the stage and everything downstream of it
        selected &= recipe.descendants(start) | {start}
    return selected
