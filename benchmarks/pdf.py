"""PDF extraction benchmark on ../shared/data/pdf-dev: Assay's extract.pdf against plain pypdfium2 text and
pymupdf's default `get_text()`, side by side in one run.

Metrics (per document, averaged per kind; a document counts under every kind it lists):
* `bow_f1` — bag-of-words F1 against the Markdown/plain ground truth: NFKC, case-folded `\\w+` tokens,
  Han/kana split into single characters, Markdown syntax (`#`, `|`, `*`, table rules) removed from both.
* `order` — reading order: word-level Levenshtein similarity (1 - edits / max(len)) of the same token
  sequences (rapidfuzz). A page read in the wrong column order loses it; a missing word costs both.
* `cells` — ICDAR 2013 (-str.xml): share of non-empty table cells whose text is one whole unit of the
  output (a line, a Markdown table cell, or a run split by 2+ spaces/tabs). `cell_pairs` — share of
  horizontally adjacent cell pairs found as consecutive units of one line, left before right.
* olmOCR-Bench unit tests (`.tests.jsonl`): pass rate per type. present/absent/order/baseline follow
  olmOCR's rules (normalised text, `max_diffs` character edits, `first_n`/`last_n` windows); table tests are checked on the
  Markdown / HTML tables of the output (a cell and its neighbours); `math` is approximated by the
  formula's symbol sequence (LaTeX commands mapped to Unicode, braces and spaces dropped) found with
  ≤ 15 % edits — olmOCR renders both with KaTeX, which needs a browser.
* pages per CPU-second per system on the text-layer documents; router decisions vs the truth of which
  documents need OCR (the `scan` kind and `blank-scan`).

Split: within each document's first kind, sorted by name, every third document (index % 3 == 2) is held
out; `--split dev` scores the rest (tuned on), `--split heldout` the held-out ones (never tuned on).

Run:  python benchmarks/pdf.py [--split dev|heldout|all]  → benchmarks/results/pdf-<split>.json
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CANDIDATES = [ROOT.parent / "shared" / "data" / "pdf-dev", ROOT.parent.parent / "shared" / "data" / "pdf-dev"]
DATA = next((p for p in _CANDIDATES if p.exists()), _CANDIDATES[0])

# ---- ground truth ------------------------------------------------------------------------------


def manifest() -> list[dict]:
    return [json.loads(line) for line in (DATA / "manifest.jsonl").read_text().splitlines() if line.strip()]


def split_of(docs: list[dict]) -> dict[str, str]:
    by_kind: dict[str, list[str]] = defaultdict(list)
    for d in docs:
        by_kind[d["kind"].split(";")[0]].append(d["name"])
    out = {}
    for names in by_kind.values():
        for i, name in enumerate(sorted(names)):
            out[name] = "heldout" if i % 3 == 2 else "dev"
    return out


def _strip_front_matter(md: str) -> str:
    return re.sub(r"\A---\n.*?\n---\n", "", md, flags=re.S)


def reference_text(name: str) -> tuple[str | None, bool]:
    """The reference text and whether it is complete (False: only precision-free recall is fair)."""
    gt = DATA / "gt"
    if (gt / f"{name}.md").exists():
        return _strip_front_matter((gt / f"{name}.md").read_text()), True
    if (gt / f"{name}.txt").exists():
        return (gt / f"{name}.txt").read_text(), True
    if (gt / f"{name}.tex").exists():  # title, abstract, tables exact; the body is \lipsum (not shipped)
        tex = (gt / f"{name}.tex").read_text()
        tex = re.sub(r"\\(documentclass|usepackage|begin|end|author|date|lipsum|pagebreak|caption|label)(\[[^]]*\])?(\{[^}]*\})?", " ", tex)
        tex = re.sub(r"%.*", " ", tex)
        tex = re.sub(r"\\[a-zA-Z]+", " ", tex)
        return re.sub(r"[{}&\\]", " ", tex), False
    return None, False


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TOK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = re.sub(r"<[^>]+>", " ", text)  # HTML tables inside Markdown ground truth
    text = re.sub(r"^\s*\|?\s*:?-{3,}.*$", " ", text, flags=re.M)  # Markdown table rules
    return [t for t in _TOK.findall(text) if t != "_" and not set(t) <= {"_"}]


def bow_f1(ref: list[str], out: list[str], recall_only: bool = False) -> float:
    r, o = Counter(ref), Counter(out)
    tp = sum((r & o).values())
    if not tp:
        return 0.0
    p, rc = tp / sum(o.values()), tp / sum(r.values())
    return rc if recall_only else 2 * p * rc / (p + rc)


def order_score(ref: list[str], out: list[str]) -> float:
    from rapidfuzz.distance import Levenshtein

    if not ref and not out:
        return 1.0
    return Levenshtein.normalized_similarity(ref, out)


# ---- ICDAR 2013 table cells --------------------------------------------------------------------

def _norm_cell(s: str) -> str:
    s = unicodedata.normalize("NFKC", s).replace("\u2212", "-")
    return re.sub(r"\s+", " ", s).strip().casefold()


def icdar_cells(name: str) -> list[tuple[int, int, int, str]]:
    """(table, row, col, text) of every non-empty cell."""
    path = DATA / "gt" / f"{name}-str.xml"
    if not path.exists():
        return []
    root = ET.parse(path).getroot()
    cells = []
    for t, table in enumerate(root.iter("table")):
        for cell in table.iter("cell"):
            text = _norm_cell("".join((cell.find("content").itertext())) if cell.find("content") is not None else "")
            if text:
                cells.append((t, int(cell.get("start-row")), int(cell.get("start-col")), text))
    return cells


def output_units(text: str) -> list[list[str]]:
    """Lines of the output, each split into cell-like units."""
    lines = []
    for line in text.splitlines():
        if re.match(r"^\s*\|?\s*:?-{3,}", line):
            continue
        if "|" in line:
            parts = [p for p in line.strip().strip("|").split("|")]
        else:
            parts = re.split(r"\t|\s{2,}", line)
        parts = [_norm_cell(p) for p in parts if p.strip()]
        if parts:
            lines.append(parts)
    return lines


def table_scores(name: str, text: str) -> dict | None:
    cells = icdar_cells(name)
    if not cells:
        return None
    lines = output_units(text)
    units = Counter(u for line in lines for u in line)
    whole_lines = Counter(" ".join(line) for line in lines)
    found = sum(1 for *_, c in cells if units[c] or whole_lines[c])
    pairs = adjacent = 0
    grid = {(t, r, c): s for t, r, c, s in cells}
    for (t, r, c), s in grid.items():
        right = grid.get((t, r, c + 1))
        if right is None:
            continue
        pairs += 1
        if any(_consecutive(line, s, right) for line in lines):
            adjacent += 1
    return {"cells": found / len(cells), "cell_pairs": adjacent / pairs if pairs else None, "n_cells": len(cells)}


def _consecutive(line: list[str], a: str, b: str) -> bool:
    return any(line[i] == a and line[i + 1] == b for i in range(len(line) - 1))


# ---- olmOCR-Bench unit tests ---------------------------------------------------------------------

def _norm(s: str) -> str:
    s = unicodedata.normalize("NFC", s)
    for a, b in {"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "\u00a0": " ", "ﬁ": "fi", "ﬂ": "fl"}.items():
        s = s.replace(a, b)
    s = re.sub(r"[*#]", "", s)  # Markdown emphasis / headings are not text
    return re.sub(r"\s+", " ", s).strip()


def _fuzzy_find(needle: str, hay: str, max_diffs: int) -> int:
    """Position of the end of the best approximate occurrence with ≤ max_diffs edits, else -1."""
    if max_diffs <= 0:
        i = hay.find(needle)
        return i + len(needle) if i >= 0 else -1
    from rapidfuzz.distance import Levenshtein

    # Sellers' approximate substring search, one row at a time (needle rows x hay columns).
    n = len(needle)
    prev = list(range(n + 1))
    best, at = max_diffs + 1, -1
    for j, ch in enumerate(hay):
        cur = [0]
        for i in range(1, n + 1):
            cur.append(min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (needle[i - 1] != ch)))
        if cur[n] < best:
            best, at = cur[n], j + 1
        prev = cur
    del Levenshtein
    return at if best <= max_diffs else -1


def _present_at(text: str, hay: str, test: dict) -> int:
    needle = _norm(text)
    if not test.get("case_sensitive", True):
        needle, hay = needle.lower(), hay.lower()
    return _fuzzy_find(needle, hay, int(test.get("max_diffs", 0)))


_LATEX = {r"\pi": "π", r"\int": "∫", r"\nabla": "∇", r"\times": "×", r"\partial": "∂", r"\cdot": "·",
          r"\sum": "∑", r"\infty": "∞", r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\delta": "δ",
          r"\epsilon": "ε", r"\varepsilon": "ε", r"\theta": "θ", r"\lambda": "λ", r"\mu": "μ", r"\sigma": "σ",
          r"\rho": "ρ", r"\phi": "φ", r"\omega": "ω", r"\Omega": "Ω", r"\leq": "≤", r"\geq": "≥", r"\neq": "≠",
          r"\pm": "±", r"\approx": "≈", r"\in": "∈", r"\to": "→", r"\rightarrow": "→", r"\sqrt": "√",
          r"\mathbf": "", r"\mathrm": "", r"\frac": "", r"\left": "", r"\right": "", r"\,": "", r"\quad": ""}


def math_symbols(s: str) -> str:
    for k in sorted(_LATEX, key=len, reverse=True):
        s = re.sub(re.escape(k) + r"(?![a-zA-Z])", _LATEX[k], s)
    s = re.sub(r"\\[a-zA-Z]+", "", s)
    s = unicodedata.normalize("NFKC", s).replace("−", "-").replace("⋅", "·")  # one glyph once rendered
    return re.sub(r"[\s{}^_$\\()\[\]\u200b]", "", s)


def parse_tables(text: str) -> list[list[list[str]]]:
    """Markdown pipe tables and HTML <table>s of the output as lists of rows of cells."""
    tables, cur = [], []
    for line in text.splitlines() + [""]:
        s = line.strip()
        if s.startswith("|") and s.count("|") >= 2:
            if not re.match(r"^\|?\s*:?-{3,}", s):
                cur.append([_norm(c) for c in s.strip("|").split("|")])
        elif cur:
            tables.append(cur)
            cur = []
    for m in re.finditer(r"<table.*?</table>", text, flags=re.S | re.I):
        rows = []
        for tr in re.findall(r"<tr.*?</tr>", m.group(0), flags=re.S | re.I):
            rows.append([_norm(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, flags=re.S | re.I)])
        tables.append(rows)
    return tables


def _table_test(test: dict, tables: list) -> bool:
    want = _norm(test["cell"])
    for rows in tables:
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                if cell != want:
                    continue
                at = lambda rr, cc: rows[rr][cc] if 0 <= rr < len(rows) and 0 <= cc < len(rows[rr]) else None  # noqa: E731
                checks = {"up": at(r - 1, c), "down": at(r + 1, c), "left": at(r, c - 1), "right": at(r, c + 1)}
                ok = all(_norm(test[k]) == v for k, v in checks.items() if test.get(k))
                if test.get("top_heading"):
                    ok = ok and any(at(rr, c) == _norm(test["top_heading"]) for rr in range(r))
                if test.get("left_heading"):
                    ok = ok and at(r, 0) == _norm(test["left_heading"])
                if ok:
                    return True
    return False


def run_unit_test(test: dict, text: str) -> bool:
    hay = _norm(text)
    kind = test["type"]
    if kind in ("present", "absent") and (test.get("first_n") or test.get("last_n")):
        # olmOCR looks only at the first / last n characters (a footer is absent from the page's end)
        first, last = test.get("first_n") or 0, test.get("last_n") or 0
        hay = (hay[:first] if first else "") + (hay[-last:] if last else "")
    if kind == "present":
        return _present_at(test["text"], hay, test) >= 0
    if kind == "absent":
        return _present_at(test["text"], hay, test) < 0
    if kind == "order":
        a, b = _present_at(test["before"], hay, test), _present_at(test["after"], hay, test)
        return a >= 0 and b >= 0 and a - len(_norm(test["before"])) < b - len(_norm(test["after"]))
    if kind == "baseline":
        return len(text.strip()) <= int(test.get("max_length", 0)) if test.get("max_length") is not None else bool(text.strip())
    if kind == "table":
        return _table_test(test, parse_tables(text))
    if kind == "math":
        want = math_symbols(test["math"])
        got = math_symbols(text)
        return bool(want) and _fuzzy_find(want, got, max(0, int(len(want) * 0.15))) >= 0
    return False


def unit_tests(name: str) -> list[dict]:
    path = DATA / "gt" / f"{name}.tests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


# ---- systems -----------------------------------------------------------------------------------

def plain_pdfium(path: str) -> str:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(path)
    return "\n\n".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))


def plain_pymupdf(path: str) -> str:
    import pymupdf

    with pymupdf.open(path) as doc:
        return "\n\n".join(page.get_text() for page in doc)


def assay(params: dict):
    from assay.extractors.pdf import extract_pdf

    def run(path: str) -> tuple[str, dict]:
        out = extract_pdf({"path": path, **params})
        return out.get("text", ""), out
    return run


def systems() -> dict:
    return {
        "pdfium": lambda p: (plain_pdfium(p), {}),
        "pymupdf": lambda p: (plain_pymupdf(p), {}),
        "assay-v1": assay({"layout": False}),
        "assay": assay({}),
    }


# ---- run ---------------------------------------------------------------------------------------

def _mean(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.fmean(xs), 4) if xs else None


def _rate(recs) -> float | None:
    pages = sum(r.get("ocr_pages", 0) for r in recs)
    cpu = sum(r.get("ocr_cpu_s", 0.0) for r in recs)
    return round(pages / cpu, 4) if cpu else None


def evaluate(split: str) -> dict:
    docs = manifest()
    where = split_of(docs)
    chosen = [d for d in docs if split == "all" or where[d["name"]] == split]
    result = {"split": split, "documents": [d["name"] for d in chosen], "pages": sum(d["pages"] for d in chosen),
              "platform": platform.platform(), "systems": {}}
    for sys_name, fn in systems().items():
        per_doc, cpu_text, pages_text, route = {}, 0.0, 0, []
        for d in chosen:
            path = str(DATA / "pdfs" / f"{d['name']}.pdf")
            t0 = time.process_time()
            try:
                text, raw = fn(path)
            except Exception as exc:  # a plain extractor that raises scores as empty
                text, raw = "", {"reject": "error", "detail": str(exc)}
            dt = time.process_time() - t0
            kinds = d["kind"].split(";")
            needs_ocr = "scan" in kinds or "blank-scan" in kinds
            if "scan" in kinds:  # a scan is scored as a scan only, not under the kinds of its source
                kinds = ["scan"]
            if not needs_ocr:
                cpu_text += dt
                pages_text += d["pages"]
            rec = {"kinds": kinds, "cpu_s": round(dt, 4), "chars": len(text)}
            if raw.get("reject"):
                rec["reject"] = raw["reject"]
            meta = raw.get("meta", {})
            if "ocr_pages" in meta:
                rec["ocr_pages"] = meta["ocr_pages"]
                rec["ocr_cpu_s"] = round(dt, 4) if meta["ocr_pages"] else 0.0  # the whole document's CPU
                route.append((needs_ocr, meta["ocr_pages"] > 0))
            ref, complete = reference_text(d["name"])
            if ref is not None:
                rt, ot = tokens(ref), tokens(text)
                rec["bow_f1"] = round(bow_f1(rt, ot, recall_only=not complete), 4)
                if complete:
                    rec["order"] = round(order_score(rt, ot), 4)
            ts = table_scores(d["name"], text)
            if ts:
                rec.update({k: round(v, 4) if isinstance(v, float) else v for k, v in ts.items()})
            tests = unit_tests(d["name"])
            if tests:
                rec["unit_tests"] = {t["id"]: [t["type"], run_unit_test(t, text)] for t in tests}
            per_doc[d["name"]] = rec
        by_kind: dict[str, dict] = {}
        kinds = sorted({k for r in per_doc.values() for k in r["kinds"]})
        for k in kinds:
            rs = [r for r in per_doc.values() if k in r["kinds"]]
            by_kind[k] = {"docs": len(rs), "bow_f1": _mean(r.get("bow_f1") for r in rs),
                          "order": _mean(r.get("order") for r in rs), "cells": _mean(r.get("cells") for r in rs),
                          "cell_pairs": _mean(r.get("cell_pairs") for r in rs)}
        tests_by_type: dict[str, list[bool]] = defaultdict(list)
        for r in per_doc.values():
            for typ, ok in r.get("unit_tests", {}).values():
                tests_by_type[typ].append(ok)
        summary = {
            "bow_f1": _mean(r.get("bow_f1") for r in per_doc.values()),
            "order": _mean(r.get("order") for r in per_doc.values()),
            "icdar_cells": _mean(r.get("cells") for n, r in per_doc.items() if n.startswith("icdar-")),
            "icdar_cell_pairs": _mean(r.get("cell_pairs") for n, r in per_doc.items() if n.startswith("icdar-")),
            "olmocr_tests": {t: {"n": len(v), "pass_rate": round(sum(v) / len(v), 4)} for t, v in sorted(tests_by_type.items())},
            "text_layer_pages_per_cpu_s": round(pages_text / cpu_text, 2) if cpu_text else None,
            "ocr_pages_per_cpu_s": _rate(per_doc.values()),
            "rejects": dict(Counter(r["reject"] for r in per_doc.values() if r.get("reject"))),
        }
        if route:
            tp = sum(a and b for a, b in route)
            summary["router"] = {"docs": len(route), "accuracy": round(sum(a == b for a, b in route) / len(route), 4),
                                 "ocr_recall": round(tp / max(1, sum(a for a, _ in route)), 4),
                                 "ocr_precision": round(tp / max(1, sum(b for _, b in route)), 4)}
        result["systems"][sys_name] = {"summary": summary, "by_kind": by_kind, "documents": per_doc}
        print(sys_name, json.dumps(summary), flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=["dev", "heldout", "all"], default="dev")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    res = evaluate(args.split)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"pdf-{args.split}.json"
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    for sys_name, s in res["systems"].items():
        print(f"\n{sys_name}")
        for k, v in s["by_kind"].items():
            print(f"  {k:22s} n={v['docs']:2d} f1={v['bow_f1']} order={v['order']} cells={v['cells']} pairs={v['cell_pairs']}")


if __name__ == "__main__":
    main()
