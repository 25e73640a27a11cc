"""A training run is a stage: its inputs are token datasets, its output kind is a run.

The run's identity is the stage's (pipeline/identity.py): the train config (params), the training
and held-out token datasets by their fingerprints, and the trainer's code. So the one runner skips a
run whose data and config are unchanged, resumes a killed one from its last checkpoint, and starts
over when anything it read changed (a checkpoint of other inputs is never resumed: the folder is
cleared first, and each checkpoint also names the fingerprint it belongs to).

The output folder holds, besides the manifest (which carries the summary):

    config.json      the config the run trained with
    metrics.jsonl    one record per logged step and per evaluation
    checkpoints/     step-NNNNNNNN.pt (weights-only loadable), the last `keep_checkpoints`
    summary.json     the run's summary (also in the manifest)
    report.html      curves and expert telemetry
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from pydantic import Field

from assay.pipeline import storage
from assay.pipeline.stage import GlobalContext, GlobalStage, Params, register

RUN_FILES = ("config.json", "metrics.jsonl", "checkpoints", "summary.json", "report.html")


class TrainRunParams(Params):
    config: dict[str, Any] = Field(description="The train config (see trainer/config.py), data paths included")


@register("train.run")
class TrainRun(GlobalStage):
    """Train a proxy model on a token dataset and score it on held-out token datasets.

    Its inputs are the training dataset, then the eval sets in the config's order. Use `assay train
    CONFIG --out DIR` (or `assay ablate`), which build this stage from a config file.
    """

    Params = TrainRunParams
    output_kind = "run"
    command = False  # `assay train CONFIG` and `assay ablate SPEC` run it
    owned_names = RUN_FILES
    requires = ("torch",)
    log: Callable[[str], None] = staticmethod(lambda message: None)

    def train_config(self):
        from .config import TrainConfig

        return TrainConfig.model_validate(self.params.config)

    def read_files(self) -> dict[str, list[str]]:
        """The task suite's files (shipped subsets or the user's own) are part of the run's identity: the
        final evaluation scores them, so a run scored on other items is another run."""
        cfg = self.train_config()
        if cfg.eval.tasks is None:
            return {}
        from .tasks import suite_files

        return {"tasks": suite_files(cfg.eval.tasks)}

    def inputs(self) -> list[str]:
        cfg = self.train_config()
        return [cfg.data.train, *cfg.eval.sets.values()]

    def output_schema(self, input_schemas=()) -> pa.Schema:
        return pa.schema([])

    def run_local(self, ctx: GlobalContext) -> int:
        from assay.pipeline.dataset import atomic_write_text

        from .train import METRICS, Trainer, usable_checkpoint

        cfg = self.train_config()
        out = ctx.out_root
        trainer = Trainer(cfg, out, self.log, fingerprint=ctx.fingerprint)
        found = usable_checkpoint(out, ctx.fingerprint, self.log)
        if found is not None:
            trainer.load(*found)
            self.log(f"{out}: resuming from {found[0].name} (step {trainer.state['step']} of {trainer.total_steps})")
        else:
            storage.remove(out / METRICS)
            atomic_write_text(out / "config.json", json.dumps(cfg.model_dump(mode="json"), indent=1))
        p = trainer.info["params"]
        self.log(f"{cfg.name}: {p['total'] / 1e6:.2f}M params ({p['active'] / 1e6:.2f}M active), "
                 f"{trainer.total_steps} steps x {trainer.tokens_per_step} tokens on {trainer.device}")
        self.summary = trainer.run()
        return 0

    def describe_output(self, out_root: Path) -> dict[str, Any]:
        summary = getattr(self, "summary", None)
        return {"summary": summary} if summary is not None else {}


def run_training(cfg, out: str | Path, log: Callable[[str], None] = print, force: bool = False,
                 report: bool = True, owner: str | None = None, replace: bool | None = None) -> dict:
    """Train `cfg` into the run folder `out` through the runner: skipped when nothing it reads changed,
    resumed from its last checkpoint after a kill, trained afresh otherwise. Returns the summary."""
    from assay.pipeline.runner import run_stage

    stage = TrainRun({"config": cfg.model_dump(mode="json")}, stage_id=cfg.name)
    stage.log = log
    result = run_stage(stage, stage.inputs(), out, engine="local", force=force, owner=owner, replace=replace)
    if result.skipped:
        log(f"{out}: already complete (nothing it reads changed)")
    elif report:  # a view of the finished run, not part of its identity
        from .report import write_run_report

        write_run_report(out)
    return result.manifest["summary"]
