"""Router health of an MoE run, read from its telemetry records (metrics.jsonl `moe`, moe.MoE.telemetry).

Per layer: the experts' shares of the last telemetry window's tokens, the busiest expert's load over
the mean (at the end and at its peak), the router's entropy, the chosen expert's score and the bias
spread at the end, and two flags:

* `collapsed_early`: some window sent at least COLLAPSE_SHARE of its tokens to one expert (the early
  collapse of docs/trainer.md: between steps 12 and 30 most seeds send every token to one expert);
* `collapsed`: the last window still does, or an expert got no token in it.

An ablation (ablate.py) keeps this per arm and seed in ablation.json, and the report shows it.
"""
from __future__ import annotations

COLLAPSE_SHARE = 0.75  # of a window's tokens on one expert (4 experts, top-1: 3x the mean load)


def layer_health(windows: list[dict], tokens: list[int]) -> dict:
    """One layer's router over the run: `windows` are its telemetry records in order, `tokens` the
    run's token count at each."""
    last = windows[-1]
    n = len(last["load"])
    collapsed = [max(w["load"]) >= COLLAPSE_SHARE for w in windows]
    peak = max(range(len(windows)), key=lambda i: windows[i]["load_max_mean"])
    return {
        "experts": n,
        "load": last["load"],
        "load_max_mean": last["load_max_mean"],
        "peak_load_max_mean": windows[peak]["load_max_mean"], "peak_at_tokens": tokens[peak],
        "router_entropy": last["router_entropy"], "routing_confidence": last["routing_confidence"],
        "bias_spread": round(last["bias_max"] - last["bias_min"], 5),
        "collapsed_windows": sum(collapsed), "windows": len(windows),
        "collapsed_early": any(collapsed),
        "collapsed": collapsed[-1] or last["experts_without_tokens"] > 0,
    }


def run_health(records: list[dict]) -> list[dict] | None:
    """Per layer router health of one run's metric records; None for a dense run (no router)."""
    train = [r for r in records if r.get("kind") == "train" and r.get("moe")]
    if not train:
        return None
    tokens = [r["tokens"] for r in train]
    return [dict(layer=i, **layer_health([r["moe"][i] for r in train], tokens)) for i in range(len(train[0]["moe"]))]


def arm_health(per_seed: dict[int, list[dict]]) -> dict:
    """An arm's routers over its seeds: every seed's layers, and how many seeds collapsed where."""
    layers = len(next(iter(per_seed.values())))
    return {"seeds": {str(s): h for s, h in per_seed.items()},
            "collapsed_seeds": sum(any(layer["collapsed"] for layer in h) for h in per_seed.values()),
            "collapsed_early_seeds": sum(any(layer["collapsed_early"] for layer in h) for h in per_seed.values()),
            "worst_load_max_mean": [max(h[i]["load_max_mean"] for h in per_seed.values()) for i in range(layers)]}


def describe(arm: str, health: dict) -> str:
    """The arm's router health in one sentence."""
    n = len(health["seeds"])
    worst = ", ".join(f"layer {i} {x:.2f}" for i, x in enumerate(health["worst_load_max_mean"]))
    return (f"{arm}: busiest expert's final load over the mean, worst seed: {worst}; collapsed at the end in "
            f"{health['collapsed_seeds']} of {n} seeds, at some point in {health['collapsed_early_seeds']} of {n} "
            f"(a window with {COLLAPSE_SHARE:.0%} of its tokens on one expert).")
