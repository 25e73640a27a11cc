"""The embedded default: a pool of worker processes over shards, no services, bounded memory
(each worker streams one shard at a time in row-group batches).

Each stage gets its own pool, sized by the stage (one worker per `cpus` of the engine's cores, no
more than free memory holds at `memory_gb` each, its `workers`, its GPU slots) and shut down when the
stage ends: every worker then runs the stage's teardown() once and exits, so a model loaded by one
stage is gone before the next starts. Workers die with the driver (a parent-death signal), so a
killed `assay` leaves no process behind."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa

from ..stage import Stage, Task
from .base import (Engine, EngineOptions, execute_task, gpu_slots, stage_workers, teardown_worker_stages,
                   visible_devices, with_fences)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def exit_with(pid: int) -> None:
    """End this process as soon as process `pid` (the driver) ends, whoever our parent is.

    Pool workers are children of the forkserver, not of the driver, and the forkserver only exits
    once no worker holds its liveness pipe: a parent-death signal alone would wait forever. A thread
    blocked on a pidfd of the driver wakes the moment it dies."""
    import select
    import threading

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfd (old kernel, not Linux): poll instead
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    os._exit(1)
                except PermissionError:
                    pass
                time.sleep(0.5)
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="assay-exit-with-driver", daemon=True).start()


def _init_worker(counter: Any, devices: list[str] | None, driver: int) -> None:
    from multiprocessing import util

    die_with_parent()
    exit_with(driver)
    # Ctrl-C is the driver's to handle: it cancels the pool; a worker only stops when told. SIGINT
    # came blocked from the forkserver (mp_context); ignoring it first drops one that is pending.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if devices:  # a GPU stage: take the next slot's devices (base.gpu_slots)
        with counter.get_lock():
            slot = counter.value
            counter.value += 1
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[slot % len(devices)]
    # Runs when the worker exits at pool shutdown: the stage's teardown(), once per worker.
    util.Finalize(None, teardown_worker_stages, exitpriority=10)


def pool_size(stage: Stage, options: EngineOptions, tasks: int) -> int:
    """One worker per `cpus` of the engine's cores, and no more than the memory now free holds
    workers of `memory_gb` each."""
    n = stage_workers(stage, options, tasks, cores=options.worker_count())
    if stage.resources.memory_gb:
        import psutil

        n = min(n, max(1, int(psutil.virtual_memory().available / (stage.resources.memory_gb * 2**30))))
    return n


PRELOAD = ["assay.pipeline.engines.forkserver_init", "pyarrow", "assay.pipeline.engines.base"]


def mp_context(preload: Sequence[str] = ()) -> mp.context.BaseContext:
    """The workers' start method (forkserver unless ASSAY_MP_START says otherwise), its server up.

    Ctrl-C reaches the whole process group, the forkserver included, and the forkserver ignores
    SIGINT only once its preload imports are done: a Ctrl-C during them printed a KeyboardInterrupt
    traceback. So it starts with SIGINT blocked (inherited through exec; CPython does the same for
    its resource tracker); a Ctrl-C meanwhile stays pending in the driver and lands when unblocked."""
    ctx = mp.get_context(os.environ.get("ASSAY_MP_START", "forkserver"))
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver, resource_tracker

        if preload:
            ctx.set_forkserver_preload(list(preload))
        # The tracker first: starting it unblocks SIGINT (its own version of this trick).
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            forkserver.ensure_running()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return ctx


class LocalEngine(Engine):
    name = "local"

    def __init__(self, options: EngineOptions):
        super().__init__(options)

    def _pool(self, workers: int, stage: Stage) -> ProcessPoolExecutor:
        ctx = mp_context(PRELOAD)
        devices = gpu_slots(stage.resources.gpus, visible_devices()) if stage.resources.gpus else None
        return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                   initargs=(ctx.Value("i", 0), devices, os.getpid()))

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        if not tasks:
            return
        from ..dataset import held_fences

        workers = pool_size(stage, self.options, len(tasks))
        fences = held_fences()
        if workers <= 1:
            try:  # in-process: no pickling, no pool start-up
                for task in tasks:
                    counts = execute_task(stage, task, str(out_root), schema)
                    if on_done:
                        on_done(task.index, counts)
            finally:
                teardown_worker_stages()
            return
        pool = self._pool(workers, stage)
        # Keep at most 2 tasks per worker in flight so a huge task list never sits in memory as futures.
        limit = 2 * workers
        pending: dict[Any, Task] = {}
        queue = deque(tasks)
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    task = queue.popleft()
                    pending[pool.submit(execute_task, stage, task, str(out_root), schema, fences)] = task
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    task = pending.pop(future)
                    counts = future.result()
                    if on_done:
                        on_done(task.index, counts)
        except BaseException:
            for future in pending:
                future.cancel()
            _stop_workers(pool)
            raise
        pool.shutdown(wait=True)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        workers = min(self.options.worker_count(), len(items))
        fn = with_fences(fn)
        if workers <= 1:
            return [fn(item) for item in items]
        ctx = mp_context(PRELOAD)
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                   initargs=(None, None, os.getpid()))
        try:
            results = list(pool.map(fn, items))
        except BaseException:
            _stop_workers(pool)
            raise
        pool.shutdown(wait=True)
        return results

    def describe(self) -> str:
        return f"local[{self.options.worker_count()}]"


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """On an interrupt or a failure: end the workers now; their uncommitted shards stay temp files,
    which the rerun removes."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
