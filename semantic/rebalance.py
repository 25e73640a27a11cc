"""`semantic.rebalance`: per-document sampling weights that down-sample clusters with disproportionate
mass (Step 3.5's cooldown rebalancing), written as `cluster_weight` for the mixer.

Fit counts every cluster's documents and mass exactly (text bytes, or documents) on every shard;
reduce turns the masses into one weight per cluster; apply writes the weight of each document's
cluster. Weights are in (0, 1]: a cluster keeps weight 1 unless it is too heavy, so every cluster
stays represented. Two shapes (the reports do not say which Step 3.5 used):

* `cap`: no cluster may hold more than `max_share` of the mass after rebalancing (or, with
  `quantile`, more than that quantile of the cluster masses): weight = min(1, T / mass), with the
  largest such T found by bisection (a cluster's share after capping, T / sum(min(mass, T)), grows
  with T). A cap below 1/k cannot be met; then every cluster is capped at the smallest mass.
* `power`: weight proportional to mass^-alpha, scaled so the lightest cluster keeps weight 1.

With `drop: true` the stage also samples: a document stays when the hash of its id falls below its
weight, and each cluster's document with the smallest hash always stays.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from assay.pipeline.stage import FitApplyStage, Params, register, set_column, with_rejects

_NO_HASH = np.iinfo(np.uint64).max


class RebalanceParams(Params):
    method: Literal["cap", "power"] = Field("cap", description="cap a cluster's share, or weight by mass^-alpha")
    max_share: float | None = Field(0.05, gt=0, le=1, description="cap: largest share of the mass a cluster keeps")
    quantile: float | None = Field(None, gt=0, le=1, description="cap: cap at this quantile of cluster masses instead")
    alpha: float = Field(0.5, ge=0, description="power: the exponent")
    mass: Literal["bytes", "documents"] = Field("bytes", description="What a cluster's mass counts")
    drop: bool = Field(False, description="Also reject the documents the weights sample out")

    @model_validator(mode="after")
    def _target(self) -> "RebalanceParams":
        if self.method == "cap" and self.max_share is None and self.quantile is None:
            raise ValueError("method cap needs max_share or quantile")
        return self


def cap_threshold(mass: np.ndarray, share: float) -> tuple[float, bool]:
    """The largest T with T / sum(min(mass, T)) <= share, and whether the cap is reachable."""
    mass = mass[mass > 0]
    if mass.max() / mass.sum() <= share:
        return float(mass.max()), True
    if share * len(mass) < 1:
        return float(mass.min()), False
    lo, hi = float(mass.min()), float(mass.max())
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid / np.minimum(mass, mid).sum() <= share:
            lo = mid
        else:
            hi = mid
    return lo, True


def weights_for(mass: np.ndarray, params: RebalanceParams) -> tuple[np.ndarray, dict]:
    """One weight per cluster (empty clusters get 1) and what was done."""
    weights = np.ones(len(mass))
    live = mass > 0
    if not live.any():
        return weights, {"threshold": None, "reachable": True}
    if params.method == "power":
        weights[live] = (mass[live] / mass[live].min()) ** -params.alpha
        return weights, {"threshold": None, "reachable": True}
    if params.quantile is not None:
        threshold, reachable = float(np.quantile(mass[live], params.quantile)), True
    else:
        threshold, reachable = cap_threshold(mass, params.max_share)
    weights[live] = np.minimum(1.0, threshold / mass[live])
    return weights, {"threshold": threshold, "reachable": reachable}


@register("semantic.rebalance")
class Rebalance(FitApplyStage):
    """Weight documents so heavy clusters are down-sampled (`cluster_weight`, read by the mixer).

    Example: assay rebalance runs/x/clustered runs/x/rebalanced --max-share 0.05
    """

    Params = RebalanceParams
    columns = {"cluster_weight": pa.float32()}

    def _parts(self, table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from assay.pipeline.errors import UserError

        if "cluster" not in table.column_names:
            raise UserError(f"stage {self.stage_id!r}: its input has no `cluster` column; run semantic.cluster first")
        cluster = pc.fill_null(table.column("cluster"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        if self.params.mass == "bytes":
            mass = pc.binary_length(pc.fill_null(table.column("text"), "")).to_numpy(zero_copy_only=False)
        else:
            mass = np.ones(table.num_rows)
        from assay.dedup.hashing import hash_strings

        return cluster, mass.astype(np.float64), hash_strings(table.column("id").combine_chunks())

    def fit(self, table: pa.Table, state: dict | None) -> dict:
        cluster, mass, hashes = self._parts(table)
        ok = cluster >= 0
        k = int(cluster.max()) + 1 if ok.any() else 0
        part = {"docs": np.bincount(cluster[ok], minlength=k).astype(np.int64),
                "mass": np.bincount(cluster[ok], weights=mass[ok], minlength=k),
                "anchor": np.full(k, _NO_HASH, np.uint64)}
        np.minimum.at(part["anchor"], cluster[ok], hashes[ok])
        return _merge(state, part) if state else part

    def combine(self, states: list[dict | None]) -> dict | None:
        total = None
        for s in states:
            if s:
                total = _merge(total, s) if total else s
        return total

    def reduce(self, states: list[dict | None]) -> dict:
        total = self.combine(states)
        if total is None:
            total = {"docs": np.zeros(0, np.int64), "mass": np.zeros(0), "anchor": np.zeros(0, np.uint64)}
        weights, how = weights_for(total["mass"], self.params)
        return dict(total, weights=weights, how=how)

    def save_artifact(self, out_root: Path, artifact: dict) -> None:
        from assay.pipeline.dataset import write_artifact

        buf = io.BytesIO()
        np.savez(buf, docs=artifact["docs"], mass=artifact["mass"], anchor=artifact["anchor"], weights=artifact["weights"])
        write_artifact(out_root, "rebalance.npz", buf.getvalue())
        write_artifact(out_root, "fit.json", json.dumps(summary(artifact, self.params), indent=2))

    def load_artifact(self, out_root: Path) -> dict:
        import io

        from assay.pipeline.dataset import read_artifact

        data = np.load(io.BytesIO(read_artifact(out_root, "rebalance.npz")))
        return {name: data[name] for name in data.files}

    def apply(self, table: pa.Table, artifact: dict) -> pa.Table:
        cluster, _, hashes = self._parts(table)
        weights, anchors = artifact["weights"], artifact["anchor"]
        known = (cluster >= 0) & (cluster < len(weights))  # unclustered rows get no weight (null)
        slot = np.where(known, cluster, 0)
        w = weights[slot] if len(weights) else np.ones(len(cluster))
        table = set_column(table, "cluster_weight", pa.array(w.astype(np.float32), mask=~known))
        if not self.params.drop:
            return table
        anchor = anchors[slot] == hashes if len(anchors) else np.zeros(len(cluster), bool)
        keep = ~known | (hashes.astype(np.float64) / 2.0 ** 64 < w) | (known & anchor)
        self.stats.count("sampled_out", int((~keep).sum()))
        return with_rejects(table, [None if k else "rebalanced" for k in keep])


def _merge(a: dict, b: dict) -> dict:
    k = max(len(a["docs"]), len(b["docs"]))

    def pad(x, fill):
        return np.concatenate([x, np.full(k - len(x), fill, x.dtype)])

    return {"docs": pad(a["docs"], 0) + pad(b["docs"], 0), "mass": pad(a["mass"], 0) + pad(b["mass"], 0),
            "anchor": np.minimum(pad(a["anchor"], _NO_HASH), pad(b["anchor"], _NO_HASH))}


def summary(artifact: dict, params: RebalanceParams, points: int = 200) -> dict:
    """Totals, the largest share before and after, and the sorted cluster-share curves (at most
    `points` points each) for the report's before/after plot."""
    mass, weights = artifact["mass"], artifact["weights"]
    after = mass * weights
    before_share = np.sort(mass / max(mass.sum(), 1e-12))[::-1]
    after_share = np.sort(after / max(after.sum(), 1e-12))[::-1]
    pick = np.unique(np.linspace(0, max(len(mass) - 1, 0), min(points, len(mass))).astype(int)) if len(mass) else []
    return {
        "clusters": int(len(mass)), "nonempty": int((mass > 0).sum()), "documents": int(artifact["docs"].sum()),
        "mass": params.mass, "method": params.method, **artifact["how"],
        "mass_before": float(mass.sum()), "mass_after": float(after.sum()),
        "largest_share_before": float(before_share[0]) if len(mass) else 0.0,
        "largest_share_after": float(after_share[0]) if len(mass) else 0.0,
        "min_weight": float(weights[mass > 0].min()) if (mass > 0).any() else 1.0,
        "downsampled_clusters": int(((weights < 1) & (mass > 0)).sum()),
        "curve": {"rank": [int(i) for i in pick], "before": [float(before_share[i]) for i in pick],
                  "after": [float(after_share[i]) for i in pick]},
    }
