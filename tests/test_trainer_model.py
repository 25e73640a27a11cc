"""Trainer model: routing, aux-loss-free balancing, grouped vs naive experts, masked loss, dense control."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from assay.pipeline.tokens import LOSS, META, PAD  # noqa: E402
from assay.trainer.config import ModelConfig, MoEConfig  # noqa: E402
from assay.trainer.data import make_batch, target_weights  # noqa: E402
from assay.trainer.model import GPT, IGNORE  # noqa: E402
from assay.trainer.moe import MoE, Router  # noqa: E402


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)


@pytest.mark.parametrize("score", ["softmax", "sigmoid"])
def test_router_selects_with_bias_but_gates_with_unbiased_scores(score):
    torch.manual_seed(0)
    router = Router(16, 6, 2, score, normalize=score == "sigmoid", scaling=2.5)
    torch.nn.init.normal_(router.weight, std=0.5)
    x = torch.randn(32, 16)
    _, _, scores, _ = router(x)
    plain = torch.topk(scores, 2).indices
    router.expert_bias[5] = 10.0  # expert 5 now wins every selection
    ids, gates, scores2, _ = router(x)
    assert torch.equal(scores, scores2)  # the bias never touches the scores
    assert (ids == 5).any(1).all()
    assert not (plain == 5).any(1).all()  # without the bias it would not be picked everywhere
    expected = scores.gather(-1, ids)
    if score == "sigmoid":
        expected = expected / expected.sum(-1, keepdim=True)
    torch.testing.assert_close(gates, 2.5 * expected, rtol=0, atol=1e-6)
    assert ids.shape == (32, 2) and (ids[:, 0] != ids[:, 1]).all()


def test_bias_moves_load_toward_balance_on_a_skewed_batch():
    torch.manual_seed(0)
    moe = MoE(16, MoEConfig(num_experts=4, top_k=1, expert_hidden=8, n_shared=0))
    with torch.no_grad():
        torch.nn.init.normal_(moe.router.weight, std=0.3)
        moe.router.weight[0] += 0.3  # skew: expert 0 is everyone's favourite
    x = torch.randn(1, 256, 16) + 0.5
    ratios = []
    for _ in range(100):
        moe(x)
        load = moe.step_load.clone()
        ratios.append(float(load.max() / load.mean()))
        if not ratios[1:]:
            first = load
        moe.update_bias(0.01)
    assert int(first.argmax()) == 0 and ratios[0] > 2.0
    assert sum(ratios[-20:]) / 20 < 1.1  # near-balanced on the same batch
    assert moe.router.expert_bias[0] < 0 < moe.router.expert_bias[1:].max()
    before = moe.router.expert_bias.clone()
    moe(x)
    moe.update_bias(0.0)  # rate 0 (the schedule's tail): the bias stays put
    assert torch.equal(before, moe.router.expert_bias)


@pytest.mark.parametrize("k,act_clip", [(1, None), (2, None), (3, 0.05)])
def test_grouped_expert_compute_equals_the_naive_loop(k, act_clip):
    torch.manual_seed(0)
    cfg = MoEConfig(num_experts=6, top_k=k, expert_hidden=24, n_shared=1, act_clip=act_clip, score="sigmoid")
    moe = MoE(32, cfg)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.2)
    x = torch.randn(3, 40, 32)
    flat = x.reshape(-1, 32)
    ids, gates, _, _ = moe.router(flat)
    xa, xb = flat.clone().requires_grad_(), flat.clone().requires_grad_()
    grouped = moe.experts(xa, ids, gates)
    stats_g = moe.experts.read_act_stats()
    naive = moe.experts.forward_loop(xb, ids, gates)
    stats_n = moe.experts.read_act_stats()
    torch.testing.assert_close(grouped, naive, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(stats_g[0], stats_n[0], rtol=1e-5, atol=1e-7)
    assert torch.equal(stats_g[1], stats_n[1])
    w = torch.randn_like(grouped)
    ga = torch.autograd.grad((grouped * w).sum(), [xa, moe.experts.w_gate_up, moe.experts.w_down])
    gb = torch.autograd.grad((naive * w).sum(), [xb, moe.experts.w_gate_up, moe.experts.w_down])
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _tiny(num_experts=4, mtp=0, **moe):
    torch.manual_seed(0)
    return GPT(ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, n_dense_layers=0),
               MoEConfig(num_experts=num_experts, top_k=1, expert_hidden=32, **moe), 100, 16, mtp)


def test_target_flags():
    mask = np.array([[0, LOSS, META, META | LOSS, PAD, LOSS | PAD, 0]], np.uint8)
    assert target_weights(mask, meta_loss=False).tolist() == [[False, True, False, False, False, False, False]]
    assert target_weights(mask, meta_loss=True).tolist() == [[False, True, True, True, False, False, False]]


def test_masked_positions_contribute_exactly_zero_loss_and_gradient():
    model = _tiny(z_loss_coef=0.0)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 100, (2, 17))
    mask = np.full((2, 17), LOSS, np.uint8)
    mask[0, 5:9] = 0  # loss-masked context
    mask[1, 3:6] = META  # a metadata prefix, after the switch
    mask[1, 14:] = PAD
    batch = make_batch(tokens, mask, meta_loss=False)
    masked = batch.targets == IGNORE
    assert int(masked.sum()) == 4 + 3 + 3 and batch.n_targets == 32 - 10

    h, _ = model.hidden(batch.idx, batch.valid)
    logits = model.head(model.norm(h))
    logits.retain_grad()
    loss = model._ce(logits, batch.targets)
    loss.backward()
    assert torch.count_nonzero(logits.grad[masked]) == 0
    assert torch.count_nonzero(logits.grad[~masked].abs().sum(-1)) == int((~masked).sum())
    # The loss is the sum over trained-on targets only, and changing masked targets changes nothing.
    lp = torch.log_softmax(logits.detach().float(), -1)
    manual = -lp[~masked].gather(-1, batch.targets[~masked].unsqueeze(-1)).sum()
    torch.testing.assert_close(loss.detach(), manual, rtol=1e-6, atol=1e-5)
    other = tokens.copy()
    other[0, 5:9] = (other[0, 5:9] + 1) % 100  # the tokens whose target positions are masked
    other_batch = make_batch(other, mask, meta_loss=False)
    assert torch.equal(other_batch.targets, batch.targets)


def test_dense_control_has_equal_active_parameters():
    moe, dense = _tiny(4), _tiny(1)
    assert moe.moe_layers() and not dense.moe_layers()
    a, b = moe.param_counts(), dense.param_counts()
    router = 2 * 4 * 32
    assert a["active"] - router == b["active"]
    assert a["total"] > b["total"]


def test_mtp_and_aux_losses_run_and_backpropagate():
    model = _tiny(4, mtp=1, seq_balance_coef=1e-4, z_loss_coef=1e-3)
    tokens = np.random.default_rng(1).integers(0, 100, (2, 17))
    mask = np.full((2, 17), LOSS, np.uint8)
    mask[:, 10] = 0
    b = make_batch(tokens, mask, meta_loss=False)
    out = model(b.idx, b.targets, b.valid, b.next_tokens)
    assert out.mtp_sum is not None and out.aux > 0
    (out.ce_sum + 0.3 * out.mtp_sum + out.aux).backward()
    assert model.mtp.proj.weight.grad is not None
    assert all(m.router.weight.grad is not None for m in model.moe_layers())
