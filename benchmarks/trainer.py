"""Trainer benchmarks: CPU throughput of the tiny MoE vs its dense control and vs the naive expert loop,
the GPU proxy's tokens/s and MFU, and the known-order ablation (clean vs 30% junk, 3 seeds).

    python benchmarks/trainer.py                 # speed (CPU) + gpu (recorded as not measured without CUDA)
    python benchmarks/trainer.py --ablation      # also the full known-order ablation (about 10 minutes)
    python benchmarks/trainer.py --only ablation # only the ablation

Every mode merges its figures into benchmarks/results/trainer.json. Speed figures are medians of
interleaved timed steps (MoE, dense, loop, MoE, ...), so a neighbour's load hits every variant alike;
the host's load average is recorded beside them. Throughput counts token positions per second of a full
training step (forward, backward, AdamW).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys

import numpy as np
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "trainer.json"

TINY = {"model": {"d_model": 128, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2},
        "moe": {"num_experts": 4, "top_k": 1, "expert_hidden": 256, "n_shared": 1}}
# Fine-grained routing (16 experts, top-2) for the layer-level grouped-vs-loop comparison.
FINE = {"num_experts": 16, "top_k": 2, "expert_hidden": 64, "n_shared": 1}
# ~100M active parameters for the GPU proxy (trainer-notes §7.2 GPU column).
GPU_PROXY = {"model": {"d_model": 768, "n_layers": 12, "n_heads": 12, "n_kv_heads": 4, "n_dense_layers": 1},
             "moe": {"num_experts": 16, "top_k": 2, "expert_hidden": 768, "n_shared": 1, "score": "sigmoid",
                     "routed_scaling": 2.5}}


def _model(spec: dict, vocab: int, T: int, **moe_over):
    from assay.trainer.config import ModelConfig, MoEConfig
    from assay.trainer.model import GPT

    return GPT(ModelConfig(**spec["model"]), MoEConfig(**dict(spec["moe"], **moe_over)), vocab, T)


def speed(threads_list=(1, 2), steps: int = 12, B: int = 8, T: int = 256) -> dict:
    import torch

    out: dict = {"batch": [B, T], "config": TINY, "steps_timed": steps, "load_avg_before": os.getloadavg()[0]}
    for threads in threads_list:
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        variants = {"moe": _model(TINY, 259, T), "dense": _model(TINY, 259, T, num_experts=1),
                    "moe_loop": _model(TINY, 259, T, impl="loop")}
        variants["moe_loop"].load_state_dict(variants["moe"].state_dict())
        opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in variants.items()}
        idx, tgt = torch.randint(0, 256, (B, T)), torch.randint(0, 256, (B, T))
        times: dict[str, list[float]] = {k: [] for k in variants}
        for i in range(steps + 2):
            for name, m in variants.items():
                t = time.perf_counter()
                o = m(idx, tgt)
                (o.ce_sum / (B * T) + o.aux).backward()
                opts[name].step()
                opts[name].zero_grad(set_to_none=True)
                if i >= 2:  # two warm-up steps
                    times[name].append(time.perf_counter() - t)
        tok_s = {k: round(B * T / statistics.median(v), 1) for k, v in times.items()}
        params = {k: m.param_counts() for k, m in variants.items()}
        out[f"threads_{threads}"] = {
            "tokens_per_s": tok_s,
            "moe_over_dense": round(tok_s["moe"] / tok_s["dense"], 3),
            "grouped_over_loop": round(tok_s["moe"] / tok_s["moe_loop"], 3),
            "active_params": {k: p["active"] for k, p in params.items()},
            "total_params": {k: p["total"] for k, p in params.items()},
        }
        print(f"threads {threads}: {tok_s} tokens/s; MoE/dense {out[f'threads_{threads}']['moe_over_dense']}, "
              f"grouped/loop {out[f'threads_{threads}']['grouped_over_loop']}", flush=True)
    out["layer_fine_grained"] = layer_speed()
    out["load_avg_after"] = os.getloadavg()[0]
    return out


def layer_speed(N: int = 2048, d: int = 128, reps: int = 10) -> dict:
    """One MoE layer, fwd+bwd, 16 experts top-2: batched (sort + padded bmm) vs the per-expert loop."""
    import torch

    from assay.trainer.config import MoEConfig
    from assay.trainer.moe import MoE

    torch.manual_seed(0)
    layer = MoE(d, MoEConfig(**FINE))
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=0.05)
    x = torch.randn(1, N, d, requires_grad=True)
    res = {}
    times: dict[str, list[float]] = {"grouped": [], "loop": []}
    for i in range(reps + 2):
        for impl in times:
            layer.experts.impl = "padded" if impl == "grouped" else "loop"
            t = time.perf_counter()
            y, _ = layer(x)
            y.square().mean().backward()
            if i >= 2:
                times[impl].append(time.perf_counter() - t)
    for k, v in times.items():
        res[f"{k}_tokens_per_s"] = round(N / statistics.median(v), 1)
    res["grouped_over_loop"] = round(res["grouped_tokens_per_s"] / res["loop_tokens_per_s"], 3)
    res["config"] = dict(FINE, tokens=N, d_model=d)
    print(f"fine-grained layer: {res}", flush=True)
    return res


# A size that fills one H100/H200 (trainer-notes §7.2 asks for MFU where the GPU is busy): ~0.5B active
# of ~1.8B parameters, d_model 2048; fp32 weights + AdamW states ~29 GB, activations of 16k tokens ~25 GB.
GPU_FILL = {"model": {"d_model": 2048, "n_layers": 12, "n_heads": 16, "n_kv_heads": 4, "n_dense_layers": 1},
            "moe": {"num_experts": 16, "top_k": 2, "expert_hidden": 1408, "n_shared": 1, "score": "sigmoid",
                    "routed_scaling": 2.5}}
GPU_SIZES = {"proxy-100M-active": (GPU_PROXY, 8, 2048), "fill-0.5B-active": (GPU_FILL, 8, 2048)}


def gpu(steps: int = 10, budget_s: float = 300.0, sizes=("fill-0.5B-active", "proxy-100M-active")) -> dict:
    """bf16 training tokens/s and MFU (model FLOPs / the card's dense bf16 peak) of MoE proxies on one
    GPU, eager and under torch.compile; recorded as not measured without CUDA. Each size and mode is
    measured apart (a failure or an out-of-memory is recorded, not fatal); modes still waiting when
    `budget_s` is spent are recorded as skipped."""
    import torch

    if not torch.cuda.is_available():
        print("gpu: no CUDA device here; GPU figures not measured", flush=True)
        out = {}
        for name in sizes:
            spec, B, T = GPU_SIZES[name]
            with torch.device("meta"):  # counted, not allocated
                counts = _model(spec, 32768, T).param_counts()
            out[name] = {"config": spec, "batch": [B, T], "active_params": counts["active"],
                         "total_params": counts["total"]}
        return dict(out, measured=False, reason="no CUDA device in this session; GPU figures not measured")
    from assay.trainer.train import PEAK_FLOPS

    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    peak = next((v for k, v in PEAK_FLOPS.items() if k in name), None)
    torch.backends.cuda.matmul.allow_tf32 = True
    started = time.perf_counter()
    out: dict = {"device": name, "peak_bf16_flops": peak, "torch": torch.__version__, "measured": True}
    for size in sizes:
        spec, B, T = GPU_SIZES[size]
        row: dict = {"config": spec, "batch": [B, T]}
        out[size] = row
        for compiled in (False, True):
            mode = "compiled" if compiled else "eager"
            if time.perf_counter() - started > budget_s:
                row[mode] = {"skipped": f"benchmark budget of {budget_s:.0f} s spent"}
                continue
            try:
                row[mode] = measure_training(spec, B, T, dev, compiled, steps, peak, row)
            except Exception as exc:  # noqa: BLE001 - out of memory or a compile failure is a result here
                row[mode] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
            print(f"gpu {size} {mode}: {row[mode]}", flush=True)
            torch.cuda.empty_cache()
    return out


def measure_training(spec: dict, B: int, T: int, dev, compiled: bool, steps: int, peak: float | None,
                     row: dict) -> dict:
    """Median step time of bf16-autocast training (forward, backward, fused AdamW) of one model built
    on `dev`; fills `row` with the model's parameter and FLOP counts."""
    import torch

    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)
    with torch.device(dev):  # built in place: initialising 1.8B parameters on the host takes minutes
        model = _model(spec, 32768, T)
    counts = model.param_counts()
    row.update(active_params=counts["active"], total_params=counts["total"], flops_per_token=model.flops_per_token(T))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=cuda)
    idx = torch.randint(0, 32768, (B, T), device=dev)

    def step(fwd):
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            o = fwd(idx, idx)
        (o.ce_sum / (B * T) + o.aux).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step(model)  # eager first: settles the grouped-matmul check outside any compiled graph
    fwd = torch.compile(model) if compiled else model
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        step(fwd)
    sync()
    warm_s = time.perf_counter() - t0
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        step(fwd)
        sync()
        times.append(time.perf_counter() - t)
    tok_s = B * T / statistics.median(times)
    grouped = [m.experts._grouped_mm_ok for m in model.moe_layers()]
    return {"tokens_per_s": round(tok_s), "step_s_median": round(statistics.median(times), 4),
            "mfu": round(row["flops_per_token"] * tok_s / peak, 4) if peak else None, "warmup_s": round(warm_s, 1),
            "peak_memory_gb": round(torch.cuda.max_memory_allocated(dev) / 2**30, 1) if cuda else None,
            "grouped_mm": bool(grouped and all(grouped))}


def ablation(seeds=(0, 1, 2), tokens: int = 1_000_000, workers: int = 2) -> dict:
    """The known-order pair at one budget: clean text vs the same with 30% junk; dense check on seed 0."""
    from assay.trainer.ablate import run_ablation
    from assay.trainer.config import AblationSpec
    from assay.trainer.known_order import build_known_order, known_order_config

    work = Path(tempfile.mkdtemp(prefix="assay-ablation-"))
    paths = build_known_order(work / "data", train_bytes=None)
    raw = known_order_config(paths, tokens)
    cfg_path = work / "tiny.json"
    cfg_path.write_text(json.dumps(raw))
    spec = AblationSpec(name="clean-vs-junk30", config=str(cfg_path), seeds=list(seeds), tokens=tokens,
                        arms={"clean": str(paths["clean"]), "junk30": str(paths["junk"])},
                        dense_seeds=[seeds[0]], workers=workers, significance="paired")
    t = time.time()
    res = run_ablation(spec, raw, work / "out")
    seconds = round(time.time() - t, 1)
    pair = res["pairs"][0]
    summary = {"seconds": seconds, "tokens_per_run": res["tokens"], "seeds": list(seeds), "workers": workers,
               "arms": {a: {k: r[k] for k in ("mean", "std", "values", "per_source", "tokens_per_s")}
                        for a, r in res["arms"].items()},
               "winner": pair["a"], "gap": abs(pair["diff"]), "gap_over_seed_std": pair["gap_over_std"],
               "gap_over_paired_diff_std": pair["gap_over_paired_std"], "paired_p": pair["p_value"],
               "welch_p": pair["welch_p"], "significant_at_0.01_paired": pair["significant"],
               "dense_check": res.get("dense_check"), "output": str(work / "out"),
               "config": raw, "load_avg_after": os.getloadavg()[0]}
    print(json.dumps({k: summary[k] for k in ("seconds", "winner", "gap", "gap_over_seed_std",
                                              "gap_over_paired_diff_std", "paired_p", "welch_p")}), flush=True)
    for arm, r in res["arms"].items():
        print(f"  {arm}: BPB {r['mean']:.4f} ± {r['std']:.4f} {r['values']}", flush=True)
    return summary


# ---- runs logged one per line, so a long benchmark resumes where it stopped ----------------------

def _run_one(key: list, raw: dict, run_dir: str) -> dict:
    """One training run (in a spawned worker): its held-out BPB, eval curve, expert telemetry and the
    CPU seconds it took."""
    import shutil

    from assay.trainer.config import parse_train_config
    from assay.trainer.train import read_metrics, train

    shutil.rmtree(run_dir, ignore_errors=True)
    cpu, wall = time.process_time(), time.perf_counter()
    summary = train(parse_train_config(raw), run_dir, log=lambda m: None, report=False)
    recs = read_metrics(run_dir)
    moe = [r["moe"] for r in recs if r.get("kind") == "train" and r.get("moe")]
    held = summary["eval"]["held_out"]
    out = {"key": key, "bpb": held["bpb"], "cpu_s": round(time.process_time() - cpu, 1),
           "wall_s": round(time.perf_counter() - wall, 1), "device": summary.get("device", "cpu"),
           "per_source": {k: v["bpb"] for k, v in held.get("per_source", {}).items()},
           "curve": [[r["tokens"], round(r["eval"]["held_out"]["bpb"], 4)] for r in recs if r.get("kind") == "eval"]}
    if moe:
        out["load_max_mean"] = [round(max(layer["load_max_mean"] for layer in m), 3) for m in moe]
        out["act_rms_max_median"] = [round(max(layer["act_rms_max_median"] or 0 for layer in m), 2) for m in moe]
    shutil.rmtree(Path(run_dir) / "checkpoints", ignore_errors=True)
    return out


def run_grid(jobs: list[tuple[list, dict]], log: Path, work: Path, workers: int = 2, train: bool = True) -> list[dict]:
    """Train every (key, raw config) job not yet in `log` (JSON lines), `workers` at a time, one
    thread each (none with `train` False); returns every logged result."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    done = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    have = {json.dumps(r["key"]) for r in done}
    todo = [(k, dict(raw, threads=1)) for k, raw in jobs if json.dumps(k) not in have and train]
    if todo:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            futures = [pool.submit(_run_one, k, raw, str(work / "-".join(map(str, k)))) for k, raw in todo]
            for fut in as_completed(futures):
                res = fut.result()
                done.append(res)
                with open(log, "a") as fh:
                    fh.write(json.dumps(res) + "\n")
                print(f"  {res['key']}: BPB {res['bpb']:.4f} ({res['cpu_s']:.0f} CPU s)", flush=True)
    return done


def _run_probe(key: list, raw: dict, run_dir: str, averages: dict) -> dict:
    """One run driven step by step (no run folder bookkeeping): held-out BPB of the raw weights at
    every quarter of the run, and at the end of each weight average in `averages` (name -> ("ema",
    horizon as a fraction of the steps) or ("tail", the last fraction of the steps, uniform))."""
    import shutil

    import torch

    from assay.trainer.config import parse_train_config
    from assay.trainer.evaluate import evaluate
    from assay.trainer.train import Trainer

    shutil.rmtree(run_dir, ignore_errors=True)
    Path(run_dir).mkdir(parents=True)
    cfg = parse_train_config(raw)
    cpu = time.process_time()
    tr = Trainer(cfg, Path(run_dir), log=lambda m: None)
    params = [p for p in tr.model.parameters()]
    total = tr.total_steps
    avg = {}
    for name, (kind, frac) in averages.items():
        start = total - max(1, int(frac * total)) if kind == "tail" else 0
        avg[name] = {"kind": kind, "start": start, "decay": 1 - 1 / max(frac * total, 1), "n": 0,
                     "w": [p.detach().clone() for p in params]}
    held = cfg.eval.sets["held_out"]

    def score() -> float:
        return evaluate(tr.model, held, cfg.eval.batch_size, None, False, None)["bpb"]

    curve, eval_cpu = [], 0.0
    quarters = {int(total * q / 4) for q in (1, 2, 3)}
    load, router = [], []  # per telemetry window: busiest/mean load; per layer (entropy, confidence, bias spread)
    for step in range(1, total + 1):
        tr.step()
        with torch.no_grad():
            for a in avg.values():
                if a["kind"] == "ema":
                    for w, p in zip(a["w"], params):
                        w.lerp_(p, 1 - a["decay"])
                elif step > a["start"]:
                    a["n"] += 1
                    for w, p in zip(a["w"], params):
                        w.lerp_(p, 1 / a["n"])
        if (step % 25 == 0 or step == total) and tr.model.moe_layers():
            tele = [m.telemetry(10, 0.1) for m in tr.model.moe_layers()]
            load.append(round(max(t["load_max_mean"] for t in tele), 3))
            router.append([[t["router_entropy"], t["routing_confidence"], round(t["bias_max"] - t["bias_min"], 3)]
                           for t in tele])
        if step in quarters:
            t = time.process_time()
            curve.append([step * tr.tokens_per_step, round(score(), 4)])
            eval_cpu += time.process_time() - t
    t = time.process_time()
    final = score()
    curve.append([total * tr.tokens_per_step, round(final, 4)])
    out = {"key": key, "bpb": final, "curve": curve, "load_max_mean": load, "router": router}
    with torch.no_grad():
        saved = [p.detach().clone() for p in params]
        for name, a in avg.items():
            for p, w in zip(params, a["w"]):
                p.copy_(w)
            out[f"bpb_{name}"] = score()
        for p, w in zip(params, saved):
            p.copy_(w)
    eval_cpu += time.process_time() - t
    out["cpu_s"] = round(time.process_time() - cpu - eval_cpu + (eval_cpu / (len(averages) + len(curve))), 1)
    out["eval_cpu_s"] = round(eval_cpu, 1)
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


# Seed-noise probes on the tuning corpus (the stdlib text of known_order.py): overrides of the
# known-order config, each run on clean and junk30 over seeds 0-2 (issue #32).
AVERAGES = {"ema10": ("ema", 0.10), "ema25": ("ema", 0.25), "tail25": ("tail", 0.25), "tail50": ("tail", 0.5)}
NOISE_VARIANTS: dict[str, dict] = {
    "base-1M": {},
    "base-2M": {"tokens": 2_000_000},
    "cos0-2M": {"tokens": 2_000_000, "optim": {"min_lr_ratio": 0.0}},
    "wsd0-2M": {"tokens": 2_000_000, "optim": {"min_lr_ratio": 0.0, "schedule": "wsd", "decay_fraction": 0.3}},
    "cos0-1M": {"optim": {"min_lr_ratio": 0.0}},
    "muon-1M": {"optim": {"name": "muon"}},
    "muon-cos0-1M": {"optim": {"name": "muon", "min_lr_ratio": 0.0}},
    "muon-warm10-1M": {"optim": {"name": "muon", "warmup_fraction": 0.1}},
    "muon-2M": {"tokens": 2_000_000, "optim": {"name": "muon"}},
    "muon-cos0-2M": {"tokens": 2_000_000, "optim": {"name": "muon", "min_lr_ratio": 0.0}},
    "dense-muon-1M": {"moe": {"num_experts": 1}, "optim": {"name": "muon"}},
    "muon-e8k2-1M": {"moe": {"num_experts": 8, "top_k": 2, "expert_hidden": 64}, "optim": {"name": "muon"}},
    "muon-seqbal-1M": {"moe": {"seq_balance_coef": 0.01}, "optim": {"name": "muon"}},
    "muon-bias05-1M": {"moe": {"bias_rate": [{"value": 0.05, "until_fraction": 0.1}, {"value": 0.01}]},
                       "optim": {"name": "muon"}},
    "muon-biasdecay-1M": {"moe": {"bias_rate": [{"value": 0.01, "until_fraction": 0.3}, {"value": 0.001}]},
                          "optim": {"name": "muon"}},
    "muon-1M-tele": {"optim": {"name": "muon"}},  # muon-1M again, with router telemetry
    "muon-sigmoid-1M": {"moe": {"score": "sigmoid", "normalize_gates": False}, "optim": {"name": "muon"}},
    "warm10-1M": {"optim": {"warmup_fraction": 0.1}},
    "warm20-1M": {"optim": {"warmup_fraction": 0.2}},
    "warm20-cos0-1M": {"optim": {"warmup_fraction": 0.2, "min_lr_ratio": 0.0}},
}


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base.get(k, {}), v) if isinstance(v, dict) else v
    return out


def noise(variants: list[str], seeds: int = 3, arms=("clean", "junk30"), workers: int = 1) -> dict:
    """Seed-to-seed noise of the known-order proxy under each variant, on the tuning corpus only."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    import multiprocessing

    from assay.trainer.known_order import build_arms, clean_documents, known_order_config

    work = ROOT / ".bench" / "noise"
    paths = build_arms(work / "data", clean_documents(), {"clean": ("junk", 0.0), "junk10": ("junk", 0.1),
                                                          "junk30": ("junk", 0.3)})
    log = work / "runs.jsonl"
    done = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    have = {json.dumps(r["key"]) for r in done}
    jobs = []
    for v in variants:
        for s in range(seeds):
            for arm in arms:
                key = [v, arm, s]
                if json.dumps(key) in have:
                    continue
                raw = _merge(known_order_config({"clean": paths[arm], "eval": paths["eval"]}), NOISE_VARIANTS[v])
                jobs.append((key, dict(raw, seed=s, threads=1)))
    if jobs:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            futs = [pool.submit(_run_probe, k, raw, str(work / "runs" / "-".join(map(str, k))), AVERAGES)
                    for k, raw in jobs]
            for fut in as_completed(futs):  # one at a time with workers=1 (a shared machine)
                res = fut.result()
                done.append(res)
                with open(log, "a") as fh:
                    fh.write(json.dumps(res) + "\n")
                print(f"  {res['key']}: BPB {res['bpb']:.4f} "
                      + " ".join(f"{a} {res['bpb_' + a]:.4f}" for a in AVERAGES) + f" ({res['cpu_s']:.0f} CPU s)",
                      flush=True)
    return summarize_noise(done, variants)


def summarize_noise(done: list[dict], variants: list[str]) -> dict:
    res = {tuple(r["key"]): r for r in done}
    out = {}
    for v in variants:
        row = {}
        for metric in ["bpb"] + [f"bpb_{a}" for a in AVERAGES]:
            vals = {arm: [res[(v, arm, s)][metric] for s in range(10) if (v, arm, s) in res]
                    for arm in ("clean", "junk30", "junk10")}
            if len(vals["clean"]) < 2:
                continue
            n = min(len(vals["clean"]), len(vals["junk30"]))
            d = np.subtract(vals["junk30"][:n], vals["clean"][:n]) if n else np.array([])
            row[metric] = {"clean": [round(x, 4) for x in vals["clean"]],
                           "junk30": [round(x, 4) for x in vals["junk30"]],
                           "clean_std": round(float(np.std(vals["clean"], ddof=1)), 4),
                           "junk30_std": round(float(np.std(vals["junk30"], ddof=1)), 4) if n > 1 else None}
            if n > 1:
                row[metric].update(gap_stats(vals["clean"][:n], vals["junk30"][:n]),
                                   paired_diff_std=round(float(np.std(d, ddof=1)), 4))
            m = min(len(vals["clean"]), len(vals["junk10"]))
            if m > 1:
                row[metric]["junk10"] = [round(x, 4) for x in vals["junk10"]]
                row[metric]["junk10_vs_clean"] = gap_stats(vals["clean"][:m], vals["junk10"][:m])
        cpu = [res[(v, a, s)]["cpu_s"] for a in ("clean", "junk30") for s in range(3) if (v, a, s) in res]
        row["cpu_s_per_run"] = round(float(np.mean(cpu)), 1) if cpu else None
        out[v] = row
        if "bpb" in row:
            print(f"{v}: " + "; ".join(f"{m}: clean std {r['clean_std']}, gap {r.get('gap')}, "
                                     f"{r.get('gap_over_seed_std')} std, paired p {r.get('paired_p')}"
                                     for m, r in row.items() if isinstance(r, dict)), flush=True)
    return out


def gap_stats(a: list[float], b: list[float]) -> dict:
    """b's lead of a (BPB b - a), in pooled seed standard deviations, and the paired p-value."""
    from assay.trainer.ablate import paired_p

    pooled = ((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2) ** 0.5
    gap = float(np.mean(b) - np.mean(a))
    return {"gap": round(gap, 4), "gap_over_seed_std": round(gap / pooled, 2) if pooled else None,
            "paired_p": paired_p(a, b), "a_wins_every_seed": bool(all(x < y for x, y in zip(a, b)))}


# Levers against seed noise (issue #32), measured on the tuning corpus first: overrides of
# known_order_config, each a list of seeds per arm. The held-out documents are labelled half0/half1 (by a
# hash of their id), so every run also scores two disjoint halves of the eval set: the seed-to-seed
# covariance of the halves is training noise, the spread of their difference is evaluation noise.
LEVERS: dict[str, dict] = {
    "base": {"tokens": 1_000_000},  # the first pass's budget (the default is 3M tokens since)
    "t2M": {"tokens": 2_000_000},
    "t3M": {"tokens": 3_000_000},
    "t3M-b48": {"tokens": 3_000_000, "data": {"batch_size": 48}},
    # a news seed's offset is set in steps 25-125, around the end of the 5% warm-up (seed_offsets)
    "t3M-warm20": {"tokens": 3_000_000, "optim": {"warmup_fraction": 0.2}},
    "t4M": {"tokens": 4_000_000},
    "t4M-b64": {"tokens": 4_000_000, "data": {"batch_size": 64}},
    "t2M-b32": {"tokens": 2_000_000, "data": {"batch_size": 32}},
    "t4M-b32-lr6": {"tokens": 4_000_000, "data": {"batch_size": 32}, "optim": {"lr": 6e-3}},
    "t4M-b32": {"tokens": 4_000_000, "data": {"batch_size": 32}},
    "d128-2M": {"tokens": 2_000_000, "model": {"d_model": 128}, "moe": {"expert_hidden": 256}},
    "d128-2M-b32": {"tokens": 2_000_000, "model": {"d_model": 128}, "moe": {"expert_hidden": 256},
                    "data": {"batch_size": 32}},
    "lr6-1M": {"optim": {"lr": 6e-3}},
    "lr24-1M": {"optim": {"lr": 2.4e-2}},
}


def _halves(documents: list[dict]) -> list[dict]:
    from assay.trainer.known_order import is_held_out

    return [dict(d, source=f"half{int(hashlib.sha256(('half/' + d['doc_id']).encode()).hexdigest()[:8], 16) % 2}")
            if is_held_out(d["doc_id"]) else d for d in documents]


def levers(kind: str, variants: list[str], seeds: int, arms: tuple[str, ...], workers: int = 2,
           train: bool = True) -> dict:
    """Each variant's runs on one corpus (stdlib: the tuning corpus): per arm the BPB per seed, clean's
    seed std, its split into training and evaluation noise, the gap to each junk arm, CPU s per run."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _corpora

    from assay.trainer.known_order import build_arms, clean_documents, known_order_config

    work = ROOT / ".bench" / "levers" / kind
    docs = _halves(clean_documents() if kind == "stdlib" else _corpora.corpus(kind))
    paths = build_arms(work / "data", docs, {a: ("junk", {"clean": 0.0, "junk10": 0.1, "junk30": 0.3}[a])
                                              for a in ("clean", "junk10", "junk30")})
    jobs = [([v, arm, s], _merge(dict(known_order_config({"clean": paths[arm], "eval": paths["eval"]}), seed=s),
                                 LEVERS[v]))
            for s in range(seeds) for v in variants for arm in arms]  # seed-major: every variant's spread early
    res = {tuple(r["key"]): r for r in run_grid(jobs, work / "runs.jsonl", work / "runs", workers, train)}
    out = {}
    for v in variants:
        vals = {a: [res[(v, a, s)]["bpb"] for s in range(10) if (v, a, s) in res] for a in ("clean", "junk10", "junk30")}
        c = [res[(v, "clean", s)] for s in range(10) if (v, "clean", s) in res]
        row = {"clean": [round(x, 4) for x in vals["clean"]],
               "cpu_s_per_run": round(float(np.mean([r["cpu_s"] for k, r in res.items() if k[0] == v])), 1)}
        if len(c) > 1:
            row["clean_std"] = round(float(np.std(vals["clean"], ddof=1)), 4)
            h = np.array([[r["per_source"]["half0"], r["per_source"]["half1"]] for r in c])
            cov = float(np.cov(h[:, 0], h[:, 1])[0, 1])
            row["train_noise_std"] = round(max(cov, 0.0) ** 0.5, 4)  # the seeds' shared offset on both halves
            row["eval_noise_std"] = round(float(np.std(h[:, 0] - h[:, 1], ddof=1)) / 2, 4)  # on the whole set
        for a in ("junk10", "junk30"):
            n = min(len(vals["clean"]), len(vals[a]))
            if n > 1:
                row[a] = dict(gap_stats(vals["clean"][:n], vals[a][:n]), values=[round(x, 4) for x in vals[a]])
        out[v] = row
        print(f"{kind} {v}: {json.dumps(row)}", flush=True)
    return out


def _fingerprint(documents: list[dict]) -> str:
    """A short hash of the corpus (ids and texts), so a row says which corpus it was measured on."""
    h = hashlib.sha256()
    for d in documents:
        h.update(d["doc_id"].encode() + b"\0" + d["text"].encode() + b"\0")
    return h.hexdigest()[:12]


def corpora(kinds=("news", "code", "multilingual", "docs"), tokens: int | None = None, seeds: int = 5,
            workers: int = 1, paired_only: bool = False, train: bool = True, arms: tuple[str, ...] | None = None) -> dict:
    """The known-order check on corpora the protocol was never tuned on: clean and junk30 on seeds 0-2
    (paired), then junk10 on seeds 0-2 and clean on `seeds` seeds (seed-to-seed std) unless
    `paired_only`; CPU time per pair of arms. `arms`: train only these (None: all three). `train`
    False: only summarise the runs logged."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _corpora

    from assay.trainer.known_order import build_arms, known_order_config

    out: dict = {}
    base = ROOT / ".bench" / "known-order"
    proto = hashlib.sha256(json.dumps(known_order_config({"clean": "", "eval": ""}, tokens), sort_keys=True)
                           .encode()).hexdigest()[:8]  # runs of another protocol are never reused
    for kind in kinds:
        work = base / kind
        docs = _corpora.corpus(kind)
        recipes = {"clean": ("junk", 0.0), "junk10": ("junk", 0.1), "junk30": ("junk", 0.3)}
        paths = build_arms(work / "data", docs, recipes)
        # Most telling first (a run logged is never repeated): the paired clean/junk30 seeds, junk10,
        # then clean's extra seeds for its seed-to-seed spread.
        order = [(arm, s) for s in range(3) for arm in ("clean", "junk30")]
        if not paired_only:
            order += [("junk10", s) for s in range(3)] + [("clean", s) for s in range(3, seeds)]
        if arms:
            order = [(arm, s) for arm, s in order if arm in arms]
        jobs = [([kind, arm, seed], dict(known_order_config({"clean": paths[arm], "eval": paths["eval"]}, tokens),
                                         seed=seed)) for arm, seed in order]
        print(f"{kind}: {len(jobs)} runs", flush=True)
        res = {tuple(r["key"][1:]): r for r in run_grid(jobs, work / f"runs-{proto}.jsonl", work / "runs", workers,
                                                             train)}
        bpb: dict[str, list[float]] = {}
        for arm in ("clean", "junk30", "junk10"):
            bpb[arm] = [res[(arm, s)]["bpb"] for s in range(seeds) if (arm, s) in res]
        row = {"unseen_split": kind == _corpora.UNSEEN, "never_seen_split": kind == _corpora.NEVER_SEEN,
               "tuning_corpus": kind == "stdlib", "protocol_hash": proto,
               "protocol": {k: known_order_config(paths, tokens)[k] for k in ("tokens", "model", "moe", "optim")}
               | {"batch_size": known_order_config(paths, tokens)["data"]["batch_size"]}, "tokens_per_run": known_order_config(paths, tokens)["tokens"],
               "train_bytes": sum(len(d["text"].encode()) for d in _corpora.split(docs)[0]), "bpb": bpb,
               # docs is read from the installed packages: a package installed later changes it
               "documents": len(docs), "corpus_sha256": _fingerprint(docs),
               "clean_seeds": len(bpb["clean"])}
        if len(bpb["clean"]) > 1:
            row["clean_seed_std"] = round(float(np.std(bpb["clean"], ddof=1)), 4)
            row["clean_seed_std_first_3"] = round(float(np.std(bpb["clean"][:3], ddof=1)), 4)
        pair = [res.get((arm, s)) for arm in ("clean", "junk30") for s in range(3)]
        if all(pair):
            row["cpu_seconds_clean_vs_junk30_3_seeds"] = round(sum(r["cpu_s"] for r in pair), 1)
        for arm in ("junk30", "junk10"):  # paired on the seeds both arms have
            n = min(len(bpb["clean"]), len(bpb[arm]), 3)
            if n > 1:
                row[arm] = dict(gap_stats(bpb["clean"][:n], bpb[arm][:n]), seeds=n)
        out[kind] = row
        print(json.dumps({kind: {k: v for k, v in row.items() if k != "bpb"}}), flush=True)
    return out


# ---- the MoE decision proxy (issue #42): why its seeds spread, and whether a fix decides like dense ----

# Overrides of known_order_config: "dense" is the decision proxy itself; the others are its MoE at the
# same active width (4 routed experts of 128 top-1 + 1 shared of 128 = the dense FFN's 256) and budget.
MOE_VARIANTS: dict[str, dict] = {
    "dense": {},
    "moe-old": {"moe": {"num_experts": 4, "router_lr_scale": 1.0, "router_warmup_fraction": 0.0}},
    "moe": {"moe": {"num_experts": 4}},  # the MoE's defaults as they stand now
    # a third of the budget (489 steps), where the old MoE spread its seeds 4.7x dense's (issue #32 "noise")
    "dense-1M": {"tokens": 1_000_000},
    "moe-old-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 1.0, "router_warmup_fraction": 0.0}},
    "moe-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4}},
    "rlr0.1-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 0.1, "router_warmup_fraction": 0.0}},
    "rlr0.3-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 0.3, "router_warmup_fraction": 0.0}},
    "rwarm20-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 1.0, "router_warmup_fraction": 0.2}},
    # routed output at a dense expert's scale while the router is near-uniform (gates ~1/E otherwise)
    "rs4-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 1.0, "router_warmup_fraction": 0.0,
                                            "routed_scaling": 4.0}},
    "rs4-rwarm20-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 1.0,
                                                    "router_warmup_fraction": 0.2, "routed_scaling": 4.0}},
    "rwarm20-rlr0.3-1M": {"tokens": 1_000_000, "moe": {"num_experts": 4, "router_lr_scale": 0.3,
                                                       "router_warmup_fraction": 0.2}},
    "rlr0.1": {"moe": {"num_experts": 4, "router_lr_scale": 0.1, "router_warmup_fraction": 0.0}},
    "rlr0.03": {"moe": {"num_experts": 4, "router_lr_scale": 0.03, "router_warmup_fraction": 0.0}},
    "rwarm10": {"moe": {"num_experts": 4, "router_lr_scale": 1.0, "router_warmup_fraction": 0.1}},
    "rwarm10-rlr0.1": {"moe": {"num_experts": 4, "router_lr_scale": 0.1, "router_warmup_fraction": 0.1}},
}


def _router_trace(key: list, raw: dict, steps: int, run_dir: str) -> dict:
    """The first `steps` optimizer steps of a run, telemetry after every step, per MoE layer: the
    busiest and idlest expert's share over the mean, router entropy, the chosen expert's score and the
    bias spread (max - min); the training loss at each step."""
    import shutil

    from assay.trainer.config import parse_train_config
    from assay.trainer.train import Trainer

    shutil.rmtree(run_dir, ignore_errors=True)
    Path(run_dir).mkdir(parents=True)
    tr = Trainer(parse_train_config(raw), Path(run_dir), log=lambda m: None)
    trace: dict = {"loss": [], "layers": []}
    for _ in range(min(steps, tr.total_steps)):
        rec = tr.step()
        trace["loss"].append(round(rec["loss"], 4))
        tele = [m.telemetry(10, 0.1) for m in tr.model.moe_layers()]
        trace["layers"].append([[t["load_max_mean"], t["load_min_mean"], t["router_entropy"],
                                 t["routing_confidence"], round(t["bias_max"] - t["bias_min"], 3)] for t in tele])
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"key": key, "steps": len(trace["loss"]), **trace}


def _early_summary(r: dict, upto: int) -> dict:
    """One traced run, per layer over the first `upto` steps: the peak busiest/mean load, the steps an
    expert got under a tenth of the mean (starved), the mean router entropy and chosen score."""
    rows = r["layers"][:upto]
    out = []
    for layer in range(len(rows[0]) if rows else 0):
        vals = [step[layer] for step in rows]
        out.append({"peak_load_max_mean": max(v[0] for v in vals),
                    "starved_steps": sum(v[1] < 0.1 for v in vals),
                    "entropy_mean": round(float(np.mean([v[2] for v in vals])), 3),
                    "entropy_last": vals[-1][2], "confidence_last": vals[-1][3], "bias_spread_last": vals[-1][4]})
    return {"steps": upto, "layers": out, "loss_last": r["loss"][upto - 1] if len(r["loss"]) >= upto else None}


def _router_end(run_dir: Path) -> list | None:
    """Per MoE layer, the last telemetry window of a logged run: busiest/mean load, router entropy,
    the chosen expert's score, bias spread (None for a dense run or a run folder no longer there)."""
    path = run_dir / "metrics.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    moe = [r["moe"] for r in recs if r.get("kind") == "train" and r.get("moe")]
    if not moe:
        return None
    return [[m["load_max_mean"], m["router_entropy"], m["routing_confidence"], round(m["bias_max"] - m["bias_min"], 3)]
            for m in moe[-1]]


def moe_proxy(kinds: tuple[str, ...], variants: list[str], seeds: int = 5, junk_seeds: int = 3, workers: int = 1,
              early_steps: int = 0, train: bool = True, dense_reference: dict | None = None,
              early_only: bool = False) -> dict:
    """Per corpus and variant: clean on `seeds` seeds and junk30 on the first `junk_seeds` (paired), the
    seed std of clean's held-out BPB and its ratio to dense's, the junk30 gap in pooled seed std and
    the paired p; with `early_steps`, a step-by-step router trace of clean's first steps per seed
    first. `dense_reference`: results["corpora"] (the dense proxy's runs of the same protocol hash),
    used where this mode has no "dense" runs of its own."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _corpora

    from assay.trainer.known_order import build_arms, clean_documents, known_order_config

    proto = hashlib.sha256(json.dumps(known_order_config({"clean": "", "eval": ""}), sort_keys=True)
                           .encode()).hexdigest()[:8]
    out: dict = {}
    for kind in kinds:
        work = ROOT / ".bench" / "moe" / kind
        docs = clean_documents() if kind == "stdlib" else _corpora.corpus(kind)
        paths = build_arms(work / "data", docs, {"clean": ("junk", 0.0), "junk30": ("junk", 0.3)})

        def config(v: str, arm: str, seed: int) -> dict:
            return _merge(dict(known_order_config({"clean": paths[arm], "eval": paths["eval"]}), seed=seed),
                          MOE_VARIANTS[v])

        row: dict = {"protocol_hash": proto, "corpus_sha256": _fingerprint(docs), "documents": len(docs)}
        if early_steps:
            log = work / f"early-{proto}.jsonl"
            done = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
            have = {json.dumps(r["key"]) for r in done}
            todo = [([v, "clean", s, early_steps], config(v, "clean", s)) for v in variants if v != "dense"
                    for s in range(seeds)]
            todo = [(k, c) for k, c in todo if json.dumps(k) not in have]
            if todo and train:
                ctx = multiprocessing.get_context("spawn")
                with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                    futs = [pool.submit(_router_trace, k, dict(c, threads=1), early_steps,
                                        str(work / "early" / "-".join(map(str, k)))) for k, c in todo]
                    for fut in futs:
                        res = fut.result()
                        done.append(res)
                        with open(log, "a") as fh:
                            fh.write(json.dumps(res) + "\n")
            early = {}
            for r in done:
                v, _, s, n = r["key"]
                if v in variants and n == early_steps:
                    early.setdefault(v, {})[str(s)] = _early_summary(r, early_steps)
            row["early"] = early
            for v, per in early.items():
                for s, e in sorted(per.items(), key=lambda kv: int(kv[0])):
                    print(f"{kind} {v} seed {s} first {early_steps} steps: " + "; ".join(
                        f"L{i} peak {L['peak_load_max_mean']} starved {L['starved_steps']} H {L['entropy_mean']}"
                        f"->{L['entropy_last']} conf {L['confidence_last']} bias {L['bias_spread_last']}"
                        for i, L in enumerate(e["layers"])), flush=True)
        jobs = [([v, arm, s], config(v, arm, s)) for s in range(seeds) for v in variants
                for arm in ("clean", "junk30") if arm == "clean" or s < junk_seeds]
        res = {tuple(r["key"]): r for r in run_grid(jobs, work / f"runs-{proto}.jsonl", work / "runs", workers,
                                                     train and not early_only)}
        ref = (dense_reference or {}).get(kind, {})
        dense_ref = None
        if ref.get("protocol_hash") == proto and ref.get("bpb", {}).get("clean"):
            dense_ref = {"clean": ref["bpb"]["clean"][:seeds], "junk30": ref["bpb"]["junk30"][:junk_seeds],
                         "from": "results corpora (same protocol hash; CPU-deterministic runs)"}
        for v in variants:
            vals = {a: [res[(v, a, s)]["bpb"] for s in range(seeds) if (v, a, s) in res] for a in ("clean", "junk30")}
            if v == "dense" and len(vals["clean"]) < 2 and dense_ref:
                vals = {a: dense_ref[a] for a in ("clean", "junk30")}
            r = {"clean": [round(x, 4) for x in vals["clean"]], "junk30": [round(x, 4) for x in vals["junk30"]]}
            if len(vals["clean"]) > 1:
                r["clean_mean"] = round(float(np.mean(vals["clean"])), 4)
                r["clean_std"] = round(float(np.std(vals["clean"], ddof=1)), 4)
            n = min(len(vals["clean"]), len(vals["junk30"]))
            if n > 1:
                r["junk30_vs_clean"] = dict(gap_stats(vals["clean"][:n], vals["junk30"][:n]), seeds=n)
            cpu = [res[(v, a, s)]["cpu_s"] for a in ("clean", "junk30") for s in range(seeds) if (v, a, s) in res]
            if cpu:
                r["cpu_s_per_run"] = round(float(np.mean(cpu)), 1)
            ends = [_router_end(work / "runs" / f"{v}-clean-{s}") for s in range(seeds) if (v, "clean", s) in res]
            if any(ends):
                r["clean_router_at_end"] = ends
            row[v] = r
        if dense_ref and "dense" not in variants:
            row["dense"] = {"clean": [round(x, 4) for x in dense_ref["clean"]], "from": dense_ref["from"],
                            "clean_mean": round(float(np.mean(dense_ref["clean"])), 4),
                            "clean_std": round(float(np.std(dense_ref["clean"], ddof=1)), 4),
                            "junk30_vs_clean": dict(gap_stats(dense_ref["clean"][:junk_seeds], dense_ref["junk30"]),
                                                    seeds=junk_seeds)}
        for v in variants:
            d = row.get("dense-1M" if v.endswith("-1M") else "dense", {})  # the dense run of the same budget
            if not v.startswith("dense") and d.get("clean_std") and row[v].get("clean_std"):
                row[v]["std_over_dense"] = round(row[v]["clean_std"] / d["clean_std"], 2)
                row[v]["mean_minus_dense"] = round(row[v]["clean_mean"] - d["clean_mean"], 4)
        out[kind] = row
        print(json.dumps({kind: {k: v for k, v in row.items() if k != "early"}}), flush=True)
    return out


def seed_offsets(kind: str, early_steps: int = 125) -> dict:
    """Why a seed ends off the others (issue #32): every seed of an arm trains on the same batches in
    the same order (`order_seed` fixed), so its training loss minus the arm's median at each logged
    step is the initialisation's effect alone. Per logged run of `kind` (.bench/known-order/<kind>/runs):
    that offset averaged over the first `early_steps` steps after step 25, over the middle and over the
    last quarter of the run (nats a byte-token), beside the final held-out BPB minus the arm's median;
    and across all runs the correlation of the early offset with the final held-out one."""
    runs: dict[str, dict[int, dict]] = {}
    for f in sorted((ROOT / ".bench" / "known-order" / kind / "runs").glob("*/metrics.jsonl")):
        arm, seed = f.parent.name.split("-")[-2:]
        recs = [json.loads(x) for x in f.read_text().splitlines()]
        train = {r["step"]: r["loss"] for r in recs if r["kind"] == "train"}
        held = [r["eval"]["held_out"]["bpb"] for r in recs if r["kind"] == "eval"]
        if held:
            runs.setdefault(arm, {})[int(seed)] = {"train": train, "bpb": held[-1]}
    out: dict = {}
    early, final = [], []
    for arm, seeds in runs.items():
        if len(seeds) < 3:
            continue
        steps = sorted(set.intersection(*(set(r["train"]) for r in seeds.values())))
        med = {s: float(np.median([r["train"][s] for r in seeds.values()])) for s in steps}
        bpb_med = float(np.median([r["bpb"] for r in seeds.values()]))
        last = steps[-1]
        windows = {"early": [s for s in steps if 25 <= s <= early_steps],
                   "middle": [s for s in steps if early_steps < s <= 0.75 * last],
                   "last_quarter": [s for s in steps if s > 0.75 * last]}
        rows = {}
        for seed, r in sorted(seeds.items()):
            row = {f"train_offset_{w}": round(float(np.mean([r["train"][s] - med[s] for s in ss])), 4)
                   for w, ss in windows.items()}
            row["held_out_bpb_offset"] = round(r["bpb"] - bpb_med, 4)
            rows[seed] = row
            early.append(row["train_offset_early"])
            final.append(row["held_out_bpb_offset"])
        out[arm] = rows
    if len(early) > 2:
        out["corr_early_train_vs_final_held_out"] = round(float(np.corrcoef(early, final)[0, 1]), 3)
    print(json.dumps({kind: out}), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ablation", action="store_true", help="also run the known-order ablation")
    ap.add_argument("--only", choices=["speed", "gpu", "ablation", "corpora", "noise", "levers",
                                                  "seed-offsets", "moe"], default=None)
    ap.add_argument("--corpus", default="stdlib", help="levers: stdlib (the tuning corpus) or a benchmarks/_corpora kind")
    ap.add_argument("--levers", nargs="+", default=["base"], help="levers: which LEVERS variants")
    ap.add_argument("--workers", type=int, default=2, help="levers: training processes at once")
    ap.add_argument("--ablation-tokens", type=int, default=1_000_000)
    ap.add_argument("--kinds", nargs="+", default=["news", "code", "multilingual", "docs"],
                    help="corpora: which ones, in order (docs is the split kept unseen; run it last)")
    ap.add_argument("--paired-only", action="store_true", help="corpora: only clean and junk30 on seeds 0-2")
    ap.add_argument("--corpora-arms", nargs="+", default=None, choices=["clean", "junk10", "junk30"],
                    help="corpora: train only these arms (default: all three)")
    ap.add_argument("--summarize", action="store_true", help="corpora, levers: train nothing, summarise the logged runs")
    ap.add_argument("--variants", nargs="+", default=list(NOISE_VARIANTS), help="noise: which variants")
    ap.add_argument("--seeds", type=int, default=3, help="noise: seeds 0..N-1 per arm")
    ap.add_argument("--gpu-budget", type=float, default=300.0, help="gpu: seconds before the remaining sizes are skipped")
    ap.add_argument("--arms", nargs="+", default=["clean", "junk30"], help="noise: which arms")
    ap.add_argument("--moe-variants", nargs="+", default=["moe-old", "moe"], help="moe: which MOE_VARIANTS")
    ap.add_argument("--early-steps", type=int, default=0, help="moe: trace the router over clean's first N steps")
    ap.add_argument("--early-only", action="store_true", help="moe: only the router traces, no full runs")
    ap.add_argument("--junk-seeds", type=int, default=3, help="moe: junk30 on seeds 0..N-1")
    args = ap.parse_args(argv)
    modes = [args.only] if args.only else ["speed", "gpu"] + (["ablation"] if args.ablation else [])
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for mode in modes:
        if mode == "ablation":
            results[mode] = ablation(tokens=args.ablation_tokens)
        elif mode == "noise":
            results[mode] = dict(results.get(mode, {}), **noise(args.variants, args.seeds, tuple(args.arms)))
        elif mode == "levers":
            lv = results.setdefault("levers", {}).setdefault(args.corpus, {})
            lv.update(levers(args.corpus, args.levers, args.seeds, tuple(args.arms), args.workers,
                             not args.summarize))
        elif mode == "seed-offsets":
            results["seed_offsets"] = dict(results.get("seed_offsets", {}),
                                           **{k: seed_offsets(k) for k in args.kinds})
        elif mode == "moe":
            mo = results.setdefault("moe_proxy", {})
            for kind, row in moe_proxy(tuple(args.kinds), args.moe_variants, args.seeds, args.junk_seeds,
                                       args.workers, args.early_steps, not args.summarize,
                                       results.get("corpora"), args.early_only).items():
                mo[kind] = _merge(mo.get(kind, {}), row)
        elif mode == "corpora":
            results[mode] = dict(results.get(mode, {}), **corpora(
                tuple(args.kinds), workers=args.workers, paired_only=args.paired_only, train=not args.summarize,
                arms=tuple(args.corpora_arms) if args.corpora_arms else None))
        else:
            results[mode] = gpu(budget_s=args.gpu_budget) if mode == "gpu" else globals()[mode]()
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
