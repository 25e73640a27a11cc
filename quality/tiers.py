"""Calibration, ensemble and the five tiers (Nemotron-CC's bucketing, Step 3.5's tier names).

Per scorer, the calibration is the token-weighted distribution of its scores on a reference corpus
(a 4,096-bin histogram over [0, 1]: bins add across shards, so the merge is exact and every engine
gets the same artifact). A score becomes its token-weighted percentile in the reference (mid-rank
within ties) and an integer bucket 0-19. The ensemble of percentiles (max by default, as Nemotron-CC;
mean, median vote or min selectable) gives `quality_score`; its bucket and the tier cut-offs give
`tier`. Nothing is dropped.

Value scorers (`value`: quality_reference and quality_dsir in the shipped calibration) do not vote in
that ensemble: the junk detectors (web fastText, reference LM, code rules) decide which documents pass
into the top three tiers, and among those that pass the mean of the value scorers' percentiles orders
them into High, Medium-High and Medium. A bag-of-words value score cannot tell shuffled words from
prose, so it must not lift junk; a junk detector cannot tell an explanation from a news brief.

`quality.calibrate` fits on the corpus it tiers (fit-then-apply); `quality.tiers` applies a saved
calibration (the shipped one by default) to any later corpus.
"""
from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from assay.pipeline.errors import UserError
from assay.pipeline.stage import FitApplyStage, MapStage, Params, register, set_column, with_rejects

from .scorers import MODELS, approx_tokens

BINS = 4096
JOINT = "_joint"  # a deterministic sample of documents with all their scores, for the ensemble's own percentiles
JOINT_ROWS = 200_000
BUCKETS = 20
TIERS = ("High", "Medium-High", "Medium", "Medium-Low", "Low")
DEFAULT_CUTOFFS = {"High": 17, "Medium-High": 14, "Medium": 10, "Medium-Low": 6}
SHIPPED_CALIBRATION = MODELS / "calibration.json"
Ensemble = Literal["max", "mean", "vote", "min"]


class TierOptions(Params):
    scorers: list[str] = Field(default_factory=list, description="quality_<name> columns to combine, by name (empty = all calibrated ones present)")
    ensemble: Ensemble | None = Field(None, description="How scorer percentiles combine: max, mean, vote (median) or min (default: the calibration's)")
    cutoffs: dict[str, int] | None = Field(None, description="Lowest bucket (0-19) of High, Medium-High, Medium, Medium-Low (default: the calibration's)")
    value: list[str] | None = Field(None, description="Value scorers: they order the documents that pass into the top three "
                                    "tiers instead of voting in the ensemble (default: the calibration's; [] = none)")

    @field_validator("cutoffs")
    @classmethod
    def _cutoffs(cls, v: dict[str, int] | None) -> dict[str, int] | None:
        if v is None:
            return v
        if set(v) != set(TIERS[:-1]):
            raise ValueError(f"cutoffs need exactly {', '.join(TIERS[:-1])}")
        values = [v[t] for t in TIERS[:-1]]
        if values != sorted(values, reverse=True) or not all(0 <= x < BUCKETS for x in values):
            raise ValueError("cutoffs must fall from High to Medium-Low, each in 0-19")
        return v


def score_columns(table: pa.Table) -> list[str]:
    return sorted(c[len("quality_"):] for c in table.column_names if c.startswith("quality_") and c != "quality_score"
                  and c != "quality_bucket")


def _empty_joint() -> dict:
    return {"key": np.zeros(0, np.uint64), "w": np.zeros(0), "scores": {}, "group": np.zeros(0, dtype=object)}


def group_values(table: pa.Table, column: str | None) -> np.ndarray:
    """Each document's value of the `within` column as a string ('' when missing or null)."""
    if not column or column not in table.column_names:
        return np.full(table.num_rows, "", dtype=object)
    values = pc.cast(table.column(column), pa.string()) if table.column(column).type != pa.string() else table.column(column)
    return np.asarray(pc.fill_null(values, "").to_numpy(zero_copy_only=False), dtype=object)


def fit_histograms(table: pa.Table, scorers: list[str], state: dict | None, sample: float = 1.0,
                   weights: np.ndarray | None = None, within: str | None = None) -> dict:
    """Add the batch's token-weighted score histograms to `state` (name -> [BINS] weights) and its rows
    (scores, and their `within` group) to the joint sample."""
    state = state if state is not None else {}
    weights = approx_tokens(table) if weights is None else weights
    if sample < 1.0:
        weights = weights * (_id_fraction(table) < sample)
    joint = state.setdefault(JOINT, _empty_joint())
    key = _id_key(table)
    keep = weights > 0
    n_old = len(joint["key"])
    joint["key"] = np.concatenate([joint["key"], key[keep]])
    joint["w"] = np.concatenate([joint["w"], weights[keep]])
    joint["group"] = np.concatenate([joint.get("group", np.full(n_old, "", dtype=object)), group_values(table, within)[keep]])
    for name in scorers or score_columns(table):
        column = f"quality_{name}"
        if column not in table.column_names:
            continue
        col = table.column(column)
        valid = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        values = np.nan_to_num(col.to_numpy(zero_copy_only=False).astype(np.float64), nan=0.0)
        bins = np.clip((values * BINS).astype(np.int64), 0, BINS - 1)
        hist = np.bincount(bins[valid], weights=weights[valid], minlength=BINS)
        state[name] = state.get(name, np.zeros(BINS)) + hist
        old = joint["scores"].get(name, np.full(n_old, np.nan))
        joint["scores"][name] = np.concatenate([old, np.where(valid, values, np.nan)[keep]])
    for name, values in joint["scores"].items():  # scorers absent from this batch: NaN
        if len(values) < len(joint["key"]):
            joint["scores"][name] = np.concatenate([values, np.full(len(joint["key"]) - len(values), np.nan)])
    _trim(joint)
    return state


def _trim(joint: dict) -> None:
    """Keep the JOINT_ROWS documents with the lowest id keys: the same rows whatever the sharding."""
    if len(joint["key"]) <= JOINT_ROWS:
        return
    order = np.argsort(joint["key"], kind="stable")[:JOINT_ROWS]
    joint["key"], joint["w"] = joint["key"][order], joint["w"][order]
    joint["scores"] = {k: v[order] for k, v in joint["scores"].items()}
    joint["group"] = joint["group"][order]


def _id_key(table: pa.Table) -> np.ndarray:
    import xxhash

    ids = pc.fill_null(table.column("id"), "").to_pylist()
    return np.fromiter((xxhash.xxh3_64_intdigest(i.encode()) for i in ids), dtype=np.uint64, count=len(ids))


def _id_fraction(table: pa.Table) -> np.ndarray:
    """A stable pseudo-random number in [0, 1) per document from its id (content-derived hex)."""
    head = pc.utf8_slice_codeunits(pc.fill_null(table.column("id"), "0"), 0, 8).to_pylist()
    return np.array([int(h, 16) / 16 ** len(h) if h else 0.0 for h in head])


def merge_histograms(states: list[dict | None]) -> dict:
    """Several fit_histograms states as one: histograms added, joint samples merged (and trimmed)."""
    merged: dict[str, Any] = {JOINT: _empty_joint()}
    for state in states:
        for name, hist in (state or {}).items():
            if name == JOINT:
                _merge_joint(merged[JOINT], hist)
            else:
                merged[name] = merged.get(name, np.zeros(BINS)) + hist
    return merged


def make_calibration(states: list[dict], ensemble: str = "max", cutoffs: dict[str, int] | None = None,
                     scorers: list[str] | None = None, value: list[str] | None = None,
                     within: str | None = None) -> dict[str, Any]:
    merged = merge_histograms(states)
    joint = merged.pop(JOINT)
    out: dict[str, Any] = {"version": 1, "bins": BINS, "buckets": BUCKETS, "ensemble": ensemble,
                           "cutoffs": cutoffs or dict(DEFAULT_CUTOFFS), "scorers": {}}
    for name in sorted(merged):
        if scorers and name not in scorers:
            continue
        hist = merged[name]
        total = float(hist.sum())
        if total <= 0:
            continue
        cdf = np.cumsum(hist) / total
        below = np.concatenate(([0.0], cdf[:-1]))
        mid = (below + cdf) / 2  # mid-rank: tied scores share the middle of their mass
        edges = [float(np.searchsorted(cdf, k / BUCKETS)) / BINS for k in range(1, BUCKETS)]
        out["scorers"][name] = {"tokens": round(total, 1), "percentile": [round(float(x), 6) for x in mid],
                                "bucket_edges": edges}
    if not out["scorers"]:
        raise UserError("calibration found no quality_<name> scores; run the scorers first")
    # Second level: the ensemble's own token-weighted percentiles, so quality_score is uniform over the
    # reference whichever combination is chosen, and the tier cut-offs mean shares of it.
    out["value_scorers"] = sorted(n for n in (value or []) if n in out["scorers"])
    names = [n for n in sorted(out["scorers"]) if n not in out["value_scorers"]]
    if not names:
        raise UserError("every calibrated scorer is a value scorer; the ensemble needs at least one other")
    pct = np.full((len(joint["key"]), len(names)), np.nan)
    for j, name in enumerate(names):
        values = joint["scores"].get(name)
        if values is not None:
            ok = ~np.isnan(values)
            bins = np.clip((np.nan_to_num(values) * BINS).astype(np.int64), 0, BINS - 1)
            pct[ok, j] = np.asarray(out["scorers"][name]["percentile"])[bins[ok]]
    out["ensembles"] = {}
    for method in ("max", "mean", "vote", "min"):
        raw = combine(pct, method)
        hist = np.bincount(np.clip((raw * BINS).astype(np.int64), 0, BINS - 1), weights=joint["w"], minlength=BINS)
        cdf = np.cumsum(hist) / max(hist.sum(), 1e-12)
        mid = (np.concatenate(([0.0], cdf[:-1])) + cdf) / 2
        out["ensembles"][method] = [round(float(x), 6) for x in mid]
    out["reference_docs"] = int(len(joint["key"]))
    if within:
        out["within"] = {"column": within, "groups": _group_cdfs(out, joint)}
    return out


def _merge_joint(into: dict, part: dict) -> None:
    n_old, n_new = len(into["key"]), len(part["key"])
    into["key"] = np.concatenate([into["key"], part["key"]])
    into["w"] = np.concatenate([into["w"], part["w"]])
    into["group"] = np.concatenate([into["group"], part.get("group", np.full(n_new, "", dtype=object))])
    for name in set(into["scores"]) | set(part["scores"]):
        a = into["scores"].get(name, np.full(n_old, np.nan))
        b = part["scores"].get(name, np.full(n_new, np.nan))
        into["scores"][name] = np.concatenate([a, b])
    _trim(into)


def combine(pct: np.ndarray, method: str) -> np.ndarray:
    """Combine per-scorer percentiles [docs, scorers] (NaN = no score) into one value in [0, 1]."""
    n = pct.shape[0]
    have = ~np.isnan(pct).all(axis=1) if pct.shape[1] else np.zeros(n, dtype=bool)
    if not pct.shape[1]:
        return np.zeros(n)
    if method == "max":
        value = np.where(np.isnan(pct), -np.inf, pct).max(axis=1)
    elif method == "min":
        value = np.where(np.isnan(pct), np.inf, pct).min(axis=1)
    elif method == "mean":
        value = np.nansum(pct, axis=1) / np.maximum((~np.isnan(pct)).sum(axis=1), 1)
    else:  # vote: the median scorer (lower median), so most scorers agree at or above it
        ordered = np.sort(np.where(np.isnan(pct), np.inf, pct), axis=1)
        k = np.maximum((~np.isnan(pct)).sum(axis=1) - 1, 0) // 2
        value = ordered[np.arange(n), k]
    return np.where(have, value, 0.0)


def _percentiles(known: dict, names: list[str], column) -> np.ndarray:
    """[docs, scorers] token-weighted reference percentiles of raw scores (NaN = no score); `column(name)`
    gives a scorer's values as a float array with NaN for missing."""
    first = column(names[0]) if names else np.zeros(0)
    pct = np.full((len(first), len(names)), np.nan)
    for j, name in enumerate(names):
        values = column(name)
        valid = ~np.isnan(values)
        bins = np.clip((np.nan_to_num(values) * BINS).astype(np.int64), 0, BINS - 1)
        pct[valid, j] = np.asarray(known[name]["percentile"])[bins[valid]]
    return pct


def _scores(pct: np.ndarray, names: list[str], calibration: dict, opts: TierOptions) -> np.ndarray:
    """quality_score before any `within` calibration: the voters' ensemble through its own percentiles,
    then, above the Medium cut-off, the value scorers' order."""
    ensemble = opts.ensemble or calibration.get("ensemble", "max")
    fitted_value = set(calibration.get("value_scorers", []))
    value = set(fitted_value if opts.value is None else opts.value)
    if value - fitted_value:
        raise UserError(f"value scorer(s) {sorted(value - fitted_value)} were voters when the ensemble was fitted; "
                        "calibrate again with them as value scorers")
    voters = [j for j, n in enumerate(names) if n not in fitted_value]
    raw = combine(pct[:, voters], ensemble)
    cdf = calibration.get("ensembles", {}).get(ensemble)
    score = np.asarray(cdf)[np.clip((raw * BINS).astype(np.int64), 0, BINS - 1)] if cdf else raw
    cut = opts.cutoffs or calibration.get("cutoffs") or DEFAULT_CUTOFFS
    ordering = [j for j, n in enumerate(names) if n in value]
    if ordering:  # the documents that pass into the top three: ordered there by the value scorers
        floor = cut["Medium"] / BUCKETS
        merit = np.nan_to_num(combine(pct[:, ordering], "mean"), nan=0.0)
        score = np.where(score >= floor, np.minimum(floor + merit * (1 - floor), 1 - 1e-9), score)
    return score


def _cdf(values: np.ndarray, weights: np.ndarray) -> list[float]:
    """Token-weighted mid-rank percentile of each of BINS bins of a score in [0, 1]."""
    hist = np.bincount(np.clip((values * BINS).astype(np.int64), 0, BINS - 1), weights=weights, minlength=BINS)
    cdf = np.cumsum(hist) / max(hist.sum(), 1e-12)
    return [round(float(x), 6) for x in (np.concatenate(([0.0], cdf[:-1])) + cdf) / 2]


def _group_cdfs(calibration: dict, joint: dict) -> dict[str, list[float]]:
    """Per value of the `within` column: the percentiles of quality_score among that group's documents
    of the joint sample, so each group fills every tier in the same token share."""
    names = sorted(calibration["scorers"])
    pct = _percentiles(calibration["scorers"], names,
                       lambda n: joint["scores"].get(n, np.full(len(joint["key"]), np.nan)).astype(np.float64))
    score = _scores(pct, names, calibration, TierOptions())
    return {str(g): _cdf(score[joint["group"] == g], joint["w"][joint["group"] == g])
            for g in sorted(set(joint["group"].tolist()))}


def assign(table: pa.Table, calibration: dict, opts: TierOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(quality_score, bucket, tier index 0=High..4=Low, scorers used) per document."""
    known = calibration["scorers"]
    names = [n for n in (opts.scorers or sorted(known)) if f"quality_{n}" in table.column_names]
    missing = [n for n in names if n not in known]
    if missing:
        raise UserError(f"no calibration for scorer(s) {missing}; calibrated: {', '.join(sorted(known))}")
    if not names:
        raise UserError(f"none of the calibrated scorers ({', '.join(sorted(known))}) has a column in the input")
    if opts.scorers and set(names) != set(known):
        raise UserError("the ensemble's percentiles were fitted on all calibrated scorers; calibrate again to combine a subset")

    def column(name: str) -> np.ndarray:
        col = table.column(f"quality_{name}")
        values = col.to_numpy(zero_copy_only=False).astype(np.float64)
        return np.where(np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool), np.nan,
                        np.nan_to_num(values, nan=0.0))

    score = _scores(_percentiles(known, names, column), names, calibration, opts)
    within = calibration.get("within")
    if within:  # each group's own percentiles; a group the fit never saw keeps the pooled score
        groups = group_values(table, within["column"])
        bins = np.clip((score * BINS).astype(np.int64), 0, BINS - 1)
        for g, cdf in within["groups"].items():
            sel = groups == g
            score[sel] = np.asarray(cdf)[bins[sel]]
    bucket = np.minimum((score * BUCKETS).astype(np.int64), BUCKETS - 1)
    cut = opts.cutoffs or calibration.get("cutoffs") or DEFAULT_CUTOFFS
    tier = np.full(len(score), len(TIERS) - 1, dtype=np.int64)
    for i, name in reversed(list(enumerate(TIERS[:-1]))):
        tier[bucket >= cut[name]] = i
    return score, bucket, tier, names


TIER_COLUMNS = {"quality_score": pa.float32(), "quality_bucket": pa.int8(), "tier": pa.string()}


def write_tiers(stage: MapStage, table: pa.Table, calibration: dict, opts: TierOptions) -> pa.Table:
    score, bucket, tier, _ = assign(table, calibration, opts)
    table = set_column(table, "quality_score", pa.array(score.astype(np.float32), pa.float32()))
    table = set_column(table, "quality_bucket", pa.array(bucket.astype(np.int8), pa.int8()))
    table = set_column(table, "tier", pa.array(np.array(TIERS, dtype=object)[tier], pa.string()))
    tokens = approx_tokens(table)
    sources = (pc.fill_null(table.column("source"), "?").to_numpy(zero_copy_only=False)
               if "source" in table.column_names else np.full(table.num_rows, "?", dtype=object))
    for src in np.unique(sources):
        rows = sources == src
        for i, name in enumerate(TIERS):
            sel = rows & (tier == i)
            if sel.any():
                stage.stats.count(f"tier_docs.{src}.{name}", int(sel.sum()))
                stage.stats.count(f"tier_tokens.{src}.{name}", float(tokens[sel].sum()))
    within = calibration.get("within")
    if within:  # the mix of the within column before (all tiers) and after (each tier) tiering
        groups = group_values(table, within["column"])
        for g in np.unique(groups):
            for i, name in enumerate(TIERS):
                sel = (groups == g) & (tier == i)
                if sel.any():
                    stage.stats.count(f"mix_tokens.{within['column']}={g or '?'}.{name}", float(tokens[sel].sum()))
    stage.stats.histogram("quality_bucket", bucket, list(range(BUCKETS + 1)))
    stage.stats.histogram("quality_score", score, [i / 20 for i in range(21)])
    return table


class CalibrateParams(TierOptions):
    sample: float = Field(1.0, gt=0, le=1, description="Share of documents (by id hash) the fit reads, for large corpora")
    within: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_]*$",
                               description="A column (content_type, source, domain, topic, ...): quality.calibrate "
                               "fits the tiers within each of its values, so every one keeps its share of tokens in "
                               "each tier and tiering does not reshape the mixture (default: one calibration for all)")


@register("quality.calibrate")
class Calibrate(FitApplyStage):
    """Fit token-weighted percentiles of every quality_<name> score on this corpus (a mergeable histogram
    per shard), then assign quality_score, quality_bucket (0-19) and tier (High ... Low). The artifact
    (_artifacts/fit.json) is a calibration that `quality.tiers --calibration` applies to later corpora.

    Example: assay quality calibrate runs/x/scored runs/x/tiered --ensemble max --sample 0.1
    """

    Params = CalibrateParams
    columns = TIER_COLUMNS

    def fit(self, table: pa.Table, state: Any) -> Any:
        return fit_histograms(table, self.params.scorers, state, self.params.sample, within=self.params.within)

    def combine(self, states: list[Any]) -> Any:
        return merge_histograms(states)

    def reduce(self, states: list[Any]) -> Any:
        return make_calibration(states, self.params.ensemble or "max", self.params.cutoffs, self.params.scorers or None,
                                self.params.value, self.params.within)

    def apply(self, table: pa.Table, artifact: Any) -> pa.Table:
        return with_rejects(write_tiers(self, table, artifact, self.params), [None] * table.num_rows)


class TiersParams(TierOptions):
    calibration: str = Field("default", description="Calibration JSON (from quality.calibrate's _artifacts/fit.json); default = shipped")


def calibration_path(value: str):
    """The calibration file: a local path, a URL (s3://...; read through pipeline/storage), or the shipped one."""
    from assay.pipeline import storage

    path = storage.as_path(value)
    if path.name == "default" and not path.exists():  # path params arrive made absolute
        path = SHIPPED_CALIBRATION
    if not path.exists():
        raise UserError(f"calibration {value!r} not found")
    return path


def load_calibration(value: str) -> dict:
    return json.loads(calibration_path(value).read_text())


@register("quality.tiers")
class Tiers(MapStage):
    """Apply a saved calibration (the shipped one by default): quality_score, quality_bucket, tier.

    Example: assay quality tiers runs/x/scored runs/x/tiered --ensemble mean
    """

    Params = TiersParams
    reads = {"calibration": "file"}
    columns = TIER_COLUMNS

    def read_files(self) -> dict[str, list[str]]:
        return {"calibration": [str(calibration_path(self.params.calibration))]}

    def setup(self) -> None:
        self.calibration = load_calibration(self.params.calibration)

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        return with_rejects(write_tiers(self, table, self.calibration, self.params), [None] * table.num_rows)
