"""Extraction benchmark: Assay vs trafilatura's default `extract()`, side by side in one run.

1. AEB (../shared/data/extraction/aeb, 181 pages): the AEB protocol (evaluate.py of
   scrapinghub/article-extraction-benchmark, re-implemented here): \\w+ tokens, 4-token shingles,
   per-page precision/recall with tp/fp/fn normalised per page, averaged; pages per CPU-second,
   interleaved page by page; the watchdog's overhead.
2. Snippets on the real AEB + magic-html pages of the split: must-contain sentences of the ground truth
   (start, middle, end) and must-not-contain page text outside it; accuracy = checks passed.
   The magic-html article pages of the split also get token precision/recall against their whole
   ground truth (`magic_article_<split>`; the held-out half is a split never tuned on).
3. Forum and Q&A threads: the 103 magic-html forum pages, token precision/recall per page.
   newspaper4k's fixtures (benchmarks/_newspaper_pages.py: its sdist's test pages, fetched into .bench/):
   token precision/recall, aggregates only (`newspaper_fixtures`; never tuned on, in both splits' runs).
3c. WCXB dev sample (../shared/data/extraction/wcxb-dev, 770 pages, 7 page types; benchmarks/wcxb.py):
   word F1 as WCXB's evaluate.py, per page type, on the tune split (70% by id hash, tuned on) and the
   check split (never tuned on); native's `page_type` tag, macro F1 against WCXB's labels.
4. Math and code: formula recall and code recall on magic-html pages with formulas/<pre>, and per
   generated family (benchmarks/extraction_pages.py: real renderers, known LaTeX and code).
5. Wall time through the CLI (`assay extract html DIR OUT --workers 1 --mode M`, M native and precise,
   other params at their defaults) against a Python process running trafilatura's default extract()
   on the same files, start-up included.

Run:  python benchmarks/extraction.py [--split dev|heldout]
      (heldout → benchmarks/results/extraction.json, dev → extraction-dev.json)
"""
from __future__ import annotations

import argparse
import gzip
import os
import json
import platform
import re
import statistics
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (/work/main), or two levels up from a worktree (/work/wt/NAME).
DATA = next((p / "shared" / "data" / "extraction" for p in (ROOT.parent, ROOT.parent.parent)
             if (p / "shared" / "data" / "extraction").is_dir()), ROOT.parent / "shared" / "data" / "extraction")
RESULTS = ROOT / "benchmarks" / "results" / "extraction.json"

# ---- AEB scoring -------------------------------------------------------------------------------

_TOKEN = re.compile(r"\w+")


def _shingles(text: str, n: int = 4) -> Counter:
    toks = _TOKEN.findall(text or "")
    return Counter(tuple(toks[i : i + n]) for i in range(max(1, len(toks) - n + 1)) if toks[i : i + n])


def aeb_scores(truth: dict[str, str], pred: dict[str, str]) -> dict[str, float]:
    precisions, recalls = [], []
    for key, true_text in truth.items():
        t, p = _shingles(true_text), _shingles(pred.get(key, ""))
        tp = sum((t & p).values())
        fp = sum((p - t).values())
        fn = sum((t - p).values())
        s = tp + fp + fn
        if s:
            tp, fp, fn = tp / s, fp / s, fn / s
        if tp + fp > 0:
            precisions.append(1.0 if fp == fn == 0 else tp / (tp + fp))
        if tp + fn > 0:
            recalls.append(1.0 if fp == fn == 0 else tp / (tp + fn))
    precision, recall = statistics.mean(precisions), statistics.mean(recalls)
    return {"f1": 2 * precision * recall / (precision + recall), "precision": precision, "recall": recall}


# ---- extractors under test ---------------------------------------------------------------------

def trafilatura_default(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html) or ""


def assay(mode: str):
    from assay.extractors.html import extract_html

    def run(html: str) -> str:
        return extract_html({"html": html, "mode": mode})["text"]

    return run


def _forget_assay_caches() -> None:
    """Every pass sees the pages as new: Assay keeps per-process caches keyed by class strings and tag
    names, which a second pass over the same 181 pages would find full (a crawl of many sites would
    not), flattering its later passes."""
    from assay.extractors import html, math, native_measure

    for cache in (native_measure._WEIGHTS, native_measure._WORDS, html._CLASS_FLAGS[False], html._CLASS_FLAGS[True],
                  math._LOCAL_NAMES):
        cache.clear()


def timed_interleaved(systems: dict, pages: dict[str, str], passes: int = 1) -> tuple[dict[str, dict], dict[str, float]]:
    """Run every system on page 1, then every system on page 2, ...: load from other users of the
    (shared) machine then hits all systems alike. Speed is pages per CPU-second of this process, the
    median over `passes` passes (a neighbour's burst, or a hypervisor's, that lasts part of one pass
    then moves one pass, not the figure); outputs are the first pass's."""
    outs: dict[str, dict] = {name: {} for name in systems}
    rates: dict[str, list[float]] = {name: [] for name in systems}
    for i in range(passes):
        _forget_assay_caches()
        cpu = {name: 0.0 for name in systems}
        for key, html in pages.items():
            for name, fn in systems.items():
                t0 = time.process_time()
                out = fn(html)
                cpu[name] += time.process_time() - t0
                if i == 0:
                    outs[name][key] = out
        for name, c in cpu.items():
            rates[name].append(len(pages) / max(c, 1e-9))
    return outs, {name: statistics.median(r) for name, r in rates.items()}


def watchdog_overhead(pages: dict[str, str]) -> dict[str, float]:
    """Wall-clock pages/s in-process vs through the per-page child process, interleaved per page
    (the child's CPU time is not ours, so this one is measured on the wall clock). In precise mode,
    named, as the recorded figures were measured before native became the default."""
    from assay.extractors.html import extract_html
    from assay.extractors.limits import Watchdog

    wall = {"in_process": 0.0, "watchdog": 0.0}
    with Watchdog(extract_html, timeout_s=30) as dog:
        t0 = time.perf_counter()
        dog.run({"html": "<html><body><p>warm</p></body></html>", "mode": "precise"})  # child start, counted
        wall["watchdog"] += time.perf_counter() - t0
        for html in pages.values():
            t0 = time.perf_counter()
            extract_html({"html": html, "mode": "precise"})
            wall["in_process"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            assert dog.run({"html": html, "mode": "precise"}).ok
            wall["watchdog"] += time.perf_counter() - t0
    rates = {k: len(pages) / v for k, v in wall.items()}
    rates["overhead_pct"] = 100 * (wall["watchdog"] / wall["in_process"] - 1)
    return rates


def worker_memory(pages: list[bytes], modes: tuple[str, ...] = ("precise", "native")) -> dict[str, dict]:
    """Peak memory of the extraction child (the per-worker process `extract.html` runs pages in) over
    the same pages, per mode: its VmHWM from /proc, and how far it grew past its size after the first
    page (the fork shares the parent's pages, which both modes inherit alike)."""
    from assay.extractors.html import extract_html
    from assay.extractors.limits import Watchdog

    def status(pid: int, key: str) -> float:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    out = {}
    for mode in modes:
        with Watchdog(extract_html, timeout_s=60) as dog:
            assert dog.run({"html": pages[0], "mode": mode}).ok
            pid = dog._proc.pid
            start = status(pid, "VmRSS")
            for html in pages:
                dog.run({"html": html, "mode": mode})
            out[mode] = {"peak_mb": status(pid, "VmHWM"), "growth_mb": status(pid, "VmHWM") - start}
    return out


# ---- math and code -----------------------------------------------------------------------------

_SCRIPT_TEX = re.compile(r"<script[^>]*type=[\"']math/tex[^\"']*[\"'][^>]*>(.*?)</script>", re.S | re.I)
_ANNOT_TEX = re.compile(r"<annotation[^>]*encoding=[\"']application/x-tex[\"'][^>]*>(.*?)</annotation>", re.S | re.I)


def page_formulas(html: str) -> list[str]:
    """TeX sources a page states: math/tex scripts, KaTeX/MathML TeX annotations, and \\(..\\), \\[..\\],
    $$..$$ written in visible text."""
    import html as htmllib

    from lxml import html as lxml_html

    found = [htmllib.unescape(m) for m in _SCRIPT_TEX.findall(html) + _ANNOT_TEX.findall(html)]
    tree = lxml_html.fromstring(html)
    for bad in tree.xpath("//script|//style|//annotation|//head"):
        bad.getparent().remove(bad)
    text = tree.text_content()
    for pattern in (r"\\\((.+?)\\\)", r"\\\[(.+?)\\\]", r"\$\$(.+?)\$\$"):
        found += re.findall(pattern, text, re.S)
    # StackExchange wraps every post in $\\begingroup$..$\\endgroup$ scripts: scoping, not formulas.
    return [f.strip() for f in found if f.strip() and f.strip() not in ("\\begingroup", "\\endgroup")]


def _nows(s: str) -> str:
    return re.sub(r"\s+", "", s)


def page_code_blocks(html: str, truth: str | None) -> list[str]:
    """Verbatim <pre> texts; with a ground truth, only blocks whose text is in it (main content)."""
    from lxml import html as lxml_html

    tree = lxml_html.fromstring(html)
    blocks = []
    truth_nows = _nows(truth) if truth is not None else None
    # What a reader sees of the block: no highlighter <script>, no "Copy" <button> label.
    for junk in tree.xpath("//pre//script|//pre//style|//pre//button|//pre//noscript|//pre//template"):
        junk.drop_tree()
    for pre in tree.iter("pre"):
        for br in pre.iter("br"):
            br.tail = "\n" + (br.tail or "")
        text = pre.text_content().strip("\n")
        if len(text.strip()) < 3:
            continue
        if truth_nows is not None and _nows(text)[:60] not in truth_nows:
            continue
        blocks.append(text)
    return blocks


def _norm_lines(s: str) -> str:
    return "\n".join(line.rstrip() for line in s.replace("\r\n", "\n").split("\n"))


def math_code_scores(pages: list[dict], fn) -> dict[str, float]:
    f_hit = f_all = c_hit = c_all = 0
    for page in pages:
        out = fn(page["html"])
        out_nows, out_lines = _nows(out), _norm_lines(out)
        for tex in page["formulas"]:
            f_all += 1
            f_hit += _nows(tex) in out_nows
        for code in page["code"]:
            c_all += 1
            c_hit += _norm_lines(code) in out_lines
    return {"formula_recall": f_hit / f_all if f_all else None, "formulas": f_all,
            "code_exact_match": c_hit / c_all if c_all else None, "code_blocks": c_all}


def magic_html_pages(limit: int | None) -> list[dict]:
    pages = []
    for kind in ("article", "forum"):
        folder = DATA / "magic-html" / "benchmark" / "data" / kind
        truth = json.loads((folder / "base.json").read_text())
        for path in sorted((folder / "htmls").glob("*.html.gz")):
            html = gzip.open(path).read().decode("utf-8", "replace")
            if not re.search(r"math/tex|class=\"katex|<math|\\\(|<pre", html, re.I):
                continue
            key = path.name.split(".")[0]
            gt = truth.get(key, {}).get("content")
            formulas = page_formulas(html)
            code = page_code_blocks(html, gt)
            if formulas or code:
                pages.append({"name": f"{kind}/{key[:10]}", "html": html, "formulas": formulas, "code": code})
    return pages[:limit] if limit else pages


# ---- forum and Q&A threads --------------------------------------------------------------------

_FORUM_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]"
                          r"|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def forum_pages() -> dict[str, tuple[str, str]]:
    folder = DATA / "magic-html" / "benchmark" / "data" / "forum"
    truth = json.loads((folder / "base.json").read_text())
    pages = {}
    for path in sorted((folder / "htmls").glob("*.html.gz")):
        key = path.name.split(".")[0]
        if key in truth:
            pages[key] = (gzip.open(path).read().decode("utf-8", "replace"), truth[key]["content"])
    return pages


def token_scores(pages: dict[str, tuple[str, str]], outs: dict[str, str]) -> dict[str, float]:
    precisions, recalls = [], []
    for key, (_, true_text) in pages.items():
        t = Counter(_FORUM_TOKEN.findall(true_text.lower()))
        p = Counter(_FORUM_TOKEN.findall(outs.get(key, "").lower()))
        tp = sum((t & p).values())
        precisions.append(tp / sum(p.values()) if p else 0.0)
        recalls.append(tp / sum(t.values()) if t else 1.0)
    precision, recall = statistics.mean(precisions), statistics.mean(recalls)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"f1": f1, "precision": precision, "recall": recall}


# ---- newspaper4k's fixtures: never tuned on, aggregates only ----------------------------------

def newspaper_section(systems: dict) -> dict:
    """Token P/R (as the forum and magic-html article pages) of every system on newspaper4k's test
    pages, interleaved; {"skipped": why} when the pinned sdist cannot be had (no network)."""
    import _newspaper_pages as fixtures

    try:
        pages, dropped = fixtures.load()
    except fixtures.Unavailable as e:
        return {"skipped": str(e)}
    outs, rates = timed_interleaved(systems, {k: html for k, (html, _) in pages.items()})
    return {"source": f"{fixtures.REQUIREMENT} sdist, tests/data/html + tests/data/txt", "sha256": fixtures.SHA256,
            "truth": "newspaper's expected output (its regression fixtures), not a human label",
            "pages": len(pages), "dropped": dropped,
            "systems": {name: dict(token_scores(pages, outs[name]), pages_per_s=rates[name]) for name in systems}}


# ---- snippets: must-contain / must-not-contain on real pages ----------------------------------

_SENT = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_SNIP_NORM = re.compile(r"[\s`*_#>|]+")


def _snip_norm(s: str) -> str:
    return _SNIP_NORM.sub(" ", s).strip()


def real_pages() -> dict[str, tuple[str, str]]:
    """key → (html, ground-truth main text) for the AEB and magic-html pages."""
    pages = {}
    aeb = json.loads((DATA / "aeb" / "ground-truth.json").read_text())
    for path in sorted((DATA / "aeb" / "html").glob("*.html.gz")):
        key = path.name.split(".")[0]
        pages[f"aeb/{key}"] = (gzip.open(path).read().decode("utf-8", "replace"), aeb[key]["articleBody"])
    for kind in ("article", "forum"):
        folder = DATA / "magic-html" / "benchmark" / "data" / kind
        truth = json.loads((folder / "base.json").read_text())
        for path in sorted((folder / "htmls").glob("*.html.gz")):
            key = path.name.split(".")[0]
            if key in truth:
                pages[f"magic-{kind}/{key[:16]}"] = (gzip.open(path).read().decode("utf-8", "replace"), truth[key]["content"])
    return pages


def page_split(key: str) -> str:
    """Real pages split like the generated ones: by a hash of the page id."""
    import hashlib

    return "dev" if hashlib.sha1(key.encode()).digest()[0] % 2 == 0 else "heldout"


def make_snippets(key: str, html: str, truth: str, seed: int = 0) -> dict[str, list[str]]:
    """Up to 3 must-contain snippets (sentences of the ground truth from its start, middle and end, so
    a long page cut short fails) and up to 3 must-not-contain snippets (visible text of the page
    outside the ground truth: menus, footers, teasers), chosen by a seeded RNG."""
    import random

    from lxml import html as lxml_html

    rng = random.Random(f"{seed}:{key}")
    tree = lxml_html.fromstring(html)
    for bad in tree.xpath("//script|//style|//head|//noscript|//template|//h1|//h2|//h3|//h4|//h5|//h6|//title"):
        bad.drop_tree()
    visible = _snip_norm(tree.text_content())
    truth_n = _snip_norm(truth)
    sents = [s for s in (_snip_norm(x) for x in _SENT.split(truth)) if 25 <= len(s) <= 200 and s in visible]
    contain = []
    if sents:
        thirds = [sents[: max(1, len(sents) // 3)], sents[len(sents) // 3: 2 * len(sents) // 3] or sents,
                  sents[2 * len(sents) // 3:] or sents]
        contain = list(dict.fromkeys(rng.choice(part) for part in thirds))
    truth_words = set(re.findall(r"\w+", truth.lower()))
    others = []
    for text in tree.xpath("//body//text()"):
        t = _snip_norm(str(text))
        if not 20 <= len(t) <= 150 or t in truth_n:
            continue
        words = re.findall(r"\w+", t.lower())
        if len(words) >= 3 and sum(w in truth_words for w in words) < 0.5 * len(words):
            others.append(t)
    others = sorted(set(others))
    return {"contain": contain, "not_contain": rng.sample(others, min(3, len(others)))}


def snippet_accuracy(snippets: dict[str, dict], outs: dict[str, str]) -> dict[str, float]:
    """Share of snippet checks passed (each must-contain found, each must-not-contain absent)."""
    ok = total = c_ok = c_all = n_ok = n_all = 0
    for key, snip in snippets.items():
        out = _snip_norm(outs.get(key, ""))
        for s in snip["contain"]:
            c_all += 1
            c_ok += s in out
        for s in snip["not_contain"]:
            n_all += 1
            n_ok += s not in out
    ok, total = c_ok + n_ok, c_all + n_all
    return {"accuracy": ok / total if total else None, "checks": total,
            "contain_recall": c_ok / c_all if c_all else None, "not_contain_ok": n_ok / n_all if n_all else None}


# ---- generated families (benchmarks/extraction_pages.py) -------------------------------------

_OUT_FORMULA = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)


def formula_leaves(tex: str) -> str | None:
    """The symbols of a formula in reading order (latex2mathml's MathML leaves, NFKC, no invisible
    operators): what a MathML page without TeX can be checked by, since its TeX spelling is gone."""
    import unicodedata

    from latex2mathml.converter import convert
    from lxml import etree

    try:
        root = etree.fromstring(convert(tex).encode())
    except Exception:  # latex2mathml raises many types on TeX it does not know
        return None
    out = []
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.rsplit("}", 1)[-1] in ("mi", "mn", "mo", "mtext", "ms") and el.text:
            out.append(re.sub(r"[\u2061-\u2064\u200b\s]", "", unicodedata.normalize("NFKC", el.text)))
    return "".join(out)


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def output_rows(text: str) -> list[list[str]]:
    """Rows of every Markdown table in an output (`| a | b |` lines; separator rows skipped)."""
    rows = []
    for line in text.split("\n"):
        line = line.strip()
        if not line.startswith("|") or re.fullmatch(r"\|[\s:|-]*", line):
            continue
        cells = [" ".join(c.replace("\\|", "|").split()) for c in _CELL_SPLIT.split(line.strip("|"))]
        rows.append(cells)
    return rows


def table_cells(tables: list[list[list[str]]], text: str) -> tuple[int, int]:
    """(cells recovered in table form, cells): a ground-truth row counts the cells that an output
    table row holds at the same column, for the output row that matches it best; so a cell found in
    running text, or in another column, does not count."""
    rows = output_rows(text)
    hit = total = 0
    for table in tables:
        for row in table:
            want = [" ".join(c.split()) for c in row]
            total += len(want)
            hit += max((sum(i < len(r) and r[i] == c for i, c in enumerate(want)) for r in rows), default=0)
    return hit, total


def generated_scores(folder: Path, fn) -> dict[str, dict]:
    """Per family: formula recall (TeX found in the output with whitespace removed; for MathML-only
    families the formula's symbols found in one output formula) and code recall (block found with
    its lines verbatim, trailing spaces aside)."""
    truth = json.loads((folder / "truth.json").read_text())
    fams: dict[str, list[int]] = {}
    for name, t in truth.items():
        out = fn((folder / name).read_text(encoding="utf-8"))
        out_nows, out_lines = _nows(out), _norm_lines(out)
        out_leaves = None
        row = fams.setdefault(t["family"], [0, 0, 0, 0, 0, 0, 0, 0])
        if t.get("tables"):
            hit, total = table_cells(t["tables"], out)
            row[4] += hit
            row[5] += total
        for f in t["formulas"]:
            row[1] += 1
            if f["match"] == "tex":
                row[0] += _nows(f["tex"]) in out_nows
            else:
                if out_leaves is None:
                    out_leaves = [formula_leaves(a or b) for a, b in _OUT_FORMULA.findall(out)]
                want = formula_leaves(f["tex"])
                row[0] += bool(want) and any(x and want in x for x in out_leaves)
        for code in t["code"]:
            row[3] += 1
            row[2] += _norm_lines(code) in out_lines
        if t.get("text"):  # lines of prose the page must keep (a how-to's steps)
            flat = " ".join(out.split())
            row[7] += len(t["text"])
            row[6] += sum(" ".join(line.split()) in flat for line in t["text"])
    def row_of(r: list[int]) -> dict:
        return {"formula_recall": r[0] / r[1] if r[1] else None, "formulas": r[1],
                "code_recall": r[2] / r[3] if r[3] else None, "code_blocks": r[3],
                "table_cell_recall": r[4] / r[5] if r[5] else None, "table_cells": r[5],
                "text_recall": r[6] / r[7] if r[7] else None, "text_lines": r[7]}

    result = {fam: row_of(r) for fam, r in sorted(fams.items())}
    result["ALL"] = row_of([sum(r[i] for r in fams.values()) for i in range(8)])
    return result


# ---- wall time through the command line --------------------------------------------------------

TRAFILATURA_CLI = """
import json, pathlib, sys
import trafilatura
out = open(sys.argv[2], "w", encoding="utf-8")
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.html")):
    text = trafilatura.extract(path.read_bytes()) or ""
    out.write(json.dumps({"path": str(path), "text": text}) + "\\n")
"""


def cli_wall_time(folder: Path, rounds: int) -> dict[str, float]:
    """Seconds for `assay extract html DIR OUT --workers 1 --mode precise|native` (other params at
    their defaults: per-page watchdog, Parquet output) and for a Python process running trafilatura's
    default extract() over the same files, start-up included for both; alternated `rounds` times,
    median reported."""
    import shutil
    import subprocess
    import sys
    import tempfile

    import resource

    assay_bin = Path(sys.executable).with_name("assay")
    # Bytecode for Assay's modules, as `pip install` writes it for an installed package (trafilatura's
    # has it): a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile Assay's sources at every
    # start (0.15-0.2 CPU s a command) and trafilatura's never.
    package_dirs = [str(ROOT / d) for d in ("pipeline", "extractors", "filters", "quality", "dedup", "synth",
                                            "mixer", "trainer", "semantic") if (ROOT / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *package_dirs], check=True,
                   stdout=subprocess.DEVNULL)
    names = ("assay", "assay-native", "trafilatura")
    times: dict[str, list[float]] = {n: [] for n in names}
    # CPU seconds of the command and its children (the watchdog's child included: it is waited for):
    # on a shared machine the wall clock also counts other users' load, the CPU time does not.
    cpu: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            # Every other round runs the commands in reverse order, so that neither side always runs
            # right after the same command (a warm page cache, a CPU's frequency or a neighbour's
            # burst that follows a heavy command would otherwise land on one side every round).
            for name in (names if i % 2 == 0 else names[::-1]):
                out = Path(tmp) / name
                shutil.rmtree(out, ignore_errors=True)
                cmd = ([str(assay_bin), "extract", "html", str(folder), str(out), "--workers", "1"]
                       + ["--mode", "native" if name == "assay-native" else "precise"] if name != "trafilatura"
                       else [sys.executable, "-c", TRAFILATURA_CLI, str(folder), str(out)])
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    native = cli_summary({"assay": times["assay-native"], "trafilatura": times["trafilatura"]},
                         {"assay": cpu["assay-native"], "trafilatura": cpu["trafilatura"]})
    precise = cli_summary({k: times[k] for k in ("assay", "trafilatura")}, {k: cpu[k] for k in ("assay", "trafilatura")})
    return dict(precise, native=native, rounds=rounds, load_average=os.getloadavg())


def cli_summary(times: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict:
    """Medians of each side, and the median of the per-round ratios: the two commands of a round
    run back to back, so the paired ratio holds when the machine's speed drifts between rounds (it
    does on shared VMs, by a third within minutes) and is the figure to quote."""
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    paired = statistics.median(t / a for a, t in zip(times["assay"], times["trafilatura"]))
    round_cpu = [t / a for a, t in zip(cpu["assay"], cpu["trafilatura"])]
    paired_cpu = statistics.median(round_cpu)
    return {"assay_s": med["assay"], "trafilatura_s": med["trafilatura"],
            "speedup": med["trafilatura"] / med["assay"], "assay_cpu_s": med_cpu["assay"],
            "trafilatura_cpu_s": med_cpu["trafilatura"], "cpu_speedup": med_cpu["trafilatura"] / med_cpu["assay"],
            "speedup_paired": paired, "cpu_speedup_paired": paired_cpu,
            "cpu_speedup_rounds": [min(round_cpu), max(round_cpu)], "all": times, "all_cpu": cpu}


def _cli_folder(real: dict[str, tuple[str, str]], generated: Path, dest: Path) -> int:
    """The pages of the run as plain .html files in one folder (what a user points the CLI at)."""
    import shutil

    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    n = 0
    for key, (html, _) in real.items():
        (dest / (key.replace("/", "__") + ".html")).write_text(html, encoding="utf-8")
        n += 1
    for path in generated.rglob("*.html"):
        (dest / f"gen__{path.parent.name}__{path.name}").write_bytes(path.read_bytes())
        n += 1
    return n


# ---- main --------------------------------------------------------------------------------------

def _ensure_bench_deps() -> None:
    """The page generator's renderers are benchmark-only dependencies: installed on first use."""
    import importlib.util
    import subprocess
    import sys

    needed = ("pypandoc", "latex2mathml", "markdown", "mdx_math", "pymdownx", "docutils", "pygments")
    if any(importlib.util.find_spec(m) is None for m in needed):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r",
                        str(ROOT / "benchmarks" / "requirements-extraction.txt")], check=True)


def wcxb_scores(systems: dict) -> dict | None:
    """Every system on the WCXB dev sample, interleaved page by page (benchmarks/wcxb.py)."""
    import wcxb

    if not (wcxb.WCXB / "manifest.tsv").exists():
        return None
    from assay.extractors.html import extract_html

    pages = wcxb.load_pages("all")
    outs = {name: {} for name in systems}
    cpu = {name: 0.0 for name in systems}
    tags = {}
    for pid, pg in pages.items():
        html = pg["html"]
        for name, fn in systems.items():
            t0 = time.process_time()
            if name == "assay native":  # the same call as `assay("native")`, with the page_type kept
                doc = extract_html({"html": html, "mode": "native"})
                outs[name][pid], tags[pid] = doc["text"], doc["meta"]["page_type"]
            else:
                outs[name][pid] = fn(html)
            cpu[name] += time.process_time() - t0
    return {"pages": len(pages), "systems": {name: wcxb.scores(pages, o) for name, o in outs.items()}, "cpu_s": cpu,
            "page_type": wcxb.page_type_scores(pages, tags),
            "split": "tune = sha1('wcxb/<id>')[0] % 10 < 7 (tuned on), check = the rest (never tuned on)"}


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("dev", "heldout"), default="heldout",
                    help="which half of the generated families and real pages to score (dev: to look at)")
    ap.add_argument("--per-family", type=int, default=12, help="generated pages per family")
    ap.add_argument("--passes", type=int, default=3, help="in-process timing passes over the AEB pages (median reported)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated CLI timing rounds (median reported)")
    ap.add_argument("--no-cli", action="store_true", help="skip the command-line wall-time comparison")
    ap.add_argument("--only", choices=("speed", "wcxb"), help="speed: only the AEB in-process speed and the CLI timing "
                    "(printed, no results file written); wcxb: only the WCXB section, its figures replaced in the "
                    "results file")
    args = ap.parse_args()

    import sys

    import trafilatura

    _ensure_bench_deps()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from extraction_pages import generate

    from assay.extractors.html import extract_html

    systems = {"trafilatura (default extract)": trafilatura_default, "assay precise": assay("precise"),
               "assay native": assay("native"), "assay fast": assay("fast")}
    for html in ("<html><body><p>warm</p></body></html>",):
        for fn in systems.values():
            fn(html)

    if args.only == "wcxb":
        return _wcxb_only(args, systems)

    # 1. AEB (all 181 pages: the published protocol) with in-process CPU speed.
    truth = json.loads((DATA / "aeb" / "ground-truth.json").read_text())
    paths = sorted((DATA / "aeb" / "html").glob("*.html.gz"))
    pages = {p.name.split(".")[0]: gzip.open(p).read().decode("utf-8") for p in paths}
    truth = {k: truth[k]["articleBody"] for k in pages}
    outs, rates = timed_interleaved(systems, pages, passes=args.passes)
    aeb = {name: dict(aeb_scores(truth, outs[name]), pages_per_s=rates[name]) for name in systems}
    base = aeb["trafilatura (default extract)"]
    for row in aeb.values():
        row["f1_vs_trafilatura"] = row["f1"] - base["f1"]
        row["speed_vs_trafilatura"] = row["pages_per_s"] / base["pages_per_s"]
    for half in ("dev", "heldout"):  # the AEB pages of each split (native was tuned on the dev half only)
        keys = [k for k in pages if page_split(f"aeb/{k}") == half]
        for name in systems:
            aeb[name][f"{half}_half"] = dict(aeb_scores({k: truth[k] for k in keys}, outs[name]), pages=len(keys))
    if args.only == "speed":
        return _speed_only(args, aeb)
    overhead = watchdog_overhead(pages)

    # 2. Snippets on the real pages of the split (AEB + magic-html article and forum).
    real = {k: v for k, v in real_pages().items() if page_split(k) == args.split}
    snippets = {k: make_snippets(k, html, gt) for k, (html, gt) in real.items()}
    real_outs, _ = timed_interleaved(systems, {k: html for k, (html, _) in real.items()})
    snip = {}
    for group in ("aeb", "magic-article", "magic-forum", ""):
        keys = [k for k in real if k.startswith(group)]
        snip[group or "ALL"] = {name: snippet_accuracy({k: snippets[k] for k in keys}, real_outs[name])
                                for name in systems}
        snip[group or "ALL"]["pages"] = len(keys)

    # 2b. Articles of many sites (magic-html article pages of the split, token P/R against their whole
    # ground truth). On the held-out half this split ("magic-article-heldout") was never tuned on:
    # before #30's third pass it was scored only by the snippets above, in aggregate.
    articles = {k: v for k, v in real.items() if k.startswith("magic-article/")}
    article_scores = {name: dict(token_scores(articles, real_outs[name]), pages=len(articles)) for name in systems}

    # 3. Forum threads (all 103 magic-html forum pages, token P/R against their ground truth).
    fpages = forum_pages()
    f_outs, f_rates = timed_interleaved(systems, {k: html for k, (html, _) in fpages.items()})
    forum = {name: dict(token_scores(fpages, f_outs[name]), pages_per_s=f_rates[name]) for name in systems}
    split_pages = {k: v for k, v in fpages.items() if page_split(f"magic-forum/{k[:16]}") == args.split}
    for name in systems:
        forum[name][f"{args.split}_half"] = dict(token_scores(split_pages, f_outs[name]), pages=len(split_pages))

    # 3b. newspaper4k's regression fixtures: real news pages in many languages with newspaper's own
    # expected text. Never tuned on, and not split: every page is in both --split runs. Aggregates only:
    # no page's output or score is printed or saved, so nobody tuning the selector sees one.
    newspaper = newspaper_section(systems)

    # 4. Math and code: magic-html pages with formulas/<pre>, and every generated family.
    gen_dir = generate(args.split, args.per_family)
    mathcode = {"magic-html": {name: math_code_scores(magic_html_pages(None), fn) for name, fn in systems.items()}}
    generated = {name: generated_scores(gen_dir, fn) for name, fn in systems.items()}

    # 3c. WCXB dev sample (benchmarks/wcxb.py): 770 pages of 7 page types, word F1 as WCXB's
    # evaluate.py, per page type and per split (tune: looked at while changing native; check: never),
    # and native's page_type tag against WCXB's labels. Skipped when the data is not there.
    wcxb_section = wcxb_scores(systems)
    if wcxb_section is not None:
        _print_wcxb(wcxb_section)

    # 5. Wall time through the CLI, one worker, start-up included, on every page of this run; and
    # the extraction child's peak memory on the same pages, per mode.
    cli = None
    folder = ROOT / ".bench" / "extraction-cli" / args.split
    n_pages = _cli_folder(real, gen_dir, folder)
    memory = worker_memory([p.read_bytes() for p in sorted(folder.glob("*.html"))])
    if not args.no_cli:
        cli = dict(cli_wall_time(folder, args.rounds), pages=n_pages)

    names = list(systems)
    print(f"\nAEB: {len(pages)} pages (F1/precision/recall per the AEB protocol; pages per CPU-second, interleaved, median of {args.passes} passes)")
    print(f"{'system':32} {'F1':>7} {'prec':>7} {'recall':>7} {'pages/s':>9} {'ΔF1':>7} {'speed×':>7}")
    for name, r in aeb.items():
        print(f"{name:32} {r['f1']:7.4f} {r['precision']:7.4f} {r['recall']:7.4f} {r['pages_per_s']:9.1f} "
              f"{r['f1_vs_trafilatura']:+7.4f} {r['speed_vs_trafilatura']:7.2f}")
    for half in ("dev", "heldout"):
        print(f"  AEB {half} half: " + ", ".join(
            f"{n.split(' (')[0]} F1 {r[half + '_half']['f1']:.4f} P {r[half + '_half']['precision']:.4f}"
            for n, r in aeb.items()) + f" ({aeb[names[0]][half + '_half']['pages']} pages)")
    print(f"watchdog (per-page child process, wall clock): {overhead['in_process']:.1f} pages/s in-process, "
          f"{overhead['watchdog']:.1f} pages/s isolated, overhead {overhead['overhead_pct']:+.1f}%")
    print(f"\nSnippet accuracy, {args.split} real pages (must-contain found and must-not-contain absent)")
    print(f"{'group':16} {'pages':>6} " + " ".join(f"{n[:22]:>24}" for n in names))
    for group, rows in snip.items():
        print(f"{group:16} {rows['pages']:6d} " + " ".join(
            f"{_fmt(rows[n]['accuracy']):>11} ({rows[n]['checks']:4d} checks)" for n in names))
    print(f"\nArticles, magic-article-{args.split}: {len(articles)} magic-html article pages of the split "
          "(token P/R per page, averaged; the held-out half was never tuned on)")
    for name, r in article_scores.items():
        print(f"{name:32} F1 {r['f1']:.4f}  P {r['precision']:.4f}  R {r['recall']:.4f}")
    print(f"\nForum/Q&A threads: {len(fpages)} magic-html forum pages (token P/R per page, averaged)")
    for name, r in forum.items():
        h = r[f"{args.split}_half"]
        print(f"{name:32} F1 {r['f1']:.4f}  P {r['precision']:.4f}  R {r['recall']:.4f}   "
              f"{args.split} half ({h['pages']} pages): F1 {h['f1']:.4f}")
    if wcxb_section is not None:
        _print_wcxb(wcxb_section)
    if "skipped" in newspaper:
        print(f"\nnewspaper4k fixtures: skipped ({newspaper['skipped']})")
    else:
        print(f"\nnewspaper4k fixtures: {newspaper['pages']} real news pages, many languages, never tuned on "
              "(truth: newspaper's expected output; token P/R per page, averaged; pages per CPU-second)")
        for name, r in newspaper["systems"].items():
            print(f"{name:32} F1 {r['f1']:.4f}  P {r['precision']:.4f}  R {r['recall']:.4f}  {r['pages_per_s']:7.1f} pages/s")
    print(f"\nMath and code, generated {args.split} pages ({args.per_family} per family) and magic-html pages")
    print(f"{'family':20} " + " ".join(f"{n[:24]:>26}" for n in names) + "   (formula recall / code recall)")
    fams = list(generated[names[0]])
    for fam in fams:
        print(f"{fam:20} " + " ".join(
            f"{_fmt(generated[n][fam]['formula_recall']):>12} / {_fmt(generated[n][fam]['code_recall']):>11}" for n in names)
            + f"   n={generated[names[0]][fam]['formulas']}/{generated[names[0]][fam]['code_blocks']}")
    print(f"{'tables':20} " + " ".join(f"{_fmt(generated[n]['ALL']['table_cell_recall']):>26}" for n in names)
          + f"   (cells recovered in table form, n={generated[names[0]]['ALL']['table_cells']})")
    print(f"{'steps':20} " + " ".join(f"{_fmt(generated[n]['ALL']['text_recall']):>26}" for n in names)
          + f"   (how-to instructions kept, n={generated[names[0]]['ALL']['text_lines']})")
    mh = mathcode["magic-html"]
    print(f"{'magic-html':20} " + " ".join(
        f"{_fmt(mh[n]['formula_recall']):>12} / {_fmt(mh[n]['code_exact_match']):>11}" for n in names)
        + f"   n={mh[names[0]]['formulas']}/{mh[names[0]]['code_blocks']}")
    print(f"\nExtraction child's peak memory over the {n_pages} pages of this run: " + ", ".join(
        f"{mode} {m['peak_mb']:.0f} MB (grew {m['growth_mb']:.0f} MB)" for mode, m in memory.items()))
    if cli:
        print(f"\nCLI wall time, {cli['pages']} pages, one worker, start-up included (median of {cli['rounds']}): "
              f"assay --mode precise {cli['assay_s']:.1f} s, trafilatura {cli['trafilatura_s']:.1f} s, speed-up {cli['speedup']:.2f}x "
              f"(median of the per-round ratios {cli['speedup_paired']:.2f}x); "
              f"CPU time precise {cli['assay_cpu_s']:.1f} s, trafilatura {cli['trafilatura_cpu_s']:.1f} s, "
              f"speed-up {cli['cpu_speedup']:.2f}x (paired {cli['cpu_speedup_paired']:.2f}x) "
              f"(load average {cli['load_average'][0]:.1f} on {os.cpu_count()} cores)")
        nat = cli["native"]
        print(f"  --mode native (the default): wall {nat['assay_s']:.1f} s ({nat['speedup_paired']:.2f}x paired), CPU {nat['assay_cpu_s']:.1f} s "
              f"vs trafilatura {nat['trafilatura_cpu_s']:.1f} s: {nat['cpu_speedup']:.2f}x (paired {nat['cpu_speedup_paired']:.2f}x, "
              f"rounds {nat['cpu_speedup_rounds'][0]:.2f}-{nat['cpu_speedup_rounds'][1]:.2f}x)")

    results = RESULTS if args.split == "heldout" else RESULTS.with_name("extraction-dev.json")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({
        "split": args.split, "aeb": aeb, "aeb_pages": len(pages), "watchdog": overhead, "snippets": snip,
        "forum": forum, "forum_pages": len(fpages), f"magic_article_{args.split}": article_scores,
        "newspaper_fixtures": newspaper, "wcxb_dev": wcxb_section, "math_code": mathcode, "generated": generated,
        "per_family": args.per_family, "cli": cli, "worker_memory": memory,
        "trafilatura_version": trafilatura.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }, indent=2, sort_keys=True))
    print(f"\nwrote {results.relative_to(ROOT)}")


def _print_wcxb(section: dict) -> None:
    import wcxb

    print(f"\nWCXB dev sample: {section['pages']} pages, word F1 per page type "
          "(check: the 30% never tuned on; tune: the 70% looked at)")
    for split in ("tune", "check", "ALL"):
        print(wcxb.table(section["systems"], split))
    print("CPU s: " + ", ".join(f"{n} {c:.1f}" for n, c in section["cpu_s"].items()))
    print("page_type macro F1: " + ", ".join(f"{k} {v['macro_f1']:.3f}" for k, v in section["page_type"].items()))


def _wcxb_only(args, systems: dict) -> None:
    """`--only wcxb`: the WCXB section alone, its figures replaced in this split's results file."""
    section = wcxb_scores(systems)
    _print_wcxb(section)
    results = RESULTS if args.split == "heldout" else RESULTS.with_name("extraction-dev.json")
    data = json.loads(results.read_text()) if results.exists() else {}
    data["wcxb_dev"] = section
    results.write_text(json.dumps(data, indent=2, sort_keys=True))
    print(f"\nwrote the wcxb_dev section of {results.relative_to(ROOT)}")


def _speed_only(args, aeb: dict) -> None:
    """`--only speed`: the AEB pages per CPU-second (measured above) and the CLI timing on this
    split's folder, without the accuracy sections."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from extraction_pages import generate

    real = {k: v for k, v in real_pages().items() if page_split(k) == args.split}
    folder = ROOT / ".bench" / "extraction-cli" / args.split
    n_pages = _cli_folder(real, generate(args.split, args.per_family), folder)
    for name, r in aeb.items():
        print(f"AEB in-process {name:32} {r['pages_per_s']:7.1f} pages/CPU-s, {r['speed_vs_trafilatura']:.2f}x trafilatura")
    cli = cli_wall_time(folder, args.rounds)
    nat = cli["native"]
    print(f"CLI {args.split}, {n_pages} pages, one worker (median of {args.rounds}): native CPU {nat['assay_cpu_s']:.2f} s "
          f"vs trafilatura {nat['trafilatura_cpu_s']:.2f} s: {nat['cpu_speedup']:.2f}x (paired {nat['cpu_speedup_paired']:.2f}x, "
          f"rounds {nat['cpu_speedup_rounds'][0]:.2f}-{nat['cpu_speedup_rounds'][1]:.2f}x); "
          f"precise CPU {cli['assay_cpu_s']:.2f} s ({cli['cpu_speedup_paired']:.2f}x paired); "
          f"load average {cli['load_average'][0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
