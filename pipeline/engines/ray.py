"""Ray engine: a pool of Ray actors per stage, each running whole tasks (one input shard to one output
shard) with the stage's resources (`num_cpus`, `num_gpus`, memory): Ray counts them, shares a device
between actors asking for a fraction of one, and pins each actor to device ids from those the
raylet was started with (a local Ray gets the GPUs CUDA_VISIBLE_DEVICES gives this process). An
actor keeps the stage (and whatever its setup() loaded) warm across tasks; the pool grows while tasks wait and the cluster has
room, up to the stage's worker count; when the stage ends each actor runs teardown() once and is
killed. A local Ray by default, any cluster by address."""
from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa

from ..stage import Stage, Task
from ..errors import UserError
from .lifeline import watch_descendants
from .base import (Engine, EngineOptions, execute_task, stage_workers, teardown_worker_stages, visible_devices,
                   with_fences)


def ray_process_marks() -> tuple[str, ...]:
    """How a local Ray's own processes start their command lines: a program or script inside the
    installed ray package (GCS, raylet, agents, monitors), or a worker's "ray::" title. Not just
    any "/ray/" in a path: a user's /data/ray/tool.py is not Ray's."""
    import importlib.util

    spec = importlib.util.find_spec("ray")
    folders = {p for f in ((spec.submodule_search_locations or []) if spec else []) for p in (f, os.path.realpath(f))}
    return tuple(sorted(p.rstrip("/") + "/" for p in folders)) + ("ray::",)


class _StageActor:
    """One worker of one stage."""

    def __init__(self, stage: Stage, out_root: str, schema: pa.Schema, fences: dict[str, str]):
        self.stage, self.out_root, self.schema, self.fences = stage, out_root, schema, fences

    def run(self, task: Task) -> dict:
        return execute_task(self.stage, task, self.out_root, self.schema, self.fences)

    def teardown(self) -> int:
        return teardown_worker_stages()


def _call(fn, item):
    return fn(item)


class RayEngine(Engine):
    name = "ray"

    def __init__(self, options: EngineOptions):
        super().__init__(options)
        import ray

        from ..logs import ray_logs_to_driver, verbosity

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        forward = ray_logs_to_driver()  # workers' prints and warnings reach this terminal only with -v
        import logging

        # Ray sets up its own "ray" logger when imported (INFO: "Started a local Ray instance."):
        # its level is Assay's verbosity's, passed where Ray takes it
        quiet = {"logging_level": logging.INFO if verbosity() >= 2 else logging.WARNING}
        if not ray.is_initialized():
            if options.ray_address:
                ray.init(address=options.ray_address, include_dashboard=False, log_to_driver=forward,
                         ignore_reinit_error=True, **quiet)
            else:
                # address="local": always a fresh private instance, never a cluster someone else started
                # the GPUs this process was given (Ray then hands actors ids from that list)
                gpus = {"num_gpus": len(visible_devices())} if "CUDA_VISIBLE_DEVICES" in os.environ else {}
                ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=options.worker_count(), **gpus,
                         include_dashboard=False, log_to_driver=forward,
                         object_store_memory=options.ray_object_store_mb * 1024 * 1024, ignore_reinit_error=True,
                         **quiet)
                # ours to stop however this process ends (kill -9 left Ray's agents running for a minute)
                watch_descendants(ray_process_marks())
        logging.getLogger("ray.data").setLevel(logging.WARNING if verbosity() < 2 else logging.INFO)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        self.ray = ray
        self.teardowns = 0  # teardown() calls made by the last stage's actors (tests read it)

    def _actor_class(self, stage: Stage):
        res = stage.resources
        opts: dict[str, Any] = {"num_cpus": res.cpus, "num_gpus": res.gpus, "max_concurrency": 1}
        if res.memory_gb:
            opts["memory"] = int(res.memory_gb * 1024 ** 3)
        return self.ray.remote(**opts)(_StageActor)

    def _fits(self, stage: Stage, resources: dict) -> int:
        """How many actors of this stage `resources` (total or free) can host."""
        res = stage.resources
        n = int(resources.get("CPU", 0) // res.cpus)
        if res.gpus:
            n = min(n, int(resources.get("GPU", 0) // res.gpus))
        return n

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        if not tasks:
            return
        from ..dataset import held_fences

        ray = self.ray
        fences = held_fences()
        max_actors = stage_workers(stage, self.options, len(tasks))
        actor_cls = self._actor_class(stage)
        actors: list[Any] = []
        idle: deque = deque()
        running: dict[Any, tuple[Any, Task]] = {}
        queue = deque(tasks)
        # Start as many actors as the cluster holds (at least one); grow later while work waits and
        # room frees up (an autoscaling cluster adds nodes).
        fits = self._fits(stage, ray.cluster_resources())
        if not fits and not self.options.ray_address:  # a local Ray gains no nodes: it would wait forever
            raise UserError(f"stage {stage.stage_id!r} asks for {stage.resources.cpus:g} CPUs and {stage.resources.gpus:g} "
                            f"GPUs per worker; this Ray has {ray.cluster_resources().get('CPU', 0):g} and "
                            f"{ray.cluster_resources().get('GPU', 0):g}")
        initial = max(1, min(max_actors, fits))
        try:
            while queue or running:
                while queue and len(actors) < max_actors and (
                        len(actors) < initial or (not idle and self._fits(stage, ray.available_resources()) > 0)):
                    actor = actor_cls.remote(stage, str(out_root), schema, fences)
                    actors.append(actor)
                    idle.append(actor)
                while queue and idle:
                    actor, task = idle.popleft(), queue.popleft()
                    running[actor.run.remote(task)] = (actor, task)
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    actor, task = running.pop(ref)
                    counts = ray.get(ref)
                    idle.append(actor)
                    if on_done:
                        on_done(task.index, counts)
            self.teardowns = sum(ray.get([a.teardown.remote() for a in actors]))
        finally:
            for actor in actors:
                ray.kill(actor)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        call, fn = self.ray.remote(_call), with_fences(fn)
        return self.ray.get([call.remote(fn, item) for item in items])

    def describe(self) -> str:
        return f"ray[{self.options.ray_address or 'local'}]"
