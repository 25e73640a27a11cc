"""The MoE router (issue #42): the default routed scaling passes a uniform router's experts at a dense
expert's scale (at 1, gates of 1/E left layer 0's router uniform for a whole run in some seeds, which
ended at the dense level); the router's LR scale and warm-up apply to its parameter group only, and
on the decision proxy's MoE a warm-up keeps the router from sending every token to one expert in the
first steps (at the full LR from step 0, seed 1 starved an expert from step 15 for 25 steps in a row)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import MoEConfig, parse_train_config  # noqa: E402
from assay.trainer.known_order import clean_documents, is_held_out, known_order_config  # noqa: E402
from assay.trainer.moe import MoE  # noqa: E402
from assay.trainer.train import Trainer  # noqa: E402


@pytest.fixture(scope="module")
def stdlib_rows(tmp_path_factory):
    """The known-order clean training text (Python's own documentation: no ../shared), as bytes."""
    docs = [d for d in clean_documents() if not is_held_out(d["doc_id"])]
    return write_byte_dataset(docs, tmp_path_factory.mktemp("stdlib") / "clean", seq_len=129)


def _proxy_moe(rows, **moe) -> dict:
    """The decision proxy (known_order_config) with its FFN as the 4-expert MoE of equal active width."""
    raw = known_order_config({"clean": rows, "eval": rows})
    raw["moe"] = dict(raw["moe"], num_experts=4, **moe)
    raw["eval"] = {}
    return dict(raw, seed=1)


def _router_lrs(tr: Trainer) -> tuple[float, float]:
    """(router group LR, another AdamW group's LR) as the last step set them."""
    groups = {g["name"]: g["lr"] for g in tr.optimizers[0].param_groups}
    return groups["router"], groups["no_decay"]


@pytest.mark.parametrize("experts,k", [(4, 1), (8, 2)])
def test_a_uniform_router_passes_its_experts_at_full_scale_by_default(experts, k):
    layer = MoE(16, MoEConfig(num_experts=experts, top_k=k, expert_hidden=8))
    torch.nn.init.zeros_(layer.router.weight)  # every score 1/E
    _, gates, _, _ = layer.router(torch.randn(5, 16))
    assert torch.allclose(gates.sum(-1), torch.ones(5))  # the k gates sum to 1, as one dense FFN's would
    assert MoEConfig(score="sigmoid").scaling == 1.0 and MoEConfig(routed_scaling=2.5).scaling == 2.5


def test_router_lr_scale_and_warmup_apply_to_the_router_group_only(stdlib_rows, tmp_path):
    raw = _proxy_moe(stdlib_rows, router_lr_scale=0.5, router_warmup_fraction=0.5)
    raw["tokens"] = 8 * 16 * 128  # 8 steps: global warm-up 0 steps (5% of 8), router warm-up 4
    tr = Trainer(parse_train_config(raw), tmp_path)
    seen = []
    for _ in range(6):
        rec = tr.step()
        router, other = _router_lrs(tr)
        seen.append(round(router / other, 6))
        assert rec["router_lr_scale"] == pytest.approx(router / other)
    assert seen == [0.125, 0.25, 0.375, 0.5, 0.5, 0.5]  # 0.5 x (step + 1) / 4, then the scale itself


@pytest.mark.parametrize("warmup", [0.2])
def test_router_warmup_keeps_every_expert_fed_in_the_first_steps(stdlib_rows, tmp_path, warmup):
    """Seed 1 of the decision proxy's MoE (routed scaling 1, as in issue #32's runs), its first 40
    steps of a 3M-token run, telemetry every step: with a 20% router warm-up no expert goes without a
    tenth of the mean load for more than 3 steps in a row, and the busiest never takes 3.5x the mean.
    Without it this seed gave 4.0x (every token to one expert) and an expert starved for 25 steps in
    a row from step 15."""
    raw = _proxy_moe(stdlib_rows, routed_scaling=1.0, router_warmup_fraction=warmup)
    tr = Trainer(parse_train_config(raw), tmp_path)
    busiest, longest, run = 0.0, 0, 0
    for _ in range(40):
        tr.step()
        tele = [m.telemetry(10, 0.1) for m in tr.model.moe_layers()]
        busiest = max(busiest, *(t["load_max_mean"] for t in tele))
        run = run + 1 if min(t["load_min_mean"] for t in tele) < 0.1 else 0
        longest = max(longest, run)
    assert longest <= 3, f"an expert starved {longest} steps in a row"
    assert busiest < 3.5, f"one expert took {busiest}x the mean load"
