"""Start-up of the command line, side by side in one run: `assay --help` and `assay extract html
--help` as shipped (families imported lazily) against the same help built with every family imported
first (Assay's earlier behaviour). Median of --runs alternated runs; results/startup.json.

    python benchmarks/startup.py --runs 7
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The same `main()`, with every family imported before the command line is parsed.
EAGER = ("import sys\nfrom assay.pipeline import cli\nlazy = cli.build_cli\n"
         "def eager():\n    root = lazy()\n    cli.populate(root)\n    return root\n"
         "cli.build_cli = eager\ncli.main(sys.argv[1:])")


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    assay = str(Path(sys.executable).with_name("assay"))
    result: dict = {"runs": args.runs}
    for label, words in (("assay --help", ["--help"]), ("assay extract html --help", ["extract", "html", "--help"])):
        lazy, eager = [], []
        for _ in range(args.runs):
            lazy.append(timed([assay, *words]))
            eager.append(timed([sys.executable, "-c", EAGER, *words]))
        result[label] = {"lazy_s": round(statistics.median(lazy), 3), "all_families_s": round(statistics.median(eager), 3),
                         "speedup": round(statistics.median(eager) / statistics.median(lazy), 2)}
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))
    (HERE / "results" / "startup.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
