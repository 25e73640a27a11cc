"""The known-order ablation (issues #13 and #32): clean text must beat the same text with 30% junk on
held-out BPB in every seed, by more than 5 seed standard deviations with paired p < 0.01, 3 seeds at the
protocol's budget (3M tokens a run since issue #32's second pass), and clean's seed-to-seed std must be
at most 0.015.

`benchmarks/trainer.py --ablation` (in `make bench`) runs the same protocol and adds the dense re-run.
"""
from __future__ import annotations

import json

import numpy as np

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from assay.trainer.ablate import run_ablation  # noqa: E402
from assay.trainer.config import AblationSpec  # noqa: E402
from assay.trainer.known_order import build_known_order, known_order_config  # noqa: E402


@pytest.mark.slow
def test_clean_text_beats_junk_injected_text(tmp_path):
    paths = build_known_order(tmp_path / "data", train_bytes=None)
    raw = known_order_config(paths)
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(raw))
    spec = AblationSpec(name="known-order", config=str(cfg), seeds=[0, 1, 2], dense_check=False, workers=2,
                        significance="paired", arms={"clean": str(paths["clean"]), "junk30": str(paths["junk"])})
    res = run_ablation(spec, raw, tmp_path / "out", log=lambda m: None)
    clean, junk = res["arms"]["clean"], res["arms"]["junk30"]
    assert max(clean["values"]) < min(junk["values"]), res["arms"]
    pair = res["pairs"][0]
    # Measured by benchmarks/trainer.py (the same Trainer, deterministic on CPU): at 1M tokens clean 1.935,
    # 1.931, 1.942, junk30 2.023, 2.019, 2.015, gap 17 seed std, paired p 0.004; at 3M (the default now)
    # clean 1.754, 1.758 on seeds 0-1 (`--only levers`). The previous proxy (AdamW, 4-expert MoE, 1M)
    # gave 3.28 seed std, paired p 0.095, and fails here, as does any setting whose seeds spread > 0.015.
    assert pair["a"] == "clean" and pair["gap_over_std"] > 5 and pair["p_value"] < 0.01, pair
    assert clean["std"] <= 0.015, clean
    assert set(clean["per_source"]) == {"reference", "docstrings"}
    assert (tmp_path / "out" / "bpb.png").exists() and "Ablation known-order" in (tmp_path / "out" / "report.html").read_text()


def test_verdict_states_winner_gap_interval_p_value_and_caution():
    """The ablation report's sentence (shared with issue #29): which arm won and by how much, lower BPB
    is better, the 95% CI and p-value, whether significant, and a caution when n is small."""
    from scipy import stats

    from assay.trainer.ablate import compare
    from assay.trainer.report import verdict

    values = {"raw": [3.52, 3.61, 3.55], "curated": [3.40, 3.47, 3.43]}
    arms = {k: {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)), "values": v} for k, v in values.items()}
    pair = compare(values, "paired", 0.05)[0]
    lo, hi = stats.ttest_rel(values["curated"], values["raw"]).confidence_interval()
    assert pair["ci95"] == pytest.approx((lo, hi))
    text = verdict(pair, arms, 0.05, "paired")
    assert text.startswith("curated beat raw by 0.127 bits per byte") and "lower is better" in text
    assert f"95% CI of the gap {-hi:+.3f} to {-lo:+.3f}" in text and f"paired p = {pair['p_value']:.2g}" in text
    assert "significant at alpha 0.05" in text and "Caution: 3 seeds" in text
    close = {"a": [3.50, 3.60, 3.41, 3.55, 3.47], "b": [3.52, 3.58, 3.44, 3.57, 3.46]}
    arms = {k: {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)), "values": v} for k, v in close.items()}
    text = verdict(compare(close, "welch", 0.05)[0], arms, 0.05, "welch")
    assert "could not be told apart" in text and "does not say which data is better" in text
    assert "Caution" not in text


ZH = ("据央视新闻消息，江苏省无锡市中级人民法院一审公开开庭审理了受贿一案。无锡市人民检察院起诉指控：被告人利用职务上的便利，"
      "为有关单位和个人在企业经营、职务晋升等事项上提供帮助，非法收受财物。庭审中，检察机关出示了相关证据，被告人及其辩护人进行了质证。")
EN = ("The reference manual describes the syntax and the core semantics of the language. It is terse, but "
      "attempts to be exact and complete. The semantics of non-essential built-in object types are described elsewhere.")


def _shared_pairs(a: str, b: str) -> float:
    """The share of a's adjacent pairs of units (words, or characters in text without spaces) that b
    also has."""
    units = lambda t: t.split() if " " in t else list(t)  # noqa: E731
    pairs = lambda t: set(zip(units(t), units(t)[1:]))  # noqa: E731
    return len(pairs(a) & pairs(b)) / len(pairs(a))


@pytest.mark.parametrize("text", [ZH, EN], ids=["chinese", "english"])
def test_shuffled_junk_scrambles_text_in_every_script(text):
    """Junk made by shuffling must be junk in scripts without spaces too: shuffling at spaces left
    Chinese text intact (the multilingual known-order pair then ranked the junk arm first)."""
    import random

    from assay.trainer.known_order import _shuffled

    junk = _shuffled(random.Random(0), text)
    assert sorted(junk.replace(" ", "")) == sorted(text.replace(" ", ""))  # the same letters
    assert _shared_pairs(junk, text) < 0.3


def test_keyword_spam_is_in_the_documents_script():
    import random

    from assay.trainer.known_order import _keyword_spam, junk_documents

    spam = _keyword_spam(random.Random(0), ZH, 400)
    letters = [c for c in spam if c.isalpha()]
    assert len(spam) >= 400 and all("\u4e00" <= c <= "\u9fff" for c in letters)
    docs = [{"doc_id": f"d{i}", "source": "zh", "text": ZH} for i in range(200)]
    junk = junk_documents(docs, 0.3)
    size = lambda ds: sum(len(d["text"].encode()) for d in ds)  # noqa: E731
    assert size(junk) / (size(junk) + size(docs)) == pytest.approx(0.3, abs=0.03)
    assert {d["source"] for d in junk} == {"shuffled", "keywords", "boilerplate"}
