"""`make bench`: run every benchmark in this folder, one after another, and list where results went.

Each benchmark measures Assay side by side with its named baseline in one run and writes
benchmarks/results/<name>.json; figures are ratios, never pass/fail thresholds.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failures = 0
    for script in sorted(HERE.glob("*.py")):
        if script.name == "run.py" or script.name.startswith("_"):
            continue
        print(f"== {script.name}", flush=True)
        rc = subprocess.call([sys.executable, str(script)] + sys.argv[1:])
        failures += rc != 0
    print(f"results: {HERE / 'results'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
