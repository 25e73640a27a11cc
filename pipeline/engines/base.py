"""What every engine shares: options, the per-task executor, and the worker-side stage cache."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa
from pydantic import Field

from .. import storage
from ..stage import Params, Stage, Task
from ..stats import Stats


class EngineOptions(Params):
    workers: int = Field(0, ge=0, description="Parallel tasks (local processes, Ray actors); 0 = all cores")
    spark_master: str = Field("local[*]", description="Spark master URL, e.g. spark://127.0.0.1:7077")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings")
    ray_address: str | None = Field(None, description="Ray cluster address (host:port); default: start a local Ray")
    ray_object_store_mb: int = Field(512, description="Object store size for a local Ray")

    def worker_count(self) -> int:
        return self.workers or os.cpu_count() or 1


def stage_workers(stage: Stage, options: EngineOptions, tasks: int, cores: float | None = None) -> int:
    """How many workers a stage gets here: one per `cpus` of `cores` (the cores the engine fills) and
    no more than the GPU slots of the visible devices, capped by the stage's own `workers` and the
    engine's. cores=None: the engine's scheduler counts CPUs and GPUs itself (Ray, Spark clusters)."""
    n = options.worker_count()
    if cores is not None:
        n = int(cores / stage.resources.cpus + 1e-9)
        if stage.resources.gpus:
            n = min(n, len(gpu_slots(stage.resources.gpus, visible_devices())) or 1)
    if stage.workers:
        n = min(n, stage.workers)
    return max(1, min(n, tasks))


def visible_devices() -> list[str]:
    """The GPUs this process may use, as CUDA names them to it: CUDA_VISIBLE_DEVICES when set (a
    scheduler may have narrowed it to, say, "5,7"), else every device torch counts."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    try:
        import torch  # only when a stage asks for GPUs

        return [str(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        return []


def gpu_slots(gpus: float, devices: list[str]) -> list[str]:
    """The CUDA_VISIBLE_DEVICES of each worker slot for workers asking for `gpus` each: whole devices
    of `devices` (ceil(gpus) per worker), or, below one, floor(1/gpus) workers per device, spread
    over the devices first. Never a device outside `devices`."""
    if gpus >= 1:
        per = math.ceil(gpus - 1e-9)
        return [",".join(devices[i:i + per]) for i in range(0, len(devices) - per + 1, per)]
    share = int(1 / gpus + 1e-9)
    return [d for _ in range(share) for d in devices]


# One live instance per stage in each worker process: models load once per worker, and the cache is
# emptied (teardown called) when the stage ends, so a model never outlives its stage.
_WORKER_STAGES: dict[tuple[str, str, str], Stage] = {}


def worker_stage(stage: Stage) -> Stage:
    key = (type(stage).ref(), stage.params_json(), stage.stage_id)
    cached = _WORKER_STAGES.get(key)
    if cached is None:
        _WORKER_STAGES[key] = cached = stage
    cached.ensure_setup()
    return cached


def teardown_worker_stages() -> int:
    """Tear down every stage this worker holds; returns how many were torn down."""
    stages = list(_WORKER_STAGES.values())
    _WORKER_STAGES.clear()
    for stage in stages:
        stage.close()
    return len(stages)


def execute_task(stage: Stage, task: Task, out_root: str, schema: pa.Schema,
                 fences: dict[str, str] | None = None) -> dict:
    """Run one task to one committed shard and return its ledger. Identical on every engine.
    `fences`: the driver's lease tokens (dataset.held_fences), which every commit checks."""
    from ..dataset import hold_fences

    hold_fences(fences)
    stage = worker_stage(stage)
    stage.stats = Stats()
    started = time.perf_counter()
    writer = stage.open_writer(storage.as_path(out_root), task, schema)
    try:
        for item in stage.run_task(task, writer):
            writer.write(item)
        stats = stage.stats.to_json()
        if stats:  # a fused chain has set each stage's own
            writer.files.stats = stats
        writer.files.seconds = time.perf_counter() - started
        return writer.commit().to_json()
    except BaseException:
        writer.abort()
        raise


def with_fences(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn` made to run under the leases the driver holds now, wherever an engine runs it: what it
    writes inside those outputs is checked against them (a global stage's waves)."""
    from functools import partial

    from ..dataset import held_fences

    fences = held_fences()
    return partial(_fenced_call, fences, fn) if fences else fn


def _fenced_call(fences: dict[str, str], fn: Callable[[Any], Any], item: Any) -> Any:
    from ..dataset import hold_fences

    hold_fences(fences)
    return fn(item)


class Engine:
    name = "base"

    def __init__(self, options: EngineOptions):
        self.options = options

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        raise NotImplementedError

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """fn(item) for every item on the engine's workers, results in item order: the waves of a
        global stage's plan. fn and items are pickled; results should be small (counts, paths)."""
        fn = with_fences(fn)
        return [fn(item) for item in items]

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return self.name
