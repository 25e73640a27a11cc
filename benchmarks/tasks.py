"""The downstream-proxy task suite on the decision proxy: CPU seconds and figures (issue #42).

    python benchmarks/tasks.py [--checkpoint RUN] [--suite default] [--items N]

Trains the decision proxy (examples/train/proxy.yaml: d64, 2 layers, byte tokens, context 128, 3M
tokens) on the known-order clean data unless `--checkpoint` names a run, then scores the suite twice
in one process, one torch thread: as `assay eval --tasks` does (each item's choices in one row after
one copy of the context, block mask) and with the baseline of one row per continuation (the same
figures, each context computed once per choice). Reports CPU (process) seconds of each, their ratio,
the largest difference between the two runs' figures, and the suite's figures with their 95%
intervals over items. Writes benchmarks/results/tasks.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def proxy_checkpoint(work: Path) -> Path:
    from assay.trainer.config import load_train_config
    from assay.trainer.known_order import build_known_order
    from assay.trainer.train import train

    paths = build_known_order(work / "data")
    cfg = load_train_config(REPO / "examples" / "train" / "proxy.yaml")
    cfg.data.train = str(paths["clean"])
    cfg.eval.sets = {"held_out": str(paths["eval"])}
    t = time.process_time()
    summary = train(cfg, work / "proxy", log=lambda m: None)
    print(f"proxy trained: held-out BPB {summary['eval']['held_out']['bpb']:.4f} "
          f"({time.process_time() - t:.0f} CPU s here; 0 if it was already there)")
    return work / "proxy"


def main() -> int:
    import torch

    from assay.trainer.checkpoint import load_model
    from assay.trainer.downstream import score_suite
    from assay.trainer.tasks import load_suite
    from assay.trainer.tokenizer import for_checkpoint

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, help="a proxy run or .pt (default: train one under .bench/tasks)")
    ap.add_argument("--suite", default="default")
    ap.add_argument("--items", type=int, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ckpt_path = args.checkpoint or proxy_checkpoint(REPO / ".bench" / "tasks")
    model, cfg, ckpt = load_model(ckpt_path, device="cpu")
    tok = for_checkpoint(ckpt, None, str(ckpt_path))
    suite = load_suite(args.suite, args.items)
    runs = {}
    for name, share in (("shared_context", True), ("row_per_continuation", False)):
        t = time.process_time()
        runs[name] = score_suite(model, tok, suite, ckpt["context"], share_context=share)
        runs[name]["cpu_seconds_total"] = round(time.process_time() - t, 2)
        print(f"{name}: {runs[name]['cpu_seconds_total']} CPU s, {runs[name]['positions']:,} row positions")
    a, b = runs["shared_context"], runs["row_per_continuation"]
    diff = max(abs(a["tasks"][t]["metrics"][m]["mean"] - b["tasks"][t]["metrics"][m]["mean"])
               for t in a["tasks"] for m in a["tasks"][t]["metrics"])
    ratio = b["cpu_seconds_total"] / a["cpu_seconds_total"]
    print(f"baseline / shared-context CPU time: {ratio:.2f}x; largest difference in a figure: {diff:.2g}")
    for name, t in a["tasks"].items():
        m = t["metrics"]
        cells = "  ".join(f"{k} {v['mean']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]"
                          for k, v in m.items() if k in ("acc", "p_correct", "greedy", "bpb"))
        chance = f"{t['chance']:.3f}" if t["chance"] else "  -  "
        print(f"  {name:15s} {t['items']:4d} items  chance {chance}  {cells}")
    print("  macro: " + "  ".join(f"{k} {v['mean']:.4f} [{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]"
                                  for k, v in a["macro"].items()))
    where = Path(ckpt_path).resolve()
    out = {"checkpoint": str(where.relative_to(REPO)) if where.is_relative_to(REPO) else str(ckpt_path), "suite": args.suite, "items_cap": suite.items, "context": ckpt["context"],
           "threads": 1, "cpu_seconds": {"shared_context": a["cpu_seconds_total"],
                                         "row_per_continuation": b["cpu_seconds_total"]},
           "positions": {"shared_context": a["positions"], "row_per_continuation": b["positions"]},
           "baseline_over_shared": round(ratio, 3), "largest_figure_difference": diff,
           "tasks": a["tasks"], "macro": a["macro"]}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "tasks.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
