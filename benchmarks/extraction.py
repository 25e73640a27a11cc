"""Extraction benchmark: Assay vs trafilatura's default `extract()`, side by side in one run.

1. Accuracy and speed on the Article Extraction Benchmark (../shared/data/extraction/aeb, 181 pages):
   the AEB protocol (evaluate.py of scrapinghub/article-extraction-benchmark, re-implemented here):
   \\w+ tokens, 4-token shingles, per-page precision/recall with tp/fp/fn normalised per page, then
   averaged over pages; F1 from the averaged precision and recall.
2. Math and code on the magic-html pages that carry formulas or <pre> blocks, plus pages written
   here for each markup (MathJax text delimiters, <script type="math/tex">, KaTeX, MathML,
   AsciiMath, <pre><code class="language-x">):
   - formula recall: share of formulas (TeX source found in the page) that appear in the output,
     compared with whitespace removed;
   - code exact-match: share of main-content <pre> blocks whose text appears verbatim (blank lines and
     indentation included) in the output.
3. Forum and Q&A threads: the 103 magic-html forum pages (StackExchange, Discourse, XenForo,
   phpBB, Reddit, Chinese BBSes, ...) against their ground-truth main text (question and answers):
   token precision/recall per page (\\w+ runs; CJK characters one token each, since the pages are
   multilingual), averaged over pages; F1 from the averages.
4. Watchdog overhead: the same AEB pages through the per-page child process (limits.Watchdog).

Run:  python benchmarks/extraction.py   (writes benchmarks/results/extraction.json)
"""
from __future__ import annotations

import argparse
import gzip
import json
import platform
import re
import statistics
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "extraction"
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


def timed_interleaved(systems: dict, pages: dict[str, str]) -> tuple[dict[str, dict], dict[str, float]]:
    """Run every system on page 1, then every system on page 2, ...: load from other users of the
    (shared) machine then hits all systems alike. Speed is pages per CPU-second of this process."""
    outs: dict[str, dict] = {name: {} for name in systems}
    cpu = {name: 0.0 for name in systems}
    for key, html in pages.items():
        for name, fn in systems.items():
            t0 = time.process_time()
            outs[name][key] = fn(html)
            cpu[name] += time.process_time() - t0
    return outs, {name: len(pages) / max(c, 1e-9) for name, c in cpu.items()}


def watchdog_overhead(pages: dict[str, str]) -> dict[str, float]:
    """Wall-clock pages/s in-process vs through the per-page child process, interleaved per page
    (the child's CPU time is not ours, so this one is measured on the wall clock)."""
    from assay.extractors.html import extract_html
    from assay.extractors.limits import Watchdog

    wall = {"in_process": 0.0, "watchdog": 0.0}
    with Watchdog(extract_html, timeout_s=30) as dog:
        t0 = time.perf_counter()
        dog.run({"html": "<html><body><p>warm</p></body></html>"})  # child start, counted
        wall["watchdog"] += time.perf_counter() - t0
        for html in pages.values():
            t0 = time.perf_counter()
            extract_html({"html": html})
            wall["in_process"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            assert dog.run({"html": html}).ok
            wall["watchdog"] += time.perf_counter() - t0
    rates = {k: len(pages) / v for k, v in wall.items()}
    rates["overhead_pct"] = 100 * (wall["watchdog"] / wall["in_process"] - 1)
    return rates


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


FILL = "This paragraph carries enough ordinary words to look like the main content of an article page. " * 2
CODE_PY = 'import math\n\n\ndef area(r):\n    """Blank lines and indentation must survive."""\n    return math.pi * r ** 2\n'
CODE_JS = "function add(a, b) {\n  // two-space indent\n\n  return a + b;\n}"


def written_pages() -> list[dict]:
    """One page per markup; formulas and code known by construction."""
    def page(body: str) -> str:
        return (f"<html><head><title>t</title></head><body><nav><a href='/'>Home</a> <a href='/x'>Blog</a></nav>"
                f"<article><h1>Notes</h1><p>{FILL}</p>{body}<p>{FILL}</p></article>"
                f"<footer>Copyright 2024 Example. All rights reserved.</footer></body></html>")

    return [
        {"name": "mathjax-delimiters", "html": page(f"<p>Inline \\(a_i + b_{{ij}}\\) and display \\[\\int_0^1 x^2\\,dx = \\frac{{1}}{{3}}\\] and $$e^{{i\\pi}} + 1 = 0$$. {FILL}</p>"),
         "formulas": ["a_i + b_{ij}", "\\int_0^1 x^2\\,dx = \\frac{1}{3}", "e^{i\\pi} + 1 = 0"], "code": []},
        {"name": "script-math-tex", "html": page(f"<p>Energy <script type='math/tex'>E = mc^2</script> and <script type='math/tex; mode=display'>\\sum_{{n=1}}^\\infty \\frac{{1}}{{n^2}} = \\frac{{\\pi^2}}{{6}}</script>. {FILL}</p>"),
         "formulas": ["E = mc^2", "\\sum_{n=1}^\\infty \\frac{1}{n^2} = \\frac{\\pi^2}{6}"], "code": []},
        {"name": "katex", "html": page(f"<p>Cost <span class='katex'><span class='katex-mathml'><math><semantics><mrow><mi>O</mi></mrow><annotation encoding='application/x-tex'>O(n \\log n)</annotation></semantics></math></span><span class='katex-html' aria-hidden='true'>O(nlogn)</span></span> overall. {FILL}</p>"),
         "formulas": ["O(n \\log n)"], "code": []},
        {"name": "mathml", "html": page(f"<p>Square <math><msup><mi>x</mi><mn>2</mn></msup></math> and <math display='block'><mfrac><mi>a</mi><mi>b</mi></mfrac></math> and <math><msqrt><mi>y</mi></msqrt></math>. {FILL}</p>"),
         "formulas": ["x^2", "\\frac{a}{b}", "\\sqrt{y}"], "code": []},
        {"name": "asciimath", "html": page(f"<p>Root <script type='math/asciimath'>sqrt(x)</script> here. {FILL}</p>"),
         "formulas": ["\\sqrt{x}"], "code": []},
        {"name": "pre-code-language", "html": page(f"<p>Python first. {FILL}</p><pre><code class='language-python'>{CODE_PY}</code></pre><p>Then JS. {FILL}</p><pre class='lang-js'><code>{CODE_JS}</code></pre>"),
         "formulas": [], "code": [CODE_PY.strip("\n"), CODE_JS]},
    ]


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


# ---- main --------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="use only the first N AEB pages (quick check)")
    args = ap.parse_args()

    truth = json.loads((DATA / "aeb" / "ground-truth.json").read_text())
    paths = sorted((DATA / "aeb" / "html").glob("*.html.gz"))[: args.limit]
    pages = {p.name.split(".")[0]: gzip.open(p).read().decode("utf-8") for p in paths}
    truth = {k: truth[k]["articleBody"] for k in pages}

    import trafilatura

    from assay.extractors.html import extract_html

    for html in list(pages.values())[:3]:  # warm imports and caches for both
        trafilatura_default(html)
        extract_html({"html": html})

    systems = {"trafilatura (default extract)": trafilatura_default,
               "assay precise": assay("precise"), "assay fast": assay("fast")}
    outs, rates = timed_interleaved(systems, pages)
    aeb: dict[str, dict] = {name: dict(aeb_scores(truth, outs[name]), pages_per_s=rates[name]) for name in systems}
    overhead = watchdog_overhead(pages)

    base = aeb["trafilatura (default extract)"]
    for row in aeb.values():
        row["f1_vs_trafilatura"] = row["f1"] - base["f1"]
        row["speed_vs_trafilatura"] = row["pages_per_s"] / base["pages_per_s"]

    fpages = forum_pages()
    f_outs, f_rates = timed_interleaved(systems, {k: html for k, (html, _) in fpages.items()})
    forum = {name: dict(token_scores(fpages, f_outs[name]), pages_per_s=f_rates[name]) for name in systems}

    mc_sets = {"magic-html": magic_html_pages(None), "written": written_pages()}
    mathcode = {}
    for set_name, mc_pages in mc_sets.items():
        for name, fn in (("trafilatura (default extract)", trafilatura_default), ("assay precise", assay("precise")),
                         ("assay fast", assay("fast"))):
            mathcode.setdefault(set_name, {})[name] = math_code_scores(mc_pages, fn)
        mathcode[set_name]["pages"] = len(mc_pages)

    print(f"\nAEB: {len(pages)} pages (F1/precision/recall per the AEB protocol; pages per CPU-second, interleaved)")
    print(f"{'system':32} {'F1':>7} {'prec':>7} {'recall':>7} {'pages/s':>9} {'ΔF1':>7} {'speed×':>7}")
    for name, r in aeb.items():
        print(f"{name:32} {r['f1']:7.4f} {r['precision']:7.4f} {r['recall']:7.4f} {r['pages_per_s']:9.1f} "
              f"{r['f1_vs_trafilatura']:+7.4f} {r['speed_vs_trafilatura']:7.2f}")
    print(f"watchdog (per-page child process, wall clock): {overhead['in_process']:.1f} pages/s in-process, "
          f"{overhead['watchdog']:.1f} pages/s isolated, overhead {overhead['overhead_pct']:+.1f}%")
    print(f"\nForum/Q&A threads: {len(fpages)} magic-html forum pages (token P/R per page, averaged)")
    print(f"{'system':32} {'F1':>7} {'prec':>7} {'recall':>7} {'pages/s':>9}")
    for name, r in forum.items():
        print(f"{name:32} {r['f1']:7.4f} {r['precision']:7.4f} {r['recall']:7.4f} {r['pages_per_s']:9.1f}")
    for set_name, rows in mathcode.items():
        print(f"\nMath and code, {set_name} pages ({rows['pages']})")
        print(f"{'system':32} {'formula recall':>15} {'(n)':>5} {'code exact-match':>17} {'(n)':>5}")
        for name, r in rows.items():
            if name == "pages":
                continue
            fr = "-" if r["formula_recall"] is None else f"{r['formula_recall']:.3f}"
            ce = "-" if r["code_exact_match"] is None else f"{r['code_exact_match']:.3f}"
            print(f"{name:32} {fr:>15} {r['formulas']:5d} {ce:>17} {r['code_blocks']:5d}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "aeb": aeb, "forum": forum, "forum_pages": len(fpages), "watchdog": overhead, "math_code": mathcode, "aeb_pages": len(pages),
        "trafilatura_version": trafilatura.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }, indent=2, sort_keys=True))
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
