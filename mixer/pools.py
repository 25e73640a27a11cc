"""The documents a tokenized dataset offers, and which of them a stage's rules admit.

A `Pool` is the doc index of one `mix.tokenize` output held as columns (a few numbers per document,
never tokens). `reasons()` applies a slot's rules to it: None where a document is eligible, else the
reason it is not, which becomes the ledger's reject reason when no slot takes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline.schema import conform
from assay.pipeline.tokens import TokenDataset

from .tokenize import STREAM_INDEX_SCHEMA

# Reasons, in the order they are checked; the first that applies is reported.
NOT_IN_SOURCE = "not_in_source"
TIER_EXCLUDED = "tier_excluded"
CODE_HITS = "code_hits"
TOO_SHORT = "too_short"
TOO_LONG = "too_long"
PREFIX_TOO_LONG = "prefix_too_long"  # the metadata prefix leaves no room for text in a row (plan._slot_of)


@dataclass
class Pool:
    path: Path
    shard: np.ndarray
    docs: pa.Table  # STREAM_INDEX_SCHEMA, all shards in order

    @classmethod
    def load(cls, path: str | Path, indexes: list[int] | None = None) -> "Pool":
        """The doc index of a tokenized dataset's shards (all of them, or those `indexes` name)."""
        ds = TokenDataset(path)
        tables, shards = [], []
        for index in ds.shard_indexes() if indexes is None else indexes:
            table = conform(ds.docs(index), STREAM_INDEX_SCHEMA)
            tables.append(table)
            shards.append(np.full(table.num_rows, index, np.int32))
        docs = pa.concat_tables(tables) if tables else STREAM_INDEX_SCHEMA.empty_table()
        return cls.of(ds.path, np.concatenate(shards) if shards else np.zeros(0, np.int32), docs)

    @classmethod
    def of(cls, path: str | Path, shard: np.ndarray, docs: pa.Table) -> "Pool":
        pool = cls(path, shard, docs)
        pool._cache()
        return pool

    def _cache(self) -> None:
        col = lambda name: self.docs.column(name).to_numpy(zero_copy_only=False)  # noqa: E731
        self.start = col("start")
        self.length = col("length")
        self.prefix = col("prefix_length")
        self.text_tokens = self.length - self.prefix
        self.bytes = col("bytes")
        self.fim_start = col("fim_start")
        self.fim_length = col("fim_length")
        self.has_roles = self.docs.column("role_names").is_valid().to_numpy(zero_copy_only=False)

    def __len__(self) -> int:
        return self.docs.num_rows

    def column(self, name: str) -> pa.ChunkedArray:
        return self.docs.column(name)

    def packed_length(self, meta: bool) -> np.ndarray:
        """Tokens a document takes in a row before cropping: BOS, prefix (if on), text, EOS."""
        return self.text_tokens + 2 + (self.prefix if meta else 0)

    def weights(self) -> np.ndarray:
        """cluster_weight where present, 1 elsewhere."""
        w = pc.fill_null(self.column("cluster_weight"), 1.0).to_numpy(zero_copy_only=False)
        return np.clip(w, 0.0, None)

    def has_column_values(self, name: str) -> bool:
        return self.column(name).null_count < len(self)


def reasons(pool: Pool, source, stage, entry) -> np.ndarray:
    """Per document: None if the slot's rules admit it, else the first reason they do not.

    `source` is the mixture's SourceSpec (which rows belong to it), `stage` the StageSpec whose rules
    apply (for replay, the stage replayed), `entry` that stage's MixEntry for the source."""
    n = len(pool)
    out = np.full(n, None, object)

    def mark(bad: np.ndarray, reason: str) -> None:
        out[bad & (out == None)] = reason  # noqa: E711 (elementwise)

    ctypes = pool.column("content_type")
    if source.content_types is not None:
        mark(~_isin(ctypes, source.content_types), NOT_IN_SOURCE)
    if source.sources is not None:
        mark(~_isin(pool.column("source"), source.sources), NOT_IN_SOURCE)
    tiers = pool.column("tier")
    for ct, kept in stage.tiers.items():
        # a document without a tier (never scored) is kept: the rule narrows scored data only
        scored = pc.and_(pc.equal(ctypes, ct), tiers.is_valid())
        outside = pc.and_(scored, pc.invert(pc.is_in(tiers, pa.array(kept, pa.string()))))
        mark(pc.fill_null(outside, False).to_numpy(zero_copy_only=False), TIER_EXCLUDED)
    if stage.code_max_hits is not None:
        hits = pc.fill_null(pc.greater(pool.column("code_hits"), stage.code_max_hits), False)
        mark(hits.to_numpy(zero_copy_only=False), CODE_HITS)
    min_tokens = entry.min_tokens if entry.min_tokens is not None else stage.min_tokens
    max_tokens = entry.max_tokens if entry.max_tokens is not None else stage.max_tokens
    mark(pool.text_tokens < min_tokens, TOO_SHORT)
    if max_tokens is not None:
        mark(pool.text_tokens > max_tokens, TOO_LONG)
    return out


def _isin(values: pa.ChunkedArray, allowed: list[str]) -> np.ndarray:
    return pc.fill_null(pc.is_in(values, pa.array(allowed, pa.string())), False).to_numpy(zero_copy_only=False)
