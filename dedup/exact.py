"""`dedup.exact`: documents with the same normalised text are duplicates (one band, key = text hash).

The key is a hash of MinHash's token sequence (NFKC, lower case, punctuation and spacing ignored), so
copies that differ only in case, punctuation or spacing count as exact. Texts without a token take
no part.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from assay.pipeline.stage import register

from .base import DedupParams, DedupStage
from .tokens import text_keys


class ExactDedupParams(DedupParams):
    pass


@register("dedup.exact")
class ExactDedup(DedupStage):
    """Exact dedup on a hash of the normalised text. Example: `assay dedup exact docs/ out/`."""

    Params = ExactDedupParams
    reason: ClassVar[str] = "exact-duplicate"

    def batch_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        keys, valid = text_keys(table.column("text"))
        return keys[:, None], valid
