"""A reduced known-order ablation: clean text must beat the same text with 30% junk on held-out BPB.

The full version (3 seeds, a larger budget, the dense re-run) is `benchmarks/trainer.py --ablation`;
this one keeps 2 seeds and a third of the budget (two runs at a time, one thread each).
"""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from assay.trainer.ablate import run_ablation  # noqa: E402
from assay.trainer.config import AblationSpec  # noqa: E402
from assay.trainer.known_order import build_known_order  # noqa: E402


@pytest.mark.slow
def test_clean_text_beats_junk_injected_text(tmp_path):
    paths = build_known_order(tmp_path / "data", train_bytes=None)
    raw = {"name": "tiny", "tokens": 250 * 512, "threads": 1,
           "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2},
           "moe": {"num_experts": 4, "top_k": 1, "expert_hidden": 128, "n_shared": 1, "z_loss_coef": 1e-3},
           "data": {"train": str(paths["clean"]), "batch_size": 4, "order_seed": 0}, "optim": {"lr": 1.2e-2},
           "eval": {"sets": {"held_out": str(paths["eval"])}, "batch_size": 64, "max_rows": 192},
           "log": {"every": 50}}
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(raw))
    spec = AblationSpec(name="known-order", config=str(cfg), seeds=[0, 1], dense_check=False, workers=2,
                        arms={"clean": str(paths["clean"]), "junk30": str(paths["junk"])})
    res = run_ablation(spec, raw, tmp_path / "out", log=lambda m: None)
    clean, junk = res["arms"]["clean"], res["arms"]["junk30"]
    assert max(clean["values"]) < min(junk["values"]), res["arms"]
    pair = res["pairs"][0]
    # Measured here: gap 0.197 BPB = 2.6 seed std (deterministic on CPU). The 3-std goal is NOT met at
    # this budget (nor by the 3-seed benchmark, see benchmarks/results/trainer.json): tiny byte-level
    # models this early in training differ by up to 0.2 BPB between seeds. This guards the order.
    assert pair["a"] == "clean" and pair["gap_over_std"] > 2, pair
    assert set(clean["per_source"]) == {"reference", "docstrings"}
    assert (tmp_path / "out" / "bpb.png").exists() and "Ablation known-order" in (tmp_path / "out" / "report.html").read_text()
