"""Corpora of different kinds, built from what this machine has, for the trainer's known-order and
ranking benchmarks (`benchmarks/trainer.py --corpora`, `benchmarks/ranking.py`; the leading underscore keeps
`make bench` from running it as a benchmark). None of them was used to choose
the known-order protocol (that was the stdlib reference and docstrings of `trainer/known_order.py`).

* `news`: the article bodies of the article-extraction benchmark (news and blog posts) in Latin
  script, one document per article (../shared/data/extraction/aeb);
* `code`: the Python standard library's own source (tests excluded), files cut at blank lines into
  documents of about 4 KB;
* `multilingual`: main-content text of the magic-html article and forum pages and the aeb articles
  whose letters are mostly not Latin (Chinese, Japanese, Korean, Arabic, Cyrillic, Devanagari);
* `docs`: the long descriptions (READMEs) of the installed packages' metadata. The split kept
  unseen by the first dense + Muon protocol (run after it was frozen);
* `mixed`: news, math, multilingual and code together, for the ranking benchmark (a larger proxy
  needs more text than one small corpus holds);
* `math`: competition mathematics, problem and worked solution in LaTeX-laden prose (every third
  record of the MATH test set, ../shared/data/decontam/math). The split kept unseen by the protocol of
  issue #32's second pass: only its record count and size were looked at before that protocol was frozen.

Every corpus is a list of {doc_id, source, text}; `split` holds out every 8th document by a hash of
its id, so the held-out set is disjoint from every arm.
"""
from __future__ import annotations

import json
import sysconfig
import unicodedata
from collections import Counter
from pathlib import Path

from assay.trainer.known_order import _chunks, is_held_out

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (/work/main), or two levels up from a worktree (/work/wt/NAME).
SHARED = next((p / "shared" / "data" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
              ROOT.parent / "shared" / "data")
if not SHARED.exists():  # a worktree one level deeper than the main checkout
    SHARED = ROOT.parents[1] / "shared" / "data"
if not SHARED.exists():
    SHARED = Path("/work/shared/data")
KINDS = ("news", "code", "multilingual", "docs", "math", "mixed")
UNSEEN = "docs"  # unseen by the first dense + Muon known-order protocol and by benchmarks/ranking.py
NEVER_SEEN = "math"  # unseen by the known-order protocol of issue #32's second pass (trainer.py --only corpora)


def _script(text: str) -> str:
    letters = Counter(unicodedata.name(ch, "?").split()[0] for ch in text[:4000] if ch.isalpha())
    return letters.most_common(1)[0][0] if letters else "?"


def _aeb() -> dict[str, str]:
    truth = json.loads((SHARED / "extraction" / "aeb" / "ground-truth.json").read_text())
    return {k: v["articleBody"] for k, v in sorted(truth.items()) if v.get("articleBody")}


def news() -> list[dict]:
    return [{"doc_id": f"news/{k}", "source": "news", "text": t} for k, t in _aeb().items()
            if _script(t) == "LATIN" and len(t) >= 200]


def code(max_bytes: int = 1_000_000) -> list[dict]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    docs, total = [], 0
    for path in sorted(stdlib.glob("**/*.py")):
        rel = path.relative_to(stdlib).as_posix()
        if "test" in rel or "site-packages" in rel or "idlelib" in rel:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for i, chunk in enumerate(_chunks(text, 4000)):
            docs.append({"doc_id": f"code/{rel}/{i}", "source": "code", "text": chunk})
            total += len(chunk.encode())
        if total >= max_bytes:
            break
    return docs


def multilingual() -> list[dict]:
    docs = []
    for kind in ("article", "forum"):
        base = json.loads((SHARED / "extraction" / "magic-html" / "benchmark" / "data" / kind / "base.json").read_text())
        for key, value in sorted(base.items()):
            text = value.get("content") or ""
            if len(text) >= 200 and _script(text) != "LATIN":
                docs.append({"doc_id": f"ml/{kind}/{key}", "source": _script(text).lower(), "text": text})
    for key, text in _aeb().items():
        if _script(text) != "LATIN" and len(text) >= 200:
            docs.append({"doc_id": f"ml/aeb/{key}", "source": _script(text).lower(), "text": text})
    return docs


def docs() -> list[dict]:
    """Package READMEs from the installed distributions' metadata (the unseen corpus)."""
    from importlib.metadata import distributions

    out, seen = [], set()
    for dist in sorted(distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
        name = (dist.metadata["Name"] or "").lower()
        body = dist.metadata.get_payload() if dist.metadata else None
        if not name or name in seen or not body:
            continue
        seen.add(name)
        for i, chunk in enumerate(_chunks(str(body), 4000)):
            out.append({"doc_id": f"docs/{name}/{i}", "source": "docs", "text": chunk})
    return out


def math(every: int = 3) -> list[dict]:
    """Every `every`-th MATH test record (all seven subjects), problem then solution, one document each."""
    out = []
    with open(SHARED / "decontam" / "math" / "math_test.jsonl", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i % every == 0:
                r = json.loads(line)
                out.append({"doc_id": f"math/{r['source_path']}", "source": "math",
                            "text": f"{r['problem']}\n\n{r['solution']}"})
    return out


def mixed() -> list[dict]:
    """news, math, multilingual and 2.5 MB of code together (~4.7 MB): enough text that the ranking
    benchmark's larger proxy (4x the tiny one's 1M tokens) reads it about once, not six times as it
    read news alone. `docs` stays out: it is the known-order protocol's unseen split."""
    return news() + math() + multilingual() + code(max_bytes=2_500_000)


def stdlib() -> list[dict]:
    """The tuning corpus itself (known_order.clean_documents), for reference rows beside the others."""
    from assay.trainer.known_order import clean_documents

    return clean_documents()


def corpus(kind: str) -> list[dict]:
    return {"news": news, "code": code, "multilingual": multilingual, "docs": docs, "math": math,
            "mixed": mixed, "stdlib": stdlib}[kind]()


def split(documents: list[dict]) -> tuple[list[dict], list[dict]]:
    """(training pool, held-out documents)."""
    return ([d for d in documents if not is_held_out(d["doc_id"])],
            [d for d in documents if is_held_out(d["doc_id"])])
