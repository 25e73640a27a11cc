"""Semantic-family benchmarks: decontamination quality and speed, clustering quality, embedding and
k-means speed, each side by side with a named baseline.

    python benchmarks/semantic.py decontam    # recall per benchmark x perturbation on held-out items,
                                              # false positives on clean documents; vs a plain
                                              # Python n-gram-set decontaminator (quality and docs/s)
    python benchmarks/semantic.py decontam-speed  # only the docs/s figures (after a scan change)
    python benchmarks/semantic.py cluster     # topic purity on real text (code, issues, math, web)
    python benchmarks/semantic.py speed       # embeddings/s vs sentence-transformers' encode;
                                              # k-means vs faiss alone and sklearn MiniBatchKMeans

Every mode prints a table and merges its figures into benchmarks/results/semantic.json. Real text
comes from the repository (the sample corpus, the shipped registry) and, when present, from
../shared/data (1,400 Python files and 440 article/forum pages as clean documents). The host is
shared, so every speed figure is the best of `--repeat` runs, and the figures that matter are the
ratios, measured in the same run.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results" / "semantic.json"
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def best_of(repeat: int, fn, *args):
    """(least seconds, result) over `repeat` calls: on a shared host the fastest run is the one least
    disturbed by other work."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args)
        runs.append((time.perf_counter() - start, result))
    return min(r[0] for r in runs), runs[-1][1]


def clean_documents() -> dict[str, list[str]]:
    """Documents with no benchmark in them, by kind: shared data when present, else the sample."""
    from semantic_data import code_files, web_pages

    if not DATA.exists():
        return {"code": list(code_files()), "web": list(web_pages())}
    web = []
    for path in sorted(DATA.glob("extraction/magic-html/benchmark/data/*/base.json")):
        web += [v["content"] for v in json.loads(path.read_text()).values() if v.get("content")]
    web += [v["articleBody"] for v in json.loads((DATA / "extraction/aeb/ground-truth.json").read_text()).values()]
    code = [p.read_text(errors="replace") for p in sorted((DATA / "code/thealgorithms-python").rglob("*.py"))]
    return {"code": code, "web": [t for t in web if len(t) > 200]}


# ---- the baseline: a straightforward Python n-gram-set decontaminator --------------------------

_PY_WORD = re.compile(r"\w+")


def py_tokens(text: str) -> list[str]:
    return _PY_WORD.findall(re.sub(r"\d+", "0", text.lower()))


class PythonNgrams:
    """lower-case, digits to 0, \\w+ tokens; a dict from n-gram tuple to the items holding it; a
    document hits an item when it holds `min_overlap` of the item's distinct n-grams."""

    def __init__(self, items: list[tuple[str, str, str]], n: int = 13, min_overlap: float = 0.34):
        self.n, self.min_overlap, self.items = n, min_overlap, items
        self.index: dict[tuple, set[int]] = {}
        self.sizes = []
        for i, (_, _, text) in enumerate(items):
            toks = py_tokens(text)
            grams = {tuple(toks[j:j + n]) for j in range(len(toks) - n + 1)} or ({tuple(toks)} if toks else set())
            self.sizes.append(len(grams))
            for g in grams:
                self.index.setdefault(g, set()).add(i)

    def find(self, text: str) -> list[tuple[str, str]]:
        toks = py_tokens(text)
        seen: dict[int, set] = {}
        for j in range(max(len(toks) - self.n + 1, 1)):
            g = tuple(toks[j:j + self.n])
            for i in self.index.get(g, ()):
                seen.setdefault(i, set()).add(g)
        return [self.items[i][:2] for i, gs in seen.items() if len(gs) / self.sizes[i] >= self.min_overlap]


# ---- decontamination ------------------------------------------------------------------------------

PERTURBATIONS = ("verbatim", "numbers", "reflow", "markup", "paraphrase")


def planted(split: int, per_benchmark: int, rng) -> list[tuple[str, str, str, str]]:
    """(perturbation, benchmark, item id, document) on held-out items (index parity `split`)."""
    from assay.semantic.decontam import perturb
    from semantic_data import benchmark, code_files, web_pages

    pages, code = web_pages(), code_files()
    out = []
    for bench in ("gsm8k", "math", "mmlu-redux", "humaneval", "swebench-verified"):
        items = [x for i, x in enumerate(benchmark(bench)) if i % 2 == split][:per_benchmark]
        for item_id, text in items:
            def around():
                return [pages[int(rng.integers(len(pages)))][:800]], [pages[int(rng.integers(len(pages)))][:800]]
            edits = {"verbatim": text, "numbers": perturb.change_numbers(text, rng), "reflow": perturb.reflow(text, rng),
                     "markup": perturb.markup(text, rng), "paraphrase": perturb.paraphrase(text, rng)}
            for kind, edited in edits.items():
                out.append((kind, bench, item_id, perturb.embed_in(edited, *around())))
            if bench == "humaneval":
                others = [code[int(rng.integers(len(code)))][:1500] for _ in range(2)]
                out.append(("code file", bench, item_id, perturb.in_code_file(text, others)))
    return out


def recall_table(cases, found) -> dict:
    table: dict[str, dict[str, list]] = {}
    for (kind, bench, item_id, _), hits in zip(cases, found):
        table.setdefault(kind, {}).setdefault(bench, []).append((bench, item_id) in hits)
    return {kind: {b: round(float(np.mean(v)), 3) for b, v in sorted(per.items())}
            | {"all": round(float(np.mean([x for v in per.values() for x in v])), 3)} for kind, per in table.items()}


def assay_hits(stage, texts: list[str]) -> list[set]:
    import pyarrow as pa

    found = []
    for start in range(0, len(texts), 2000):
        for h in stage.find(pa.array(texts[start:start + 2000])):
            found.append({(x["benchmark"], x["item"]) for x in h} if h else set())
    return found


def mode_decontam(args) -> dict:
    import pyarrow as pa

    from assay.semantic.decontam.registry import load_items, load_registry
    from assay.semantic.decontam.stage import Decontam
    from semantic_data import benchmark

    rng = np.random.default_rng(args.seed)
    cases = planted(1, args.items, rng)  # odd items: held out (the defaults were chosen on even ones)
    texts = [c[3] for c in cases]
    clean = clean_documents()
    negatives = [t for kind in sorted(clean) for t in clean[kind]]
    registry, base = load_registry()
    items = load_items(registry, base)
    result: dict = {"held_out_items_per_benchmark": args.items, "clean_documents": {k: len(v) for k, v in clean.items()},
                    "configs": {}}
    configs = {"assay default (13-gram, overlap>=0.34)": {},
               "MiMo parity (16-gram, any overlap)": {"ngram": 16, "min_overlap": 0.0}}
    for name, params in configs.items():
        stage = Decontam(params)
        stage.setup()
        found = assay_hits(stage, texts)
        fp = [(i, sorted(h)[:2]) for i, h in enumerate(assay_hits(stage, negatives)) if h]
        result["configs"][name] = {"recall": recall_table(cases, found), "false_positives": len(fp),
                                   "clean_checked": len(negatives), "false_positive_rate": round(len(fp) / len(negatives), 4),
                                   "false_positive_examples": [str(x[1]) for x in fp[:5]]}
        print(name, json.dumps(result["configs"][name]["recall"]), f"FP {len(fp)}/{len(negatives)}")
    # the semantic path embeds every 64-word window: measured on GSM8K and HumanEval items only (a CPU
    # embeds the 13K-item registry in minutes) and a sixth of the clean documents
    sem_benches = ["gsm8k", "humaneval"]
    sem_ids = {(b, i) for b in sem_benches for i, _ in [x for j, x in enumerate(benchmark(b)) if j % 2 == 1][:args.semantic_items]}
    sem_cases = [c for c in cases if (c[1], c[2]) in sem_ids and c[0] in ("verbatim", "numbers", "paraphrase")]
    stage = Decontam({"semantic": True, "only": sem_benches})
    stage.setup()
    negs = negatives[::6]
    found = assay_hits(stage, [c[3] for c in sem_cases])
    fp = sum(1 for h in assay_hits(stage, negs) if h)
    ngram_only = Decontam({"only": sem_benches})
    ngram_only.setup()
    result["configs"]["assay + semantic (cos>=0.85), gsm8k+humaneval"] = {
        "recall": recall_table(sem_cases, found),
        "recall_ngram_only_same_cases": recall_table(sem_cases, assay_hits(ngram_only, [c[3] for c in sem_cases])),
        "false_positives": fp, "clean_checked": len(negs), "false_positive_rate": round(fp / len(negs), 4)}
    print("semantic", json.dumps(result["configs"]["assay + semantic (cos>=0.85), gsm8k+humaneval"]))
    # the baseline: same items, same documents
    py_items = [(b, i, t) for b, i, t in zip(items.benchmarks, items.ids, items.texts) if t]
    py = PythonNgrams(py_items)
    found = [set(py.find(t)) for t in texts]
    fp = sum(1 for t in negatives if py.find(t))
    result["configs"]["python n-gram set (13-gram, overlap>=0.34)"] = {
        "recall": recall_table(cases, found), "false_positives": fp, "clean_checked": len(negatives),
        "false_positive_rate": round(fp / len(negatives), 4), "note": "no AIME/AMC (hash-only), no markup handling"}
    print("python baseline", json.dumps(result["configs"]["python n-gram set (13-gram, overlap>=0.34)"]["recall"]),
          f"FP {fp}/{len(negatives)}")
    # known overlap: MATH-500 is part of MATH test
    math_only = Decontam({"only": ["math"]})
    math_only.setup()
    m500 = benchmark("math500")
    hits = assay_hits(math_only, [t for _, t in m500])
    twins = Decontam({"only": ["math500"]})
    twins.setup()
    ids500 = {i for i, _ in m500}
    rest = [t for i, t in benchmark("math") if i not in ids500]
    result["math500_in_math"] = {"found": sum(("math", i) in h for (i, _), h in zip(m500, hits)), "of": len(m500),
                                 "math_not_in_500_matching_a_500_item": sum(1 for h in assay_hits(twins, rest) if h),
                                 "math_not_in_500": len(rest),
                                 "note": "the matches outside MATH-500 are template twins: the same problem with "
                                         "other numbers, which digit masking is meant to catch"}
    print("MATH-500 in MATH:", result["math500_in_math"])
    result["speed"] = decontam_speed(negatives, py_items, args.repeat)
    result["speed_sample"] = decontam_speed(sample_documents(), py_items, args.repeat, with_rss=False)
    return result


def decontam_speed(docs: list[str], py_items, repeat: int, with_rss: bool = True) -> dict:
    """docs/s of the stage's batch function (full shipped registry, one core) against the Python
    baseline on the same documents, each the best of `repeat` runs, and peak RSS of each index,
    measured in fresh processes."""
    import pyarrow as pa

    from assay.semantic.decontam.stage import Decontam

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    pa.set_cpu_count(1)
    stage = Decontam({})
    built, _ = best_of(1, stage.setup)
    table = pa.table({"text": docs})
    mb = sum(len(t.encode()) for t in docs) / 1e6
    stage.process(table.slice(0, 200).append_column("id", pa.array([str(i) for i in range(200)])))  # warm-up
    batches = [table.slice(i, 5000) for i in range(0, table.num_rows, 5000)]
    ours, _ = best_of(repeat, lambda: [stage.find(b.column("text")) for b in batches])
    py = PythonNgrams(py_items)
    theirs, _ = best_of(repeat, lambda: [py.find(t) for t in docs])
    rss = {kind: _index_rss(kind) for kind in ("assay", "python")} if with_rss else None
    out = {"documents": len(docs), "text_mb": round(mb, 1), "index_build_seconds": round(built, 2),
           "assay_docs_per_s": round(len(docs) / ours), "assay_mb_per_s": round(mb / ours, 1),
           "python_docs_per_s": round(len(docs) / theirs), "speedup": round(theirs / ours, 1),
           "index_keys": int(len(stage.index.keys)), "index_bytes_mb": round(stage.index.nbytes / 1e6, 1),
           "peak_rss_index_mb": rss}
    print(f"decontam speed: {len(docs)} docs, {mb:.1f} MB: assay {out['assay_docs_per_s']} docs/s "
          f"({out['assay_mb_per_s']} MB/s), python {out['python_docs_per_s']} docs/s, {out['speedup']}x; index RSS {rss}")
    return out


def sample_documents() -> list[str]:
    """Documents the scan was not tuned on, all from the repository: the demo's held-out set (web and
    encyclopedia text), its SWE-bench issues (which are in the registry: a contaminated source, every
    position of a verbatim copy matches) and its Python files."""
    sample = ROOT / "examples" / "sample"
    docs = []
    for path in (sample / "heldout" / "heldout.jsonl.gz", sample / "issues" / "swebench-issues.jsonl.gz"):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            docs += [t for t in (json.loads(line).get("text") for line in fh) if t]
    docs += [p.read_text(encoding="utf-8", errors="replace") for p in sorted((sample / "code").rglob("*.py"))]
    return [d for d in docs if d.strip()]


def _index_rss(kind: str) -> float:
    """RSS growth (MB) of a fresh process while it builds the index of the full shipped registry."""
    code = (
        "import psutil, sys; sys.path.insert(0, %r)\n"
        "p = psutil.Process(); import numpy, pyarrow, numba\n"
        "from assay.semantic.decontam.registry import load_items, load_registry\n"
        "from assay.semantic.decontam.stage import Decontam\n"
        "import semantic\n"
        "before = p.memory_info().rss\n"
        "if %r == 'assay':\n    s = Decontam({}); s.setup(); s.items = None\n"
        "else:\n"
        "    r, b = load_registry(); it = load_items(r, b)\n"
        "    x = semantic.PythonNgrams([(a, i, t) for a, i, t in zip(it.benchmarks, it.ids, it.texts) if t]); it = None\n"
        "import gc; gc.collect(); print((p.memory_info().rss - before) / 1e6)\n") % (str(ROOT / "benchmarks"), kind)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return round(float(out.stdout.strip().splitlines()[-1]), 1)


# ---- clustering quality ----------------------------------------------------------------------------

def purity(clusters, labels) -> float:
    groups: dict = {}
    for c, lab in zip(clusters, labels):
        groups.setdefault(c, Counter())[lab] += 1
    return sum(max(g.values()) for g in groups.values()) / len(labels)


def mode_cluster(args) -> dict:
    from assay.semantic import kmeans
    from assay.semantic.model import Encoder
    from semantic_data import topic_corpus

    texts, labels = topic_corpus(args.per_topic)
    enc = Encoder(None, max_tokens=256, threads=2)
    x = enc.encode(texts)
    merged = ["math" if lab == "word-problem" else lab for lab in labels]
    out = {"documents": len(texts), "topics": dict(Counter(labels)), "model": "all-MiniLM-L6-v2", "purity": {}}
    for k in (4, 5, 8, 10, 20):
        five, four = [], []
        for seed in range(5):
            cents = kmeans.train(x, k, seed=seed, nredo=10)
            ids, _ = kmeans.Assigner(cents).assign(x)
            five.append(purity(ids, labels))
            four.append(purity(ids, merged))
        out["purity"][f"k={k}"] = {"five_topics_mean": round(float(np.mean(five)), 3),
                                   "five_topics_min": round(float(np.min(five)), 3),
                                   "four_topics_mean": round(float(np.mean(four)), 3),
                                   "four_topics_min": round(float(np.min(four)), 3)}
        print(f"k={k}", out["purity"][f"k={k}"])
    out["note"] = ("five topics: code, GitHub issues, GSM8K word problems, MATH problems, web pages; four: the two "
                   "math sets as one. MiniLM places word problems and competition math close together, and issues "
                   "near code, so k = #topics rarely separates all five; over-clustering does better.")
    return out


# ---- speed -----------------------------------------------------------------------------------------

def sphere_mixture(n: int, d: int, centers: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centers, d))
    x = c[rng.integers(0, centers, n)] + 0.6 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def mode_speed(args) -> dict:
    return {"embed": embed_speed(args), "kmeans": kmeans_speed(args)}


def embed_speed(args) -> dict:
    import pyarrow as pa
    import torch
    from sentence_transformers import SentenceTransformer

    from assay.pipeline.dataset import write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.semantic.embed import Embed
    from assay.semantic.model import Encoder, model_path
    from semantic_data import benchmark, code_files, web_pages

    texts = (list(web_pages())[:args.embed_docs // 3] + [t for _, t in benchmark("swebench-lite")][:args.embed_docs // 3]
             + list(code_files())[:args.embed_docs // 3])
    torch.set_num_threads(2)
    model = SentenceTransformer(model_path(None), device="cpu")
    model.max_seq_length = 256
    model.encode(texts[:8])
    st, _ = best_of(args.repeat, lambda: model.encode(texts, batch_size=64, normalize_embeddings=True))
    enc = Encoder(None, max_tokens=256, threads=2)
    enc.encode(texts[:8])
    ours, _ = best_of(args.repeat, lambda: enc.encode(texts))
    with tempfile.TemporaryDirectory() as tmp:
        src = write_table(make_docs([{"text": t, "source": "s", "content_type": "web"} for t in texts]),
                          Path(tmp) / "in", shards=2)

        def stage_run():
            out = Path(tmp) / f"emb-{time.perf_counter_ns()}"
            run_stage(Embed({}), [src], out, engine="local", options={"workers": 2})

        stage_s, _ = best_of(args.repeat, stage_run)
    n = len(texts)
    out = {"documents": n, "max_tokens": 256, "cores": 2,
           "sentence_transformers_encode_docs_per_s": round(n / st, 1),
           "assay_encoder_docs_per_s": round(n / ours, 1),
           "assay_stage_docs_per_s": round(n / stage_s, 1),
           "encoder_vs_st": round(st / ours, 2), "stage_vs_st": round(st / stage_s, 2),
           "note": "the stage figure includes starting 2 worker processes, loading the model in each, and "
                   "reading/writing Parquet; the encoder figure is the same call path without them"}
    print("embed:", out)
    return out


def kmeans_speed(args) -> dict:
    import faiss

    from assay.semantic import kmeans

    faiss.omp_set_num_threads(2)
    x = sphere_mixture(args.kmeans_docs, 384, 3000, args.seed)
    out = {"vectors": len(x), "dim": 384, "threads": 2, "data": "synthetic mixture of 3,000 directions on the sphere"}
    for k in (256, 1024):
        def faiss_alone():
            km = faiss.Kmeans(384, k, niter=20, seed=0, spherical=True, max_points_per_centroid=256, verbose=False)
            km.train(x)
            _, ids = km.index.search(x, 1)
            return float(np.mean(np.sum(x * km.centroids[ids[:, 0]], axis=1)))

        def assay():
            cents = kmeans.train(x, k, niter=20, seed=0)
            _, sims = kmeans.Assigner(cents).assign(x)
            return float(sims.mean())

        f_s, f_q = best_of(args.repeat, faiss_alone)
        a_s, a_q = best_of(args.repeat, assay)
        out[f"k={k}"] = {"faiss_s": round(f_s, 2), "assay_s": round(a_s, 2), "assay_vs_faiss": round(f_s / a_s, 2),
                         "faiss_mean_cos": round(f_q, 4), "assay_mean_cos": round(a_q, 4)}
        print(f"kmeans k={k}:", out[f"k={k}"])
    from sklearn.cluster import MiniBatchKMeans

    def sk():
        m = MiniBatchKMeans(n_clusters=1024, batch_size=4096, n_init=1, max_iter=20, random_state=0).fit(x)
        c = m.cluster_centers_ / np.linalg.norm(m.cluster_centers_, axis=1, keepdims=True)
        return float(np.mean(np.sum(x * c[m.predict(x)], axis=1)))

    s_s, s_q = best_of(1, sk)
    out["k=1024"].update({"sklearn_minibatch_s": round(s_s, 2), "sklearn_mean_cos": round(s_q, 4),
                          "assay_vs_sklearn": round(s_s / out["k=1024"]["assay_s"], 2)})
    print("sklearn MiniBatchKMeans k=1024:", round(s_s, 2), "s")
    big = args.big_k
    coarse = int(round(big ** 0.5))
    two_s, cents = best_of(1, lambda: kmeans.train(x, big, coarse=coarse, niter=10, seed=0))
    assign_s, (ids, sims) = best_of(1, lambda: kmeans.Assigner(cents, nprobe=8).assign(x))
    flat = faiss.IndexFlatIP(384)
    flat.add(cents.fine)
    exact_s, (_, exact) = best_of(1, lambda: flat.search(x, 1))
    out[f"two-level k={big}"] = {"coarse": coarse, "train_s": round(two_s, 1), "assign_s": round(assign_s, 2),
                                 "exact_assign_s": round(exact_s, 2), "assign_speedup": round(exact_s / assign_s, 1),
                                 "assign_equals_exact": round(float(np.mean(ids == exact[:, 0])), 4),
                                 "mean_cos": round(float(sims.mean()), 4), "clusters_used": int(len(np.unique(ids)))}
    print(f"two-level k={big}:", out[f"two-level k={big}"])
    return out


def save(mode: str, result: dict) -> None:
    """Merge one mode's figures into the results file, keeping the other modes'."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged[mode] = result
    RESULTS.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")


def mode_decontam_speed(args) -> dict:
    """Only the decontamination speed figures, into the decontam section (its recall figures stay):
    for re-measuring after a change to the scan, which the recall tests show leaves hits identical."""
    from assay.semantic.decontam.registry import load_items, load_registry

    registry, base = load_registry()
    items = load_items(registry, base)
    py_items = [(b, i, t) for b, i, t in zip(items.benchmarks, items.ids, items.texts) if t]
    clean = clean_documents()
    negatives = [t for kind in sorted(clean) for t in clean[kind]]
    merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    section = merged.get("decontam", {})
    section["speed"] = decontam_speed(negatives, py_items, args.repeat)
    section["speed_sample"] = decontam_speed(sample_documents(), py_items, args.repeat, with_rss=False)
    return section


MODES = {"decontam": mode_decontam, "decontam-speed": mode_decontam_speed, "cluster": mode_cluster,
         "speed": mode_speed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=sorted(MODES))
    ap.add_argument("--items", type=int, default=60, help="decontam: held-out items per benchmark")
    ap.add_argument("--semantic-items", type=int, default=30, help="decontam: held-out items for the semantic path")
    ap.add_argument("--per-topic", type=int, default=40, help="cluster: documents per topic")
    ap.add_argument("--embed-docs", type=int, default=96)
    ap.add_argument("--kmeans-docs", type=int, default=100_000)
    ap.add_argument("--big-k", type=int, default=16_384)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    save("decontam" if args.mode == "decontam-speed" else args.mode, MODES[args.mode](args))


if __name__ == "__main__":
    main()
