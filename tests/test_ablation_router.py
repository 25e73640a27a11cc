"""An MoE ablation keeps its routers' health (trainer/routing.py) in ablation.json, the report and the CLI,
and every decision metric, held-out BPB and the task suite's, gets its call in a few words (issue #42's demo)."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from assay.trainer.ablate import compare, run_ablation, verdicts  # noqa: E402
from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import AblationSpec  # noqa: E402
from assay.trainer.report import short_verdict  # noqa: E402
from assay.trainer.routing import COLLAPSE_SHARE, run_health  # noqa: E402
from assay.trainer.train import read_metrics  # noqa: E402

WORDS = "the cat sat on a mat while seven dogs ran past the old mill and a bird sang".split()


def _docs(n: int, seed: int, noise: float = 0.0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(20, 50))]
        text = " ".join("".join(rng.choice("qxzjkv") for _ in range(5)) if rng.random() < noise else w for w in words)
        out.append({"doc_id": f"d{seed}-{i}", "source": "web", "text": text + "."})
    return out


@pytest.fixture(scope="module")
def moe_ablation(tmp_path_factory):
    root = tmp_path_factory.mktemp("router")
    arms = {"clean": str(write_byte_dataset(_docs(60, 0), root / "clean", seq_len=65)),
            "junk": str(write_byte_dataset(_docs(60, 0, noise=0.5), root / "junk", seq_len=65))}
    held = write_byte_dataset(_docs(8, 1), root / "eval", seq_len=65)
    raw = {"name": "m", "seed": 0, "tokens": 12 * 4 * 64, "threads": 1,
           "model": {"d_model": 32, "n_layers": 2, "n_heads": 4},
           "moe": {"num_experts": 4, "top_k": 1, "expert_hidden": 32, "n_shared": 1},
           "data": {"train": arms["clean"], "batch_size": 4}, "log": {"every": 2}, "eval": {"sets": {"held": str(held)}}}
    (root / "cfg.json").write_text(json.dumps(raw))
    spec = AblationSpec(name="moe", config=str(root / "cfg.json"), arms=arms, seeds=[0, 1], dense_check=False,
                        significance="paired", alpha=0.05, eval={"tasks": "copa", "task_items": 8})
    out = root / "out"
    return run_ablation(spec, raw, out, log=lambda m: None), out


def test_moe_ablation_keeps_every_runs_router_health(moe_ablation):
    res, out = moe_ablation
    on_disk = json.loads((out / "ablation.json").read_text())
    assert on_disk["router"] == json.loads(json.dumps(res["router"]))
    for arm in ("clean", "junk"):
        h = on_disk["router"][arm]
        assert set(h["seeds"]) == {"0", "1"}
        for seed, layers in h["seeds"].items():
            assert [layer["layer"] for layer in layers] == [0, 1]
            recs = [r for r in read_metrics(out / "runs" / f"{arm}-s{seed}") if r.get("kind") == "train"]
            for layer in layers:
                last = recs[-1]["moe"][layer["layer"]]
                assert layer["load"] == last["load"] and len(layer["load"]) == 4
                assert sum(layer["load"]) == pytest.approx(1, abs=1e-3)
                assert layer["load_max_mean"] == last["load_max_mean"]
                assert layer["windows"] == len(recs)
                assert layer["collapsed"] == (max(last["load"]) >= COLLAPSE_SHARE or last["experts_without_tokens"] > 0)
        assert h["collapsed_seeds"] == sum(any(x["collapsed"] for x in ls) for ls in h["seeds"].values())
    page = (out / "report.html").read_text()
    assert "<h4>Router</h4>" in page and "collapsed at the end" in page and "Router: clean: busiest expert" in page


def test_collapse_flags_follow_the_windows_loads():
    """A window with three quarters of its tokens on one expert is a collapse; the run ends collapsed
    only when its last window is (or starves an expert)."""
    def window(load, empty=0):
        return {"load": load, "load_max_mean": max(load) * len(load), "experts_without_tokens": empty,
                "router_entropy": 1.0, "routing_confidence": 0.5, "bias_min": -0.1, "bias_max": 0.2}

    recs = [{"kind": "train", "tokens": 100 * i, "moe": [window(a), window(b)]} for i, (a, b) in enumerate([
        ([0.25, 0.25, 0.25, 0.25], [0.3, 0.3, 0.2, 0.2]),
        ([0.8, 0.1, 0.05, 0.05], [0.3, 0.3, 0.2, 0.2]),
        ([0.3, 0.3, 0.2, 0.2], [0.9, 0.1, 0.0, 0.0]),
    ])]
    recs[-1]["moe"][1]["experts_without_tokens"] = 2
    l0, l1 = run_health(recs)
    assert l0["collapsed_early"] and not l0["collapsed"] and l0["collapsed_windows"] == 1
    assert l0["peak_at_tokens"] == 100 and l0["peak_load_max_mean"] == pytest.approx(3.2)
    assert l1["collapsed"] and l1["collapsed_early"] and l1["bias_spread"] == pytest.approx(0.3)
    assert run_health([{"kind": "train", "tokens": 5}]) is None  # dense: no router


def test_every_decision_metric_gets_its_call_in_words(moe_ablation):
    res, out = moe_ablation
    named = {v["metric"]: v for v in res["verdicts"]}
    assert list(named) == ["held-out BPB (held)", "tasks macro p_correct", "tasks macro bpb", "tasks macro acc"]
    for v, pair in ((named["held-out BPB (held)"], res["pairs"][0]),
                    (named["tasks macro p_correct"], res["tasks"]["pairs"]["p_correct"][0])):
        expect = (f"{pair['a']} better on" if pair["significant"] else "no difference on") + f" {v['metric']} (p "
        assert v["words"].startswith(expect) and f"{pair['p_value']:.2g}" in v["words"]
    summary = (out / "report.html").read_text()
    assert "In short:</b> " + "; ".join(v["words"] for v in res["verdicts"]) in summary


def test_short_verdict_names_the_better_arm_by_the_metrics_direction():
    """Task p_correct: higher is better, so the arm with the higher mean wins; BPB: the lower."""
    values = {"raw": [0.30, 0.31, 0.29, 0.30, 0.32], "curated": [0.34, 0.36, 0.35, 0.35, 0.37]}
    up = compare(values, "paired", 0.05, higher_is_better=True)[0]
    assert short_verdict(up, "tasks macro p_correct").startswith("curated better on tasks macro p_correct (p ")
    down = compare(values, "paired", 0.05)[0]
    assert short_verdict(down, "held-out BPB") == f"raw better on held-out BPB (p {down['p_value']:.2g})"
    close = compare({"a": [1.0, 1.2, 0.9], "b": [1.1, 1.0, 1.0]}, "paired", 0.05)[0]
    assert short_verdict(close, "held-out BPB") == f"no difference on held-out BPB (p {close['p_value']:.2g}; {close['a']} ahead)"
    res = {"metric_set": "held", "pairs": [down], "tasks": {"pairs": {"p_correct": [up]}}}
    assert [v["words"] for v in verdicts(res)] == [short_verdict(down, "held-out BPB (held)"),
                                                    short_verdict(up, "tasks macro p_correct")]
    assert np.isfinite(up["p_value"])
