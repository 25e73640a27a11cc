"""Quality benchmark, side by side in one run (results: benchmarks/results/quality.json, as ratios):

1. heuristic signals + rules (Assay, vectorised) vs datatrove 0.10.1's GopherQualityFilter,
   GopherRepetitionFilter, C4QualityFilter and FineWebQualityFilter on the same documents, one core
   each; plus per-family decision agreement (datatrove runs in .bench/quality-venv, built from
   benchmarks/requirements-quality.txt, with its default spaCy English tokenizer);
2. quality.fasttext (Assay's stage: preprocessing + predict + column) vs calling the same model's
   predict on a Python list directly;
3. the whole default ensemble with tiers (quality.tier) through the local engine on 2 workers, on the
   documents as they are and cut to about 3,000 characters (the goal's ~3 KB documents);
4. the contrast check on the held-out test pages (never used for training or calibration): share of
   clean pages in the top three tiers and of junk versions in the bottom two.

Documents: pages of ../shared/data (clean main text, full page text, shuffled, spam), cycled to --docs.

    python benchmarks/quality.py --docs 20000
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench" / "quality-venv"
FAMILY_FILTERS = {"gopher": "GopherQualityFilter", "repetition": "GopherRepetitionFilter", "c4": "C4QualityFilter",
                  "fineweb": "FineWebQualityFilter"}

DATATROVE_SCRIPT = r"""
import json, sys, time
import pyarrow.parquet as pq
from datatrove.data import Document
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter, FineWebQualityFilter
texts = pq.read_table(sys.argv[1]).column("text").to_pylist()
filters = {"gopher": GopherQualityFilter(), "repetition": GopherRepetitionFilter(), "c4": C4QualityFilter(),
           "fineweb": FineWebQualityFilter()}
for f in filters.values():  # warm the tokenizer
    f.filter(Document(text="Warm up the tokenizer. It loads once.", id="w"))
out = {"keep": {}, "seconds": {}}
for name, f in filters.items():
    t = time.perf_counter()
    keep = []
    for i, text in enumerate(texts):
        r = f.filter(Document(text=text, id=str(i)))
        keep.append(bool(r if isinstance(r, bool) else r[0]))
    out["seconds"][name] = time.perf_counter() - t
    out["keep"][name] = keep
print(json.dumps(out))
"""


def corpus(n: int) -> list[str]:
    from assay.quality.corpus import build, sample_page_ids

    sets = build(ROOT.parent / "shared" / "data", sample_page_ids(ROOT))
    texts = [r["text"] for split in sets.values() for r in split]
    return [texts[i % len(texts)] for i in range(n)]


def cut(texts: list[str], chars: int) -> list[str]:
    """The same documents cut to about `chars` characters at a line break (the goal's ~3 KB documents)."""
    out = []
    for t in texts:
        if len(t) > chars:
            end = t.rfind("\n", 0, chars)
            t = t[:end if end > chars // 2 else chars]
        out.append(t)
    return out


def ensure_venv() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-U", "pip"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(ROOT / "benchmarks/requirements-quality.txt")], check=True)
    return py


def heuristics(texts: list[str], work: Path) -> dict:
    from assay.filters.rules import Rules, decide
    from assay.filters.signals import COLUMNS, compute_signals

    arr = pa.array(texts, pa.string())
    compute_signals(arr[:200])  # compile the kernel outside the timing
    t = time.perf_counter()
    sig = {}
    for start in range(0, len(texts), 5000):
        for k, v in compute_signals(arr[start:start + 5000]).items():
            sig.setdefault(k, []).append(v)
    table = pa.table({f"sig_{k}": pa.array(np.concatenate(v).astype(np.float32)) for k, v in sig.items()})
    assay_s = time.perf_counter() - t
    t = time.perf_counter()
    params = Rules.Params(families=list(FAMILY_FILTERS), bypass={})
    hits, names, _ = decide(table, params)
    decide_s = time.perf_counter() - t
    path = work / "docs.parquet"
    pq.write_table(pa.table({"text": arr}), path)
    script = work / "dt.py"
    script.write_text(DATATROVE_SCRIPT)
    res = subprocess.run([str(ensure_venv()), str(script), str(path)], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    dt = json.loads(res.stdout.strip().splitlines()[-1])
    from assay.filters.rules import RULES

    agreement = {}
    for family in FAMILY_FILTERS:
        cols = [j for j, name in enumerate(names) if RULES[name][3] == family]
        ours = ~hits[:, cols].any(axis=1)
        theirs = np.array(dt["keep"][family])
        agreement[family] = {"same_decision": round(float((ours == theirs).mean()), 4),
                             "assay_keep": round(float(ours.mean()), 4), "datatrove_keep": round(float(theirs.mean()), 4)}
    dt_s = sum(dt["seconds"].values())
    return {"docs": len(texts), "assay_signals_s": round(assay_s, 3), "assay_thresholds_s": round(decide_s, 4),
            "datatrove_s": round(dt_s, 3), "datatrove_s_per_filter": {k: round(v, 3) for k, v in dt["seconds"].items()},
            "assay_docs_per_s": round(len(texts) / (assay_s + decide_s)), "datatrove_docs_per_s": round(len(texts) / dt_s),
            "speedup": round(dt_s / (assay_s + decide_s), 2), "agreement": agreement, "signals": len(COLUMNS)}


def fasttext_speed(texts: list[str]) -> dict:
    from assay.quality.ftmodel import prepare
    from assay.quality.scorers import FastTextScorer
    from assay.pipeline.schema import make_docs

    table = make_docs([{"text": t, "source": "b"} for t in texts])
    stage = FastTextScorer({})
    stage.ensure_setup()
    model = stage.model.model
    raw_texts = [t.replace("\n", " ") for t in texts]
    best = {"stage": 1e9, "raw": 1e9, "raw_prepared": 1e9, "raw_1_thread": 1e9}
    prepared = prepare(pa.array(texts))
    for _ in range(3):
        t = time.perf_counter()
        for start in range(0, len(texts), 10_000):
            stage.process(table.slice(start, 10_000))
        best["stage"] = min(best["stage"], time.perf_counter() - t)
        t = time.perf_counter()
        model.predict(raw_texts, k=-1)
        best["raw"] = min(best["raw"], time.perf_counter() - t)
        t = time.perf_counter()
        model.predict(prepared, k=-1)
        best["raw_prepared"] = min(best["raw_prepared"], time.perf_counter() - t)
        t = time.perf_counter()
        model.predict_batch(raw_texts, k=-1, threads=1)  # per core: predict on a list uses every core
        best["raw_1_thread"] = min(best["raw_1_thread"], time.perf_counter() - t)
    n = len(texts)
    return {"docs": n, "stage_docs_per_s": round(n / best["stage"]), "raw_predict_docs_per_s": round(n / best["raw"]),
            "stage_vs_raw": round(best["raw"] / best["stage"], 3),
            # the same predict on the text the stage feeds it: what preprocessing and columns cost (raw text
            # predicts faster mostly because "word," and the like are out of the model's vocabulary)
            "stage_vs_raw_on_prepared": round(best["raw_prepared"] / best["stage"], 3),
            "raw_predict_on_prepared_docs_per_s": round(n / best["raw_prepared"]),
            "raw_predict_1_thread_docs_per_s": round(n / best["raw_1_thread"])}


def ensemble_speed(texts: list[str], work: Path, workers: int = 2) -> dict:
    from assay.pipeline.dataset import write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.pipeline.stage import resolve_stage

    table = make_docs([{"text": t, "source": "b", "url": f"u{i}"} for i, t in enumerate(texts)])
    src = write_table(table, work / "in", shards=workers * 2)
    t = time.perf_counter()
    run_stage(resolve_stage("quality.tier")({}), [src], work / "tiered", options={"workers": workers})
    wall = time.perf_counter() - t
    # CPU time of the same stage in this process (every thread counted): docs per CPU-second, which
    # other load on a shared machine does not change the way it changes wall-clock throughput
    stage = resolve_stage("quality.tier")({})
    stage.ensure_setup()
    stage.process(table.slice(0, 100))
    cpu = time.process_time()
    for start in range(0, table.num_rows, stage.batch_rows):
        stage.process(table.slice(start, stage.batch_rows))
    cpu = time.process_time() - cpu
    stage.close()
    mean_bytes = float(np.mean([len(x.encode()) for x in texts]))
    return {"docs": len(texts), "workers": workers, "wall_s": round(wall, 2), "docs_per_s": round(len(texts) / wall),
            "docs_per_cpu_s": round(len(texts) / cpu), "mean_doc_bytes": round(mean_bytes)}


def contrast_on_test_pages() -> dict:
    from assay.quality.corpus import build, sample_page_ids
    from assay.quality.evaluate import contrast

    test = build(ROOT.parent / "shared" / "data", sample_page_ids(ROOT))["test"]
    result = contrast(test)
    return {"pages": len({r["page"] for r in test}), "clean_top3": result["clean_top3"],
            "junk_bottom2": result["junk_bottom2"], "kinds": result["kinds"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--heuristic-docs", type=int, default=4_000, help="datatrove is slow: fewer docs for that part")
    args = ap.parse_args()
    texts = corpus(args.docs)
    out: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_1m_at_start": round(os.getloadavg()[0], 2)},
                 "note": "ratios over the same documents in one run; wall-clock rates fall with other load on the machine"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out["heuristics_vs_datatrove"] = heuristics(texts[:args.heuristic_docs], work)
        print(json.dumps(out["heuristics_vs_datatrove"], indent=1), flush=True)
        out["fasttext_vs_raw_predict"] = fasttext_speed(texts)
        print(json.dumps(out["fasttext_vs_raw_predict"], indent=1), flush=True)
        out["default_ensemble_with_tiers"] = ensemble_speed(texts, work / "full")
        print(json.dumps(out["default_ensemble_with_tiers"], indent=1), flush=True)
        out["default_ensemble_with_tiers_3kb"] = ensemble_speed(cut(texts, 3_000), work / "cut")
        print(json.dumps(out["default_ensemble_with_tiers_3kb"], indent=1), flush=True)
    out["machine"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    out["contrast_test_pages"] = contrast_on_test_pages()
    print(json.dumps(out["contrast_test_pages"], indent=1), flush=True)
    res = ROOT / "benchmarks" / "results" / "quality.json"
    tmp_path = res.with_suffix(".json.tmp")
    tmp_path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    tmp_path.replace(res)
    print(f"results: {res}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
