"""Fused map stages: a chain of one-to-one map stages run as one task per shard.

Six scorers in a row should not read and rewrite the full text six times. A fused chain reads each
input shard once, passes every batch through the stages in order and writes the last stage's rows
once; each stage still keeps its own dataset directory with its own rejects, statistics, ledger and
manifest (marked `fused_into`), so the report, `assay inspect` and the ledger see every stage. The
middle stages hold no row shards: their rows live in the last stage's output.

The runner fuses a chain when the recipe says `fuse: true` and every link is a one-to-one document
map stage on the same engine whose output only the next link reads.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .dataset import Counts, ShardWriter
from .schema import REJECT_REASON, conform
from .stage import MapStage, Stage, Task
from .stats import Stats


class FusedWriter:
    """One ShardWriter per stage of the chain; only the last one writes row shards."""

    def __init__(self, writers: list[ShardWriter]):
        self.writers = writers
        self.files = writers[-1].files  # execute_task stores the chain's seconds here
        self.counts = writers[-1].counts

    def note_inputs(self, table: pa.Table) -> None:
        self.writers[0].note_inputs(table)

    def write(self, item: tuple[int, pa.Table]) -> None:
        index, table = item
        self.writers[index].write(table)

    def commit(self) -> Counts:
        # The last stage commits last: a shard counts as done for resume only when all have.
        for writer in self.writers:
            writer.commit()
        return self.counts

    def abort(self) -> None:
        for writer in self.writers:
            writer.abort()


class FusedStage(MapStage):
    """Runs `stages` in order inside each task, writing stage i's output to `outs[i]`."""

    def __init__(self, stages: Sequence[Stage], outs: Sequence[str], schemas: Sequence[pa.Schema]):
        self.stages = list(stages)
        self.outs = [str(o) for o in outs]
        self.schemas = list(schemas)
        self.stage_id = "+".join(s.stage_id for s in self.stages)
        self.params = self.stages[0].params
        self.resources = max((s.resources for s in self.stages), key=lambda r: (r.gpus, r.cpus, r.memory_gb))
        self.workers = min((s.workers for s in self.stages if s.workers), default=0)
        self.batch_rows = self.stages[0].batch_rows
        self.stats = Stats()
        self._ready = False

    def __getstate__(self) -> dict:
        return {"stages": self.stages, "outs": self.outs, "schemas": self.schemas}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["stages"], state["outs"], state["schemas"])

    def params_json(self) -> str:
        return "|".join(s.params_json() for s in self.stages)

    @classmethod
    def ref(cls) -> str:
        return f"{cls.__module__}:{cls.__qualname__}"

    def share(self, scratch: Path) -> None:
        for stage in self.stages:
            stage.share(scratch)

    def setup(self) -> None:
        for stage in self.stages:
            stage.ensure_setup()

    def teardown(self) -> None:
        for stage in self.stages:
            stage.close()

    def open_writer(self, out_root: Path, task: Task, schema: pa.Schema) -> FusedWriter:
        writers = []
        for i, (stage, out, sch) in enumerate(zip(self.stages, self.outs, self.schemas)):
            writer = ShardWriter(out, task.index, sch, stage.stage_id, keep_rows=i == len(self.stages) - 1)
            stage.stats = Stats()
            writers.append(writer)
        self._writers = writers
        return FusedWriter(writers)

    def run_task(self, task: Task, writer: FusedWriter) -> Iterator[Any]:
        self.ensure_setup()
        last = len(self.stages) - 1
        for table in self.read_batches(task, writer):
            for i, stage in enumerate(self.stages):
                if i:
                    writer.writers[i].note_inputs(table)
                out = stage.process(table)
                yield i, out
                if i < last:  # the kept rows, as stage i wrote them, are stage i+1's input
                    if REJECT_REASON in out.column_names:
                        out = out.filter(pc.is_null(out.column(REJECT_REASON)))
                    table = conform(out, self.schemas[i])
        for stage, sub in zip(self.stages, writer.writers):
            sub.files.stats = stage.stats.to_json()
