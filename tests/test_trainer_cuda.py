"""The trainer on a CUDA device. Skipped where torch sees no GPU (CI has none); run on a lent device
machine with `python -m pytest tests/test_trainer_cuda.py` (docs/trainer.md, "GPU").

What only a GPU exercises: the `torch._grouped_mm` expert path (Hopper and later) against the padded
and loop paths, a run under bf16 autocast with fused optimizers, and evaluation on the device."""
from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import MoEConfig, parse_train_config  # noqa: E402
from assay.trainer.moe import MoE  # noqa: E402
from assay.trainer.train import Trainer, read_metrics, train  # noqa: E402

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def _docs(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"doc_id": f"d-{seed}-{i}", "source": "web",
             "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 80))) + "."} for i in range(n)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("cuda-tokens")
    return {"train": write_byte_dataset(_docs(200, 0), root / "train", seq_len=65),
            "eval": write_byte_dataset(_docs(20, 1), root / "eval", seq_len=65)}


def _cfg(data, **over):
    raw = {"name": "gpu", "seed": 0, "tokens": 60 * 16 * 64, "device": "cuda",
           "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2},
           "moe": {"num_experts": 4, "top_k": 2, "expert_hidden": 64, "n_shared": 1, "bias_rate": 0.01},
           "data": {"train": str(data["train"]), "batch_size": 16},
           "optim": {"lr": 3e-3}, "eval": {"sets": {"held": str(data["eval"])}, "every_tokens": 30 * 16 * 64},
           "log": {"every": 10}}
    raw.update(over)
    return parse_train_config(raw)


@pytest.mark.parametrize("k", [1, 2])
def test_grouped_matmul_experts_agree_with_the_padded_and_loop_paths(k):
    torch.manual_seed(0)
    moe = MoE(64, MoEConfig(num_experts=8, top_k=k, expert_hidden=64, n_shared=0, score="sigmoid")).cuda()
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.1)
    x = torch.randn(512, 64, device="cuda")
    with torch.no_grad():
        ids, gates, _, _ = moe.router(x)
    experts = moe.experts
    if torch.cuda.get_device_capability() >= (9, 0) and hasattr(torch, "_grouped_mm"):
        assert experts._use_grouped_mm(x), "grouped_mm should pass its own check on Hopper"
    outs, grads = {}, {}
    for impl in ("auto", "padded", "loop"):
        experts.impl = impl
        xi = x.clone().requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = experts(xi, ids, gates)
        y.float().square().sum().backward()
        outs[impl], grads[impl] = y.float().detach(), (xi.grad.clone(), experts.w_down.grad.clone())
        experts.w_gate_up.grad = experts.w_down.grad = None
    for impl in ("auto", "padded"):  # bf16 matmuls: agreement to bf16 precision, not bit for bit
        torch.testing.assert_close(outs[impl], outs["loop"], rtol=3e-2, atol=3e-2)
        for a, b in zip(grads[impl], grads["loop"]):
            assert (a - b).norm() <= 0.03 * b.norm() + 1e-3


def test_a_run_trains_under_bf16_on_the_gpu_and_says_so(data, tmp_path):
    summary = train(_cfg(data), tmp_path / "run", log=lambda m: None, report=False)
    rows = read_metrics(tmp_path / "run")
    losses = [r["loss"] for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert summary["steps"] == 60 and len(evals) == 2
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3  # it learned the word list
    # bits per byte of a text of 18 words: far below 8 once the words are learned
    assert evals[-1]["eval"]["held"]["bpb"] < 4.0
    assert "cuda" in (tmp_path / "run" / "summary.json").read_text()


def test_evaluation_on_the_gpu_leaves_the_router_alone(data, tmp_path):
    (tmp_path / "run").mkdir()
    tr = Trainer(_cfg(data), tmp_path / "run", log=lambda m: None)
    for _ in range(5):
        tr.step()
    layers = tr.model.moe_layers()
    before = [(m.router.expert_bias.clone(), m.step_load.clone(), m.win_load.clone()) for m in layers]
    tr.evaluate()
    for m, (bias, step_load, win_load) in zip(layers, before):
        assert torch.equal(m.router.expert_bias, bias)
        assert torch.equal(m.step_load, step_load) and torch.equal(m.win_load, win_load)
    assert tr.model.training
