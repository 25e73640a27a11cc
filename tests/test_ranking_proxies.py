"""The proxies the ranking benchmark and the demo train are the project's decision proxy
(examples/train/proxy.yaml: dense SwiGLU + Muon), not copies that drift from it (issue #32)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "train"


def _ranking():
    spec = importlib.util.spec_from_file_location("ranking_bench", ROOT / "benchmarks" / "ranking.py",
                                                  submodule_search_locations=None)
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tiny_proxy_is_proxy_yaml_and_the_larger_one_is_it_scaled_4_to_8x():
    ranking, proxy = _ranking(), yaml.safe_load((EXAMPLES / "proxy.yaml").read_text())
    tiny = ranking.tiny_proxy()
    for key in ("model", "moe", "optim", "tokens"):
        assert tiny[key] == proxy[key], key
    assert tiny["data"]["batch_size"] == proxy["data"]["batch_size"]
    larger = ranking.larger_proxy(tiny)
    ratio = ranking.non_embedding_params(larger) / ranking.non_embedding_params(tiny)
    assert 4 <= ratio <= 8, ratio
    assert larger["tokens"] == 4 * tiny["tokens"]
    assert larger["optim"] == tiny["optim"] and larger["moe"]["num_experts"] == 1
    assert larger["model"]["n_layers"] == tiny["model"]["n_layers"]


def test_the_demo_proxy_is_the_decision_proxy_at_the_demos_budget():
    proxy = yaml.safe_load((EXAMPLES / "proxy.yaml").read_text())
    demo = yaml.safe_load((EXAMPLES / "demo-proxy.yaml").read_text())
    mixture = yaml.safe_load((ROOT / "examples" / "mixtures" / "raw-arm.yaml").read_text())
    assert demo["model"] == proxy["model"]
    assert demo["moe"] == proxy["moe"]  # dense, the same FFN width
    assert demo["optim"] == proxy["optim"]  # Muon, LR, schedule, warm-up
    seq_len = mixture["stages"][0]["seq_len"]
    # the same tokens a step: proxy.yaml's rows are 128 tokens, the demo mixture's seq_len
    assert demo["data"]["batch_size"] * seq_len == proxy["data"]["batch_size"] * 128
    assert demo["data"]["order_seed"] == proxy["data"]["order_seed"]
