"""Mergeable statistics a stage records per shard; the runner merges them into the manifest.

Every kind merges exactly, so the merge over shards equals one pass over the whole dataset:
counters and sums add; fixed-bin histograms add bin by bin; the quantile sketch is a log-bucketed
sketch with relative accuracy `alpha` (DDSketch's idea: bucket i holds values in (g^(i-1), g^i]
with g = (1+alpha)/(1-alpha)), whose bucket counts add; samples (a few examples for a report, plain
JSON items) keep the first `limit` in shard order, as one pass would. Report sections and calibration read these
from manifests instead of re-reading the corpus.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

SKETCH_ALPHA = 0.01


class Stats:
    """One shard's statistics. Stages call `count`, `add`, `histogram` and `sketch`; the writer stores
    `to_json()` in the shard marker."""

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}
        self.histograms: dict[str, dict[str, Any]] = {}
        self.sketches: dict[str, dict[str, Any]] = {}
        self.samples: dict[str, dict[str, Any]] = {}

    def count(self, name: str, n: float = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    add = count  # sums are counters of a quantity

    def histogram(self, name: str, values: Iterable[float] | np.ndarray, edges: Iterable[float],
                  weights: Iterable[int] | np.ndarray | None = None) -> None:
        """Fixed-bin histogram; `edges` must be the same on every shard (they are part of the key).
        `weights` (integers, e.g. tokens per document) count each value that many times."""
        edges = [float(e) for e in edges]
        w = _int_weights(weights)
        counts, _ = np.histogram(np.asarray(values, dtype=np.float64), bins=edges, weights=w)
        slot = self.histograms.setdefault(name, {"edges": edges, "counts": [0] * (len(edges) - 1)})
        if slot["edges"] != edges:
            raise ValueError(f"histogram {name!r}: edges differ from earlier batches")
        slot["counts"] = [a + int(b) for a, b in zip(slot["counts"], counts)]

    def sketch(self, name: str, values: Iterable[float] | np.ndarray,
               weights: Iterable[int] | np.ndarray | None = None) -> None:
        """Quantile sketch of `values`; with integer `weights` (tokens per document, say) the
        quantiles are weighted ones: Nemotron-CC-style token-weighted percentiles."""
        values = np.asarray(values, dtype=np.float64)
        w = _int_weights(weights)
        keep = np.isfinite(values)
        if w is not None:
            if w.shape != values.shape:
                raise ValueError(f"sketch {name!r}: {w.size} weights for {values.size} values")
            w = w[keep]
        slot = self.sketches.setdefault(name, _empty_sketch())
        _sketch_add(slot, values[keep], w)

    def sample(self, name: str, item: dict[str, Any], limit: int) -> None:
        """Keep `item` (JSON data) as an example under `name` while fewer than `limit` are kept."""
        slot = self.samples.setdefault(name, {"limit": int(limit), "items": []})
        if len(slot["items"]) < slot["limit"]:
            slot["items"].append(item)

    def wants_sample(self, name: str, limit: int) -> bool:
        slot = self.samples.get(name)
        return slot is None or len(slot["items"]) < min(slot["limit"], limit)

    def to_json(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.counters:
            out["counters"] = dict(sorted(self.counters.items()))
        if self.histograms:
            out["histograms"] = dict(sorted(self.histograms.items()))
        if self.sketches:
            out["sketches"] = dict(sorted(self.sketches.items()))
        if self.samples:
            out["samples"] = dict(sorted(self.samples.items()))
        return out or None


def _empty_sketch() -> dict[str, Any]:
    return {"alpha": SKETCH_ALPHA, "n": 0, "zeros": 0, "pos": {}, "neg": {}, "min": None, "max": None}


def _gamma(alpha: float) -> float:
    return (1 + alpha) / (1 - alpha)


def _int_weights(weights) -> np.ndarray | None:
    """Weights as int64: integer weights keep every merge exact (float sums depend on their order)."""
    if weights is None:
        return None
    w = np.asarray(weights)
    if w.size and (not np.issubdtype(w.dtype, np.integer) and not np.all(np.mod(w, 1) == 0) or np.any(w < 0)):
        raise ValueError("weights must be non-negative integers (e.g. token counts)")
    return w.astype(np.int64)


def _sketch_add(slot: dict[str, Any], values: np.ndarray, weights: np.ndarray | None = None) -> None:
    if not values.size:
        return
    if weights is None:
        weights = np.ones(values.size, dtype=np.int64)
    log_g = math.log(_gamma(slot["alpha"]))
    for sign, mask in (("pos", values > 0), ("neg", values < 0)):
        if mask.any():
            keys, inverse = np.unique(np.ceil(np.log(np.abs(values[mask])) / log_g).astype(np.int64), return_inverse=True)
            counts = np.bincount(inverse, weights=weights[mask], minlength=keys.size).astype(np.int64)
            store = slot[sign]
            for k, c in zip(keys.tolist(), counts.tolist()):
                if c:
                    store[str(k)] = store.get(str(k), 0) + c
    slot["zeros"] += int(weights[values == 0].sum())
    slot["n"] += int(weights.sum())
    lo, hi = float(values.min()), float(values.max())
    slot["min"] = lo if slot["min"] is None else min(slot["min"], lo)
    slot["max"] = hi if slot["max"] is None else max(slot["max"], hi)


def _merge_sketch(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {"alpha": a["alpha"], "n": a["n"] + b["n"], "zeros": a["zeros"] + b["zeros"], "pos": dict(a["pos"]),
           "neg": dict(a["neg"]), "min": _opt(min, a["min"], b["min"]), "max": _opt(max, a["max"], b["max"])}
    for sign in ("pos", "neg"):
        for k, c in b[sign].items():
            out[sign][k] = out[sign].get(k, 0) + c
    return out


def _opt(fn, x, y):
    return y if x is None else x if y is None else fn(x, y)


def quantile(sketch: dict[str, Any], q: float) -> float | None:
    """The q-quantile (0..1) of a sketch, within relative error alpha of the true value."""
    n = sketch["n"]
    if not n:
        return None
    g = _gamma(sketch["alpha"])
    rank = q * (n - 1)
    # Walk buckets in value order: most negative first, zeros, then positives.
    ordered = [(-(2 * g ** int(k)) / (1 + g), c) for k, c in sorted(sketch["neg"].items(), key=lambda kv: -int(kv[0]))]
    ordered.append((0.0, sketch["zeros"]))
    ordered += [((2 * g ** int(k)) / (1 + g), c) for k, c in sorted(sketch["pos"].items(), key=lambda kv: int(kv[0]))]
    seen = 0
    for value, c in ordered:
        seen += c
        if seen > rank:
            return min(max(value, sketch["min"]), sketch["max"])
    return sketch["max"]


def merge_stats(parts: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Merge shard statistics (in shard order) into one dict of the same shape."""
    out: dict[str, Any] = {}
    for part in parts:
        if not part:
            continue
        for name, value in part.get("counters", {}).items():
            counters = out.setdefault("counters", {})
            counters[name] = counters.get(name, 0) + value
        for name, hist in part.get("histograms", {}).items():
            hists = out.setdefault("histograms", {})
            if name not in hists:
                hists[name] = {"edges": hist["edges"], "counts": list(hist["counts"])}
            elif hists[name]["edges"] != hist["edges"]:
                raise ValueError(f"histogram {name!r}: shards used different edges")
            else:
                hists[name]["counts"] = [a + b for a, b in zip(hists[name]["counts"], hist["counts"])]
        for name, sketch in part.get("sketches", {}).items():
            sketches = out.setdefault("sketches", {})
            sketches[name] = _merge_sketch(sketches[name], sketch) if name in sketches else sketch
        for name, slot in part.get("samples", {}).items():
            kept = out.setdefault("samples", {}).setdefault(name, {"limit": slot["limit"], "items": []})
            kept["items"] = kept["items"] + slot["items"][: max(0, kept["limit"] - len(kept["items"]))]
    for group in out.values():  # canonical order: equal statistics give equal manifests
        for name in list(group):
            group[name] = group.pop(name)
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())} or None
