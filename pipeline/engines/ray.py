"""Ray engine: Ray Data `map_batches` over the task list with an actor pool, so a stage that holds a
model loads it once per actor. A local Ray by default, any cluster by address."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa

from ..stage import Stage, Task
from .base import Engine, EngineOptions, execute_task


class _TaskRunner:
    """Ray actor: keeps the stage (and whatever its setup() loaded) alive across tasks."""

    def __init__(self, stage: Stage, tasks: dict[int, Task], out_root: str, schema: pa.Schema):
        self.stage, self.tasks, self.out_root, self.schema = stage, tasks, out_root, schema

    def __call__(self, batch: dict) -> dict:
        indexes = [int(i) for i in batch["index"]]
        counts = [json.dumps(execute_task(self.stage, self.tasks[i], self.out_root, self.schema)) for i in indexes]
        return {"index": indexes, "counts": counts}


class RayEngine(Engine):
    name = "ray"

    def __init__(self, options: EngineOptions):
        super().__init__(options)
        import ray

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not ray.is_initialized():
            if options.ray_address:
                ray.init(address=options.ray_address, include_dashboard=False, log_to_driver=False,
                         ignore_reinit_error=True)
            else:
                # address="local": always a fresh private instance, never a cluster someone else started
                ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=options.worker_count(), include_dashboard=False, log_to_driver=False,
                         object_store_memory=options.ray_object_store_mb * 1024 * 1024, ignore_reinit_error=True)
        import logging

        logging.getLogger("ray.data").setLevel(logging.WARNING)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        self.ray = ray

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        if not tasks:
            return
        import logging

        by_index = {t.index: t for t in tasks}
        items = self.ray.data.from_items([{"index": t.index} for t in tasks], override_num_blocks=len(tasks))
        if stage.holds_model:
            # An actor pool: each actor runs setup() (loads the model) once and serves many shards.
            actors = max(1, min(len(tasks), self.options.worker_count()))
            mapped = items.map_batches(_TaskRunner, fn_constructor_args=(stage, by_index, str(out_root), schema),
                                       batch_size=1, batch_format="numpy", num_cpus=1,
                                       compute=self.ray.data.ActorPoolStrategy(size=actors))
        else:
            # Stateless stages run as plain Ray tasks, which reuse warm worker processes.
            mapped = items.map_batches(_TaskRunner(stage, by_index, str(out_root), schema),
                                       batch_size=1, batch_format="numpy", num_cpus=1)
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        results = mapped.take_all()
        for row in results:
            if on_done:
                on_done(int(row["index"]), json.loads(row["counts"]))

    def close(self) -> None:
        pass  # the Ray instance is shared for the process; `ray.shutdown()` at exit

    def describe(self) -> str:
        return f"ray[{self.options.ray_address or 'local'}]"
