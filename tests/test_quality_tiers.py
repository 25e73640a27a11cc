"""End to end: train a fastText scorer, score, calibrate (fit-then-apply over shards), ensemble, tier;
the shipped models and calibration on junk; the same columns on every engine."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from assay.quality.corpus import read_jsonl_gz
from assay.quality.tiers import TIERS
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.pipeline.stage import resolve_stage

DATA = Path(__file__).resolve().parents[1] / "quality" / "data"


def _docs(rows):
    return make_docs([{"text": r["text"], "source": r["kind"], "content_type": "web", "url": r["page"] + "#" + r["kind"]} for r in rows])


def test_train_score_calibrate_tier(tmp_path):
    from assay.quality.ftmodel import train

    rows = read_jsonl_gz(DATA / "contrast-train.jsonl.gz")
    model = train([r["text"] for r in rows], ["hq" if r["label"] else "lq" for r in rows], tmp_path / "m.ftz", epoch=10)
    calib = read_jsonl_gz(DATA / "contrast-calib.jsonl.gz")
    src = write_table(_docs(calib), tmp_path / "in", shards=3)
    scored = run_stage(resolve_stage("quality.fasttext")({"model": str(model), "name": "mine"}), [src], tmp_path / "scored",
                       options={"workers": 2}).out
    scored = run_stage(resolve_stage("quality.lm")({}), [scored], tmp_path / "lm", options={"workers": 2}).out
    tiered = run_stage(resolve_stage("quality.calibrate")({"ensemble": "mean"}), [scored], tmp_path / "tiered",
                       options={"workers": 2}).out
    out = Dataset(tiered).read()
    art = json.loads((Path(tiered) / "_artifacts" / "fit.json").read_text())
    assert sorted(art["scorers"]) == ["lm", "mine"] and out.num_rows == len(calib)
    score = out.column("quality_score").to_numpy()
    tier = np.array([TIERS.index(t) for t in out.column("tier").to_pylist()])
    order = np.argsort(-score)
    assert np.all(np.diff(tier[order]) >= 0)  # tiers are monotone in the score
    # bucket shares on the calibration corpus match the calibration (token-weighted, 5% each)
    tokens = np.maximum(np.array([len(t.encode()) for t in out.column("text").to_pylist()]) / 4, 1)
    buckets = out.column("quality_bucket").to_numpy()
    share = np.bincount(buckets, weights=tokens, minlength=20) / tokens.sum()
    assert np.abs(np.cumsum(share) - np.arange(1, 21) / 20).max() < 0.08
    # the fresh scorer separates: clean pages land above their junk versions
    kinds = np.array(out.column("source").to_pylist())
    assert np.median(score[kinds == "clean"]) > np.percentile(score[kinds != "clean"], 75)


def test_default_tier_stage_with_shipped_calibration_puts_junk_low(tmp_path):
    calib = read_jsonl_gz(DATA / "contrast-calib.jsonl.gz")
    stage = resolve_stage("quality.tier")({})
    out = stage.process(_docs(calib))
    for col in ("quality_fasttext", "quality_edu", "quality_lm", "quality_heuristics", "quality_math", "quality_code",
                "quality_reference", "quality_dsir", "tier"):
        assert col in out.column_names
    kinds = np.array(out.column("source").to_pylist())
    tiers = np.array(out.column("tier").to_pylist())
    junk_low = np.isin(tiers[kinds != "clean"], ["Medium-Low", "Low"]).mean()
    clean_top = np.isin(tiers[kinds == "clean"], TIERS[:3]).mean()
    assert junk_low >= 0.9 and clean_top >= 0.8
    stage.close()


@pytest.mark.parametrize("engine", [pytest.param("spark", marks=pytest.mark.spark), pytest.param("ray", marks=pytest.mark.ray)])
def test_same_columns_and_tiers_on_every_engine(tmp_path, engine, request):
    rows = read_jsonl_gz(DATA / "contrast-calib.jsonl.gz")[:40]
    src = write_table(_docs(rows), tmp_path / "in", shards=2)
    stage = lambda: resolve_stage("quality.tier")({})  # noqa: E731
    local = Dataset(run_stage(stage(), [src], tmp_path / "local", options={"workers": 2}).out).read()
    other = Dataset(run_stage(stage(), [src], tmp_path / engine, engine=request.getfixturevalue(f"{engine}_engine")).out).read()
    key = lambda t: t.sort_by("id").drop_columns([c for c in t.column_names if c.startswith("reject")])  # noqa: E731
    assert key(local).equals(key(other))


def test_build_moves_the_top_three_boundary_to_balance_clean_and_junk():
    """With more junk than clean mass above the reference's median, the default boundary (bucket 10)
    would drop clean documents; the build's cut-off choice moves it so both shares are high."""
    from assay.quality.build import balanced_cutoffs
    from assay.quality.tiers import fit_histograms, make_calibration

    rng = np.random.default_rng(0)
    clean = np.clip(rng.normal(0.8, 0.05, 400), 0, 1)
    junk = np.clip(rng.normal(0.3, 0.05, 600), 0, 1)
    scores = np.concatenate([clean, junk])
    labels = np.concatenate([np.ones(400, int), np.zeros(600, int)])
    table = make_docs([{"text": "x" * 400, "source": "t", "url": f"u{i}"} for i in range(len(scores))])
    table = table.append_column("quality_web", pa.array(scores, pa.float32()))
    calibration = make_calibration([fit_histograms(table, ["web"], None)], "mean")  # not balanced: junk is 60%
    worst, cut = balanced_cutoffs(table, labels, calibration)
    assert worst >= 0.99
    from assay.quality.tiers import TierOptions, assign

    _, _, tier, _ = assign(table, calibration, TierOptions(cutoffs=cut))
    assert (tier[labels == 1] <= 2).mean() >= 0.99 and (tier[labels == 0] >= 3).mean() >= 0.99
    assert cut["Medium"] != 10 and cut["High"] == 17
    _, _, default_tier, _ = assign(table, calibration, TierOptions())
    assert (default_tier[labels == 0] >= 3).mean() < 0.9  # the default boundary lets junk into the top three


def _two_domains(n=600):
    """A pool whose code documents all score above its web documents: one pooled calibration would
    fill the top tiers with code."""
    rng = np.random.default_rng(1)
    kinds = np.array(["web"] * (2 * n // 3) + ["code"] * (n // 3))
    scores = np.where(kinds == "web", rng.normal(0.3, 0.08, n), rng.normal(0.75, 0.08, n)).clip(0, 1)
    table = make_docs([{"text": "w" * (300 + i % 7 * 50), "source": k, "content_type": k, "url": f"u{i}"}
                       for i, k in enumerate(kinds)])
    return table.append_column("quality_web", pa.array(scores, pa.float32())), kinds


def _top_share(tier, kinds, tokens, kind):
    top = tier <= 2
    return tokens[top & (kinds == kind)].sum() / tokens[top].sum()


def test_within_a_column_tiering_keeps_the_mix(tmp_path):
    from assay.quality.report import mix_shares
    from assay.quality.scorers import approx_tokens

    table, kinds = _two_domains()
    tokens = approx_tokens(table)
    pool_share = tokens[kinds == "code"].sum() / tokens.sum()
    src = write_table(table, tmp_path / "in", shards=3)
    pooled = Dataset(run_stage(resolve_stage("quality.calibrate")({}), [src], tmp_path / "pooled").out).read()
    run = run_stage(resolve_stage("quality.calibrate")({"within": "content_type"}), [src], tmp_path / "within")
    within = Dataset(run.out).read()
    tier_of = lambda t: np.array([TIERS.index(x) for x in t.sort_by("url").column("tier").to_pylist()])  # noqa: E731
    order = np.argsort([f"u{i}" for i in range(len(kinds))])
    k, w = kinds[order], tokens[order]
    assert _top_share(tier_of(pooled), k, w, "code") > 0.6  # pooled: all code is in the top half, 2x its share
    assert abs(_top_share(tier_of(within), k, w, "code") - pool_share) < 0.03
    art = json.loads((Path(run.out) / "_artifacts" / "fit.json").read_text())
    assert art["within"]["column"] == "content_type" and sorted(art["within"]["groups"]) == ["code", "web"]
    # the statistics hold the mix before and after, and the report reads it
    counters = run.manifest["statistics"]["counters"]
    mix: dict = {}
    for key, value in counters.items():
        if key.startswith("mix_tokens.content_type="):
            group, t = key[len("mix_tokens.content_type="):].rsplit(".", 1)
            mix.setdefault(group, {})[t] = value
    shares = {g: (before, after) for g, before, after in mix_shares(mix)}
    assert abs(shares["code"][0] - pool_share) < 1e-6 and abs(shares["code"][1] - pool_share) < 0.03
    from assay.quality.report import stage_section

    assert "Mix by content_type before and after tiering" in stage_section({**run.manifest, "dir": "within"})


def test_value_scorers_order_the_top_tiers_and_never_lift_junk():
    from assay.quality.tiers import TierOptions, assign, fit_histograms, make_calibration

    rng = np.random.default_rng(2)
    n = 1000
    junk = rng.uniform(0, 1, n)  # the junk detector's score
    value = rng.uniform(0, 1, n)  # a value score, unrelated to it
    table = make_docs([{"text": "x" * 400, "source": "t", "url": f"u{i}"} for i in range(n)])
    table = table.append_column("quality_web", pa.array(junk, pa.float32()))
    table = table.append_column("quality_ref", pa.array(value, pa.float32()))
    cal = make_calibration([fit_histograms(table, [], None)], "mean", value=["ref"])
    assert cal["value_scorers"] == ["ref"]
    _, _, tier, _ = assign(table, cal, TierOptions())
    _, _, junk_only, _ = assign(table, cal, TierOptions(value=[]))
    assert np.array_equal(tier >= 3, junk_only >= 3)  # the same documents pass: value decides nothing there
    passed = tier <= 2
    high = passed & (tier == 0)
    assert value[high].min() > np.median(value[passed])  # among those that pass, the value score orders them
    with pytest.raises(Exception, match="voters"):
        assign(table, make_calibration([fit_histograms(table, [], None)], "mean"), TierOptions(value=["ref"]))
