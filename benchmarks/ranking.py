"""Ranking checks for the decision proxy: do data variants come out in the order we know, and does
the tiny proxy rank them as a larger one does (DataDecide's pairwise agreement)?

    python benchmarks/ranking.py                      # CPU, all three checks, results/ranking.json
    python benchmarks/ranking.py --corpus news --larger-seeds 3 --workers 2
    python benchmarks/ranking.py --prepare-only       # build the data only (then --from-prepared elsewhere)

* tiny proxy: examples/train/proxy.yaml, read from the file (model, optimizer, batch, schedule and
  token budget), so a change of the project's decision proxy carries over; only its data paths and
  seed are replaced.
* larger proxy: the same dense SwiGLU + Muon design scaled by `--width` (2.25: d_model 64 -> 144, FFN
  256 -> 576, 4.6x the non-embedding parameters) trained on `--token-scale` (4) times the tokens, with
  `--larger-seeds` seeds so that its own noise does not decide a pair.
* graded: a known-order series over one corpus (benchmarks/_corpora.py): clean, 5%, 10% and 30% junk
  (shuffled words, keyword spam, boilerplate) and a duplicate-heavy arm (30% exact copies of a
  twentieth of the documents), ranked by the tiny proxy's held-out BPB. Expected order: clean <
  junk5 < junk10 < junk30.
* agreement: four of the variants (clean, junk10, junk30, dup30) ranked by mean BPB of the tiny and of
  the larger proxy; the share of the six pairs both put in the same order, and per pair whether each
  proxy's gap exceeds its seed noise.
* tiers: the same pool with 30% junk, scored by `quality.tier` (the shipped models and calibration):
  documents of the top two tiers against the bottom two and against a random sample, cut to equal
  bytes, on held-out clean text, tiny proxy. If the top tiers do not win, the result says the tiers
  did not help. On a pool of several domains the tiers also change the domain mix, so the same
  question is asked again by domain: each domain keeps its share of the pool's bytes, filled best
  tier first (`top_by_domain`), worst first (`bottom_by_domain`) or at random (`random_by_domain`).

Cost (news, 2 shared cores, nice 10): a tiny run 37 CPU s, a larger one ~410 (11x); the default
(3 tiny seeds of 8 variants, 2 larger seeds of 4) ~70 CPU minutes. The tokens are bytes, so on a
small corpus the larger proxy's 4x tokens are many epochs (`epochs_of_clean_text`): watch
`larger_curves` for runs whose held-out BPB turns up before the end.

Default corpus `mixed` (news, math, multilingual and code; 4.4 MB of training text, so the larger
proxy reads it ~0.9 times). Measured on an H200 (bf16; benchmarks/device_check.sh, results under
"mixed@gpu", its runs in results/ranking-mixed-gpu-runs.jsonl): 6 of 6 pairs agree, tiny 5 seeds,
larger 3 seeds; one pair (clean vs dup30) is a tie inside both proxies' noise.

Every run is logged as it finishes (.bench/ranking/<corpus>/runs-<hash of the two proxies>.jsonl),
so an interrupted benchmark resumes and a changed proxy starts a new log. GPU: the same code runs on
CUDA where a device is lent, under bf16 autocast; its runs go to their own log (`runs-<hash>-gpu.jsonl`)
and its result to "<corpus>@gpu", never mixed with CPU runs; the result records the device.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "ranking.json"
PROXY = ROOT / "examples" / "train" / "proxy.yaml"

import _corpora  # noqa: E402
from trainer import run_grid  # noqa: E402

GRADED = {"clean": ("junk", 0.0), "junk5": ("junk", 0.05), "junk10": ("junk", 0.10), "junk30": ("junk", 0.30),
          "dup30": ("dup", 0.30)}
AGREEMENT = ("clean", "junk10", "junk30", "dup30")
TIERS = ("top2", "bottom2", "random", "top_by_domain", "bottom_by_domain", "random_by_domain")


def tiny_proxy(tokens: int | None = None) -> dict:
    """examples/train/proxy.yaml without its data paths (set per run)."""
    raw = yaml.safe_load(PROXY.read_text())
    raw["data"] = {k: v for k, v in raw["data"].items() if k != "train"}
    raw["eval"] = {k: v for k, v in raw["eval"].items() if k != "sets"}
    if tokens:
        raw["tokens"] = tokens
    return raw


def larger_proxy(tiny: dict, width: float = 2.25, token_scale: int = 4) -> dict:
    """The tiny proxy with d_model and every FFN width times `width` (rounded to whole heads of even
    size; non-embedding parameters ~width^2 times: 2.25 gives 4.6x, where 2 gives 3.7x because norms
    and the output head grow only linearly) and `token_scale` times the tokens; heads, layers,
    optimizer, LR, batch and schedule unchanged (Muon's update is shape-normalised), evaluations at
    the same fractions of the run."""
    raw = copy.deepcopy(tiny)
    raw["name"] = f"{tiny.get('name', 'proxy')}-x{width}"
    unit = 2 * raw["model"]["n_heads"]
    raw["model"]["d_model"] = unit * round(raw["model"]["d_model"] * width / unit)
    for key in ("expert_hidden", "shared_hidden"):
        if raw["moe"].get(key):
            raw["moe"][key] = unit * round(raw["moe"][key] * width / unit)
    raw["tokens"] *= token_scale
    if raw["eval"].get("every_tokens"):
        raw["eval"]["every_tokens"] *= token_scale
    return raw


def with_data(proxy: dict, train: Path, held: Path, seed: int) -> dict:
    raw = copy.deepcopy(proxy)
    raw["data"]["train"] = str(train)
    raw["eval"]["sets"] = {"held_out": str(held)}
    raw["seed"] = seed
    return raw


def non_embedding_params(proxy: dict, vocab: int = 260) -> int:
    from assay.trainer.config import parse_train_config
    from assay.trainer.train import build_model

    cfg = parse_train_config(with_data(proxy, Path("x"), Path("y"), 0))
    return build_model(cfg, vocab, 129).param_counts()["active_non_embedding"]


def _nbytes(docs: list[dict]) -> int:
    return sum(len(d["text"].encode()) for d in docs)


def _take(docs: list[dict], budget: float) -> list[dict]:
    """The leading documents until their bytes reach `budget` (the one that crosses it included)."""
    out, total = [], 0
    for d in docs:
        if total >= budget:
            break
        out.append(d)
        total += len(d["text"].encode())
    return out


def tier_variants(work: Path, train: list[dict], seed: int = 0) -> dict[str, list[dict]]:
    """Score the pool (clean documents plus 30% junk) with quality.tier; top two tiers, bottom two and
    a random sample cut to the same bytes."""
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
    size = min(_nbytes(top), _nbytes(bottom))

    # By domain: each domain (a document's `source`: news, math, code, or the script of a
    # multilingual page; a junk document takes the domain of the page it was made from, as a crawl's
    # domain label would) keeps its share of the pool's bytes, filled best tier first, worst first or
    # in random order: the tiers' effect without the domain shift they cause. A byte-level proxy that
    # never saw a script scores it at ~15 bits a byte, so a sample that misses a small script (a few
    # Korean pages) loses more BPB than any quality difference; by domain, every sample has every one.
    rank = {"High": 0, "Medium-High": 1, "Medium": 2, "Medium-Low": 3, "Low": 4}

    def domain(d: dict) -> str:
        return by_id.get(d.get("from") or "", d)["source"]

    pool_bytes = _nbytes(pool)

    def by_domain(order: str) -> list[dict]:
        out = []
        for dom in sorted({domain(d) for d in pool}):
            docs = [d for d in sample if domain(d) == dom]  # the seeded random order breaks tier ties
            if order != "random":
                docs.sort(key=lambda d: rank.get(tier.get(d["doc_id"]), 5) * (1 if order == "best" else -1))
            out += _take(docs, size * _nbytes(docs) / pool_bytes)
        return out

    junk_ids = {d["doc_id"] for d in pool if d["doc_id"].startswith("junk/")}
    variants = {"top2": _take(rng.sample(top, len(top)), size), "bottom2": _take(rng.sample(bottom, len(bottom)), size),
                "random": _take(sample, size), "top_by_domain": by_domain("best"), "bottom_by_domain": by_domain("worst"),
                "random_by_domain": by_domain("random")}
    return {"variants": variants, "junk_share": {k: round(sum(d["doc_id"] in junk_ids for d in v) / max(len(v), 1), 3)
                                                 for k, v in variants.items()},
            "bytes": {k: _nbytes(v) for k, v in variants.items()},
            "tier_counts": {t: sum(1 for x in tier.values() if x == t) for t in sorted(set(tier.values()), key=str)}}


def _std(x) -> float | None:
    return round(float(np.std(x, ddof=1)), 4) if len(x) > 1 else None


def pair_table(tiny: dict[str, list[float]], larger: dict[str, list[float]]) -> dict[str, dict]:
    """Per pair (x vs y): each proxy's gap of mean BPB (y minus x: positive = x better), the arms'
    seed std (the larger of the two) and the std of the paired per-seed gap, whether the gap exceeds
    each, and whether the two proxies order the pair alike (on mean BPB)."""
    table = {}
    for x, y in itertools.combinations(sorted(larger), 2):
        row = {}
        for size, runs in (("tiny", tiny), ("larger", larger)):
            n = min(len(runs[x]), len(runs[y]))
            gap = float(np.mean(runs[y]) - np.mean(runs[x]))
            arm_std = max(filter(None, (_std(runs[x]), _std(runs[y]))), default=None)
            paired_std = _std(np.subtract(runs[y][:n], runs[x][:n]))
            row.update({f"{size}_gap": round(gap, 4), f"{size}_seed_std": arm_std, f"{size}_paired_gap_std": paired_std,
                        f"{size}_gap_beyond_seed_std": None if arm_std is None else bool(abs(gap) > arm_std),
                        f"{size}_gap_beyond_paired_std": None if paired_std is None else bool(abs(gap) > paired_std)})
        row["agree"] = bool((row["tiny_gap"] > 0) == (row["larger_gap"] > 0))
        table[f"{x} vs {y}"] = row
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # mixed (4.4 MB of training text): the larger proxy's 4M tokens read it 0.9 times; news alone (648 KB)
    # it read 6 times, and memorised (the 4-of-6 run kept in results/ranking.json under "news")
    ap.add_argument("--corpus", default="mixed", choices=_corpora.KINDS)
    # 1M, not proxy.yaml's 3M: the news corpus holds 648 KB of training text, so the larger proxy's 4x
    # tokens at 3M would be ~18 epochs (memorised text, not a ranking); 1M is the recorded setting.
    ap.add_argument("--tiny-tokens", type=int, default=1_000_000,
                    help="tiny budget (default 1M; 0 takes proxy.yaml's)")
    ap.add_argument("--width", type=float, default=2.25, help="larger proxy: d_model and FFN width multiplier")
    ap.add_argument("--token-scale", type=int, default=4, help="larger proxy: token multiplier")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--larger-seeds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--summarize", action="store_true", help="train nothing: summarise the runs logged so far")
    ap.add_argument("--prepare-only", action="store_true",
                    help="build the variants' token data and prepared.json, train nothing")
    ap.add_argument("--gpu-log", action="store_true", help="with --summarize: the log of runs made on a GPU")
    ap.add_argument("--from-prepared", action="store_true",
                    help="train on the data of an earlier --prepare-only (no corpus or quality models needed)")
    args = ap.parse_args(argv)

    import torch

    from assay.trainer.bytes import write_byte_dataset
    from assay.trainer.known_order import build_arms

    start_wall, start_load = time.time(), os.getloadavg()[0]
    tiny_cfg = tiny_proxy(args.tiny_tokens)
    larger_cfg = larger_proxy(tiny_cfg, args.width, args.token_scale)
    protocol = hashlib.sha256(json.dumps([tiny_cfg, larger_cfg], sort_keys=True).encode()).hexdigest()[:10]
    work = ROOT / ".bench" / "ranking" / args.corpus
    prepared = work / "prepared.json"
    if args.from_prepared:  # data built elsewhere (a device machine has neither ../shared nor fastText)
        info = json.loads(prepared.read_text())
        paths = {k: work / v for k, v in info["paths"].items()}
    else:
        docs = _corpora.corpus(args.corpus)
        paths = build_arms(work / "data", docs, GRADED)
        train, _ = _corpora.split(docs)
        tiers = tier_variants(work, train)
        for name, variant in tiers["variants"].items():
            random.Random(1).shuffle(variant)
            paths[name] = write_byte_dataset(variant, work / "data" / name, 129)
        info = {"paths": {k: str(Path(v).relative_to(work)) for k, v in paths.items()},
                "tiers": {k: v for k, v in tiers.items() if k != "variants"},
                "clean_train_bytes": _nbytes(train)}
        prepared.write_text(json.dumps(info, indent=1, sort_keys=True))
        if args.prepare_only:
            print(f"prepared: {prepared}")
            return 0
    tiers, clean_bytes = info["tiers"], info["clean_train_bytes"]

    # A logged run counts only for the data it trained and was scored on: each key ends with a digest
    # of the arm's and the held-out set's fingerprints, so rebuilt data is trained again, never reused.
    def data_digest(arm: str) -> str:
        fps = [(json.loads((Path(paths[a]) / "_manifest.json").read_text())).get("fingerprint", "") for a in (arm, "eval")]
        return hashlib.sha256("|".join(fps).encode()).hexdigest()[:10]

    digests = {arm: data_digest(arm) for arm in paths if arm != "eval"}

    def job(size: str, arm: str, s: int):
        return [size, arm, s, digests[arm]], with_data(tiny_cfg if size == "tiny" else larger_cfg, paths[arm],
                                                       paths["eval"], s)

    # the cheap tiny runs first (agreement arms, tiers, the rest of the graded series), then the larger
    # proxy seed by seed, so a shorter run (fewer --larger-seeds) is a prefix of a longer one
    jobs = [job("tiny", a, s) for a in [*AGREEMENT, *TIERS, *(a for a in GRADED if a not in AGREEMENT)]
            for s in range(args.seeds)]
    jobs += [job("larger", a, s) for s in range(args.larger_seeds) for a in AGREEMENT]
    keys = {json.dumps(k) for k, _ in jobs}
    on_gpu = torch.cuda.is_available() or args.gpu_log
    log = work / f"runs-{protocol}{'-gpu' if on_gpu else ''}.jsonl"  # bf16 GPU runs never mix with CPU ones
    logged = run_grid(jobs, log, work / "runs", args.workers) if not args.summarize else \
        [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    done = {tuple(r["key"][:3]): r for r in logged if json.dumps(r["key"]) in keys}
    missing = ["/".join(map(str, k[:3])) for k, _ in jobs if tuple(k[:3]) not in done]

    def runs(size: str, arm: str, n: int) -> list[float]:
        return [done[(size, arm, s)]["bpb"] for s in range(n) if (size, arm, s) in done]

    tiny = {a: runs("tiny", a, args.seeds) for a in [*GRADED, *TIERS]}
    larger = {a: runs("larger", a, args.larger_seeds) for a in AGREEMENT}
    mean = {a: float(np.mean(v)) for a, v in tiny.items() if v}
    measured = all(tiny[a] and larger[a] for a in AGREEMENT)
    table = pair_table({a: tiny[a] for a in AGREEMENT}, larger) if measured else {}
    agree = sum(p["agree"] for p in table.values())
    graded = ["clean", "junk5", "junk10", "junk30"]
    tiers_measured = all(a in mean for a in TIERS)
    top_wins = tiers_measured and mean["top2"] < min(mean["bottom2"], mean["random"])
    domain_wins = tiers_measured and mean["top_by_domain"] < min(mean["bottom_by_domain"], mean["random_by_domain"])
    cpu = [r["cpu_s"] for r in done.values()]
    result = {
        "corpus": args.corpus, "unseen_split": args.corpus == _corpora.UNSEEN,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else
        "GPU runs (bf16), summarised from their log" if on_gpu else
        "CPU (no CUDA device on this machine)",
        "tiny_proxy": {"from": "examples/train/proxy.yaml", "config": tiny_cfg,
                       "non_embedding_params": non_embedding_params(tiny_cfg)},
        "larger_proxy": {"width": args.width, "token_scale": args.token_scale, "config": larger_cfg,
                         "non_embedding_params": non_embedding_params(larger_cfg)},
        "seeds": args.seeds, "larger_seeds": args.larger_seeds,
        "runs_missing": missing,
        "graded_bpb": {a: round(mean[a], 4) for a in GRADED if a in mean},
        "graded_bpb_per_seed": {a: [round(x, 4) for x in tiny[a]] for a in GRADED},
        "graded_seed_std": {a: _std(tiny[a]) for a in GRADED},
        "graded_order_holds": all(mean[x] < mean[y] for x, y in zip(graded, graded[1:]))
        if all(a in mean for a in graded) else "not measured",
        "larger_bpb": {a: round(float(np.mean(v)), 4) for a, v in larger.items() if v},
        "larger_bpb_per_seed": {a: [round(x, 4) for x in v] for a, v in larger.items()},
        "larger_seed_std": {a: _std(v) for a, v in larger.items()},
        # held-out BPB at each quarter of the larger runs: a curve that turns up at the end is a run
        # that has started to memorise its training text (many epochs of a small corpus)
        "larger_curves": {"/".join(map(str, k[1:])): r["curve"] for k, r in sorted(done.items()) if k[0] == "larger"},
        "clean_train_bytes": clean_bytes,
        "epochs_of_clean_text": {"tiny": round(tiny_cfg["tokens"] / clean_bytes, 2),
                                 "larger": round(larger_cfg["tokens"] / clean_bytes, 2)},
        "pairs_agreeing": f"{agree} of {len(table)}" if measured else "not measured (larger proxy runs missing)",
        "pairs": table,
        "tiers": {"bpb": {a: round(mean[a], 4) for a in TIERS if a in mean}, "bpb_per_seed": {a: [round(x, 4) for x in tiny[a]] for a in TIERS},
                  "seed_std": {a: _std(tiny[a]) for a in TIERS}, "junk_share": tiers["junk_share"],
                  "bytes": tiers["bytes"], "tier_counts": tiers["tier_counts"], "top_two_tiers_win": bool(top_wins),
                  "verdict": "not measured" if not tiers_measured else "the top two tiers won on held-out clean text"
                  if top_wins else "the tiers did not help: the top two tiers did not beat both the bottom two and a "
                  "random sample",
                  "best_tiers_by_domain_win": bool(domain_wins),
                  "verdict_by_domain": "not measured" if not tiers_measured else
                  "the best tiers of each domain, at the pool's domain shares, won on held-out clean text" if domain_wins
                  else "the tiers did not help within domains either: the best tiers of each domain did not beat both "
                  "the worst ones and a random sample"},
        "cpu_seconds": {**{f"{size}_run_mean": round(float(np.mean(c)), 1) for size in ("tiny", "larger")
                           if (c := [done[k]["cpu_s"] for k in done if k[0] == size])},
                        "all_runs": round(sum(cpu), 1)},
        "run_wall_seconds_mean": {size: round(float(np.mean(w)), 1) for size in ("tiny", "larger")
                                  if (w := [done[k]["wall_s"] for k in done if k[0] == size and "wall_s" in done[k]])},
        "wall_seconds_this_invocation": round(time.time() - start_wall),
        "load_average": {"start": round(start_load, 1), "end": round(os.getloadavg()[0], 1)},
    }
    print(json.dumps({k: v for k, v in result.items() if k not in ("tiny_proxy", "larger_proxy")}, indent=1))
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    # a GPU run (bf16 autocast) is kept beside the CPU one, not over it
    results[args.corpus + ("@gpu" if on_gpu else "")] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
