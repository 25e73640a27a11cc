"""Quality benchmark, side by side in one run (results: benchmarks/results/quality.json, as ratios):

1. heuristic signals + rules (Assay, vectorised) vs datatrove 0.10.1's GopherQualityFilter,
   GopherRepetitionFilter, C4QualityFilter and FineWebQualityFilter on the same documents, one core
   each; plus per-family decision agreement (datatrove runs in .bench/quality-venv, built from
   benchmarks/requirements-quality.txt, with its default spaCy English tokenizer);
2. quality.fasttext (Assay's stage: preprocessing + compiled predict + column) vs calling the same
   model's predict on a Python list directly (line breaks made spaces, nothing else), interleaved
   rounds, in wall-clock time and per CPU-second, on the documents as they are and cut to about 3,000
   characters; then the fastText scorers' max_chars (the head of each document they judge): speed,
   and agreement of scores and tiers with the default head;
3. the whole default ensemble with tiers (quality.tier) through the local engine on 2 workers, on the
   documents as they are and cut to about 3,000 characters (the goal's ~3 KB documents);
3b. the value scorers' cost: quality.tier with and without quality_reference and quality_dsir,
   interleaved over the same documents, in CPU-seconds;
4. the contrast check on the held-out test pages (never used for training or calibration): share of
   clean pages in the top three tiers and of junk versions in the bottom two.

Documents: pages of ../shared/data (clean main text, full page text, shuffled, spam), cycled to --docs.

    python benchmarks/quality.py --docs 20000
    python benchmarks/quality.py --docs 10000 --parts fasttext   # one part; the file keeps the others
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

    from _corpora import SHARED

    sets = build(SHARED, sample_page_ids(ROOT))
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


def _timed(f) -> tuple[float, float]:
    """(wall seconds, CPU seconds of every thread of this process) of f()."""
    wall, cpu = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - wall, time.process_time() - cpu


def fasttext_speed(texts: list[str], rounds: int = 5) -> dict:
    """The stage (text column in, score column out: cut, lower-case, tokens, predict, probabilities)
    against fastText's predict on a Python list of the same texts with line breaks made spaces (predict
    refuses them) and nothing else. Interleaved rounds, so a shift of the machine's load hits both;
    best of the rounds in wall-clock time (both use every core) and in CPU time (per core)."""
    from assay.quality.ftmodel import prepare
    from assay.quality.scorers import FastTextScorer
    from assay.pipeline.schema import make_docs

    table = make_docs([{"text": t, "source": "b"} for t in texts])
    stage = FastTextScorer({})
    stage.ensure_setup()
    model = stage.model.model
    raw_texts = [t.replace("\n", " ") for t in texts]
    prepared = prepare(pa.array(texts))
    runs = {"stage": lambda: [stage.process(table.slice(s, stage.batch_rows)) for s in range(0, len(texts), stage.batch_rows)],
            "raw": lambda: model.predict(raw_texts, k=-1),
            "raw_prepared": lambda: model.predict(prepared, k=-1),
            "raw_1_thread": lambda: model.predict_batch(raw_texts, k=-1, threads=1)}  # predict on a list uses every core
    runs["stage"]()  # compile and warm outside the timing
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for name, f in runs.items():
            w, c = _timed(f)
            wall[name].append(w)
            cpu[name].append(c)
    best = {k: min(v) for k, v in wall.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    n = len(texts)
    return {"docs": n, "rounds": rounds, "mean_doc_bytes": round(float(np.mean([len(x.encode()) for x in texts]))),
            "stage_docs_per_s": round(n / best["stage"]), "raw_predict_docs_per_s": round(n / best["raw"]),
            "stage_vs_raw": round(best["raw"] / best["stage"], 3),
            # the same ratio round by round (each round's stage and raw ran back to back): its median
            "stage_vs_raw_median_of_rounds": round(float(np.median(np.array(wall["raw"]) / np.array(wall["stage"]))), 3),
            # per core: documents per CPU-second (every thread counted), which other load changes less
            "stage_docs_per_cpu_s": round(n / best_cpu["stage"]), "raw_predict_docs_per_cpu_s": round(n / best_cpu["raw"]),
            "stage_vs_raw_cpu": round(best_cpu["raw"] / best_cpu["stage"], 3),
            # the same predict on the text the stage feeds it: what preprocessing and columns cost (raw text
            # has fewer tokens: "word," is one token there, two in the stage's text, and no _nl_)
            "stage_vs_raw_on_prepared": round(best["raw_prepared"] / best["stage"], 3),
            "raw_predict_on_prepared_docs_per_s": round(n / best["raw_prepared"]),
            "raw_predict_1_thread_docs_per_s": round(n / best["raw_1_thread"]),
            "raw_predict_1_thread_docs_per_cpu_s": round(n / best_cpu["raw_1_thread"])}


def fasttext_heads(texts: list[str], heads: tuple[int, ...] = (20_000, 5_000, 2_000, 1_000)) -> dict:
    """The fastText scorers' max_chars (the head of each document they judge): speed of the web scorer on
    the benchmark documents, and how far scores and tiers (shipped calibration) move from the default
    20,000 characters on the distinct pages, with the contrast on the held-out test pages."""
    from scipy.stats import spearmanr

    from assay.pipeline.schema import make_docs
    from assay.quality.build import score_rows
    from assay.quality.corpus import build, sample_page_ids
    from assay.quality.scorers import FastTextScorer
    from assay.quality.tiers import TierOptions, assign, load_calibration

    rows = [r for split in build(ROOT.parent / "shared" / "data", sample_page_ids(ROOT)).values() for r in split]
    base = score_rows(rows)
    calibration = load_calibration("default")
    _, _, base_tier, _ = assign(base, calibration, TierOptions())
    kinds = np.array([r["kind"] for r in rows])
    test = np.array([r["split"] == "test" for r in rows])
    clean = kinds == "clean"
    table = make_docs([{"text": t, "source": "b"} for t in texts])
    out: dict = {"pages_docs": len(rows), "bench_docs": len(texts)}
    for head in heads:
        scorers = {name: FastTextScorer({"model": name, "name": col, "max_chars": head})
                   for name, col in (("web", "fasttext"), ("edu", "edu"))}
        web = scorers["web"]
        web.ensure_setup()
        web.process(table.slice(0, 100))
        wall, cpu = 1e9, 1e9
        for _ in range(3):
            w, c = _timed(lambda: [web.process(table.slice(s, web.batch_rows)) for s in range(0, len(texts), web.batch_rows)])
            wall, cpu = min(wall, w), min(cpu, c)
        scored = base
        entry: dict = {"docs_per_s": round(len(texts) / wall), "docs_per_cpu_s": round(len(texts) / cpu)}
        for stage in scorers.values():
            stage.ensure_setup()
            col = f"quality_{stage.params.name}"
            values = stage.scores(base.column("text").combine_chunks()).astype(np.float32)
            entry[f"spearman_{col}"] = round(float(spearmanr(values, base.column(col).to_numpy()).statistic), 4)
            scored = scored.set_column(scored.schema.get_field_index(col), col, pa.array(values, pa.float32()))
        _, _, tier, _ = assign(scored, calibration, TierOptions())
        entry["same_tier"] = round(float((tier == base_tier).mean()), 4)
        entry["test_clean_top3"] = round(float((tier[test & clean] <= 2).mean()), 4)
        entry["test_junk_bottom2"] = round(float((tier[test & ~clean] >= 3).mean()), 4)
        out[str(head)] = entry
    return out


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


def value_scorers_cost(texts: list[str], rounds: int = 3) -> dict:
    """CPU-seconds of quality.tier with and without its two value scorers (reference fastText, DSIR),
    interleaved over the same documents: what the value signal costs against the six-scorer ensemble."""
    from assay.pipeline.schema import make_docs
    from assay.pipeline.stage import resolve_stage
    from assay.quality.scorers import DSIRScorer, FastTextScorer

    table = make_docs([{"text": t, "source": "b", "url": f"u{i}"} for i, t in enumerate(texts)])
    full = resolve_stage("quality.tier")({})
    six = resolve_stage("quality.tier")({})
    six.parts = [p for p in six.parts if not isinstance(p, DSIRScorer)
                 and not (isinstance(p, FastTextScorer) and p.params.name == "reference")]
    for stage in (full, six):
        stage.ensure_setup()
        stage.process(table.slice(0, 100))
    cpu = {"eight": 0.0, "six": 0.0}
    for _ in range(rounds):
        for name, stage in (("six", six), ("eight", full)):
            t = time.process_time()
            for start in range(0, table.num_rows, stage.batch_rows):
                stage.process(table.slice(start, stage.batch_rows))
            cpu[name] += time.process_time() - t
    for stage in (full, six):
        stage.close()
    n = len(texts) * rounds
    return {"docs": len(texts), "rounds": rounds, "six_scorers_docs_per_cpu_s": round(n / cpu["six"]),
            "with_value_scorers_docs_per_cpu_s": round(n / cpu["eight"]), "cpu_ratio": round(cpu["eight"] / cpu["six"], 3)}


def contrast_on_test_pages() -> dict:
    from assay.quality.corpus import build, sample_page_ids
    from assay.quality.evaluate import contrast

    from _corpora import SHARED

    test = build(SHARED, sample_page_ids(ROOT))["test"]
    result = contrast(test)
    return {"pages": len({r["page"] for r in test}), "clean_top3": result["clean_top3"],
            "junk_bottom2": result["junk_bottom2"], "kinds": result["kinds"]}


PARTS = ("heuristics", "fasttext", "ensemble", "value", "contrast")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--heuristic-docs", type=int, default=4_000, help="datatrove is slow: fewer docs for that part")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                    help="run only these parts; the others' figures stay as they are in the results file")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the fastText comparison")
    args = ap.parse_args()
    texts = corpus(args.docs)
    res = ROOT / "benchmarks" / "results" / "quality.json"
    out: dict = json.loads(res.read_text()) if set(args.parts) != set(PARTS) and res.exists() else {}
    out["note"] = "ratios over the same documents in one run; wall-clock rates fall with other load on the machine"
    machine = {"cpus": os.cpu_count(), "load_avg_1m_at_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "heuristics" in args.parts:
            out["heuristics_vs_datatrove"] = heuristics(texts[:args.heuristic_docs], work)
            print(json.dumps(out["heuristics_vs_datatrove"], indent=1), flush=True)
        if "fasttext" in args.parts:
            load = round(os.getloadavg()[0], 2)
            out["fasttext_vs_raw_predict"] = fasttext_speed(texts, args.rounds)
            out["fasttext_vs_raw_predict"]["load_avg_1m"] = [load, round(os.getloadavg()[0], 2)]
            print(json.dumps(out["fasttext_vs_raw_predict"], indent=1), flush=True)
            out["fasttext_vs_raw_predict_3kb"] = fasttext_speed(cut(texts, 3_000), args.rounds)  # the goal's ~3 KB documents
            print(json.dumps(out["fasttext_vs_raw_predict_3kb"], indent=1), flush=True)
            out["fasttext_max_chars"] = fasttext_heads(texts)
            print(json.dumps(out["fasttext_max_chars"], indent=1), flush=True)
        if "value" in args.parts:
            out["value_scorers_cost"] = value_scorers_cost(texts[:5_000])
            print(json.dumps(out["value_scorers_cost"], indent=1), flush=True)
        if "ensemble" in args.parts:
            out["default_ensemble_with_tiers"] = ensemble_speed(texts, work / "full")
            print(json.dumps(out["default_ensemble_with_tiers"], indent=1), flush=True)
            out["default_ensemble_with_tiers_3kb"] = ensemble_speed(cut(texts, 3_000), work / "cut")
            print(json.dumps(out["default_ensemble_with_tiers_3kb"], indent=1), flush=True)
    machine["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    if set(args.parts) == set(PARTS):
        out["machine"] = machine
    else:
        out.setdefault("machine", {})["last_partial_run"] = {"parts": args.parts, **machine}
    if "contrast" in args.parts:
        out["contrast_test_pages"] = contrast_on_test_pages()
        print(json.dumps(out["contrast_test_pages"], indent=1), flush=True)
    tmp_path = res.with_suffix(".json.tmp")
    tmp_path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    tmp_path.replace(res)
    print(f"results: {res}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
