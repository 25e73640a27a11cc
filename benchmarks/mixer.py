"""Mixer benchmarks: tokenize + pack speed against raw `encode_batch` and datatrove, and peak memory.

    python benchmarks/mixer.py speed  --copies 10      # tokens/s on 2 cores, side by side
    python benchmarks/mixer.py tokenize                # mix.tokenize vs encode_batch per CPU-second, held-out text
    python benchmarks/mixer.py memory --copies-list 4 40   # peak RSS at two corpus sizes 10x apart
    python benchmarks/mixer.py packing                 # tokens kept, padding, shares: split vs crop

The corpus is the demo pipeline's curated sample (runs/demo/deduped; `make demo` makes it), repeated
`--copies` times into shards of ~2,000 documents (at least 8). One byte-level BPE (vocab 8192) trained on the sample serves every
row. Rows of the speed table:

* raw encode_batch / encode_batch_fast: the HF tokenizer alone on the same texts, in memory, both
  cores (its own thread pool), nothing written: the ceiling.
* assay mix build: end to end on the local engine with 2 workers, from a cold process: read Parquet,
  tokenize (metadata prefix on; a byte-level BPE takes mixer/bytebpe.py's exact fast path), write
  the token streams, plan, draw, best-fit pack and write the shards.

Every row has wall seconds (best of the interleaved rounds) and the CPU seconds of that round (all
threads; for mix build the driver and every worker, sampled every 50 ms).
* datatrove DocumentTokenizer: its tokenizer step over the same Parquet (2 tasks, 2 workers), from
  its own venv (.bench/mixer-venv, benchmarks/requirements-mixer.txt) so its pins never touch ours.

Results merge into benchmarks/results/mixer.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "runs" / "demo" / "deduped"
RESULTS = ROOT / "benchmarks" / "results" / "mixer.json"
VENV = ROOT / ".bench" / "mixer-venv"
SHARDS = 8
DOCS_PER_SHARD = 2_000


def corpus(copies: int, out: Path) -> Path:
    """The sample repeated `copies` times (ids made unique), in shards of about DOCS_PER_SHARD
    documents (at least SHARDS): a larger corpus has more shards, as a pipeline's output does."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from assay.pipeline.dataset import Dataset, write_table

    if not Dataset(SAMPLE).complete:
        sys.exit(f"{SAMPLE} is missing: run `make demo` first")
    base = Dataset(SAMPLE).read(columns=["id", "text", "source", "content_type", "url", "lang", "domain", "meta"])
    parts = [base.set_column(0, "id", pc.binary_join_element_wise(base.column("id"), pa.scalar(f"-{i}"), ""))
             for i in range(copies)]
    table = pa.concat_tables(parts)
    return write_table(table, out, shards=max(SHARDS, table.num_rows // DOCS_PER_SHARD))


def tokenizer(out: Path) -> Path:
    from assay.mixer.tokenizer import sample_texts, train_bpe

    path = out / "tokenizer.json"
    train_bpe(sample_texts([SAMPLE], 5000, 0), 8192).save(str(path))
    return path


def texts_of(path: Path) -> list[str]:
    from assay.pipeline.dataset import Dataset

    return Dataset(path).read(columns=["text"]).column("text").to_pylist()


def run_raw(tok_path: Path, texts: list[str], fast: bool) -> tuple[float, int, float]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_path))
    encode = tok.encode_batch_fast if fast else tok.encode_batch
    start, cpu = time.perf_counter(), time.process_time()
    n = 0
    for i in range(0, len(texts), 5000):
        n += sum(len(e.ids) for e in encode(texts[i:i + 5000], add_special_tokens=False))
    return time.perf_counter() - start, n, time.process_time() - cpu


def mixture_for(data: Path, tok_path: Path, budget: int) -> dict:
    # one stage taking about all the text once: what is measured is tokenize + pack, not the draw
    return {"name": "bench", "seed": 0, "tokenizer": {"path": str(tok_path)}, "max_epochs": 10,
            "meta": {"fields": ["content_type", "lang", "source"]}, "fim_content_types": [],
            "sources": {"all": {"path": str(data)}},
            "stages": [{"id": "pack", "tokens": budget, "seq_len": 2048, "mix": {"all": 1}}]}


def run_assay(data: Path, tok_path: Path, out: Path, budget: int) -> dict:
    """Build in a child process (a cold start, as a user runs it); its timings and peak RSS."""
    code = f"""
import json, threading, time, sys
import psutil
from assay.mixer.build import build
from assay.mixer.recipe import parse_mixture
peak = {{"driver": 0, "worker": 0, "total": 0}}
cpu = {{}}  # pid -> latest user+system seconds (a worker's last 50 ms before it exits are missed)
def sample():  # the driver and every worker process (forkserver children included), every 50 ms
    me = psutil.Process()
    while True:
        procs = [me] + me.children(recursive=True)
        rss = []
        for p in procs:
            try:
                rss.append(p.memory_info().rss)
                t = p.cpu_times()
                cpu[p.pid] = t.user + t.system
            except psutil.Error:
                rss.append(0)
        peak["driver"] = max(peak["driver"], rss[0])
        peak["worker"] = max([peak["worker"]] + rss[1:])
        peak["total"] = max(peak["total"], sum(rss))
        time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
m = parse_mixture(json.loads(sys.argv[1]))
t = time.perf_counter()
res = build(m, sys.argv[2], engine="local", options={{"workers": 2}}, log=lambda *_: None)
wall = time.perf_counter() - t
mb = lambda n: n // 2**20
print(json.dumps({{"seconds": wall, "driver_rss_mb": mb(peak["driver"]), "worker_rss_mb": mb(peak["worker"]),
                   "total_rss_mb": mb(peak["total"]), "tokens": res[0].manifest["mix"]["tokens"],
                   "cpu_seconds": sum(cpu.values())}}))
"""
    shutil.rmtree(out, ignore_errors=True)
    mix = json.dumps(mixture_for(data, tok_path, budget))
    res = subprocess.run([sys.executable, "-c", code, mix, str(out)], capture_output=True, text=True, check=True)
    got = json.loads(res.stdout.strip().splitlines()[-1])
    tok_manifest = next(out.glob("tokenized-*/_manifest.json"))
    got["text_tokens"] = json.loads(tok_manifest.read_text())["statistics"]["counters"]["text_tokens"]
    return got


DATATROVE_SCRIPT = r'''
import json, sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.tokens import DocumentTokenizer
if __name__ == "__main__":  # datatrove's workers re-import this file
    data, tok, out = sys.argv[1:4]
    t = time.perf_counter()
    LocalPipelineExecutor(pipeline=[
        ParquetReader(data, glob_pattern="part-*.parquet", text_key="text", id_key="id"),
        DocumentTokenizer(out + "/tokens", tokenizer_name_or_path=tok, eos_token="<|eos|>", shuffle_documents=False),
    ], tasks=2, workers=2, logging_dir=out + "/logs").run()
    print(json.dumps({"seconds": time.perf_counter() - t}))
'''


def ensure_datatrove_venv() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-U", "pip"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(ROOT / "benchmarks/requirements-mixer.txt")],
                       check=True)
    return py


def run_datatrove(data: Path, tok_path: Path, work: Path) -> dict:
    py = ensure_datatrove_venv()
    script = work / "datatrove_tokenize.py"
    script.write_text(DATATROVE_SCRIPT)
    shutil.rmtree(work / "dt", ignore_errors=True)
    res = subprocess.run([str(py), str(script), str(data), str(tok_path), str(work / "dt")], capture_output=True,
                         text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"datatrove failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def save(section: str, result: dict) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[section] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def mode_speed(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="mixer-bench-"))
    try:
        data = corpus(args.copies, work / "in")
        tok_path = tokenizer(work)
        texts = texts_of(data)
        mb = sum(len(t.encode()) for t in texts) / 1e6
        run_raw(tok_path, texts[:2000], True)  # warm-up: page cache, thread pool
        # Rounds interleave every contender, and each keeps its best round: on a shared host a burst
        # of load then hits all of them alike instead of whichever ran during it.
        best: dict[str, tuple[float, int, float | None]] = {}
        errors: dict[str, str] = {}

        def keep(label: str, secs: float, tokens: int, cpu: float | None = None) -> None:
            if label not in best or secs < best[label][0]:
                best[label] = (secs, tokens, cpu)

        for _ in range(args.repeat):
            for fast, label in ((False, "raw encode_batch"), (True, "raw encode_batch_fast")):
                keep(label, *run_raw(tok_path, texts, fast))
            text_tokens = best["raw encode_batch"][1]
            got = run_assay(data, tok_path, work / "out", int(text_tokens * 0.95))
            keep("assay mix build (tokenize + pack)", got["seconds"], got["text_tokens"], got["cpu_seconds"])
            if not args.skip_datatrove and "datatrove DocumentTokenizer" not in errors:
                try:
                    keep("datatrove DocumentTokenizer", run_datatrove(data, tok_path, work)["seconds"], text_tokens)
                except (RuntimeError, subprocess.SubprocessError) as exc:
                    errors["datatrove DocumentTokenizer"] = str(exc).splitlines()[-1][:300]
        rows = {label: {"seconds": round(secs, 3), "tokens": n, "tokens_per_s": round(n / secs),
                        **({"cpu_seconds": round(cpu, 2), "tokens_per_cpu_s": round(n / cpu)} if cpu else {})}
                for label, (secs, n, cpu) in best.items()}
        rows.update({label: {"error": e} for label, e in errors.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    raw = rows["raw encode_batch"]["tokens_per_s"]
    print(f"\n{len(texts):,} documents ({args.copies} copies of the sample), {mb:.1f} MB, {text_tokens:,} tokens, "
          f"2 cores, best of {args.repeat} interleaved rounds, load average {os.getloadavg()[0]:.1f}\n")
    raw_cpu = rows["raw encode_batch"]["tokens_per_cpu_s"]
    print(f"{'':40} {'seconds':>9} {'tokens/s':>12} {'vs raw':>8} {'tokens/CPU-s':>13} {'vs raw':>8}")
    for label, row in rows.items():
        if "error" in row:
            print(f"{label:40} {row['error']}")
            continue
        row["vs_raw_encode_batch"] = round(row["tokens_per_s"] / raw, 3)
        per_cpu = ""
        if "tokens_per_cpu_s" in row:
            row["per_cpu_vs_raw_encode_batch"] = round(row["tokens_per_cpu_s"] / raw_cpu, 3)
            per_cpu = f" {row['tokens_per_cpu_s']:>13,} {row['per_cpu_vs_raw_encode_batch']:>8.2f}"
        print(f"{label:40} {row['seconds']:>9.2f} {row['tokens_per_s']:>12,} {row['vs_raw_encode_batch']:>8.2f}{per_cpu}")
    result = {"documents": len(texts), "text_mb": round(mb, 1), "cores": os.cpu_count(), "repeat": args.repeat,
              "rows": rows, "load_average_1m_at_end": round(os.getloadavg()[0], 1)}
    save("speed", result)
    return result


TOKENIZE_CHILD = r"""
import json, resource, sys, time
mode, data, tok_path, out = sys.argv[1:5]
if mode == "raw":  # what a bare tokenizer needs: the texts from Parquet, the tokenizer, encode_batch
    import pyarrow.parquet as pq
    from pathlib import Path
    from tokenizers import Tokenizer
    texts = [t for f in sorted(Path(data).glob("part-*.parquet")) for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()]
    tok = Tokenizer.from_file(tok_path)
    tok.encode_special_tokens = True
    n = sum(len(e.ids) for i in range(0, len(texts), 1000)
            for e in tok.encode_batch(texts[i:i + 1000], add_special_tokens=False))
else:  # the mix.tokenize stage as `mix build` runs it (one worker: the CPU seconds are the same)
    from assay.mixer.tokenize import Tokenize
    from assay.pipeline.runner import run_stage
    stage = Tokenize(json.loads(mode), stage_id="tokenized")
    n = run_stage(stage, [data], out, engine="local", options={"workers": 1}).manifest["statistics"]["counters"]["text_tokens"]
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"tokens": n, "cpu_seconds": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime}))
"""


def mode_tokenize(args) -> dict:
    """`mix.tokenize` against raw `encode_batch` per CPU-second, on text the fast path was not
    profiled on: the demo's held-out set (runs/demo-heldout; issue #46 measured 0.77x there by wall
    time) and the article-extraction benchmark's news bodies. Start-up excluded: CPU of the work
    alone in a process that has imported everything (encode_batch over texts in memory; the stage's
    whole run_stage: setup, read, encode, write, commit). Start-up included: a cold child process
    each (interpreter, imports, reading the Parquet texts, loading the tokenizer)."""
    import pyarrow as pa
    from tokenizers import Tokenizer

    from assay.mixer.tokenize import Tokenize
    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _corpora

    tok_path = ROOT / "runs" / "demo" / "mix-step35" / "tokenizer.json"
    heldout = ROOT / "runs" / "demo-heldout"
    if not tok_path.exists() or not Dataset(heldout).complete:
        sys.exit("runs/demo/mix-step35 and runs/demo-heldout are missing: run `make demo` first")
    work = Path(tempfile.mkdtemp(prefix="mixer-tok-"))
    params = {"tokenizer": str(tok_path), "meta_fields": ["content_type", "lang", "source"],
              "fim_content_types": ["code"], "seed": 0}
    result = {}
    try:
        news = write_table(make_docs([{"text": d["text"], "source": "news", "url": d["doc_id"],
                                       "content_type": "web"} for d in _corpora.news()]), work / "news")
        pa.array(["x"])  # pyarrow's own lazy imports (pandas), out of what is measured
        tok = Tokenizer.from_file(str(tok_path))
        tok.encode_special_tokens = True
        for name, data in (("heldout", heldout), ("news", news)):
            texts = Dataset(data).read(columns=["text"]).column("text").to_pylist()
            best: dict[str, float] = {}

            def keep(label: str, seconds: float) -> None:
                best[label] = min(best.get(label, float("inf")), seconds)

            for _ in range(args.repeat):  # interleaved rounds, each contender's best
                cpu = time.process_time()
                n = sum(len(e.ids) for i in range(0, len(texts), 1000)
                        for e in tok.encode_batch(texts[i:i + 1000], add_special_tokens=False))
                keep("raw encode_batch", time.process_time() - cpu)
                shutil.rmtree(work / "out", ignore_errors=True)
                cpu = time.process_time()
                got = run_stage(Tokenize(params, stage_id="tokenized"), [data], work / "out", engine="local",
                                options={"workers": 1}).manifest["statistics"]["counters"]["text_tokens"]
                keep("mix.tokenize", time.process_time() - cpu)
                assert got == n, (got, n)  # the same tokens
                for label, mode in (("raw encode_batch, cold", "raw"), ("mix.tokenize, cold", json.dumps(params))):
                    shutil.rmtree(work / "out", ignore_errors=True)
                    run = subprocess.run([sys.executable, "-c", TOKENIZE_CHILD, mode, str(data), str(tok_path),
                                          str(work / "out")], capture_output=True, text=True, check=True)
                    keep(label, json.loads(run.stdout.strip().splitlines()[-1])["cpu_seconds"])
            row = {"documents": len(texts), "text_mb": round(sum(len(t.encode()) for t in texts) / 1e6, 2),
                   "tokens": n, **{f"{k} cpu_seconds": round(v, 3) for k, v in best.items()},
                   "per_cpu_vs_raw, start-up excluded": round(best["raw encode_batch"] / best["mix.tokenize"], 2),
                   "per_cpu_vs_raw, start-up included": round(best["raw encode_batch, cold"]
                                                              / best["mix.tokenize, cold"], 2)}
            result[name] = row
            print(f"{name:8} {row['documents']:>6} docs {row['text_mb']:>6} MB {n:>9,} tokens: "
                  + ", ".join(f"{k} {v:.2f} CPU-s" for k, v in best.items())
                  + f"; tokens per CPU-s vs raw: {row['per_cpu_vs_raw, start-up excluded']:.2f}x start-up excluded, "
                  f"{row['per_cpu_vs_raw, start-up included']:.2f}x included", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save("tokenize", result)
    return result


def mode_memory(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="mixer-mem-"))
    result = {}
    try:
        tok_path = tokenizer(work)
        for copies in args.copies_list:
            data = corpus(copies, work / f"in-{copies}")
            budget = sum(len(t.encode()) for t in texts_of(data)) // 4  # about the text's tokens, once
            got = run_assay(data, tok_path, work / f"out-{copies}", budget)
            shutil.rmtree(work / f"out-{copies}", ignore_errors=True)
            shutil.rmtree(data, ignore_errors=True)
            result[f"{copies} copies"] = {"text_tokens": got["text_tokens"], "seconds": round(got["seconds"], 2),
                                          "driver_peak_rss_mb": got["driver_rss_mb"],
                                          "worker_peak_rss_mb": got["worker_rss_mb"], "total_peak_rss_mb": got["total_rss_mb"]}
            print(f"{copies:>3} copies: {got['text_tokens']:>12,} tokens, {got['seconds']:6.1f} s, driver peak "
                  f"{got['driver_rss_mb']} MB, largest worker {got['worker_rss_mb']} MB, all processes {got['total_rss_mb']} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save("memory", result)
    return result


def piece_figures(stage_dir: Path, tokenized: dict[str, Path]) -> dict:
    """How a built stage cut its documents, from its doc index and its tokenized sources (`tokenized`:
    mix source -> its tokenized dataset): pieces under 32 tokens, documents split though they fit a
    row, split documents, pieces starting inside a prefix, documents missing a tail nothing counts."""
    import pyarrow as pa

    from assay.mixer.pools import Pool
    from assay.pipeline.tokens import TokenDataset

    ds = TokenDataset(stage_dir)
    mix = ds.manifest["mix"]
    seq_len, meta = mix["seq_len"], mix["meta"]
    pieces = pa.concat_tables([ds.docs(i).select(["doc_id", "mix_source", "replay_of", "epoch", "fim", "offset",
                                                  "length", "cropped"]) for i in ds.shard_indexes()]).to_pandas()
    full: dict[tuple[str, str], tuple[int, int, int]] = {}  # (source, doc_id) -> (length, FIM variant's, prefix)
    for source, path in tokenized.items():
        pool = Pool.load(path)
        prefix = pool.prefix * bool(meta)
        plain = pool.text_tokens + 2 + prefix
        fim = plain - pool.text_tokens + pool.fim_length
        full.update(zip(((source, i) for i in pool.column("doc_id").to_pylist()),
                        zip(plain.tolist(), fim.tolist(), prefix.tolist())))
    known = [full[s, i] for s, i in zip(pieces.mix_source, pieces.doc_id)]
    pieces["full"] = [k[f] for k, f in zip(known, pieces.fim)]
    pieces["prefix"] = [k[2] for k in known]
    pieces["end"] = pieces.offset + pieces.length
    keys = ["doc_id", "mix_source", "replay_of", "epoch", "fim"]
    by_doc = pieces.fillna({"replay_of": ""}).groupby(keys).agg(
        pieces=("offset", "size"), copies=("offset", lambda o: int((o == 0).sum())), full=("full", "first"),
        end=("end", "max"), cropped=("cropped", "sum"))
    fits = by_doc.full <= seq_len
    short = pieces.length < 32
    return {"pieces": len(pieces), "pieces_under_32": int(short.sum()),
            "pieces_under_32_share": round(float(short.mean()), 4),
            "pieces_under_32_of_longer_documents": int((short & (pieces.full >= 32)).sum()),
            "documents": int(by_doc.copies.sum()),
            "split_though_fits": int((by_doc.pieces[fits] > by_doc.copies[fits]).sum()),
            "max_pieces_of_a_fitting_document": int(by_doc.pieces[fits].max()) if fits.any() else 0,
            "split_documents": int((~fits).sum()),
            "pieces_starting_inside_the_prefix": int(((pieces.offset > 0) & (pieces.offset <= pieces.prefix)).sum()),
            "tails_missing_uncounted": int(((by_doc.end < by_doc.full) & (by_doc.cropped == 0)).sum())}


def mode_packing(args) -> dict:
    """Tokens kept, padding, realized shares and how documents were cut, when long documents
    continue across rows (the default) against cropping them, at each mixture's own seq_len and at
    257 and 4097: every stage of the demo's mixtures (run `make demo` first) and newswire-like
    articles (the article-extraction benchmark's bodies)."""
    import yaml

    from assay.mixer.build import build, tokenized_name
    from assay.mixer.plan import PlanError
    from assay.mixer.recipe import parse_mixture
    from assay.pipeline.dataset import write_table
    from assay.pipeline.schema import make_docs

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _corpora

    work = ROOT / ".bench" / "packing"
    names = ("step35-mini", "mimo-mini", "raw-arm", "heldout")
    mixtures = {name: ROOT / "examples" / "mixtures" / f"{name}.yaml" for name in names}
    news = work / "news-docs"
    if not (news / "_manifest.json").exists():
        write_table(make_docs([{"text": d["text"], "source": "news", "url": d["doc_id"]} for d in _corpora.news()]), news)
    tok = ROOT / "runs" / "demo" / "mix-step35" / "tokenizer.json"
    if not tok.exists():
        sys.exit(f"{tok} is missing: run `make demo` first")
    newswire = {"name": "newswire", "seed": 0, "tokenizer": {"path": str(tok)}, "meta": None, "max_epochs": 1,
                "sources": {"news": {"path": str(news)}}, "stages": [{"id": "news", "tokens": 100_000, "seq_len": 257,
                                                                      "mix": {"news": 1}}]}
    result: dict = {}
    for name in [*mixtures, "newswire"]:
        if name == "newswire":
            data, where = newswire, work / "newswire.yaml"
        else:
            data, where = yaml.safe_load(mixtures[name].read_text()), mixtures[name]
        for seq_len in args.seq_lens:
            for mode in args.modes:
                d = json.loads(json.dumps(data))
                for stage in d["stages"]:
                    stage.update(long_docs=mode)
                    if seq_len:
                        stage.update(seq_len=seq_len, tokens=max(stage["tokens"], seq_len))
                mixture = parse_mixture(d, where)
                label = f"{seq_len or 'own'} {mode}"
                out = work / f"{name}-{seq_len or 'own'}-{mode}"
                try:
                    build(mixture, out, log=lambda *_: None)
                except PlanError as exc:  # cropping shrinks what a source offers below its budget
                    result.setdefault(name, {})[label] = {"plan_error": str(exc)}
                    print(f"{name:12} {label:10} plan error: {exc}", flush=True)
                    continue
                for stage in mixture.stages:
                    mix = json.loads((out / stage.id / "_manifest.json").read_text())["mix"]
                    fit = mix["packing"]["best_fit"]
                    miss = max(abs(s["realized_share"] - s["target_share"]) for s in mix["sources"].values())
                    row = {"seq_len": stage.seq_len, "kept_fraction": round(fit["kept_fraction"], 4),
                           "padded_fraction": round(fit["padded_fraction"], 4),
                           "cropped_fraction": round(fit["cropped_fraction"], 4),
                           "overlap_fraction": round(fit.get("overlap_fraction", 0), 4),
                           "max_share_miss_points": round(100 * miss, 2), "tokens": mix["tokens"],
                           "target_tokens": mix["target_tokens"], "cut_fraction": round(fit.get("cut_fraction", 0), 4),
                           "in_rows_fraction": round(fit.get("in_rows_fraction", fit["kept_fraction"]), 4),
                           **piece_figures(out / stage.id, {s: out / tokenized_name(mixture.source_path(s))
                                                            for s in mix["sources"]})}
                    if "unfinished_fraction" in fit:  # before issue #46: tails the budget left out, not counted
                        row["unfinished_fraction"] = round(fit["unfinished_fraction"], 4)
                    result.setdefault(name, {}).setdefault(stage.id, {})[label] = row
                    print(f"{name:12} {stage.id:12} {label:10} kept {row['kept_fraction']:.2%} (cut at shares' ends "
                          f"{row['cut_fraction']:.2%}) padded "
                          f"{row['padded_fraction']:.2%} share miss {row['max_share_miss_points']:.2f} pt; pieces "
                          f"{row['pieces']}, under 32 tokens {row['pieces_under_32_share']:.1%}, split though they fit "
                          f"{row['split_though_fits']}, uncounted tails {row['tails_missing_uncounted']}", flush=True)
    save(args.save_as, result)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", choices=["speed", "tokenize", "memory", "packing", "all"], default="all")
    ap.add_argument("--copies", type=int, default=10, help="speed: repeats of the sample")
    ap.add_argument("--copies-list", type=int, nargs=2, default=[4, 40], help="memory: two corpus sizes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--seq-lens", type=int, nargs="+", default=[0, 257, 4097],
                    help="packing: row lengths (0: each mixture's own)")
    ap.add_argument("--modes", nargs="+", default=["split", "crop"], help="packing: long_docs modes")
    ap.add_argument("--save-as", default="packing", help="packing: the results section to write")
    args = ap.parse_args()
    if args.mode in ("speed", "all"):
        mode_speed(args)
    if args.mode in ("tokenize", "all"):
        mode_tokenize(args)
    if args.mode in ("memory", "all"):
        mode_memory(args)
    if args.mode in ("packing", "all"):
        mode_packing(args)


if __name__ == "__main__":
    main()
