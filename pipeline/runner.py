"""Run one stage, or a whole recipe as a DAG, with skip-if-unchanged and shard-level resume.

A stage's output directory is complete when its `_manifest.json` exists. Its fingerprint hashes the
stage, its code version, its params and its inputs' fingerprints, so a re-run skips a stage whose
fingerprint is unchanged, and a killed stage resumes at the first uncommitted shard.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from . import __version__, storage
from .dataset import (Dataset, Lease, OutputRefused, atomic_write_text, check_output, check_replace, done_shards,
                      finalize, prepare_output)
from .identity import fingerprint_of, why
from .engines import Engine, EngineOptions, get_engine
from .errors import UserError
from .stage import FitApplyStage, Stage, Task


class StageFailed(UserError):
    pass


@dataclass
class StageResult:
    stage_id: str
    out: Path
    manifest: dict[str, Any]
    skipped: bool


def identity(stage: Stage, inputs: Sequence[Dataset], input_fingerprints: list[str] | None = None) -> dict[str, Any]:
    """Everything the stage reads, reduced to digests (see identity.py)."""
    from .identity import declared

    return declared(stage, inputs, input_fingerprints)


def fingerprint(stage: Stage, inputs: Sequence[Dataset], input_fingerprints: list[str] | None = None) -> str:
    from .identity import fingerprint_of

    return fingerprint_of(identity(stage, inputs, input_fingerprints))


def producer(stage: Stage, owner: str | None) -> dict[str, Any]:
    """Who makes an output: the stage, its id, the recipe (mixture, ablation) that owns the folder, and
    its params (a stage run on its own may not silently replace the output of other params)."""
    from .identity import _digest_json

    return {"stage": stage.name or type(stage).ref(), "stage_id": stage.stage_id, "owner": owner,
            "params": _digest_json(stage.params_json())[:16]}


def _as_engine(engine: Engine | str | None, options: EngineOptions | dict | None) -> Engine:
    if isinstance(engine, Engine):
        return engine
    return get_engine(engine or "local", options)


def check_paths(stage: Stage, inputs: Sequence[Dataset], out: Path) -> None:
    """Refuse an output that is an input, lies inside one, or holds one: a run must never write over,
    into or around what it reads."""
    target = storage.resolve(storage.as_path(out))
    sources = [storage.resolve(ds.path) for ds in inputs]
    named, files = stage.outside_inputs()
    sources += [storage.resolve(storage.as_path(p)) for p in named]
    local_target = not storage.is_remote(target)
    folders: dict[str, str] = {}
    for f in files:  # a folder of 100,000 pages is 100,000 realpaths: local ones as strings, no Path
        if local_target and "://" not in f:
            real, where = storage.real_path(f, folders), str(target)
            if storage.within(real, where) or storage.within(where, real):
                sources.append(Path(real))
        else:
            sources.append(storage.resolve(storage.as_path(f)))
    for src in sources:
        if storage.resolved_inside(target, src) or storage.resolved_inside(src, target):
            relation = "is" if str(target) == str(src) else "is inside" if storage.resolved_inside(target, src) else "contains"
            raise OutputRefused(f"output {out} {relation} the input {src}; choose another output path")


@dataclass
class StageRun:
    """What a stage kind's plan (`Stage.execute`) runs with: the engine, the inputs, the output and
    its schema, the tasks listed up front, and the manifest the plan adds its figures to."""
    engine: Engine
    datasets: list[Dataset]
    out: Path
    schema: Any
    tasks: list[Task]
    fingerprint: str
    manifest: dict[str, Any]
    progress: bool = False

    def map(self, stage: Stage) -> int:
        """One task per shard, each writing its own output shard; committed shards are not run again."""
        if not self.tasks:  # an empty input still yields an output with a schema
            stage.open_writer(self.out, Task(0, ()), self.schema).commit()
        done = done_shards(self.out)
        pending = [t for t in self.tasks if t.index not in done]
        self.manifest["resumed_shards"] = len(self.tasks) - len(pending)
        _run_tasks(self.engine, stage, pending, self.out, self.schema, self.progress, total=len(self.tasks),
                   already=len(self.tasks) - len(pending))
        return max(len(self.tasks), 1)

    def fit(self, stage: FitApplyStage) -> dict | None:
        return _fit(self.engine, stage, self.tasks, self.out, self.schema, self.progress)


def run_stage(stage: Stage, inputs: Sequence[Dataset | str | os.PathLike], out: str | os.PathLike,
              engine: Engine | str | None = "local", options: EngineOptions | dict | None = None,
              force: bool = False, progress: bool = False, owner: str | None = None,
              replace: bool | None = None) -> StageResult:
    """Run `stage` over `inputs` into the output directory `out` and return its manifest.

    `force` runs it even when nothing it reads changed; `replace` (default: `force`) lets it replace an
    output another stage, recipe (`owner`) or params made."""
    return _run_chain([stage], inputs, [out], engine, options, force, progress, owner, replace)[0]


def run_fused(stages: Sequence[Stage], inputs: Sequence[Dataset | str | os.PathLike], outs: Sequence[str | os.PathLike],
              engine: Engine | str | None = "local", options: EngineOptions | dict | None = None,
              force: bool = False, progress: bool = False, owner: str | None = None,
              replace: bool | None = None) -> list[StageResult]:
    """Run a chain of one-to-one map stages as one task per shard (see fusion.py); each stage still
    gets its own output directory, rejects, statistics and manifest. Only the last holds rows: the
    others' manifests say `fused_into`, which makes them incomplete as datasets (nothing reads them)."""
    for stage in stages:
        if not stage.fusable():
            raise StageFailed(f"stage {stage.stage_id!r} cannot be fused: only one-to-one document map stages can")
    return _run_chain(stages, inputs, outs, engine, options, force, progress, owner, replace)


def _run_chain(stages: Sequence[Stage], inputs: Sequence[Dataset | str | os.PathLike], outs: Sequence[str | os.PathLike],
               engine: Engine | str | None, options: EngineOptions | dict | None, force: bool, progress: bool,
               owner: str | None, replace: bool | None) -> list[StageResult]:
    """The commit protocol, for one stage or a fused chain (stage i reads stage i-1's rows): refuse
    what is not ours, skip what is unchanged, lease every output, run the kind's plan, then write
    each manifest last."""
    from contextlib import ExitStack

    from .fusion import FusedStage

    head, outs = stages[0], [storage.as_path(o) for o in outs]
    datasets = [ds if isinstance(ds, Dataset) else Dataset(ds) for ds in inputs]
    for ds in datasets:
        if not ds.complete:
            raise StageFailed(f"stage {head.stage_id!r}: input {ds.incomplete_reason()}")
    problem = head.check_inputs(datasets)
    if problem:
        raise StageFailed(f"stage {head.stage_id!r} ({head.name}) {problem}")
    for out in outs:
        check_paths(head, datasets, out)
        check_output(out)  # before anything is read or written: never touch what is not ours
    idents: list[dict[str, Any]] = []
    fps: list[str] = []
    for stage in stages:
        idents.append(identity(stage, datasets, [fps[-1]] if fps else None))
        fps.append(fingerprint_of(idents[-1]))
    existing = [Dataset(out).manifest for out in outs]
    made_by = [producer(stage, owner) for stage in stages]
    if not force and all(m and m.get("fingerprint") == fp for m, fp in zip(existing, fps)) \
            and not existing[-1].get("fused_into"):
        for out, fp, who in zip(outs, fps, made_by):
            Lease.clear_stale(out, fp, who)
        return [StageResult(s.stage_id, o, m, skipped=True) for s, o, m in zip(stages, outs, existing)]
    for stage, out, who in zip(stages, outs, made_by):
        Lease.check_free(out)
        check_replace(out, who, force if replace is None else replace, json.loads(stage.params_json()))
    eng = _as_engine(engine, options)
    tasks = head.listed_tasks(datasets)  # list inputs before touching `out`
    with ExitStack() as held:
        previous = []
        for stage, out, fp, who in zip(stages, outs, fps, made_by):
            lease = held.enter_context(Lease(out, fp, who, owns=stage.owned_names))
            previous.append(None if force else lease.previous_fingerprint())
            prepare_output(out, fp, previous[-1])
        started = time.time()
        schemas = [head.output_schema([ds.schema for ds in datasets])]
        for stage in stages[1:]:
            schemas.append(stage.output_schema([schemas[-1]]))
        manifests = []
        upstream = [(str(ds.path), (ds.manifest or {}).get("fingerprint")) for ds in datasets]
        for stage, out, fp, ident, who, before, old in zip(stages, outs, fps, idents, made_by, previous, existing):
            manifests.append(_manifest(stage, fp, upstream, eng))
            manifests[-1].update(identity=ident, producer=who, owns=list(stage.owned_names),
                                 ran_because="forced" if force else "resumed" if before == fp
                                 else why(ident, (old or {}).get("identity")))
            upstream = [(str(out), fp)]
        plan = FusedStage(stages, outs, schemas) if len(stages) > 1 else head
        run = StageRun(eng, datasets, outs[-1], schemas[-1], tasks, fps[-1], manifests[-1], progress)
        shard_count = plan.execute(run)
        results = []
        for i, (stage, out, schema, manifest) in enumerate(zip(stages, outs, schemas, manifests)):
            manifest.update(stage.describe_output(out) if hasattr(stage, "describe_output") else {})
            manifest.update(wall_seconds=round(time.time() - started, 3), output_columns=schema.names)
            if len(stages) > 1:
                manifest.update(fused_with=[s.stage_id for s in stages], resumed_shards=run.manifest["resumed_shards"])
                if i < len(stages) - 1:
                    manifest["fused_into"] = str(outs[-1])  # its rows live in the chain's last output
            results.append(StageResult(stage.stage_id, out, finalize(out, manifest, shard_count), skipped=False))
        storage.rmtree(outs[-1] / "_scratch")
    return results


def _manifest(stage: Stage, fp: str, inputs: list[tuple[str, str | None]], eng: Engine) -> dict[str, Any]:
    return {
        "stage": stage.name or type(stage).ref(),
        "stage_id": stage.stage_id,
        "kind": stage.kind,
        "cardinality": stage.cardinality,
        "output_kind": stage.output_kind,
        "params": stage.params.model_dump(mode="json"),
        "fingerprint": fp,
        "code_version": f"assay {__version__}, {stage.name or type(stage).ref()} v{stage.version}",
        "inputs": [{"path": path, "fingerprint": ifp} for path, ifp in inputs],
        "engine": eng.describe(),
        "resources": dict(stage.resources.model_dump(), workers=stage.workers, batch_rows=stage.batch_rows),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _fit(eng: Engine, stage: FitApplyStage, tasks: list[Task], out: Path, schema, progress: bool) -> dict | None:
    """Fit phase of a fit-then-apply stage: partial states per shard (resumable), reduced on the driver
    into the artifact that the apply phase reads. Returns the fit's merged statistics."""
    from .dataset import shard_markers
    from .stats import merge_stats

    fit_root = out / "_fit"
    fit_tasks = [Task(t.index, t.inputs, t.extra + (("phase", "fit"),)) for t in tasks]
    if not (out / "_artifacts" / ".fit-done").exists():  # else: this run's fit finished before a kill
        done = done_shards(fit_root)
        pending = [t for t in fit_tasks if t.index not in done]
        _run_tasks(eng, stage, pending, out, schema, progress, total=len(fit_tasks),
                   already=len(fit_tasks) - len(pending), label="fit")
        states, unreadable = _gather_states(eng, stage, fit_root, fit_tasks)
        if unreadable:  # not what this stage stored (damaged, or planted): fit those shards again
            for t in unreadable:
                storage.remove(fit_root / "_shards" / f"part-{t.index:05d}.json")
            _run_tasks(eng, stage, unreadable, out, schema, progress, total=len(fit_tasks),
                       already=len(fit_tasks) - len(unreadable), label="fit")
            states, unreadable = _gather_states(eng, stage, fit_root, fit_tasks)
            if unreadable:
                raise StageFailed(f"stage {stage.stage_id!r}: its fit states in {fit_root} cannot be read back")
        stage.ensure_setup()
        stage.save_artifact(out, stage.reduce(states))
        atomic_write_text(out / "_artifacts" / ".fit-done", "")
    markers = shard_markers(fit_root)
    return merge_stats(markers[t.index].get("stats") for t in fit_tasks)


_UNREADABLE = object()
TREE_FAN_IN = 16  # states a worker combines into one, and the most the driver's reduce ever holds


def _load_state(path) -> Any:
    from . import codec

    try:
        return codec.loads(storage.as_path(path).read_bytes())
    except (OSError, codec.CodecError):
        return _UNREADABLE


def _gather_states(eng: Engine, stage: FitApplyStage, fit_root: Path,
                   fit_tasks: list[Task]) -> tuple[list[Any], list[Task]]:
    """The states the driver reduces, in shard order, and the fit tasks whose state cannot be read
    (those shards must be fitted again). With more shards than TREE_FAN_IN and a stage that can
    `combine`, the workers fold the states in groups of TREE_FAN_IN, level by level, into at most
    TREE_FAN_IN states, so the driver's memory does not grow with the number of shards. The tree's
    shape depends on the number of shards alone: the same artifact on every engine."""
    leaves = [str(fit_root / f"part-{t.index:05d}.state") for t in fit_tasks]
    if len(leaves) <= TREE_FAN_IN or not stage.combines():
        states = [_load_state(path) for path in leaves]
        return states, [t for t, state in zip(fit_tasks, states) if state is _UNREADABLE]
    from functools import partial

    tree = fit_root / "_tree"
    storage.rmtree(tree)  # made again from the leaves each time: cheap next to the fit
    paths, level = leaves, 0
    while len(paths) > TREE_FAN_IN:
        groups = [paths[i : i + TREE_FAN_IN] for i in range(0, len(paths), TREE_FAN_IN)]
        outs = [str(tree / f"level-{level}" / f"group-{g:05d}.state") for g in range(len(groups))]
        bad = {p for found in eng.map(partial(_combine_files, stage), list(zip(groups, outs))) for p in found}
        if bad:
            if level:  # files this tree wrote a moment ago
                raise StageFailed(f"stage {stage.stage_id!r}: combined fit states in {tree} cannot be read back")
            return [], [t for t, path in zip(fit_tasks, leaves) if path in bad]
        paths, level = outs, level + 1
    states = [_load_state(path) for path in paths]
    if any(state is _UNREADABLE for state in states):
        raise StageFailed(f"stage {stage.stage_id!r}: combined fit states in {tree} cannot be read back")
    return states, []


def _combine_files(stage: FitApplyStage, item: tuple[list[str], str]) -> list[str]:
    """On a worker: the states in `paths` folded into one state at `out`; the unreadable paths, if any
    (then nothing is written)."""
    from . import codec
    from .dataset import atomic_write_bytes

    paths, out = item
    states = [_load_state(path) for path in paths]
    bad = [path for path, state in zip(paths, states) if state is _UNREADABLE]
    if not bad:
        stage.ensure_setup()
        atomic_write_bytes(storage.as_path(out), codec.dumps(stage.combine(states)))
    return bad


def _run_tasks(eng: Engine, stage: Stage, tasks: list[Task], out: Path, schema, progress: bool,
               total: int, already: int, label: str = "") -> None:
    if tasks:
        stage.share(out / "_scratch")  # built once here, not in every worker
    if not progress:
        import logging

        from .logs import logger

        if not logger.isEnabledFor(logging.INFO):  # `assay -v`
            eng.run_tasks(stage, tasks, out, schema)
            return
        started, finished, docs = time.time(), already, 0

        def log_shard(index: int, counts: dict) -> None:
            nonlocal finished, docs
            finished += 1
            docs += counts.get("rows_in", 0)
            elapsed = max(time.time() - started, 1e-6)
            eta = elapsed / (finished - already) * (total - finished)
            logger.info("%s%s: shard %d done (%d/%d), %s docs, %.0f docs/s, eta %.0fs", stage.stage_id,
                        f" {label}" if label else "", index, finished, total, f"{docs:,}", docs / elapsed, eta)

        eng.run_tasks(stage, tasks, out, schema, on_done=log_shard)
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    started = time.time()
    docs = 0

    def done(_index: int, counts: dict) -> None:
        nonlocal docs
        docs += counts.get("rows_in", 0)
        rate = docs / max(time.time() - started, 1e-6)
        bar.update(handle, advance=1, docs=f"{docs:,} docs, {rate:,.0f}/s")

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("shards"),
                  TextColumn("{task.fields[docs]}"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                  transient=True) as bar:
        handle = bar.add_task(f"{stage.stage_id}{' ' + label if label else ''} ({eng.name})", total=total,
                              completed=already, docs="")
        eng.run_tasks(stage, tasks, out, schema, on_done=done)


# ---- recipes -----------------------------------------------------------------------------------

def run_recipe(recipe, workdir: str | os.PathLike | None = None, engine: str | None = None,
               options: dict | None = None, start: str | None = None, until: str | None = None,
               progress: bool = False, log=print, replace: bool = False) -> list[StageResult]:
    """Run a validated `Recipe` (see recipe.py) stage by stage in dependency order. `replace` lets it
    take over a workdir another recipe made."""
    from .recipe import Recipe

    assert isinstance(recipe, Recipe)
    root = storage.as_path(workdir or recipe.workdir)
    order = recipe.order()
    selected = _select(order, recipe, start, until)
    check_workdir(root, [s for s in order if s in selected], owner=recipe.name, replace=replace)
    storage.makedirs(root)
    engine_name = engine or recipe.engine
    engine_opts = recipe.engine_options.model_copy(update=options or {})
    results: list[StageResult] = []
    run_log: dict[str, Any] = {"recipe": recipe.name, "order": order, "engine": engine_name, "stages": {}}
    atomic_write_text(root / RUN_LOG, json.dumps(run_log, indent=2))  # first: marks the workdir as Assay's
    chains = fusion_chains(recipe, order, engine_name) if recipe.fuse else []
    head_of = {sid: chain[0] for chain in chains for sid in chain}
    for chain in chains:  # a chain runs whole: its middle stages hold no rows of their own
        if selected & set(chain):
            selected |= set(chain)
    for stage_id in order:
        if stage_id not in selected or head_of.get(stage_id, stage_id) != stage_id:
            continue
        chain = next((c for c in chains if c[0] == stage_id), [stage_id])
        specs = [recipe.stage_spec(sid) for sid in chain]
        stages = [spec.build() for spec in specs]
        inputs = [Dataset(root / name) for name in specs[0].inputs]
        for ds in inputs:
            if not ds.complete:
                raise StageFailed(f"stage {stage_id!r}: its input {ds.path.name!r} has not run yet; run without --from")
        eng_name = specs[0].engine or engine_name
        force = bool(start) and stage_id in selected
        if len(chain) > 1:
            chain_results = run_fused(stages, inputs, [root / sid for sid in chain], engine=eng_name,
                                      options=engine_opts, force=force, progress=progress, owner=recipe.name,
                                      replace=replace)
        else:
            chain_results = [run_stage(stages[0], inputs, root / stage_id, engine=eng_name, options=engine_opts,
                                       force=force, progress=progress, owner=recipe.name, replace=replace)]
        for result in chain_results:
            counts = result.manifest["counts"]
            state = "skipped (unchanged)" if result.skipped else \
                f"{result.manifest['wall_seconds']:.1f}s ({result.manifest.get('ran_because', 'ran')})"
            fused = " (fused)" if len(chain) > 1 else ""
            resumed = result.manifest.get("resumed_shards", 0) if not result.skipped else 0
            resumed_note = f", {resumed}/{result.manifest.get('shards', '?')} shards resumed" if resumed else ""
            log(f"  {result.stage_id:<20} {counts['rows_in']:>8} in  {counts['rows_out']:>8} out  "
                f"{counts['rows_rejected']:>7} rejected  [{result.manifest['engine']}] {state}{fused}{resumed_note}")
            results.append(result)
            run_log["stages"][result.stage_id] = {
                "skipped": result.skipped, "engine": result.manifest["engine"],
                "why": "unchanged" if result.skipped else result.manifest.get("ran_because", "ran")}
    atomic_write_text(root / RUN_LOG, json.dumps(run_log, indent=2))
    return results


RUN_LOG = "_run.json"


def dry_run(recipe, workdir: str | os.PathLike | None = None) -> list[tuple[str, bool, str]]:
    """What `run_recipe` would do, without doing it: per stage, in order, whether it would run and why
    ("unchanged", "new", "params changed", "input file 'model' changed", "upstream changed", ...).
    The fingerprints are the ones the run would compute (identity.py), upstream ones included."""
    from .identity import fingerprint_of, why

    root = storage.as_path(workdir or recipe.workdir)
    fps: dict[str, str] = {}
    plan = []
    for stage_id in recipe.order():
        spec = recipe.stage_spec(stage_id)
        stage = spec.build()
        upstream = [fps.get(name) for name in spec.inputs]
        ident = identity(stage, [], upstream)
        fps[stage_id] = fingerprint_of(ident)
        manifest = Dataset(root / stage_id).manifest
        if manifest and manifest.get("fingerprint") == fps[stage_id]:
            plan.append((stage_id, False, "unchanged"))
        else:
            plan.append((stage_id, True, why(ident, (manifest or {}).get("identity"))))
    return plan


def fusion_chains(recipe, order: list[str], engine_name: str) -> list[list[str]]:
    """Runs of one-to-one document map stages (2+) where each link's only input is the previous link,
    whose output nobody else reads, on the same engine. Links follow the graph, not positions in
    `order`: stages of other branches at the same depth (e.g. synthesis beside cleaning) may sit
    between two links there; a chain runs whole when its head's turn comes."""
    consumers: dict[str, int] = {}
    for spec in recipe.all_specs():
        for name in spec.inputs:
            consumers[name] = consumers.get(name, 0) + 1
    specs = {stage_id: recipe.stage_spec(stage_id) for stage_id in order}
    ok = {stage_id: bool(spec.inputs) and spec.build().fusable() for stage_id, spec in specs.items()}
    next_of: dict[str, str] = {}
    for stage_id, spec in specs.items():
        parent = spec.inputs[0] if len(spec.inputs) == 1 else None
        if ok[stage_id] and ok.get(parent) and consumers.get(parent) == 1 and \
                (spec.engine or engine_name) == (specs[parent].engine or engine_name):
            next_of[parent] = stage_id
    linked = set(next_of.values())
    chains: list[list[str]] = []
    for stage_id in order:
        if stage_id in next_of and stage_id not in linked:
            chain = [stage_id]
            while chain[-1] in next_of:
                chain.append(next_of[chain[-1]])
            chains.append(chain)
    return chains


def check_workdir(root: Path, stage_ids: Sequence[str], owner: str | None = None, replace: bool = False,
                  named: str = "--workdir", force: str | None = "--force") -> None:
    """A workdir is new, empty, or one Assay made (its run log) for the same recipe (`owner`; another
    recipe's workdir needs `replace`); every stage folder in it is refused unless it is an Assay
    dataset. Checked for all stages before any runs, so a refusal touches nothing. `named` and
    `force`: how the command that asks takes the folder and the flag that replaces (None: none)."""
    from .dataset import read_json_safe

    root = storage.as_path(root)
    if storage.exists(root):
        if not storage.is_dir(root):
            raise OutputRefused(f"{named} {root}: exists and is not a directory")
        log = read_json_safe(root / RUN_LOG)
        if storage.listdir(root) and not (isinstance(log, dict) and "recipe" in log):
            raise OutputRefused(f"{named} {root}: exists, is not empty and is not an Assay run directory; "
                                "refusing to write there (choose a new folder)")
        if isinstance(log, dict) and owner is not None and log.get("recipe") not in (None, owner) and not replace:
            raise OutputRefused(f"{named} {root}: holds the runs of {log['recipe']!r}, not {owner!r}; choose "
                                "another folder" + (f" (or pass {force} to replace its stages)" if force else ""))
    for stage_id in stage_ids:
        check_output(root / stage_id)


def _select(order: list[str], recipe, start: str | None, until: str | None) -> set[str]:
    for name, value in (("--from", start), ("--until", until)):
        if value and value not in order:
            import difflib

            close = difflib.get_close_matches(value, order, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise StageFailed(f"{name} {value!r}: no such stage{hint} (stages are {', '.join(order)})")
    selected = set(order)
    if until:  # the stage and everything it depends on
        selected = recipe.ancestors(until) | {until}
    if start:  # the stage and everything downstream of it
        selected &= recipe.descendants(start) | {start}
    return selected
