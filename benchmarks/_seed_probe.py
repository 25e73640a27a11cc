"""Why one seed of the known-order proxy ends worse than the others (issue #32): train one arm of a
corpus with `known_order_config` and, at fixed steps, look at what the two-layer model has learned.

    python benchmarks/_seed_probe.py news clean 3 0   # corpus, arm, seeds (one process each)
    python benchmarks/_seed_probe.py --summarize      # the probed runs into results/trainer.json

At each probe step: held-out BPB; the in-context copy loss (random byte strings of 64 repeated once:
mean loss on the second copy, nats; a model with an induction circuit predicts it almost exactly,
one without pays ~ln(256)); and per attention head the mean weight on the previous token and the
induction weight (on the token after the earlier occurrence of the current one). Results append to
.bench/seed-probe/<corpus>.jsonl; the leading underscore keeps `make bench` from running it.
"""
from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE_STEPS = (25, 50, 75, 100, 150, 200, 300, 500, 800)


def _attention_probs(attn, x, cos, sin):
    """[B, H, T, T] attention weights of one Attention module on its (normed) input x."""
    import torch

    q, k, _ = attn.project(x, cos, sin)
    T = x.shape[1]
    scores = q @ k.transpose(-1, -2) / attn.head_dim ** 0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1)


def copy_probe(model, n: int = 32, half: int = 64) -> dict:
    """Loss on the repeated half of [random bytes, the same bytes], and per layer/head the previous-
    token and induction attention weights on the repeated half."""
    import torch

    g = torch.Generator().manual_seed(1234)
    first = torch.randint(32, 127, (n, half), generator=g)  # printable ASCII bytes
    seq = torch.cat([first, first], dim=1)
    idx, tgt = seq[:, :-1], seq[:, 1:]
    captured = []
    hooks = [b.attn.register_forward_pre_hook(lambda m, a: captured.append((m, a))) for b in model.blocks]
    with torch.no_grad():
        nats = model.token_nats(idx, tgt)
    for h in hooks:
        h.remove()
    T = idx.shape[1]
    pos = torch.arange(half, T)  # query positions in the second copy (token at i repeats i - half)
    heads = []
    with torch.no_grad():
        for layer, (m, (x, cos, sin)) in enumerate(captured):
            p = _attention_probs(m, x, cos, sin)  # [B, H, T, T]
            prev = p[:, :, pos, pos - 1].mean(dim=(0, 2))
            induct = p[:, :, pos, pos - half + 1].mean(dim=(0, 2))
            heads.append({"layer": layer, "prev_token": [round(float(v), 3) for v in prev],
                          "induction": [round(float(v), 3) for v in induct]})
    return {"copy_loss": round(float(nats[:, half:].mean()), 4),
            "first_copy_loss": round(float(nats[:, : half - 1].mean()), 4), "heads": heads}


def probe(kind: str, arm: str, seed: int) -> dict:
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _corpora

    from assay.trainer.config import parse_train_config
    from assay.trainer.evaluate import evaluate
    from assay.trainer.known_order import build_arms, known_order_config
    from assay.trainer.train import Trainer

    torch.set_num_threads(1)
    work = ROOT / ".bench" / "seed-probe" / kind
    paths = build_arms(work / "data" / f"{arm}-{seed}", _corpora.corpus(kind),
                       {arm: ("junk", {"clean": 0.0, "junk10": 0.1, "junk30": 0.3}[arm])})
    cfg = parse_train_config(dict(known_order_config({"clean": paths[arm], "eval": paths["eval"]}), seed=seed))
    run = work / "runs" / f"{arm}-{seed}"
    run.mkdir(parents=True, exist_ok=True)
    tr = Trainer(cfg, run, log=lambda m: None)
    held = cfg.eval.sets["held_out"]
    points, cpu = [], time.process_time()
    for step in range(1, tr.total_steps + 1):
        tr.step()
        if step in PROBE_STEPS or step == tr.total_steps:
            tr.model.eval()
            bpb = evaluate(tr.model, held, cfg.eval.batch_size, None, False, None)["bpb"]
            points.append(dict(step=step, held_out_bpb=round(bpb, 4), **copy_probe(tr.model)))
            tr.model.train()
    out = {"key": [kind, arm, seed], "final_bpb": points[-1]["held_out_bpb"], "points": points,
           "cpu_s": round(time.process_time() - cpu, 1)}
    with open(work.parent / f"{kind}.jsonl", "a") as fh:
        fh.write(json.dumps(out) + "\n")
    return out


def summarize() -> dict:
    """Per probed run: held-out BPB and, per layer, the strongest head's previous-token weight at each
    probe step (merged into benchmarks/results/trainer.json as "seed_probe")."""
    out = {}
    for f in sorted((ROOT / ".bench" / "seed-probe").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            out["-".join(map(str, r["key"]))] = {
                "final_bpb": r["final_bpb"], "cpu_s": r["cpu_s"],
                "steps": [p["step"] for p in r["points"]],
                "held_out_bpb": [p["held_out_bpb"] for p in r["points"]],
                "copy_loss": [p["copy_loss"] for p in r["points"]],
                "prev_token_max_layer0": [max(p["heads"][0]["prev_token"]) for p in r["points"]],
                "prev_token_max_layer1": [max(p["heads"][1]["prev_token"]) for p in r["points"]],
                "prev_token_final": [h["prev_token"] for h in r["points"][-1]["heads"]]}
    return out


def main(argv: list[str]) -> int:
    if argv == ["--summarize"]:
        results = ROOT / "benchmarks" / "results" / "trainer.json"
        data = json.loads(results.read_text())
        data["seed_probe"] = summarize()
        results.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        print(json.dumps(data["seed_probe"]))
        return 0
    kind, arm, seeds = argv[0], argv[1], [int(s) for s in argv[2:]]
    with ProcessPoolExecutor(min(2, len(seeds)), mp_context=get_context("spawn")) as pool:
        for res in pool.map(probe, [kind] * len(seeds), [arm] * len(seeds), seeds):
            print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
