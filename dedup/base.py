"""What the URL, exact and MinHash dedup stages share: params, the per-batch key contract, the output.

Every dedup stage reduces a document to one or more 64-bit *band keys*; documents that share a key in
the same band are candidates, candidates are joined into connected components, and each component
keeps one document chosen by the keep policy. URL and exact dedup are the one-band case, MinHash is
the many-band case, so all three run through the same local and Spark plans and give the same groups
on both.

Output: every row gets `dup_group` (the id of the document its group keeps; a document with no
duplicate is its own group) and `dup_keep`. With `remove: true` the stage also moves the rows it does
not keep to `_rejects/` with a short reason code and `reject_detail` = "<reason> of <kept id>";
otherwise `dedup.remove` does that later, so the decision can be audited and re-weighted first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline.stage import GlobalStage, Params

from .columns import DUP_GROUP, DUP_KEEP
from .hashing import single_array
from .local_plan import run_local
from .ray_plan import run_ray
from .spark_plan import run_spark


class DedupParams(Params):
    keep: Literal["first", "longest", "quality"] = Field(
        "first",
        description="Which member of a duplicate group survives: first (input order), longest "
        "(most characters), or quality (highest `quality_column`; falls back to first when the column is absent).",
    )
    quality_column: str | None = Field(
        None, description="Numeric column ranked by keep=quality, e.g. quality_fineweb_edu; nulls rank lowest."
    )
    remove: bool = Field(
        False, description="Also move non-kept rows to _rejects/ now (otherwise run dedup.remove later)."
    )
    memory_mb: float = Field(
        1024, gt=0,
        description="Local plan memory budget: an input whose decoded size fits in half of it is held "
        "between the key pass and the output pass instead of read twice; band keys fill the rest, "
        "then spill to disk.",
    )
    batch_rows: int = Field(8192, ge=1, description="Rows per batch read from each input shard.")


@dataclass
class NodeInfo:
    """Per-batch inputs of the dedup plans. keys: uint64[n, bands]; valid: rows that take part."""

    keys: np.ndarray
    valid: np.ndarray
    length: np.ndarray  # int64 characters, for keep=longest
    score: np.ndarray | None  # float64 (NaN = missing), for keep=quality


class DedupStage(GlobalStage):
    """Base of the dedup stages; subclasses implement `batch_keys`."""

    reason: ClassVar[str] = "duplicate"  # reject code used when rows are removed
    key_columns: ClassVar[tuple[str, ...]] = ("text",)  # columns batch_keys reads
    columns = {DUP_GROUP: pa.string(), DUP_KEEP: pa.bool_()}
    Params: ClassVar[type[DedupParams]] = DedupParams

    @property
    def n_bands(self) -> int:
        return 1

    def batch_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(keys uint64[n, n_bands], valid bool[n]) for one batch of documents."""
        raise NotImplementedError

    def node_info(self, table: pa.Table) -> NodeInfo:
        keys, valid = self.batch_keys(table)
        if self.params.keep == "longest" and "text" in table.column_names:
            length = np.asarray(pc.fill_null(pc.utf8_length(table.column("text")), 0), dtype=np.int64)
        else:  # only keep=longest ranks by length
            length = np.zeros(table.num_rows, np.int64)
        score = None
        col = self.params.quality_column
        if self.params.keep == "quality" and col and col in table.column_names:
            score = np.asarray(pc.cast(table.column(col), pa.float64()).to_numpy(zero_copy_only=False), np.float64)
        return NodeInfo(keys, valid, length, score)

    def verify_pairs(self, texts: pa.Array, ia: np.ndarray, ib: np.ndarray) -> np.ndarray | None:
        """For candidate pairs (texts[ia[i]], texts[ib[i]]): which survive verification. None = no
        check. Every plan calls this same function on the same pairs, so verification cannot make
        them differ."""
        return None

    def verify_mask(self, texts_a: pa.Array, texts_b: pa.Array) -> np.ndarray | None:
        """verify_pairs for pairs given as two aligned arrays (texts_a[i], texts_b[i])."""
        m = len(texts_a)
        texts = pa.concat_arrays([single_array(texts_a), single_array(texts_b).cast(texts_a.type)])
        return self.verify_pairs(texts, np.arange(m), np.arange(m, 2 * m))

    @property
    def verifies(self) -> bool:
        return False

    def run_local(self, ctx) -> int:
        return run_local(self, ctx)

    def run_spark(self, ctx) -> int:  # pyspark is imported inside the plan, only when it runs
        return run_spark(self, ctx)

    def run_ray(self, ctx) -> int:
        return run_ray(self, ctx)


class KeyDedup(DedupStage):
    """The one-band case (URL, exact): the band key is one 64-bit hash per document."""

    def document_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(uint64[n] key, valid bool[n]) for one batch of documents."""
        raise NotImplementedError

    def batch_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        keys, valid = self.document_keys(table)
        return keys[:, None], valid
