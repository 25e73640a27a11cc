"""A stage used only by tests: a real map stage that is slow on purpose, so a run can be killed mid-way."""
from __future__ import annotations

import time

import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, set_column, with_rejects


class SlowParams(Params):
    seconds_per_batch: float = Field(0.5, description="Sleep per batch")


class SlowUpper(MapStage):
    """Upper-cases text slowly; rejects texts containing 'reject'."""

    Params = SlowParams

    def process(self, table: pa.Table) -> pa.Table:
        time.sleep(self.params.seconds_per_batch)
        texts = table.column("text").to_pylist()
        table = set_column(table, "text", [t.upper() for t in texts])
        return with_rejects(table, ["has_reject" if "reject" in t else None for t in texts])


SETUP_CALLS = 0


class CountSetups(MapStage):
    """Records, per row, the worker's pid and how many times setup() ran in that worker."""

    holds_model = True

    def setup(self) -> None:
        global SETUP_CALLS
        SETUP_CALLS += 1

    def process(self, table: pa.Table) -> pa.Table:
        import os

        table = set_column(table, "worker_pid", [os.getpid()] * table.num_rows, pa.int64())
        return set_column(table, "setup_calls", [SETUP_CALLS] * table.num_rows, pa.int64())

    def output_schema(self, input_schemas):
        schema = super().output_schema(input_schemas)
        return schema.append(pa.field("worker_pid", pa.int64())).append(pa.field("setup_calls", pa.int64()))
