"""What every engine shares: options, the per-task executor, and the worker-side stage cache."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa
from pydantic import Field

from ..dataset import ShardWriter
from ..stage import Params, Stage, Task


class EngineOptions(Params):
    workers: int = Field(0, description="Parallel tasks (local processes, Ray actors); 0 = all cores")
    spark_master: str = Field("local[*]", description="Spark master URL, e.g. spark://127.0.0.1:7077")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings")
    ray_address: str | None = Field(None, description="Ray cluster address (host:port); default: start a local Ray")
    ray_object_store_mb: int = Field(512, description="Object store size for a local Ray")

    def worker_count(self) -> int:
        return self.workers or os.cpu_count() or 1


# One live instance per (stage class, params) in each worker process: models load once per worker.
_WORKER_STAGES: dict[tuple[str, str, str], Stage] = {}


def worker_stage(stage: Stage) -> Stage:
    key = (type(stage).ref(), stage.params_json(), stage.stage_id)
    cached = _WORKER_STAGES.get(key)
    if cached is None:
        _WORKER_STAGES[key] = cached = stage
    cached.ensure_setup()
    return cached


def execute_task(stage: Stage, task: Task, out_root: str, schema: pa.Schema) -> dict:
    """Run one task to one committed shard and return its ledger. Identical on every engine."""
    stage = worker_stage(stage)
    writer = ShardWriter(Path(out_root), task.index, schema, stage.stage_id)
    try:
        for table in stage.run_task(task, writer.counts):
            writer.write(table)
        return writer.commit().to_json()
    except BaseException:
        writer.abort()
        raise


class Engine:
    name = "base"

    def __init__(self, options: EngineOptions):
        self.options = options

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return self.name
