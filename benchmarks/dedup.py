"""Dedup benchmarks: quality on planted near-duplicates, speed vs rensa, datasketch and datatrove, memory.

    python benchmarks/dedup.py quality                 # recall/precision per edit rate (real text)
    python benchmarks/dedup.py speed --docs 100000     # Assay vs datasketch vs datatrove, one core
    python benchmarks/dedup.py rensa --docs 150000     # the command line vs rensa, whole processes, one core
    python benchmarks/dedup.py memory --docs 1000000   # peak RSS of the local plan on short docs
    python benchmarks/dedup.py spark --docs 1000000    # the same job on Spark with 1 GiB of memory
    python benchmarks/dedup.py cjk                     # planted copies in Chinese and Japanese, characters vs words

Every mode prints a table and merges its figures into benchmarks/results/dedup.json. The corpus is
built from the real documents in ../shared/data (articles, Python files, MATH, GSM8K): documents
are random real lines of those texts, plus edited copies of earlier documents (the near-duplicates).
datatrove runs from its own venv (.bench/dedup-venv, created from benchmarks/requirements-dedup.txt)
so its pins never touch the project's environment.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
if not DATA.exists():  # a worktree one level deeper than the main checkout
    DATA = ROOT.parents[1] / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results" / "dedup.json"
VENV = ROOT / ".bench" / "dedup-venv"
PARAMS = {"ngram": 5, "num_perm": 112, "bands": 14, "rows": 8}


# ---- corpus -------------------------------------------------------------------------------------

def build_corpus(n_docs: int, min_words: int, max_words: int, dup_rate: float = 0.1,
                 seed: int = 0, piece_words: int = 20) -> tuple[list[str], np.ndarray]:
    """(texts, origin): documents of random real lines (articles, code, math, GSM8K) until
    `min_words..max_words` words; `dup_rate` of them are copies, with 2% word edits, of an earlier
    document. origin[i] is the original a document descends from (its own index for an original):
    the truth for recall and pair precision.

    The lines are the distinct ones, cut into pieces of at most `piece_words` words, so that two
    originals share little by chance: drawn 34M words from 1.3M, whole lines made originals that
    were one long paragraph, or a few, and the same one (25% of the text is in lines of 50+ words),
    and frequent lines (imports, formula steps) weighed more. At 150k documents a quarter of the
    pairs grouped then joined originals that share most of their text (exact Jaccard up to 1), which
    counted as false positives though they are duplicates by content. Deterministic."""
    from assay.dedup.evaluate import edit_words, real_texts

    lines = []
    for line in dict.fromkeys(ln.strip() for _, t in real_texts(DATA) for ln in t.splitlines()):
        words = line.split()
        lines += [" ".join(words[k : k + piece_words]) for k in range(0, len(words), piece_words)]
    lines = [ln for ln in dict.fromkeys(lines) if len(ln.split()) >= 3]
    n_words = np.array([len(ln.split()) for ln in lines])
    rng = np.random.default_rng(seed)
    vocab = sorted({w for ln in lines[:20000] for w in ln.split()})
    docs: list[str] = []
    origin = np.arange(n_docs)
    for i in range(n_docs):
        if docs and rng.random() < dup_rate:
            src = int(rng.integers(0, len(docs)))
            docs.append(edit_words(docs[src], 0.02, vocab, rng))
            origin[i] = origin[src]
            continue
        target = int(rng.integers(min_words, max_words + 1))
        picked, words = [], 0
        while words < target:
            j = int(rng.integers(0, len(lines)))
            picked.append(lines[j])
            words += int(n_words[j])
        docs.append("\n".join(picked))
    return docs, origin


def write_corpus(texts: list[str], path: Path, shards: int) -> None:
    from assay.pipeline.dataset import write_table
    from assay.pipeline.schema import make_docs

    write_table(make_docs({"text": t, "source": f"src{i % 4}"} for i, t in enumerate(texts)), path, shards)


# ---- the three implementations ------------------------------------------------------------------

def run_assay(path: Path, out: Path, **params) -> tuple[float, int]:
    from assay.dedup.near import MinHashDedup
    from assay.pipeline.dataset import Dataset
    from assay.pipeline.runner import run_stage

    t = time.perf_counter()
    run_stage(MinHashDedup({**PARAMS, **params}), [path], out, engine="local", force=True)
    seconds = time.perf_counter() - t
    removed = sum(1 for k in Dataset(out).read(columns=["dup_keep"]).column("dup_keep").to_pylist() if not k)
    return seconds, removed


def run_assay_core(texts: list[str], scratch: Path) -> tuple[float, int]:
    """The same stage's signatures + LSH + components on in-memory texts (no Parquet in or out)."""
    import pyarrow as pa

    from assay.dedup.annotate import Shard
    from assay.dedup.bandstore import BandStore
    from assay.dedup.local_plan import group_nodes
    from assay.dedup.near import MinHashDedup

    stage = MinHashDedup(PARAMS)
    t = time.perf_counter()
    arr = pa.array(texts, pa.string())
    store = BandStore(stage.n_bands, scratch, int(stage.params.memory_mb * 2**20))
    for first in range(0, len(texts), stage.params.batch_rows):
        keys, valid = stage.batch_keys(pa.table({"text": arr.slice(first, stage.params.batch_rows)}))
        nodes = np.arange(first, first + len(valid))
        store.add(keys[valid], nodes[valid])
    # the texts as one held shard, where verification takes the candidates' texts from
    held = Shard(0, "", 0, len(texts), arr.nbytes)
    labels, _ = group_nodes(stage, [held], store, len(texts), {0: [(0, pa.table({"text": arr}))]})
    seconds = time.perf_counter() - t
    return seconds, int((labels != np.arange(len(texts))).sum())


RENSA_SCRIPT = r'''
import glob, json, re, sys, time
import pyarrow.parquet as pq
from rensa import RMinHash, RMinHashLSH

texts = []
for path in sorted(glob.glob(sys.argv[1] + "/part-*.parquet")):
    texts += pq.read_table(path, columns=["text"]).column("text").to_pylist()
word = re.compile(r"\w+")  # Assay's tokens: runs of word characters, lower case
n = 5

def shingles(text):
    toks = word.findall(text.lower())
    return [" ".join(s) for s in zip(*[toks[i:] for i in range(n)])] or ([" ".join(toks)] if toks else [])

sets = [shingles(t) for t in texts]
matrix = RMinHash.digest_matrix_from_token_sets(sets, num_perm=112, seed=1)
flags = RMinHashLSH(threshold=0.72, num_perm=112, num_bands=14).insert_matrix_and_query_duplicate_flags(matrix)
print(json.dumps({"in_groups": int(sum(flags))}))
'''


def process_cpu(cmd: list[str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of a whole process: start-up, imports and exit included."""
    before = os.times()
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = os.times()
    if res.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed:\n{res.stderr[-3000:]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), wall, res.stdout


def assay_vs_rensa(path: Path, work: Path, rounds: int) -> dict:
    """`assay dedup minhash` (one worker, the command line as a user runs it) against rensa's bulk API
    (digest matrix + LSH over the same 5-word shingles, 112 permutations, 14 x 8 bands), each a whole
    process reading the same Parquet input, in paired rounds: CPU and wall seconds, and their ratio.
    rensa writes nothing and builds no groups, so the comparison favours it."""
    assay = str(Path(sys.executable).with_name("assay"))
    script = work / "rensa_minhash.py"
    script.write_text(RENSA_SCRIPT)
    # One untimed run of each first: after an install or an edit Assay compiles its kernels once
    # (rensa's wheel comes compiled), and both then read their input from the page cache.
    process_cpu([assay, "dedup", "minhash", str(path), str(work / "cli-out")])
    process_cpu([sys.executable, str(script), str(path)])
    pairs = []
    for _ in range(rounds):  # the last round's output stays in work/cli-out
        shutil.rmtree(work / "cli-out", ignore_errors=True)
        a_cpu, a_wall, _ = process_cpu([assay, "dedup", "minhash", str(path), str(work / "cli-out")])
        r_cpu, r_wall, out = process_cpu([sys.executable, str(script), str(path)])
        pairs.append((a_cpu, a_wall, r_cpu, r_wall))
    a_cpu, a_wall, r_cpu, r_wall = (float(np.median(col)) for col in zip(*pairs))
    return {"rounds": rounds, "assay_cpu_s": round(a_cpu, 2), "assay_wall_s": round(a_wall, 2),
            "rensa_cpu_s": round(r_cpu, 2), "rensa_wall_s": round(r_wall, 2),
            "cpu_ratio": round(float(np.median([p[2] / p[0] for p in pairs])), 2),
            "wall_ratio": round(float(np.median([p[3] / p[1] for p in pairs])), 2),
            "rensa_in_groups": json.loads(out.strip().splitlines()[-1])["in_groups"]}


def planted_quality(path: Path, work: Path, origin: np.ndarray) -> dict:
    """Recall and pair precision against the planted origins, and recall of the planted pairs whose
    exact Jaccard is >= 0.8: of the command line's output in work/cli-out (default parameters,
    candidates verified) and of the same stage with verify_threshold=None; with the CPU seconds the
    default run spent verifying."""
    from assay.dedup.evaluate import origin_scores
    from assay.dedup.verify import pairs_jaccard
    from assay.pipeline.dataset import Dataset

    copies = np.flatnonzero(origin != np.arange(len(origin)))
    texts = Dataset(path).read(columns=["text"]).column("text")
    close = pairs_jaccard(texts, copies, origin[copies], PARAMS["ngram"]) >= 0.8
    out = {}
    for label, extra in (("default (verified)", None), ("unverified", {"verify_threshold": None})):
        if extra is not None:
            run_assay(path, work / "unverified", **extra)
        dest = work / ("cli-out" if extra is None else "unverified")
        groups = Dataset(dest).read(columns=["dup_group"]).column("dup_group")
        got = origin_scores(origin, groups)
        found = np.asarray(groups.take(copies)) == np.asarray(groups.take(origin[copies]))
        stats = json.loads((dest / "_manifest.json").read_text())["stats"]["dedup"]
        got.update(recall_jaccard_ge_0_8=round(float(found[close].mean()), 4), pairs_jaccard_ge_0_8=int(close.sum()),
                   candidate_edges=stats["candidate_edges"], verified_edges=stats["verified_edges"],
                   verify_cpu_s=stats.get("verify_cpu_s"))
        out[label] = got
        print(f"  {label:20} recall {got['recall']} (J>=0.8: {got['recall_jaccard_ge_0_8']} of {got['pairs_jaccard_ge_0_8']})"
              f"  precision {got['precision']} over {got['predicted_pairs']} pairs  (candidates {got['candidate_edges']},"
              f" verified {got['verified_edges']}, verify CPU {got['verify_cpu_s']} s)")
    return out


def run_datasketch(texts: list[str], shared_permutations: bool = True) -> tuple[float, int]:
    """Per-document MinHash + MinHashLSH query/insert + union-find.

    shared_permutations=True is the tuned path: the permutations are drawn once and handed to every
    MinHash. False is datasketch's documented usage, `MinHash(num_perm=112)` per document, which
    draws them again for each document."""
    import re

    from datasketch import MinHash, MinHashLSH

    t = time.perf_counter()
    punct = re.compile(r"[^\w\s]+")
    k = PARAMS["num_perm"]
    proto = MinHash(num_perm=k, seed=1)  # default scheme; permutations made once
    lsh = MinHashLSH(num_perm=k, params=(PARAMS["bands"], PARAMS["rows"]))
    parent = list(range(len(texts)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    n = PARAMS["ngram"]
    for i, text in enumerate(texts):
        toks = punct.sub(" ", text.lower()).split()
        if not toks:
            continue
        shingles = {" ".join(toks[j : j + n]).encode() for j in range(max(len(toks) - n + 1, 1))}
        if shared_permutations:
            m = MinHash(num_perm=k, permutations=proto.permutations, scheme=proto.scheme)
        else:
            m = MinHash(num_perm=k)
        m.update_batch(list(shingles))
        for j in lsh.query(m):
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
        lsh.insert(i, m)
    seconds = time.perf_counter() - t
    removed = sum(1 for i in range(len(texts)) if find(i) != i)
    return seconds, removed


DATATROVE_SCRIPT = r'''
import sys, time, json
from pathlib import Path
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupSignature, MinhashDedupBuckets,
    MinhashDedupCluster)
from datatrove.utils.hashing import HashConfig
from datatrove.utils.word_tokenizers import WordTokenizer

class SplitTokenizer(WordTokenizer):
    """str.split words: cheaper than datatrove's spaCy default, so this favours datatrove."""
    def word_tokenize(self, text): return text.split()
    def sent_tokenize(self, text): return [text]
    def span_tokenize(self, text): return [(0, len(text))]

inp, work, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
if mode == "tuned":
    cfg = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, hash_config=HashConfig(precision=64))
    extra = {"language": SplitTokenizer()}
else:  # documented defaults: MinhashConfig() is 5-grams, 14 x 8, 64-bit; spaCy English words
    cfg = MinhashConfig()
    assert (cfg.n_grams, cfg.num_buckets, cfg.hashes_per_bucket) == (5, 14, 8), cfg
    extra = {}
t = time.perf_counter()
LocalPipelineExecutor([ParquetReader(inp, text_key="text", id_key="id", glob_pattern="part-*.parquet"),
    MinhashDedupSignature(output_folder=str(work / "sigs"), config=cfg, **extra)],
    tasks=1, workers=1, logging_dir=str(work / "logs1")).run()
t1 = time.perf_counter()
LocalPipelineExecutor([MinhashDedupBuckets(input_folder=str(work / "sigs"), output_folder=str(work / "buckets"),
    config=cfg)], tasks=cfg.num_buckets, workers=1, logging_dir=str(work / "logs2")).run()
t2 = time.perf_counter()
LocalPipelineExecutor([MinhashDedupCluster(input_folder=str(work / "buckets"), output_folder=str(work / "remove"),
    config=cfg)], tasks=1, workers=1, logging_dir=str(work / "logs3")).run()
t3 = time.perf_counter()
removed = 0
for f in (work / "remove").glob("*.remove"):
    removed += f.stat().st_size // 4
print(json.dumps({"seconds": t3 - t, "signatures": t1 - t, "buckets": t2 - t1, "cluster": t3 - t2, "removed": removed}))
'''


def ensure_datatrove_venv() -> Path | None:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-U", "pip"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(ROOT / "benchmarks/requirements-dedup.txt")], check=True)
    return py


def run_datatrove(path: Path, work: Path, mode: str = "tuned") -> dict:
    """mode "tuned": str.split words; "default": datatrove's documented defaults (spaCy words)."""
    py = ensure_datatrove_venv()
    script = work / "datatrove_minhash.py"
    script.write_text(DATATROVE_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    shutil.rmtree(work / f"dt-{mode}", ignore_errors=True)
    res = subprocess.run([str(py), str(script), str(path), str(work / f"dt-{mode}"), mode], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"datatrove failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---- modes --------------------------------------------------------------------------------------

def one_core() -> None:
    """Pin this process (and children) to one core and keep Arrow single-threaded."""
    import pyarrow as pa

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def median_of(runs: int, fn, *a) -> tuple[float, int]:
    """(median seconds, result) of `runs` calls: Assay's runs are seconds long, so one slow moment of
    the host would swing a single one; the baselines run for minutes and average it out themselves."""
    got = [fn(*a) for _ in range(runs)]
    return float(np.median([g[0] for g in got])), got[-1][1]


def mode_speed(args) -> dict:
    one_core()
    texts, origin = build_corpus(args.docs, 50, 400, seed=args.seed)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    work = Path(tempfile.mkdtemp(prefix="dedup-bench-"))
    try:
        write_corpus(texts, work / "in", args.shards)
        # Once per process: the code point tables and loading (or, on a fresh install, compiling)
        # the kernel. Timed on a 1,000-document warm-up and reported apart, not in the docs/s.
        write_corpus(texts[:1000], work / "warm", 1)
        startup, _ = run_assay(work / "warm", work / "warm-out")
        rows = []
        secs, removed = median_of(args.repeat, run_assay, work / "in", work / "out")
        rows.append(("assay (local plan, end to end)", secs, removed))
        secs, removed = median_of(args.repeat, run_assay_core, texts, work / "core")
        rows.append(("assay core (in memory, no Parquet I/O)", secs, removed))
        secs, removed = run_datasketch(texts)
        rows.append(("datasketch tuned (shared permutations)", secs, removed))
        secs, removed = run_datasketch(texts, shared_permutations=False)
        rows.append(("datasketch default (MinHash per doc)", secs, removed))
        if not args.skip_datatrove:
            for mode, label in (("tuned", "datatrove tuned (str.split words)"), ("default", "datatrove default (spaCy words)")):
                dt = run_datatrove(work / "in", work, mode)
                rows.append((label, dt["seconds"], dt["removed"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    e2e, core = rows[0][1], rows[1][1]
    print(f"\n{args.docs:,} documents, {mb:.1f} MB of text, params {PARAMS}, one core; Assay: median of "
          f"{args.repeat} runs, after a {startup:.2f} s warm-up (tables, compiled kernel)\n")
    print(f"{'implementation':42} {'seconds':>8} {'docs/s':>9} {'MB/s':>7} {'assay e2e x':>12} {'assay core x':>13} {'removed':>8}")
    result = {"documents": args.docs, "text_mb": round(mb, 2), "params": PARAMS, "cores": 1,
              "assay_repeats": args.repeat, "assay_startup_seconds": round(startup, 2), "runs": {}}
    for name, secs, removed in rows:
        print(f"{name:42} {secs:8.2f} {args.docs / secs:9.0f} {mb / secs:7.2f} {secs / e2e:12.1f} {secs / core:13.1f} {removed:8d}")
        result["runs"][name] = {"seconds": round(secs, 2), "docs_per_s": round(args.docs / secs), "mb_per_s": round(mb / secs, 3),
                                "assay_speedup": round(secs / e2e, 2), "assay_core_speedup": round(secs / core, 2),
                                "removed": removed}
    return result


def mode_rensa(args) -> dict:
    """The command line against rensa on one core (see assay_vs_rensa)."""
    one_core()
    texts, origin = build_corpus(args.docs, 50, 400, seed=args.seed)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    work = Path(tempfile.mkdtemp(prefix="dedup-rensa-"))
    try:
        write_corpus(texts, work / "in", args.shards)
        del texts
        result = assay_vs_rensa(work / "in", work, args.repeat)
        print("planted copies, their recall and pair precision:")
        result["quality"] = planted_quality(work / "in", work, origin)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.update(documents=args.docs, text_mb=round(mb, 1), params=PARAMS,
                  load_average=[round(x, 1) for x in os.getloadavg()])
    print(f"{args.docs:,} documents ({mb:.0f} MB), one core, whole processes, median of {args.repeat} paired rounds:\n"
          f"  assay dedup minhash  CPU {result['assay_cpu_s']} s  wall {result['assay_wall_s']} s\n"
          f"  rensa (bulk API)     CPU {result['rensa_cpu_s']} s  wall {result['rensa_wall_s']} s\n"
          f"  rensa / assay        CPU {result['cpu_ratio']}x  wall {result['wall_ratio']}x\n"
          f"  load average {result['load_average']}")
    return result


def mode_quality(args) -> dict:
    import pyarrow as pa  # noqa: F401

    from assay.dedup.evaluate import distinct_texts, plant, real_texts, score
    from assay.pipeline.dataset import Dataset

    base = distinct_texts([t for _, t in real_texts(DATA)])
    rates = [0.01, 0.02, 0.03, 0.05, 0.1, 0.2]
    planted = plant(base, rates, args.copies, seed=args.seed)
    work = Path(tempfile.mkdtemp(prefix="dedup-quality-"))
    out = {"base_documents": len(base), "copies_per_rate": args.copies}
    try:
        write_corpus(planted.texts, work / "in", 4)
        for label, extra in (("minhash 14x8 (default: verify 0.6)", {}), ("minhash 14x8, no verification", {"verify_threshold": None}),
                             ("minhash 14x8 + verify 0.7", {"verify_threshold": 0.7})):
            run_assay(work / "in", work / "out", **extra)
            got = score(planted, Dataset(work / "out").read(columns=["dup_group"]).column("dup_group").to_pylist())
            out[label] = got
            print(f"\n{label}: {got['documents']} docs; recall(J>=0.8) {got['recall_jaccard_ge_0.8']} over "
                  f"{got['pairs_jaccard_ge_0.8']} pairs; precision {got['precision']} over {got['predicted_pairs']} pairs")
            print(f"{'edit rate':>10} {'pairs':>6} {'mean J':>7} {'recall':>7}")
            for r, v in got["per_edit_rate"].items():
                print(f"{r:>10} {v['pairs']:6d} {v['mean_jaccard']:7.3f} {v['recall']:7.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def cjk_paragraphs(lang: str, min_chars: int = 120) -> list[str]:
    """Paragraphs (consecutive lines merged up to `min_chars`) of the Chinese or Japanese documents in
    ../shared/data: magic-html and aeb main texts identified as `lang` by lid.176, and the UDHR page
    of pdf-dev's ground truth (udhr-cmn / udhr-jpn)."""
    import fasttext

    from assay.extractors.langid import model_path

    lid = fasttext.load_model(str(model_path()))
    texts = [t for _, t in real_texts_cjk()]
    texts = [t for t in texts if lid.predict(" ".join(t[:2000].split()), k=1)[0][0] == f"__label__{lang}"]
    texts.append((DATA / "pdf-dev" / "gt" / {"zh": "udhr-cmn.md", "ja": "udhr-jpn.md"}[lang]).read_text())
    out = []
    for text in texts:
        buf = ""
        for line in (ln.strip() for ln in text.splitlines()):
            buf += line
            if len(buf) >= min_chars:
                out.append(buf)
                buf = ""
    return list(dict.fromkeys(out))


def real_texts_cjk() -> list[tuple[str, str]]:
    from assay.dedup.evaluate import real_texts

    return [(s, t) for s, t in real_texts(DATA) if s in ("aeb", "magic-html-article", "magic-html-forum")]


def plant_words(base: list[str], rates: list[float], copies: int, seed: int):
    """Planted copies of CJK paragraphs: each segmented word substituted, deleted or followed by an
    inserted word with probability `rate` (the words of filters/words.py, joined back without spaces)."""
    import regex

    from assay.dedup.evaluate import Planted
    from assay.filters.words import spaced

    import pyarrow as pa

    tokens = [t.split() for t in spaced(pa.array(base)).to_pylist()]
    cjk = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")
    vocab = sorted({w for ws in tokens for w in ws if cjk.search(w)})
    rng = np.random.default_rng(seed)

    def join(ws):
        out = ""
        for w in ws:
            out += ("" if not out or (cjk.search(out[-1]) or cjk.match(w)) else " ") + w
        return out

    texts, origin, rate = list(base), list(range(len(base))), [np.nan] * len(base)
    for r in rates:
        for i in rng.choice(len(base), size=min(copies, len(base)), replace=False).tolist():
            ws = []
            for w in tokens[i]:
                d, op, pick = rng.random(), int(rng.integers(0, 3)), vocab[int(rng.integers(0, len(vocab)))]
                ws += [w] if d >= r else [pick] if op == 0 else [w, pick] if op == 1 else []
            texts.append(join(ws))
            origin.append(i)
            rate.append(r)
    order = rng.permutation(len(texts))
    return Planted([texts[i] for i in order], np.asarray(origin)[order], np.asarray(rate, dtype=float)[order])


def mode_cjk(args) -> dict:
    """Planted near-duplicates of Chinese and Japanese paragraphs, found with character shingles
    (the default) and with word shingles (`segment: true`): recall over pairs whose exact Jaccard (in
    the shingles the run used) is >= 0.8, and pair precision, as `quality` measures English."""
    from assay.dedup.evaluate import distinct_texts, score
    from assay.pipeline.dataset import Dataset

    rates = [0.01, 0.02, 0.03, 0.05, 0.1, 0.2]
    out = {}
    work = Path(tempfile.mkdtemp(prefix="dedup-cjk-"))
    try:
        for lang in ("zh", "ja"):
            base = distinct_texts(cjk_paragraphs(lang))
            planted = plant_words(base, rates, min(args.copies, len(base)), args.seed)
            write_corpus(planted.texts, work / lang, 4)
            out[lang] = {"base_documents": len(base), "documents": len(planted.texts)}
            for label, seg in (("characters (default)", False), ("words (segment: true)", True)):
                run_assay(work / lang, work / f"{lang}-out", segment=seg)
                got = score(planted, Dataset(work / f"{lang}-out").read(columns=["dup_group"]).column("dup_group").to_pylist(),
                            PARAMS["ngram"], segmented=seg)
                out[lang][label] = got
                print(f"{lang} {label:24} {len(base)} base docs: recall(J>=0.8) {got['recall_jaccard_ge_0.8']} over "
                      f"{got['pairs_jaccard_ge_0.8']} pairs; precision {got['precision']} over {got['predicted_pairs']} pairs")
                print("   per edit rate: " + "  ".join(f"{r}: J {v['mean_jaccard']:.2f} recall {v['recall']:.2f}"
                                                     for r, v in got["per_edit_rate"].items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def mode_memory(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="dedup-mem-"))
    try:
        texts, _ = build_corpus(args.docs, 10, 60, seed=args.seed)
        mb = sum(len(t.encode()) for t in texts) / 1e6
        write_corpus(texts, work / "in", args.shards)
        del texts
        code = (
            "import sys, time, resource; from assay.dedup.near import MinHashDedup; from assay.pipeline.runner import run_stage;"
            "t=time.perf_counter(); r=run_stage(MinHashDedup({}), [sys.argv[1]], sys.argv[2], engine='local');"
            "print(time.perf_counter()-t, r.manifest['counts']['rows_in'], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
        )
        res = subprocess.run([sys.executable, "-c", code, str(work / "in"), str(work / "out")], capture_output=True, text=True, check=True)
        secs, rows, rss_kb = res.stdout.split()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"documents": int(rows), "text_mb": round(mb, 1), "seconds": round(float(secs), 1), "peak_rss_mb": round(int(rss_kb) / 1024)}
    print(f"local plan, {result['documents']:,} short documents ({mb:.0f} MB): {result['seconds']} s, peak RSS {result['peak_rss_mb']} MB")
    return result


def mode_spark(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="dedup-spark-"))
    try:
        texts, _ = build_corpus(args.docs, 10, 60, seed=args.seed)
        write_corpus(texts, work / "in", args.shards)
        del texts
        code = (
            "import sys, time, json; from assay.dedup.near import MinHashDedup; from assay.pipeline.runner import run_stage;"
            "o={'spark_master':'local[2]','spark_conf':{'spark.driver.memory':sys.argv[3],'spark.sql.shuffle.partitions':'64'}};"
            "t=time.perf_counter(); r=run_stage(MinHashDedup({}), [sys.argv[1]], sys.argv[2], engine='spark', options=o);"
            "s=time.perf_counter()-t; t=time.perf_counter(); l=run_stage(MinHashDedup({}), [sys.argv[1]], sys.argv[2]+'-local');"
            "import pyarrow.parquet as pq, glob;"
            "same=all(pq.read_table(a).equals(pq.read_table(a.replace(sys.argv[2], sys.argv[2]+'-local'))) for a in sorted(glob.glob(sys.argv[2]+'/part-*.parquet')));"
            "print(json.dumps({'seconds': round(s,1), 'plan': r.manifest['plan'], 'rows': r.manifest['counts']['rows_in'], 'identical_to_local': same}))"
        )
        res = subprocess.run([sys.executable, "-c", code, str(work / "in"), str(work / "out"), args.spark_memory],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(res.stderr[-3000:])
        result = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["driver_memory"] = args.spark_memory
    print(f"spark plan, {result['rows']:,} docs, spark.driver.memory={args.spark_memory}: {result['seconds']} s, "
          f"identical to local: {result['identical_to_local']}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["quality", "speed", "rensa", "memory", "spark", "cjk"])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--copies", type=int, default=300, help="quality: planted copies per edit rate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="speed: Assay runs per figure (the median is reported)")
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--spark-memory", default="1g")
    args = ap.parse_args()
    modes = {"quality": mode_quality, "speed": mode_speed, "rensa": mode_rensa, "memory": mode_memory, "spark": mode_spark,
             "cjk": mode_cjk}
    result = modes[args.mode](args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    all_results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    all_results[args.mode] = result
    RESULTS.write_text(json.dumps(all_results, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
