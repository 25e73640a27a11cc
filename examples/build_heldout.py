"""Build examples/sample/heldout/heldout.jsonl.gz: the demo's held-out evaluation text.

Documents of tests/fixtures/texts/real_texts.jsonl.gz (articles, forum threads, Python files, MATH and
GSM8K problems; licences in tests/fixtures/NOTICE) that share no 13-word window with anything the
demo extracts from examples/sample, so neither training arm (curated or raw) has seen them.

    .venv/bin/assay run examples/recipes/demo.yaml --workdir runs/demo --until normalized
    .venv/bin/python examples/build_heldout.py runs/demo
"""
from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

from assay.pipeline.dataset import Dataset

REPO = Path(__file__).resolve().parents[1]
RAW_INPUTS = ("web_warc", "web_html", "pdfs", "code", "issues", "encyclopedia")
WINDOW = 13
# Math problems outnumber the rest of the fixture five to one; capped so the held-out mix reads like
# the sample's (web, code, a little math) and BPB is not a math score.
CAPS = {"math": 150, "gsm8k": 100}


def windows(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + WINDOW]) for i in range(max(0, len(words) - WINDOW + 1))}


def main() -> None:
    run = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/demo")
    seen: set[tuple[str, ...]] = set()
    for name in RAW_INPUTS:
        for text in Dataset(run / name).read(columns=["text"]).column("text").to_pylist():
            seen |= windows(text or "")
    with gzip.open(REPO / "tests" / "fixtures" / "texts" / "real_texts.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    kept, per_kind = [], Counter()
    for r in rows:
        if per_kind[r["source"]] < CAPS.get(r["source"], len(rows)) and not (windows(r["text"]) & seen):
            kept.append(r)
            per_kind[r["source"]] += 1
    out = REPO / "examples" / "sample" / "heldout" / "heldout.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(out, "wb", mtime=0) as fh:  # mtime 0: the same bytes on every build
        for r in kept:
            fh.write((json.dumps({"text": r["text"], "kind": r["source"]}) + "\n").encode())
    print(f"{out}: {len(kept)} of {len(rows)} documents: {dict(per_kind)}")


if __name__ == "__main__":
    main()
