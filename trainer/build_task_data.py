"""Rebuild the shipped task subsets (`tasks_data/`) from the project's shared eval pack.

    python -m assay.trainer.build_task_data [--shared ../shared/data] [--check]

Each shipped task is the DEFAULT_ITEMS items of its benchmark split with the smallest sha256 of
`benchmark/id` (tasks.cap_items: what `--items` takes from the full data too), in the task schema,
as zstd JSON Lines. MMLU-Redux comes from its CSVs (upstream.py; only items whose error_type is ok).
`--check` also converts every upstream file in `evals/*/orig/` with upstream.py and compares the
items with the pack's own normalised files (they were made by another program): any difference is
printed and the exit status is 1. Sources and licences: `tasks_data/NOTICE`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import zstandard

from .tasks import DATA, DEFAULT_ITEMS, SHIPPED, cap_items, load_task
from .upstream import convert

ORIG = {"arc_easy": "ARC-Easy-Test.jsonl.gz", "arc_challenge": "ARC-Challenge-Test.jsonl.gz", "boolq": "val.jsonl.gz",
        "copa": "val.jsonl.gz", "csqa": "dev_rand_split.jsonl.gz", "hellaswag": "hellaswag_val_full.txt.gz",
        "lambada_openai": "lambada_openai.jsonl.gz", "mbpp": "mbpp.jsonl.gz", "nq_open": "NQ-open.dev.jsonl.gz",
        "openbookqa": "test.tsv.gz", "piqa": "valid.jsonl.gz", "siqa": "dev.jsonl.gz",
        "triviaqa": "triviaqa_sm_sub.jsonl.gz", "winogrande": "winogrande.jsonl.gz"}


def full_items(shared: Path, name: str):
    if name == "mmlu_redux":
        return convert(str(shared / "decontam" / "mmlu-redux" / "mmlu_redux"), name)[0]
    return load_task(name, str(shared / "evals" / name / f"{SHIPPED[name]}.jsonl.gz"), items=0).items


def build(shared: Path) -> None:
    DATA.mkdir(exist_ok=True)
    for name in sorted(SHIPPED):
        items = full_items(shared, name)
        keep = cap_items(items, DEFAULT_ITEMS)
        raw = "".join(json.dumps(it.to_json(), ensure_ascii=False) + "\n" for it in keep).encode()
        out = DATA / f"{name}.jsonl.zst"
        out.write_bytes(zstandard.ZstdCompressor(level=19).compress(raw))
        print(f"{name}: {len(keep)} of {len(items)} items, {out.stat().st_size / 1e3:.0f} kB")


def check(shared: Path) -> int:
    bad = 0
    for name, file in sorted(ORIG.items()):
        mine = [it.to_json() for it in convert(str(shared / "evals" / name / "orig" / file), name)[0]]
        theirs = [it.to_json() for it in full_items(shared, name)]
        diff = sum(a != b for a, b in zip(mine, theirs)) + abs(len(mine) - len(theirs))
        bad += diff
        print(f"{name}: {len(mine)} items converted from orig/, {len(theirs)} in the pack, {diff} differ")
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    parser.add_argument("--check", action="store_true", help="only compare upstream conversions with the pack")
    args = parser.parse_args()
    if args.check:
        sys.exit(check(args.shared))
    build(args.shared)


if __name__ == "__main__":
    main()
