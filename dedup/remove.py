"""`dedup.remove`: move rows a dedup stage did not keep (`dup_keep` false) to `_rejects/`.

The reason is a short code (default `near-duplicate`) so ledger counts stay per kind; the detail names
the kept document, `near-duplicate of <dup_group>`.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, register, with_rejects

from .columns import DUP_GROUP, DUP_KEEP


class RemoveParams(Params):
    reason: str = Field(
        "near-duplicate", description="Reject code for removed rows: near-duplicate, exact-duplicate or url-duplicate."
    )


@register("dedup.remove")
class RemoveDuplicates(MapStage):
    """Drop rows with dup_keep = false into rejects. Example: `assay dedup remove annotated/ out/`."""

    Params = RemoveParams

    def process(self, table: pa.Table) -> pa.Table:
        if DUP_KEEP not in table.column_names:
            raise ValueError("dedup.remove needs the dup_keep column: run dedup.url/exact/minhash first")
        drop = np.asarray(pc.fill_null(pc.invert(table.column(DUP_KEEP)), False))
        groups = table.column(DUP_GROUP).to_pylist()
        reason = self.params.reason
        reasons = [reason if d else None for d in drop.tolist()]
        details = [f"{reason} of {g}" if d else None for g, d in zip(groups, drop.tolist())]
        return with_rejects(table, reasons, details)
