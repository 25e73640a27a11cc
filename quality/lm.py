"""A small reference language model for CCNet-style perplexity scores, without a deep-learning stack.

A hashed word-bigram model with absolute discounting (interpolated with a smoothed unigram), trained
on clean prose. A document's score is how much the bigram model lowers its perplexity against the
unigram model (mean log2 p_bigram - log2 p_unigram per word): text whose word order reads like the
reference scores high, shuffled words, keyword lists and menus score low, and rare vocabulary alone
costs nothing (a plain perplexity mostly measures vocabulary).
Counting and scoring are NumPy over the batch's word codes; the model is a few sparse count arrays.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from assay.filters import textops as T
from assay.pipeline.dataset import atomic_path

UNI_BITS = 18
BI_BITS = 22
DISCOUNT = 0.75
MAX_CHARS = 20_000


def _word_hashes(text: pa.Array) -> tuple[np.ndarray, np.ndarray, int]:
    """(hash per word, document per word, docs): the fastText scorer's tokens with punctuation kept
    (lower-cased, symbols split off), without `_nl_`."""
    from assay.filters.kernels import fasttext_tokens

    lists = pc.utf8_split_whitespace(fasttext_tokens(text, MAX_CHARS, lean=False))
    values = pc.list_flatten(lists)
    keep = pc.and_(pc.not_equal(values, "_nl_"), pc.greater(pc.binary_length(values), 0))  # "" splits into [""]
    w = T.Pieces(values.filter(keep), np.asarray(pc.list_parent_indices(lists))[np.asarray(keep)].astype(np.int64), len(text))
    codes, dictionary = w.codes()
    hashes = np.fromiter((xxhash.xxh3_64_intdigest(s.encode()) for s in dictionary.to_pylist()), dtype=np.uint64, count=len(dictionary))
    return hashes[codes], w.doc, w.n_docs


def _bigram_keys(h: np.ndarray, doc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unigram bucket of each word, and (previous-word bucket, bigram bucket) for words whose previous
    word is in the same document."""
    uni = (h >> np.uint64(64 - UNI_BITS)).astype(np.int64)
    same = np.concatenate(([False], doc[1:] == doc[:-1]))
    prev = np.concatenate(([0], uni[:-1]))
    mixed = (h[:-1] * np.uint64(0x9E3779B97F4A7C15)) ^ h[1:]
    bi = np.concatenate(([0], (mixed >> np.uint64(64 - BI_BITS)).astype(np.int64)))
    return uni, np.where(same, prev, -1), np.where(same, bi, -1)


class NgramLM:
    def __init__(self, uni: np.ndarray, bi: np.ndarray, ctx: np.ndarray, follow: np.ndarray, center: float, scale: float):
        self.uni, self.bi, self.ctx, self.follow = uni, bi, ctx, follow
        self.total = float(uni.sum())
        self.center, self.scale = center, scale

    @classmethod
    def train(cls, texts: Sequence[str]) -> "NgramLM":
        h, doc, _ = _word_hashes(pa.array(list(texts), pa.string()))
        uni_k, prev_k, bi_k = _bigram_keys(h, doc)
        uni = np.bincount(uni_k, minlength=1 << UNI_BITS).astype(np.float64)
        has = bi_k >= 0
        bi = np.bincount(bi_k[has], minlength=1 << BI_BITS).astype(np.float64)
        ctx = np.bincount(prev_k[has], minlength=1 << UNI_BITS).astype(np.float64)
        pairs = np.unique(prev_k[has] * (1 << BI_BITS) + bi_k[has])
        follow = np.bincount(pairs // (1 << BI_BITS), minlength=1 << UNI_BITS).astype(np.float64)
        return cls(uni, bi, ctx, follow, 0.0, 1.0)

    @classmethod
    def train_calibrated(cls, texts: Sequence[str]) -> "NgramLM":
        """Train on all texts; centre and scale the score on held-out halves (in-sample gains are inflated)."""
        texts = list(texts)
        halves = (texts[0::2], texts[1::2])
        held = np.concatenate([cls.train(halves[i]).order_gain(pa.array(halves[1 - i], pa.string())) for i in (0, 1)])
        lm = cls.train(texts)
        lm.center, lm.scale = float(np.median(held)), float(max(np.std(held), 1e-3))
        return lm

    def order_gain(self, text: pa.Array) -> np.ndarray:
        h, doc, n = _word_hashes(text)
        uni_k, prev_k, bi_k = _bigram_keys(h, doc)
        p_uni = (self.uni[uni_k] + 0.5) / (self.total + 0.5 * (1 << UNI_BITS))
        has = bi_k >= 0
        ctx = np.where(has, self.ctx[np.maximum(prev_k, 0)], 0.0)
        big = np.where(has, self.bi[np.maximum(bi_k, 0)], 0.0)
        follow = np.where(has, self.follow[np.maximum(prev_k, 0)], 0.0)
        seen = ctx > 0
        safe = np.where(seen, ctx, 1.0)
        p = np.where(seen, np.maximum(big - DISCOUNT, 0) / safe + DISCOUNT * follow / safe * p_uni, p_uni)
        gain = np.log2(p) - np.log2(p_uni)
        total = np.bincount(doc, weights=np.where(has, gain, 0.0), minlength=n)
        count = np.bincount(doc, weights=has.astype(np.float64), minlength=n)
        return T.ratio(total, count, empty=0.0)

    def score(self, text: pa.Array) -> np.ndarray:
        """In [0, 1]: a logistic of the order gain, centred on held-out clean documents (0.5 = typical)."""
        z = (self.order_gain(text) - self.center) / self.scale
        return 1 / (1 + np.exp(-np.clip(z, -30, 30)))

    def save(self, path: Path) -> None:
        arrays = {}
        for name in ("uni", "bi", "ctx", "follow"):
            values = getattr(self, name)
            idx = np.flatnonzero(values)
            arrays[f"{name}_idx"] = idx.astype(np.int32)
            arrays[f"{name}_val"] = values[idx].astype(np.uint32)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(fh, center=self.center, scale=self.scale, uni_bits=UNI_BITS, bi_bits=BI_BITS, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> "NgramLM":
        with np.load(path) as z:
            if int(z["uni_bits"]) != UNI_BITS or int(z["bi_bits"]) != BI_BITS:
                raise ValueError(f"{path}: built for other hash sizes")
            dense = {}
            for name, bits in (("uni", UNI_BITS), ("bi", BI_BITS), ("ctx", UNI_BITS), ("follow", UNI_BITS)):
                values = np.zeros(1 << bits, dtype=np.float64)
                values[z[f"{name}_idx"]] = z[f"{name}_val"]
                dense[name] = values
            return cls(dense["uni"], dense["bi"], dense["ctx"], dense["follow"], float(z["center"]), float(z["scale"]))
