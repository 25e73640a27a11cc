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

from .base import KeyDedup
from .tokens import text_keys


@register("dedup.exact")
class ExactDedup(KeyDedup):
    """Exact dedup on a hash of the normalised text. Example: `assay dedup exact docs/ out/`."""

    reason: ClassVar[str] = "exact-duplicate"

    def document_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        return text_keys(table.column("text"))
