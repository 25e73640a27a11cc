"""`dedup.url`: documents whose normalised URLs are equal are duplicates (one band, key = URL hash).

URLs are normalised by the extraction family's `normalize_url` (scheme/host case, default ports,
tracking parameters, fragments, ...). Rows without a URL take no part and are kept.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa

from assay.pipeline.stage import register

from .base import KeyDedup
from .hashing import hash_strings


@register("dedup.url")
class UrlDedup(KeyDedup):
    """URL dedup on normalised URLs. Example: `assay dedup url docs/ out/ --keep longest`."""

    reason: ClassVar[str] = "url-duplicate"
    key_columns: ClassVar[tuple[str, ...]] = ("url",)

    def document_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        from assay.extractors.urls import normalize_urls

        urls = table.column("url").to_pylist() if "url" in table.column_names else [None] * table.num_rows
        norm = pa.array([u or None for u in normalize_urls(urls)], pa.string())
        return hash_strings(norm.fill_null("")), np.asarray(norm.is_valid())
