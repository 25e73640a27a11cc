"""Top tiers against a random sample at equal tokens, within domains, on a mixed pool none of the
scorers was tuned on (issue 43, step 5; results: benchmarks/results/quality_ablation.json).

Pool (unseen by every scorer, threshold and calibration): web = the 770 WCXB dev pages' main content
(7 page types), code = SWE-bench Lite dev golden and test patches plus HumanEval prompts with their
canonical solutions, math = GSM8K test problems with their worked answers. quality.tier (shipped
models and calibration, frozen before this pool was read) scores it; quality.calibrate --within
content_type fits the tiers per domain. Arms, each domain at its pool share of bytes: `top` fills
each domain from the top three tiers (best score first), `random` at random. The held-out every-8th
documents are the BPB set; the downstream task suite (macro) decides, paired over seeds.

    nice -n 10 .venv/bin/python benchmarks/quality_ablation.py --seeds 5 --tokens 300000 --items 100
    nice -n 10 .venv/bin/assay ablate runs/quality-ablation/spec.json --out runs/quality-ablation/ablate
    .venv/bin/python benchmarks/quality_ablation.py --results   # ablation.json -> results file
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _corpora import SHARED  # noqa: E402


def pool() -> list[dict]:
    docs = []
    for path in sorted((SHARED / "extraction" / "wcxb-dev" / "ground-truth").glob("*.json.gz")):
        text = json.loads(gzip.decompress(path.read_bytes()))["ground_truth"].get("main_content") or ""
        if len(text) >= 200:
            docs.append({"text": text, "content_type": "web", "doc_id": f"wcxb/{path.name}"})
    for rec in json.loads((SHARED / "swebench" / "princeton-nlp-SWE-bench_Lite-dev.json").read_text()):
        for key in ("patch", "test_patch"):
            docs.append({"text": rec[key], "content_type": "code", "doc_id": f"swe/{rec['instance_id']}/{key}"})
    with gzip.open(SHARED / "decontam" / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append({"text": rec["prompt"] + rec["canonical_solution"], "content_type": "code", "doc_id": rec["task_id"]})
    for i, line in enumerate((SHARED / "decontam" / "gsm8k" / "test.jsonl").read_text().splitlines()):
        rec = json.loads(line)
        docs.append({"text": rec["question"] + "\n" + rec["answer"], "content_type": "math", "doc_id": f"gsm8k/{i}"})
    return docs


def tiered(docs: list[dict], work: Path) -> list[dict]:
    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.pipeline.stage import resolve_stage

    table = make_docs([{"text": d["text"], "source": d["content_type"], "content_type": d["content_type"],
                        "url": d["doc_id"]} for d in docs])
    src = write_table(table, work / "pool", shards=2)
    scored = run_stage(resolve_stage("quality.tier")({}), [src], work / "scored", options={"workers": 1}).out
    out = run_stage(resolve_stage("quality.calibrate")({"within": "content_type", "ensemble": "mean", "value": ["reference", "dsir"]}),
                    [scored], work / "within", options={"workers": 1})
    t = Dataset(out.out).read()
    by_url = {u: (s, tr) for u, s, tr in zip(t.column("url").to_pylist(), t.column("quality_score").to_pylist(), t.column("tier").to_pylist())}
    for d in docs:
        d["score"], d["tier"] = by_url[d["doc_id"]]
    return docs


def arms(docs: list[dict], seed: int) -> dict[str, list[dict]]:
    """Each domain at its pool share: half its bytes, from the top three tiers best first, or at random."""
    out = {"top": [], "random": []}
    for domain in sorted({d["content_type"] for d in docs}):
        mine = [d for d in docs if d["content_type"] == domain]
        budget = sum(len(d["text"].encode()) for d in mine) / 2
        ranked = sorted(mine, key=lambda d: -d["score"])
        shuffled = mine[:]
        random.Random(seed).shuffle(shuffled)
        for name, order in (("top", ranked), ("random", shuffled)):
            total = 0
            for d in order:
                if total >= budget:
                    break
                out[name].append(d)
                total += len(d["text"].encode())
    return out


def results(work: Path) -> int:
    ab = json.loads((work / "ablate" / "ablation.json").read_text())
    mix = json.loads((work / "mix.json").read_text())
    tasks = ab.get("tasks", {})
    out = {"question": "top three tiers (quality.tier scores, quality.calibrate --within content_type) vs a random "
                       "sample, each domain at its pool share, equal tokens",
           "pool": "WCXB dev main content (web), SWE-bench Lite dev patches + HumanEval solutions (code), GSM8K test "
                   "(math): no scorer, threshold or calibration saw it",
           "tokens": ab["tokens"], "seeds": ab["seeds"], "mix_bytes": mix,
           "held_out_bpb": {a: {k: v[k] for k in ("mean", "std", "values")} for a, v in ab["arms"].items()},
           "bpb_pairs": ab["pairs"],
           "tasks_macro": {a: {m: {k: r["macro"][m].get(k) for k in ("mean", "std", "values")} for m in r["macro"]}
                           for a, r in tasks.get("arms", {}).items()},
           "tasks_pairs": tasks.get("pairs"), "items_cap": tasks.get("items_cap"),
           "contamination": ab.get("contamination")}
    path = ROOT / "benchmarks" / "results" / "quality_ablation.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(path)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=300_000)
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--work", default=str(ROOT / "runs" / "quality-ablation"))
    ap.add_argument("--results", action="store_true", help="summarise WORK/ablate/ablation.json into the results file")
    args = ap.parse_args()
    if args.results:
        return results(Path(args.work))
    from assay.trainer.bytes import write_byte_dataset
    from assay.trainer.known_order import is_held_out

    work = Path(args.work)
    docs = tiered(pool(), work)
    held = [d for d in docs if is_held_out(d["doc_id"])]
    train = [d for d in docs if not is_held_out(d["doc_id"])]
    chosen = arms(train, 0)
    paths = {"eval": write_byte_dataset(held, work / "eval", 129)}
    for name, ds in chosen.items():
        random.Random(1).shuffle(ds)
        paths[name] = write_byte_dataset(ds, work / name, 129)
    proxy = (ROOT / "examples" / "train" / "proxy.yaml").read_text()
    (work / "proxy.yaml").write_text(proxy.replace("../../runs/train-data/clean", str(paths["top"]))
                                     .replace("../../runs/train-data/eval", str(paths["eval"])))
    spec = {"name": "quality-tiers-unseen-pool", "config": "proxy.yaml", "arms": {k: str(paths[k]) for k in chosen},
            "seeds": list(range(args.seeds)), "tokens": args.tokens,
            "eval": {"sets": {"held_out": str(paths["eval"])}, "tasks": "default", "task_items": args.items},
            "significance": "paired", "alpha": 0.01, "dense_check": False, "contamination": "flag", "workers": 2}
    (work / "spec.json").write_text(json.dumps(spec, indent=1))
    mix = {name: {dom: sum(len(d["text"].encode()) for d in ds if d["content_type"] == dom) for dom in ("web", "code", "math")}
           for name, ds in chosen.items()}
    (work / "mix.json").write_text(json.dumps(mix))
    print(json.dumps({"pool_docs": len(docs), "held_out": len(held), "mix_bytes": mix}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
