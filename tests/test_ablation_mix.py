"""Ablations that cannot mislead (issue #42): the report and ablation.json carry held-out BPB per source
per arm, warn when two arms train on different source or domain mixes (naming the source and both
shares), say nothing when the mixes match, and `match_mix` trains an arm on another arm's shares."""
from __future__ import annotations

import json
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from assay.pipeline.dataset import Dataset  # noqa: E402
from assay.trainer.ablate import run_ablation  # noqa: E402
from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import ConfigError, load_ablation_spec  # noqa: E402
from assay.trainer.mixcheck import arm_mix, shares  # noqa: E402

WEB = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()
MANUAL = "press the reset key then select menu option four and set the value to zero before saving".split()


def _docs(n: int, source: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    words = WEB if source == "web" else MANUAL
    return [{"doc_id": f"{source}-{seed}-{i}", "source": source, "content_type": source,
             "text": " ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) + "."} for i in range(n)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix-data")
    return {
        # raw: a manual at about a third of the tokens; curated cut it to about 6%
        "raw": write_byte_dataset(_docs(40, "web", 0) + _docs(20, "manual", 1), root / "raw", seq_len=65),
        "curated": write_byte_dataset(_docs(40, "web", 2) + _docs(3, "manual", 3), root / "curated", seq_len=65),
        # the raw mix on other documents
        "alike": write_byte_dataset(_docs(40, "web", 4) + _docs(20, "manual", 5), root / "alike", seq_len=65),
        "eval": write_byte_dataset(_docs(6, "web", 6) + _docs(6, "manual", 7), root / "eval", seq_len=65),
    }


def _ablate(data, tmp_path, arms: dict[str, str], extra: str = ""):
    cfg = {"name": "m", "seed": 0, "tokens": 4 * 4 * 64, "threads": 1,
           "model": {"d_model": 32, "n_layers": 1, "n_heads": 4}, "moe": {"num_experts": 1, "expert_hidden": 32},
           "data": {"train": str(data["raw"]), "batch_size": 4}, "log": {"every": 2}}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("name: m\nconfig: cfg.json\narms: {" + ", ".join(f"{k}: {data[v]}" for k, v in arms.items())
                         + f"}}\nseeds: [0, 1]\ndense_check: false\neval: {{held: {data['eval']}}}\n" + extra)
    spec, raw = load_ablation_spec(spec_file)
    res = run_ablation(spec, raw, tmp_path / "out", log=lambda m: None)
    return res, (tmp_path / "out" / "report.html").read_text()


def test_arms_with_different_source_mixes_are_warned_about_with_per_source_bpb(data, tmp_path):
    res, page = _ablate(data, tmp_path, {"raw": "raw", "curated": "curated"})
    want = {arm: shares(arm_mix(data[arm])) for arm in ("raw", "curated")}
    assert want["raw"]["manual"] > 0.25 and want["curated"]["manual"] < 0.1  # the data is what the test says
    found = {(d["kind"], d["name"]): d for d in res["mix"]["differences"]}
    manual = found[("source", "manual")]
    assert (manual["a"], manual["b"]) == ("raw", "curated")
    assert manual["share_a"] == round(want["raw"]["manual"], 4) and manual["share_b"] == round(want["curated"]["manual"], 4)
    assert manual["message"].startswith(f"curated cut source manual from {want['raw']['manual']:.1%} of the tokens "
                                        f"(raw) to {want['curated']['manual']:.1%}")
    assert "reflects the mix, not quality" in manual["message"]
    assert ("domain", "manual") not in found  # one source per domain: said once, as the source
    assert res["mix"]["arms"]["raw"]["sources"]["manual"] == arm_mix(data["raw"])["sources"]["manual"]
    # per-source held-out BPB per arm, with each seed's value and the comparison per source
    for arm in ("raw", "curated"):
        assert set(res["arms"][arm]["per_source"]) == {"web", "manual"}
        assert len(res["arms"][arm]["per_source"]["manual"]["values"]) == 2
    assert set(res["source_pairs"]) == {"web", "manual"}
    saved = json.loads((tmp_path / "out" / "ablation.json").read_text())
    assert saved["mix"]["differences"] == res["mix"]["differences"]
    # the page: the warning, the shares, the per-source table and a caution after the verdict
    assert "Mix differs between raw and curated:</b><ul><li>curated cut source manual" in page  # the largest first
    assert "<h4>Held-out BPB per source</h4>" in page and "<td>manual</td>" in page
    stat = res["arms"]["curated"]["per_source"]["manual"]
    assert f"<td>{stat['mean']:.4f} ± {stat['std']:.4f}</td><td>{want['curated']['manual']:.1%}</td>" in page
    assert "Caution: the two arms train on different mixes (source manual" in page
    assert "No source or domain share differs" not in page
    assert "match_mix: {curated: raw}" in page


def test_arms_with_the_same_mix_carry_no_warning(data, tmp_path):
    res, page = _ablate(data, tmp_path, {"raw": "raw", "alike": "alike"})
    a, b = shares(arm_mix(data["raw"])), shares(arm_mix(data["alike"]))
    assert abs(a["manual"] - b["manual"]) < 0.05  # the data is what the test says
    assert res["mix"]["differences"] == []
    assert "Mix differs" not in page and "train on different mixes" not in page
    assert "No source or domain share differs between arms" in page


def test_match_mix_trains_an_arm_on_the_other_arms_shares(data, tmp_path):
    res, page = _ablate(data, tmp_path, {"raw": "raw", "curated": "curated"}, "match_mix: {raw: curated}\n")
    assert res["mix"]["differences"] == []  # raw resampled to curated's shares: nothing to warn about
    matched = res["mix"]["matched"]["raw"]
    assert matched["to"] == "curated" and matched["tokens"] < matched["tokens_before"]
    target, got = shares(arm_mix(data["curated"])), shares(arm_mix(matched["path"]))
    assert abs(got["manual"] - target["manual"]) < 0.02, (got, target)
    # the resample keeps the ledger: every piece of the source arm is kept or rejected with a reason
    counts = Dataset(matched["path"]).manifest["counts"]
    assert counts["rows_in"] == counts["rows_out"] + counts["rejected"]["not_in_matched_mix"]["rows"]
    assert "raw holds curated's source shares: a resample" in page
    inputs = [i["path"] for i in Dataset(tmp_path / "out" / "runs" / "raw-s0").manifest["inputs"]]
    assert matched["path"] in inputs  # the arm trained on the resample
    # a reference arm that is not an arm, or that is itself matched, is refused in one line
    (tmp_path / "bad").mkdir()
    with pytest.raises(ConfigError, match="match_mix: 'nope' is not an arm"):
        _ablate(data, tmp_path / "bad", {"raw": "raw", "curated": "curated"}, "match_mix: {raw: nope}\n")
