"""Build the example token datasets: clean Python reference text and docstrings, the same with 30%
junk injected, and a held-out evaluation set (byte-level, see assay.trainer.known_order).

    .venv/bin/python examples/train/build_data.py [OUT]      # default runs/train-data
"""
import sys
from pathlib import Path

from assay.trainer.known_order import build_known_order

out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/train-data")
for name, path in build_known_order(out).items():
    print(f"{name}: {path}")
