"""Kill/resume at scale: the demo recipe killed with SIGKILL (and interrupted with Ctrl-C) at random
moments, rerun, and compared byte for byte with an uninterrupted run. The test suite runs 3 + 2
trials of the same harness (tests/test_pipeline_kill.py); this runs more and records them.

    python benchmarks/reliability.py --kills 10 --interrupts 5
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from test_pipeline_kill import run_trials  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--interrupts", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    result = {}
    for name, sig, trials in (("sigkill", signal.SIGKILL, args.kills), ("sigint", signal.SIGINT, args.interrupts)):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.time()
            points = run_trials(Path(tmp), trials, args.seed, sig)
            result[name] = {"trials": trials, "all_identical": True, "no_process_left": True,
                            "kill_points_s": [round(p, 2) for p in points], "seconds": round(time.time() - started, 1)}
            print(name, result[name], flush=True)
    out = HERE / "results" / "reliability.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
