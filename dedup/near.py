"""`dedup.minhash`: near-duplicate detection with MinHash-LSH.

Word n-gram shingles (character n-grams for scripts without spaces, or their words with `segment`) over normalised text, 64-bit
shingle hashes, `num_perm` permutations, `bands` x `rows` banding; documents sharing a band key are
candidates, verified by exact Jaccard (`verify_threshold`, on by default), then joined into
connected components.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa
from pydantic import Field, model_validator

from assay.pipeline.stage import register

from .base import DedupParams, DedupStage
from .minhash import MinHasher
from .verify import pairs_jaccard

VERIFY_THRESHOLD = 0.6  # below the 14x8 knee (~0.72, P=0.21 at 0.6): removes the tail, keeps the curve


class MinHashParams(DedupParams):
    ngram: int = Field(5, ge=1, description="Shingle size in tokens (words; characters for CJK/Thai/...).")
    num_perm: int = Field(112, ge=1, description="Signature length: one-permutation-hashing bins (permutations in classic MinHash).")
    bands: int = Field(14, ge=1, description="LSH bands; bands x rows must not exceed num_perm.")
    rows: int = Field(
        8, ge=1,
        description="Rows per band. P(pair with Jaccard s is a candidate) = 1-(1-s^rows)^bands; "
        "threshold ~(1/bands)^(1/rows). 14x8: J=0.6 0.21, 0.7 0.57, 0.75 0.77, 0.8 0.92, 0.85 0.99, 0.9 1.00.",
    )
    seed: int = Field(1, description="Seed of the permutations: same seed, same signatures, every engine.")
    segment: bool = Field(
        False,
        description="Shingle words, not characters, of Chinese, Japanese and Thai: their text is cut into "
        "words by dictionary segmenters (filters/words.py: jieba, MeCab/UniDic, PyThaiNLP) before shingling, "
        "so `ngram` counts words in every script. Changes the groups (and the stage's identity).",
    )
    verify_threshold: float | None = Field(
        VERIFY_THRESHOLD, ge=0.0, le=1.0,
        description="Keep only candidate pairs whose exact shingle Jaccard is at least this (null, or 0 "
        "on the command line: keep every candidate). The default removes what LSH lets through below its threshold: 14x8 makes "
        "a candidate of 5% of the pairs with J 0.5 and 21% at 0.6, each one joining two documents that "
        "are not near-duplicates (and chains of them, whole groups). Costs shingling the candidate "
        "documents again, about a tenth of the stage's CPU time.",
    )

    @model_validator(mode="after")
    def _fits(self):
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")
        return self


@register("dedup.minhash")
class MinHashDedup(DedupStage):
    """MinHash-LSH near-duplicate groups; every row gets dup_group and dup_keep.

    Threshold curve, P(candidate) = 1-(1-s^r)^b for Jaccard s (defaults 14 bands x 8 rows, FineWeb's):
      J:       0.50   0.60   0.70   0.75   0.80   0.85   0.90
      14x8:    0.053  0.211  0.565  0.772  0.924  0.988  1.000   (threshold ~0.72)
      20x5:    0.470  0.802  0.975  0.996  1.000  1.000  1.000   (threshold ~0.55)
      9x12:    0.002  0.019  0.118  0.252  0.473  0.749  0.950   (threshold ~0.83)
    Pairs in the same group by transitivity count too, so group-level recall is above the curve.

    Candidate pairs are checked by their exact shingle Jaccard (default >= 0.6) before they join a group.

    Example: `assay dedup minhash docs/ out/ --bands 14 --rows 8 --verify-threshold 0.7`
    """

    Params = MinHashParams
    reason: ClassVar[str] = "near-duplicate"
    version = "3"  # 2: one-permutation hashing signatures; 3: verification on by default

    @property
    def hasher(self) -> MinHasher:
        p = self.params
        return MinHasher(num_perm=p.num_perm, bands=p.bands, rows=p.rows, seed=p.seed)

    @property
    def n_bands(self) -> int:
        return self.params.bands

    def batch_keys(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        hasher = self.hasher
        sig, counts = hasher.text_signatures(table.column("text"), self.params.ngram, self.params.segment)
        return hasher.band_keys(sig), counts > 0

    @property
    def verifies(self) -> bool:
        return self.params.verify_threshold is not None

    def verify_pairs(self, texts: pa.Array, ia: np.ndarray, ib: np.ndarray) -> np.ndarray | None:
        if self.params.verify_threshold is None:
            return None
        return pairs_jaccard(texts, ia, ib, self.params.ngram, self.params.segment) >= self.params.verify_threshold
