"""The embedded default: a pool of worker processes over shards, no services, bounded memory
(each worker streams one shard at a time in row-group batches)."""
from __future__ import annotations

import multiprocessing as mp
from collections import deque
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa

from ..stage import Stage, Task
from .base import Engine, EngineOptions, execute_task


class LocalEngine(Engine):
    name = "local"

    def __init__(self, options: EngineOptions):
        super().__init__(options)
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = mp.get_context(os.environ.get("ASSAY_MP_START", "forkserver"))
            if ctx.get_start_method() == "forkserver":
                ctx.set_forkserver_preload(["pyarrow", "assay.pipeline.engines.base"])
            self._pool = ProcessPoolExecutor(max_workers=self.options.worker_count(), mp_context=ctx)
        return self._pool

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        if self.options.worker_count() <= 1 or len(tasks) <= 1:
            for task in tasks:  # in-process: no pickling, no pool start-up
                counts = execute_task(stage, task, str(out_root), schema)
                if on_done:
                    on_done(task.index, counts)
            return
        pool = self._executor()
        # Keep at most 2 tasks per worker in flight so a huge task list never sits in memory as futures.
        limit = 2 * self.options.worker_count()
        pending: dict[Any, Task] = {}
        queue = deque(tasks)
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    task = queue.popleft()
                    pending[pool.submit(execute_task, stage, task, str(out_root), schema)] = task
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    task = pending.pop(future)
                    counts = future.result()
                    if on_done:
                        on_done(task.index, counts)
        except BaseException:
            for future in pending:
                future.cancel()
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def describe(self) -> str:
        return f"local[{self.options.worker_count()}]"
