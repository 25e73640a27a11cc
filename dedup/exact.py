"""`dedup.exact`: documents with the same normalised text are duplicates (one band, key = text hash).

The normalisation is MinHash's (NFKC, lower case, punctuation removed, whitespace collapsed), so
copies that differ only in case, punctuation or spacing count as exact. Empty texts take no part.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline.stage import register

from .base import DedupParams, DedupStage
from .hashing import hash_strings
from .shingles import normalize


class ExactDedupParams(DedupParams):
    pass


@register("dedup.exact")
class ExactDedup(DedupStage):
    """Exact dedup on a hash of the normalised text. Example: `assay dedup exact docs/ out/`."""

    Params = ExactDedupParams
    reason: ClassVar[str] = "exact-duplicate"

    def batch_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        norm = normalize(table.column("text").combine_chunks())
        valid = np.asarray(pc.greater(pc.binary_length(norm), 0).fill_null(False))
        return hash_strings(norm)[:, None], valid
