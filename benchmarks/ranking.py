"""Ranking checks for the proxy: do data variants come out in the order we know, and does the tiny
proxy rank them as a larger one does (DataDecide's pairwise agreement)?

    python benchmarks/ranking.py                      # CPU, all three checks, results/ranking.json
    python benchmarks/ranking.py --corpus news --tiny-tokens 1000000 --larger-seeds 2

The defaults (tiny 500k tokens x 3 seeds, larger 2M tokens x 1 seed) took 18.5 CPU minutes (31 wall
minutes at load average 5-10) on the 2-core VM: 24 tiny runs of ~20 CPU s and 4 larger of ~165.

* graded: a known-order series over one corpus (benchmarks/_corpora.py): clean, 5%, 10% and 30% junk
  (boilerplate and shuffled words) and a duplicate-heavy arm (30% exact copies of a twentieth of the
  documents), ranked by held-out BPB of the default proxy (trainer/known_order.py). The expected order
  is clean < junk5 < junk10 < junk30.
* agreement: four of the variants (clean, junk10, junk30, dup30) ranked by the tiny proxy and by a
  larger one (d_model 128: 4x the non-embedding parameters, 4x the tokens); the share of the six
  pairs both put in the same order.
* tiers: the same pool with its junk scored by `quality.tier` (the shipped models and calibration):
  documents of the top two tiers against the bottom two and against a random sample, at equal
  tokens, on held-out clean text. If the top tiers do not win, the result says the tiers did not help.

Every run is logged as it finishes (.bench/ranking/<corpus>/runs.jsonl), so an interrupted benchmark
resumes. GPU: this benchmark runs the same code on CUDA where a device is lent; the result records
whether one was (`device`).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "ranking.json"

import _corpora  # noqa: E402
from trainer import run_grid  # noqa: E402

GRADED = {"clean": ("junk", 0.0), "junk5": ("junk", 0.05), "junk10": ("junk", 0.10), "junk30": ("junk", 0.30),
          "dup30": ("dup", 0.30)}
AGREEMENT = ("clean", "junk10", "junk30", "dup30")
LARGER = {"model": {"d_model": 128, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2},
          "moe": {"expert_hidden": 256}}


def _config(train: Path, held: Path, tokens: int, larger: bool) -> dict:
    from assay.trainer.known_order import known_order_config

    raw = known_order_config({"clean": train, "eval": held}, tokens)
    if larger:
        raw["model"] = dict(raw["model"], **LARGER["model"])
        raw["moe"] = dict(raw["moe"], **LARGER["moe"])
        raw["tokens"] = 4 * tokens
    return raw


def tier_variants(work: Path, train: list[dict], seed: int = 0) -> dict[str, list[dict]]:
    """Score the pool (clean documents plus 30% junk) with quality.tier; top two tiers, bottom two and
    a random sample cut to the same bytes."""
    import pyarrow as pa

    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.quality.default import DefaultTier
    from assay.trainer.known_order import junk_documents

    pool = train + junk_documents(train, 0.3, seed)
    table = make_docs([{"text": d["text"], "source": d["source"], "url": d["doc_id"], "content_type": "web"} for d in pool])
    if not Dataset(work / "tiered").complete:
        write_table(table, work / "pool", shards=2)
        run_stage(DefaultTier({}), [work / "pool"], work / "tiered")
    scored = Dataset(work / "tiered").read(columns=["url", "tier"]).to_pylist()
    tier = {r["url"]: r["tier"] for r in scored}
    by_id = {d["doc_id"]: d for d in pool}
    top = [by_id[u] for u, t in tier.items() if t in ("High", "Medium-High")]
    bottom = [by_id[u] for u, t in tier.items() if t in ("Medium-Low", "Low")]
    rng = random.Random(seed)
    sample = rng.sample(pool, len(pool))
    size = min(sum(len(d["text"].encode()) for d in top), sum(len(d["text"].encode()) for d in bottom))

    def cut(docs: list[dict]) -> list[dict]:
        out, total = [], 0
        for d in docs:
            if total >= size:
                break
            out.append(d)
            total += len(d["text"].encode())
        return out

    junk_ids = {d["doc_id"] for d in pool if d["doc_id"].startswith("junk/")}
    variants = {"top2": cut(rng.sample(top, len(top))), "bottom2": cut(rng.sample(bottom, len(bottom))),
                "random": cut(sample)}
    return {"variants": variants, "junk_share": {k: round(sum(d["doc_id"] in junk_ids for d in v) / max(len(v), 1), 3)
                                                 for k, v in variants.items()},
            "tier_counts": {t: sum(1 for x in tier.values() if x == t) for t in sorted(set(tier.values()), key=str)}}


def _agree(a: dict[str, float], b: dict[str, float]) -> tuple[int, int]:
    pairs = list(itertools.combinations(sorted(a), 2))
    return sum((a[x] < a[y]) == (b[x] < b[y]) for x, y in pairs), len(pairs)


def _pair_table(tiny_runs: dict[str, list[float]], larger: dict[str, float]) -> dict[str, dict]:
    """Per pair: the tiny proxy's BPB gap (second minus first) with the seed std of the paired gap,
    the larger proxy's gap, and whether they order the pair alike."""
    table = {}
    for x, y in itertools.combinations(sorted(larger), 2):
        gaps = np.subtract(tiny_runs[y], tiny_runs[x])
        table[f"{x} vs {y}"] = {"tiny_gap": round(float(gaps.mean()), 4), "tiny_gap_seed_std": round(float(gaps.std(ddof=1)), 4)
                                if len(gaps) > 1 else None, "larger_gap": round(larger[y] - larger[x], 4),
                                "agree": bool((gaps.mean() > 0) == (larger[y] > larger[x]))}
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="news", choices=_corpora.KINDS)
    # Sized so one run takes <= 30 CPU minutes on 2 cores: a larger run costs ~2.4x a tiny one per
    # token (measured on news), so at 4x the tokens one larger seed of four arms is ~half the total.
    ap.add_argument("--tiny-tokens", type=int, default=500_000, help="tiny proxy budget (the larger gets 4x)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--larger-seeds", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)

    import torch

    from assay.trainer.bytes import write_byte_dataset
    from assay.trainer.known_order import build_arms

    tokens = args.tiny_tokens
    work = ROOT / ".bench" / "ranking" / args.corpus
    docs = _corpora.corpus(args.corpus)
    paths = build_arms(work / "data", docs, GRADED)
    train, _ = _corpora.split(docs)
    tiers = tier_variants(work, train)
    for name, variant in tiers["variants"].items():
        random.Random(1).shuffle(variant)
        paths[name] = write_byte_dataset(variant, work / "data" / name, 129)

    jobs = []
    for arm in GRADED:
        for s in range(args.seeds):
            jobs.append((["tiny", arm, s], dict(_config(paths[arm], paths["eval"], tokens, False), seed=s)))
    for arm in AGREEMENT:
        for s in range(args.larger_seeds):
            jobs.append((["larger", arm, s], dict(_config(paths[arm], paths["eval"], tokens, True), seed=s)))
    for arm in ("top2", "bottom2", "random"):
        for s in range(args.seeds):
            jobs.append((["tiny", arm, s], dict(_config(paths[arm], paths["eval"], tokens, False), seed=s)))
    done = {tuple(r["key"]): r for r in run_grid(jobs, work / "runs.jsonl", work / "runs", args.workers)}

    def mean(size: str, arm: str, n: int) -> float:
        return float(np.mean([done[(size, arm, s)]["bpb"] for s in range(n)]))

    def cpu(size: str, arm: str, n: int) -> float:
        return round(sum(done[(size, arm, s)]["cpu_s"] for s in range(n)), 1)

    tiny = {a: mean("tiny", a, args.seeds) for a in GRADED}
    tiny_runs = {a: [done[("tiny", a, s)]["bpb"] for s in range(args.seeds)] for a in GRADED}
    larger = {a: mean("larger", a, args.larger_seeds) for a in AGREEMENT}
    agree, pairs = _agree({a: tiny[a] for a in AGREEMENT}, larger)
    graded = ["clean", "junk5", "junk10", "junk30"]
    tier_bpb = {a: mean("tiny", a, args.seeds) for a in ("top2", "bottom2", "random")}
    top_wins = tier_bpb["top2"] < min(tier_bpb["bottom2"], tier_bpb["random"])
    result = {
        "corpus": args.corpus, "unseen_split": args.corpus == _corpora.UNSEEN,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else
        "CPU only: no GPU device was lent to this session; GPU figures (MoE proxy MFU) not measured",
        "tiny_tokens": tokens, "larger_tokens": 4 * tokens, "seeds": args.seeds, "larger_seeds": args.larger_seeds,
        "graded_bpb": {a: round(v, 4) for a, v in tiny.items()},
        "graded_order_holds": all(tiny[x] < tiny[y] for x, y in zip(graded, graded[1:])),
        "larger_bpb": {a: round(v, 4) for a, v in larger.items()},
        "graded_seed_std": {a: round(float(np.std(v, ddof=1)), 4) for a, v in tiny_runs.items()} if args.seeds > 1 else None,
        "pairs_agreeing": f"{agree} of {pairs}",
        "pairs": (pair_table := _pair_table({a: tiny_runs[a] for a in AGREEMENT}, larger)),
        # pairs the tiny proxy separates by more than the seed std of the paired gap: the others'
        # agreement is closer to a coin toss
        "tiny_pairs_beyond_one_seed_std": sum(abs(p["tiny_gap"]) > (p["tiny_gap_seed_std"] or 0)
                                              for p in pair_table.values()),
        "tiers": {"bpb": {a: round(v, 4) for a, v in tier_bpb.items()}, "junk_share": tiers["junk_share"],
                  "tier_counts": tiers["tier_counts"], "top_two_tiers_win": bool(top_wins),
                  "verdict": "the top two tiers won on held-out clean text" if top_wins else
                  "the tiers did not help: the top two tiers did not beat both the bottom two and a random sample"},
        "cpu_seconds": {"tiny_run": cpu("tiny", "clean", 1), "larger_run": cpu("larger", "clean", 1),
                        "all_runs": round(sum(r["cpu_s"] for r in done.values()), 1)},
        "load_average_at_end": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(result, indent=1))
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[args.corpus] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
