"""WCXB dev sample (../shared/data/extraction/wcxb-dev: 770 pages of 7 page types) scored as WCXB's own
`evaluate.py` does: lower-cased `\\w+` tokens, per-page precision/recall/F1 from the multiset overlap
with `main_content`, averaged over pages (a page whose `main_content` is empty scores 1 only when the
output is empty as well).

The pages are split by a stable hash of their id: 70% `tune` (looked at while changing the selector)
and 30% `check` (never looked at page by page; its figures are the ones from pages never tuned on).

Run alone (`python benchmarks/wcxb.py [--split tune|check|all] [--worst N] [--no-trafilatura]`) to
look at the tune pages; `benchmarks/extraction.py` runs it side by side with trafilatura in its run.
"""
from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WCXB = next((p / "shared" / "data" / "extraction" / "wcxb-dev" for p in (ROOT.parent, ROOT.parent.parent)
             if (p / "shared" / "data" / "extraction").is_dir()), ROOT.parent / "shared" / "data" / "extraction" / "wcxb-dev")
TYPES = ("article", "forum", "product", "listing", "collection", "documentation", "service")

_TOKEN = re.compile(r"\w+")


def split_of(page_id: str) -> str:
    """`tune` for 70% of the pages, `check` for the rest, by a hash of the id (stable run to run)."""
    return "tune" if hashlib.sha1(f"wcxb/{page_id}".encode()).digest()[0] % 10 < 7 else "check"


def _truth(path: Path) -> tuple[str, str]:
    d = json.loads(gzip.open(path).read())
    internal = d.get("_internal")
    if isinstance(internal, str):
        internal = ast.literal_eval(internal)
    gt = d.get("ground_truth")
    if isinstance(gt, str):
        try:
            gt = json.loads(gt)
        except ValueError:
            gt = ast.literal_eval(gt)
    kind = internal["page_type"]["primary"]
    return gt.get("main_content") or "", "collection" if kind == "category" else kind


def load_pages(split: str = "all") -> dict[str, dict]:
    """{id: {'html': bytes, 'truth': str, 'type': str, 'split': str}} for the pages of `split`."""
    pages = {}
    for line in (WCXB / "manifest.tsv").read_text().splitlines()[1:]:
        _, pid, kind = line.split("\t")[:3]
        s = split_of(pid)
        if split not in ("all", s):
            continue
        truth, _ = _truth(WCXB / "ground-truth" / f"{pid}.json.gz")
        pages[pid] = {"html": gzip.open(WCXB / "html" / f"{pid}.html.gz").read(), "truth": truth, "type": kind,
                      "split": s}
    return pages


def page_f1(pred: str, truth: str) -> tuple[float, float, float]:
    """(precision, recall, F1) of one page, as WCXB's evaluate.py."""
    p, t = Counter(_TOKEN.findall(pred.lower())), Counter(_TOKEN.findall(truth.lower()))
    if not t:
        return (1.0, 1.0, 1.0) if not p else (0.0, 0.0, 0.0)
    if not p:
        return 0.0, 0.0, 0.0
    common = sum((p & t).values())
    if not common:
        return 0.0, 0.0, 0.0
    precision, recall = common / sum(p.values()), common / sum(t.values())
    return precision, recall, 2 * precision * recall / (precision + recall)


def scores(pages: dict[str, dict], outs: dict[str, str]) -> dict:
    """Mean word F1 (and P, R) over all pages, per page type, and per split."""
    per = {pid: page_f1(outs.get(pid, ""), pg["truth"]) for pid, pg in pages.items()}

    def agg(keys) -> dict:
        keys = list(keys)
        if not keys:
            return {"pages": 0}
        return {"f1": statistics.mean(per[k][2] for k in keys), "precision": statistics.mean(per[k][0] for k in keys),
                "recall": statistics.mean(per[k][1] for k in keys), "pages": len(keys)}

    out = {"ALL": agg(pages)}
    for s in ("tune", "check"):
        out[s] = agg(k for k in pages if pages[k]["split"] == s)
        out[f"{s}_types"] = {kind: agg(k for k in pages if pages[k]["split"] == s and pages[k]["type"] == kind)
                             for kind in TYPES}
    out["types"] = {kind: agg(k for k in pages if pages[k]["type"] == kind) for kind in TYPES}
    return out


def page_type_scores(pages: dict[str, dict], predicted: dict[str, str]) -> dict:
    """Macro F1 of the `page_type` tag against WCXB's labels, overall and per split."""
    def macro(keys) -> dict:
        keys = list(keys)
        per = {}
        for kind in TYPES:
            tp = sum(1 for k in keys if predicted.get(k) == kind and pages[k]["type"] == kind)
            fp = sum(1 for k in keys if predicted.get(k) == kind and pages[k]["type"] != kind)
            fn = sum(1 for k in keys if predicted.get(k) != kind and pages[k]["type"] == kind)
            per[kind] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0
        acc = sum(1 for k in keys if predicted.get(k) == pages[k]["type"]) / max(len(keys), 1)
        return {"macro_f1": statistics.mean(per.values()), "accuracy": acc, "per_type_f1": per, "pages": len(keys)}

    return {"ALL": macro(pages), **{s: macro(k for k in pages if pages[k]["split"] == s) for s in ("tune", "check")}}


def run_systems(systems: dict, pages: dict[str, dict]) -> tuple[dict[str, dict], dict[str, float], dict[str, str]]:
    """Every system on each page in turn (load from other users hits all alike): outputs, CPU
    seconds per system, and the `page_type` Assay's native mode tagged each page with."""
    from assay.extractors.html import extract_html

    outs = {name: {} for name in systems}
    cpu = {name: 0.0 for name in systems}
    tags = {}
    for pid, pg in pages.items():
        for name, fn in systems.items():
            t0 = time.process_time()
            if fn is None:  # Assay native, whose page_type is kept too
                doc = extract_html({"html": pg["html"]})
                outs[name][pid] = doc["text"]
                tags[pid] = doc["meta"].get("page_type")
            else:
                outs[name][pid] = fn(pg["html"])
            cpu[name] += time.process_time() - t0
    return outs, cpu, tags


def trafilatura_extract(html: bytes) -> str:
    import trafilatura

    return trafilatura.extract(html) or ""


def table(result: dict, split: str = "ALL") -> str:
    names = list(result)
    rows = [f"{'page type':15} {'pages':>5} " + " ".join(f"{n[:14]:>14}" for n in names)]
    types = "types" if split == "ALL" else f"{split}_types"
    for kind in TYPES:
        r0 = result[names[0]][types][kind]
        rows.append(f"{kind:15} {r0['pages']:5d} " + " ".join(f"{result[n][types][kind].get('f1', 0):14.3f}" for n in names))
    r0 = result[names[0]][split]
    rows.append(f"{'mean ' + split:15} {r0['pages']:5d} " + " ".join(f"{result[n][split]['f1']:14.3f}" for n in names))
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("tune", "check", "all"), default="tune")
    ap.add_argument("--worst", type=int, default=0, help="print the N tune pages where native trails most")
    ap.add_argument("--no-trafilatura", action="store_true", help="read trafilatura's outputs from .bench cache")
    ap.add_argument("--dump", help="write native outputs to this JSON")
    args = ap.parse_args()
    pages = load_pages(args.split)
    cache = ROOT / ".bench" / f"wcxb-trafilatura-{args.split}.json"
    systems = {"assay native": None}
    if not args.no_trafilatura:
        systems = {"trafilatura": trafilatura_extract, **systems}
    outs, cpu, tags = run_systems(systems, pages)
    if args.no_trafilatura and cache.exists():
        outs = {"trafilatura": json.loads(cache.read_text()), **outs}
    elif not args.no_trafilatura:
        cache.parent.mkdir(exist_ok=True)
        cache.write_text(json.dumps(outs["trafilatura"]))
    result = {name: scores(pages, o) for name, o in outs.items()}
    for s in (("tune", "check") if args.split == "all" else (args.split,)):
        print(table(result, s))
    print("cpu s:", {k: round(v, 1) for k, v in cpu.items()})
    if any(tags.values()):
        print("page_type:", json.dumps(page_type_scores(pages, tags), indent=None))
    if args.dump:
        Path(args.dump).write_text(json.dumps({"native": outs["assay native"], "tags": tags}))
    if args.worst and "trafilatura" in outs:
        gaps = []
        for pid, pg in pages.items():
            if pg["split"] != "tune":
                continue
            n, t = page_f1(outs["assay native"][pid], pg["truth"]), page_f1(outs["trafilatura"][pid], pg["truth"])
            gaps.append((t[2] - n[2], pid, pg["type"], n, t, len(outs["assay native"][pid]), len(pg["truth"])))
        for g in sorted(gaps, reverse=True)[:args.worst]:
            print(f"{g[1]} {g[2]:13} gap {g[0]:+.3f} native P {g[3][0]:.2f} R {g[3][1]:.2f} | traf F1 {g[4][2]:.2f} "
                  f"| native chars {g[5]} truth chars {g[6]}")


if __name__ == "__main__":
    main()
