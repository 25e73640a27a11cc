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
