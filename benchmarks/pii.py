"""PII detection (`filter.pii`, issue 46): precision and recall per kind on the labelled set, against
the detector before issue 46, in one run; what each finds on real code and text; throughput.

1. The labelled set (tests/fixtures/pii/: built by its build.py, 650 documents of code in twelve
   languages and file types, documentation, manuals, web pages and commits): per kind true
   positives, misses and false positives, precision and recall, false positives per 100 documents;
   for `dev` (the rules were tuned on it) and `heldout` (its own templates, scored once, at the end).
2. Real documents with no labels (tests/fixtures/texts/real_texts.jsonl.gz: news and blog article
   bodies, forum threads, Python files of TheAlgorithms, MATH and GSM8K problems; and 400 modules of
   this interpreter's standard library): matches per kind per 100 documents, and the first few of
   each, masked, to look at.
3. Throughput: documents per CPU-second of the stage's process() on the real documents, the stage
   of commit 50dbfdb (loaded from git) and today's, in one run.

Baseline: the patterns and the card check of `filters/pii.py` as of commit 50dbfdb (before this
issue), copied below, applied in the same order (a later kind does not take a span an earlier one
took), on all text (the old stage had no code rules).

Run:  python benchmarks/pii.py    (writes benchmarks/results/pii.json)
"""
from __future__ import annotations

import gzip
import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = REPO / "tests" / "fixtures"
RESULTS = HERE / "results" / "pii.json"

# ---- the detector before issue 46 (filters/pii.py @ 50dbfdb) --------------------------------------

OLD_PATTERNS = {
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "api_key": (r"\b(?:AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|xox[abprs]-[A-Za-z0-9-]{10,}"
                r"|AIza[0-9A-Za-z_\-]{35}|sk_live_[0-9A-Za-z]{20,}|sk-[A-Za-z0-9_\-]{32,}"
                r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"),
    "secret": (r"(?i)\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|password|passwd)\b"
               r"(\s*[:=]\s*[\"']?)[A-Za-z0-9_\-/+.]{12,}"),
    "email": r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b",
    "ip": r"\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b",
    "phone": r"(?:\+\d{1,3}[\s.\-]?)?(?:\(\d{2,4}\)|\b\d{3})[\s.\-]\d{3}[\s.\-]\d{4}\b",
}
OLD_CARD = r"\b(?:\d[ \-]?){12,18}\d\b"
OLD_SKIP_IPS = ("127.0.0.1", "0.0.0.0", "255.255.255.255")


def old_detect(row: dict) -> list[tuple[str, int, int]]:
    from assay.filters.pii import luhn_ok

    text, spans = row["text"], []

    def free(a, b):
        return not any(s < b and a < e for _, s, e in spans)

    for kind, pattern in OLD_PATTERNS.items():
        for m in re.finditer(pattern, text):
            a = m.end(1) if kind == "secret" else m.start()
            if kind == "ip" and m.group(0) in OLD_SKIP_IPS:
                continue
            if free(a, m.end()):
                spans.append((kind, a, m.end()))
    for m in re.finditer(OLD_CARD, text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and luhn_ok(digits) and free(m.start(), m.end()):
            spans.append(("card", m.start(), m.end()))
    return spans


def new_detect(row: dict) -> list[tuple[str, int, int]]:
    from assay.filters.pii_detect import find

    code = row.get("suffix") if row.get("content_type") == "code" else None
    return [(f.kind, f.start, f.end) for f in find(row["text"], code_suffix=code)]


def labelled(split: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "pii" / f"{split}.jsonl").open(encoding="utf-8")]


def labelled_section(splits=("dev", "heldout")) -> dict:
    from assay.filters.pii_eval import score

    out = {}
    for split in splits:
        rows = labelled(split)
        out[split] = {"before": score(rows, old_detect, keep_examples=5), "after": score(rows, new_detect, keep_examples=5)}
        for side in ("before", "after"):
            s = out[split][side]
            print(split, side, "FP/100 docs", s["fp_per_100_docs"], {k: (s[k]["precision"], s[k]["recall"])
                                                                     for k in ("email", "phone", "ip", "card", "api_key", "secret", "private_key")}, flush=True)
    return out


def real_docs() -> list[dict]:
    with gzip.open(FIXTURES / "texts" / "real_texts.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    for i, row in enumerate(rows):
        row["id"] = f"real-{i}"
        if row["source"] == "code":
            row["content_type"], row["suffix"] = "code", ".py"
    return rows


def stdlib_docs(limit: int = 400) -> list[dict]:
    """The first `limit` modules of this interpreter's standard library, as code documents: real code
    with its authors' addresses, version strings, OIDs, test vectors and big constants."""
    import sysconfig

    paths = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    paths = [p for p in paths if "site-packages" not in p.parts][:limit]
    return [{"id": str(p), "source": "stdlib", "text": p.read_text(encoding="utf-8", errors="replace"),
             "content_type": "code", "suffix": ".py"} for p in paths]


def _masked(text: str, a: int, b: int) -> str:
    from assay.filters.pii_detect import shape

    return (text[max(0, a - 40):a] + "[" + shape(text[a:b]) + "]" + text[b:b + 20]).replace("\n", " ")


def real_section() -> dict:
    rows = real_docs() + stdlib_docs()
    by_source: dict[str, int] = {}
    for r in rows:
        by_source[r["source"]] = by_source.get(r["source"], 0) + 1
    out = {"documents": len(rows), "by_source": by_source}
    for side, detect in (("before", old_detect), ("after", new_detect)):
        counts: dict[str, int] = {}
        seen: dict[str, list] = {}
        for row in rows:
            for kind, a, b in detect(row):
                counts[kind] = counts.get(kind, 0) + 1
                if len(seen.setdefault(kind, [])) < 12:
                    seen[kind].append(f"{row['source']}: {_masked(row['text'], a, b)}")
        out[side] = {"matches": dict(sorted(counts.items())),
                     "per_100_docs": {k: round(100 * v / len(rows), 2) for k, v in sorted(counts.items())},
                     "first_matches_masked": seen}
        print("real", side, out[side]["matches"], flush=True)
    return out


BASE = "50dbfdb"  # the commit before issue 46's PII work


def old_stage_class():
    """filter.pii's stage class as of BASE, loaded from git (None outside a git checkout)."""
    import subprocess
    import types

    done = subprocess.run(["git", "-C", str(REPO), "show", f"{BASE}:filters/pii.py"], capture_output=True, text=True)
    if done.returncode:
        return None
    module = types.ModuleType("assay.filters._pii_before")
    module.__package__ = "assay.filters"
    sys.modules[module.__name__] = module  # pydantic resolves the params' annotations through it
    exec(compile(done.stdout.replace('@register("filter.pii")\n', ""), f"{BASE}:filters/pii.py", "exec"), module.__dict__)
    return module.Pii


def throughput_section(repeats: int = 3) -> dict:
    """Both stages' process() on the same table of the real documents, in one run: documents per
    CPU-second (the best of `repeats`)."""
    from assay.filters.pii import Pii
    from assay.pipeline.schema import make_docs

    rows = real_docs()
    table = make_docs([{"text": r["text"], "source": r["source"], "content_type": r.get("content_type", "web"),
                        "meta": {"suffix": r["suffix"]} if r.get("suffix") else None} for r in rows])
    stages = {"after": Pii({})}
    before = old_stage_class()
    if before is not None:
        stages["before"] = before({})
    best = {}
    for side, stage in sorted(stages.items(), reverse=True):
        times = []
        for _ in range(repeats):
            started = time.process_time()
            stage.process(table)
            times.append(time.process_time() - started)
        best[side] = min(times)
    out = {"documents": len(rows), "mb": round(sum(len(r["text"].encode()) for r in rows) / 2**20, 2),
           "cpu_seconds": {k: round(v, 3) for k, v in best.items()},
           "docs_per_cpu_second": {k: round(len(rows) / v) for k, v in best.items()}}
    if "before" in best:
        out["after_over_before_speed"] = round(best["before"] / best["after"], 3)
    print("throughput", out, flush=True)
    return out


def main(argv: list[str]) -> None:
    splits = ("dev",) if "--dev" in argv else ("dev", "heldout")
    result = {"labelled": labelled_section(splits)}
    if "--dev" not in argv:
        result["real"] = real_section()
        result["throughput"] = throughput_section()
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {RESULTS}")
    else:
        print(json.dumps(result["labelled"]["dev"], indent=1, ensure_ascii=False)[:20000])


if __name__ == "__main__":
    main(sys.argv[1:])
