"""`quality.tier`: the default scorers and the shipped calibration in one pass over each batch.

Running the parts as one map stage reads and writes the corpus once instead of eight times; each part
is the same code its own stage runs (filter.signals, filter.rules, quality.code_rules,
quality.fasttext web, edu and reference, quality.lm, quality.dsir, quality.math, quality.tiers).
"""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, register, with_rejects

from .code_rules import CodeRules
from assay.filters.rules import Rules
from .scorers import DSIRScorer, FastTextScorer, LMScorer, MathScorer
from assay.filters.signals import COLUMNS as SIGNAL_COLUMNS
from assay.filters.signals import Signals
from .tiers import TIER_COLUMNS, TiersParams, load_calibration, write_tiers

SCORERS = ("fasttext", "edu", "lm", "heuristics", "math", "code", "reference", "dsir")


class TierParams(TiersParams):
    keep_signals: bool = Field(False, description="Also write the sig_ columns of filter.signals")


@register("quality.tier")
class DefaultTier(MapStage):
    """Score with the eight default scorers (quality_fasttext, quality_edu, quality_lm, quality_heuristics,
    quality_math, quality_code, and the value scorers quality_reference and quality_dsir) and assign tiers
    with the shipped calibration, in one pass. Drops nothing.

    Example: assay quality tier runs/x/deduped runs/x/tiered
    """

    Params = TierParams
    version = "2"  # 2: quality_reference and quality_dsir, and the calibration that reads them
    reads = {"calibration": "file"}
    requires = ("fasttext_new",)
    batch_rows = 5_000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parts = [Signals(), Rules(), CodeRules(), FastTextScorer({"model": "web", "name": "fasttext"}),
                      FastTextScorer({"model": "edu", "name": "edu"}), LMScorer(), MathScorer(),
                      FastTextScorer({"model": "reference", "name": "reference"}), DSIRScorer()]
        columns: dict[str, pa.DataType] = {}
        for part in self.parts:
            columns.update(part.columns)
        if not self.params.keep_signals:
            columns = {k: v for k, v in columns.items() if k not in SIGNAL_COLUMNS}
        self.columns = {**columns, **TIER_COLUMNS}

    def read_files(self) -> dict[str, list[str]]:
        from .tiers import calibration_path

        files = {"calibration": [str(calibration_path(self.params.calibration))]}
        for part in self.parts:
            files.update({f"{part.params.name if hasattr(part.params, 'name') else type(part).__name__}.{k}": v
                          for k, v in part.read_files().items()})
        return files

    def setup(self) -> None:
        for part in self.parts:
            part.stats = self.stats  # one statistics channel for the fused stage
            part.ensure_setup()
        self.calibration = load_calibration(self.params.calibration)

    def teardown(self) -> None:
        for part in self.parts:
            part.close()

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        for part in self.parts:
            part.stats = self.stats
            table = part.process(table)
        if not self.params.keep_signals:
            table = table.drop_columns([c for c in SIGNAL_COLUMNS if c in table.column_names])
        table = write_tiers(self, table, self.calibration, self.params)
        return with_rejects(table, [None] * table.num_rows)
