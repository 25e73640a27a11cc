"""`make bench`: run every benchmark in this folder, one after another, and list where results went.

Each benchmark measures Assay side by side with its named baseline in one run and writes
benchmarks/results/<name>.json; figures are ratios, never pass/fail thresholds.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Benchmarks with several modes: the runs `make bench` does (others run with no arguments).
MODES = {
    "dedup.py": [["quality"], ["speed", "--docs", "100000"], ["memory", "--docs", "1000000", "--shards", "20"],
                 ["spark", "--docs", "1000000", "--shards", "20", "--spark-memory", "1g"]],
    "semantic.py": [["decontam"], ["cluster"], ["speed"]],
    "trainer.py": [["--ablation"]],  # speed, GPU (when there is one) and the known-order ablation
}


def main() -> int:
    failures = 0
    for script in sorted(HERE.glob("*.py")):
        if script.name == "run.py" or script.name.startswith("_"):
            continue
        for args in MODES.get(script.name, [[]]):
            print(f"== {script.name} {' '.join(args)}", flush=True)
            rc = subprocess.call([sys.executable, str(script), *args])
            failures += rc != 0
    print(f"results: {HERE / 'results'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
