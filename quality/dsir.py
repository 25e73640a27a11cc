"""Importance towards a stated target distribution (DSIR, Xie et al. 2023; Moore-Lewis's
cross-entropy difference with bag models).

Two hashed n-gram bag models (words and word bigrams in 2**BITS buckets, add-one smoothed): one of the
target corpus, one of the raw pool. A document's score is the log-likelihood ratio per token,
mean log p_target(g) - log p_raw(g) over its n-grams: how much more it looks like the target than like
the pool. Only the ratio per bucket is stored. Words are lm.py's tokens (the fastText tokens with
punctuation kept), so both scorers read text the same way.

The shipped `dsir.npz` targets quality/data/reference.jsonl.gz (documentation and explanations, see
reference.py) against the raw web pool of quality/data/contrast-train (main text and full pages):
never an evaluation item.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from assay.filters import textops as T

BITS = 18


def _grams(text: pa.Array) -> tuple[np.ndarray, np.ndarray, int]:
    """(bucket per n-gram, document per n-gram, docs): every word, and every pair of adjacent words of
    the same document."""
    from .lm import _word_hashes

    h, doc, n = _word_hashes(text)
    shift = np.uint64(64 - BITS)
    uni = (h >> shift).astype(np.int64)
    same = doc[1:] == doc[:-1]
    pair = ((h[:-1] * np.uint64(0x9E3779B97F4A7C15)) ^ (h[1:] + np.uint64(0x632BE59BD9B4E019)))[same]
    return np.concatenate([uni, (pair >> shift).astype(np.int64)]), np.concatenate([doc, doc[1:][same]]), n


def _log_probs(texts: Sequence[str]) -> np.ndarray:
    grams, _, _ = _grams(pa.array(list(texts), pa.string()))
    counts = np.bincount(grams, minlength=1 << BITS).astype(np.float64) + 1.0  # add-one: no bucket is impossible
    return np.log(counts / counts.sum())


class Importance:
    def __init__(self, ratio: np.ndarray, center: float = 0.0, scale: float = 1.0, target: str = ""):
        self.ratio, self.center, self.scale, self.target = ratio, center, scale, target

    @classmethod
    def train(cls, target: Sequence[str], raw: Sequence[str], name: str = "") -> "Importance":
        """Bag models of `target` and `raw`; the squash is centred between the two corpora's median
        scores on held-out halves (in-sample ratios are inflated) and scaled by their spread."""
        target, raw = list(target), list(raw)
        held_t, held_r = [], []
        for i in (0, 1):
            part = cls(_log_probs(target[i::2]) - _log_probs(raw[i::2]))
            held_t.append(part.llr(pa.array(target[1 - i::2], pa.string())))
            held_r.append(part.llr(pa.array(raw[1 - i::2], pa.string())))
        t, r = np.concatenate(held_t), np.concatenate(held_r)
        center = float((np.median(t) + np.median(r)) / 2)
        scale = float(max(np.std(np.concatenate([t, r])), 1e-3))
        return cls((_log_probs(target) - _log_probs(raw)).astype(np.float32), center, scale, name)

    def llr(self, text: pa.Array) -> np.ndarray:
        """Mean log-likelihood ratio (nats) per n-gram of each document; 0 for one without words."""
        grams, doc, n = _grams(text)
        total = np.bincount(doc, weights=self.ratio[grams].astype(np.float64), minlength=n)
        return T.ratio(total, np.bincount(doc, minlength=n).astype(np.float64), empty=0.0)

    def score(self, text: pa.Array) -> np.ndarray:
        """In [0, 1]: a logistic of the ratio; 0.5 is half-way between typical target and pool text."""
        z = (self.llr(text) - self.center) / self.scale
        return 1 / (1 + np.exp(-np.clip(z, -30, 30)))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        # float16 keeps ratios to 3 digits, plenty for a ranking, at half the file
        np.savez_compressed(tmp, ratio=self.ratio.astype(np.float16), center=self.center, scale=self.scale,
                            bits=BITS, target=self.target)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> "Importance":
        with np.load(path) as z:
            if int(z["bits"]) != BITS:
                raise ValueError(f"{path}: built for {int(z['bits'])}-bit buckets, this code hashes into {BITS}")
            return cls(z["ratio"].astype(np.float32), float(z["center"]), float(z["scale"]), str(z["target"]))
