"""Bounded shards: one large JSON Lines file is read into several tasks of bounded size, so the next map
stage spreads over every core. Measures wall time of read.jsonl + filter.script on one file with 1 and
2 workers, side by side in one run (the baseline is Assay's previous behaviour: one file, one task, one
shard for every later stage, which a `task_mb` / `task_bytes` larger than the file reproduces).

    python benchmarks/sharding.py --mb 300
"""
from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make_file(path: Path, mb: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    words = [w.strip() for w in (HERE.parent / "README.md").read_text().split() if w.strip().isalpha()]
    rows, size = 0, 0
    with open(path, "w") as fh:
        while size < mb * 2**20:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(50, 400)))
            line = json.dumps({"text": text, "url": f"https://example.com/{rows}"}) + "\n"
            fh.write(line)
            size += len(line)
            rows += 1
    return rows


def run(src: Path, root: Path, workers: int, task_mb: int) -> dict:
    from assay.filters.basic import ScriptFilter
    from assay.pipeline.readers import ReadJsonl
    from assay.pipeline.runner import run_stage

    # The baseline (one task per file, no re-sharding) also keeps the map stage on one task per shard.
    ScriptFilter.task_bytes = task_mb * 2**20 if task_mb >= 10**6 else 64 * 2**20
    reader = ReadJsonl({"paths": [str(src)], "task_mb": task_mb})
    t0 = time.perf_counter()
    raw = run_stage(reader, [], root / "raw", options={"workers": workers})
    t1 = time.perf_counter()
    run_stage(ScriptFilter({"allowed": ["Latin"]}), [raw.out], root / "script", options={"workers": workers})
    t2 = time.perf_counter()
    return {"workers": workers, "task_mb": task_mb, "shards": raw.manifest["shards"],
            "rows": raw.manifest["counts"]["rows_out"], "read_s": round(t1 - t0, 2), "map_s": round(t2 - t1, 2),
            "total_s": round(t2 - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--task-mb", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "big.jsonl"
        make_file(src, args.mb)
        runs = [run(src, tmp / f"r{i}", workers, task_mb) for i, (workers, task_mb) in enumerate(
            [(1, 10**6), (2, 10**6), (1, args.task_mb), (2, args.task_mb)])]
    one_task_2w = runs[1]["total_s"]
    split_1w, split_2w = runs[2]["total_s"], runs[3]["total_s"]
    result = {"file_mb": args.mb, "runs": runs,
              "speedup_2_vs_1_workers_split": round(split_1w / split_2w, 2),
              "speedup_split_vs_one_task_on_2_workers": round(one_task_2w / split_2w, 2)}
    result["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)  # other work on the machine skews the ratios
    print(json.dumps(result, indent=2))
    (HERE / "results" / "sharding.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
