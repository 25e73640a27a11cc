"""The reference corpus: documentation and explanatory prose that the reference classifier
(`reference.ftz`, DCLM-style) and the importance scorer (`dsir.npz`, DSIR) take as their target.

Target, stated: *reference-like text* — API documentation and the explanations in it (docstrings of
the Python standard library and of permissively licensed scientific packages: NumPy, SciPy, SymPy,
NetworkX, scikit-learn, pandas), and project documentation (the long descriptions of permissively
licensed packages in the virtualenv). No benchmark item, test split or evaluation set is read: the
downstream task suite's data (../shared/data/evals, decontam) is never a source.

`python -m assay.quality.reference` rebuilds quality/data/reference.jsonl.gz (and the topic tagger's
documentation seeds, topic-seeds.jsonl.gz, from its train split) from the pinned
environment (constraints.txt); build-models reads only the committed file, so the models rebuild the
same from the repository alone. Pages are a source file's docstrings (module, classes, functions, in
order) or one package's description; a hash of the page id splits train (80%) from test (20%).
"""
from __future__ import annotations

import ast
import hashlib
import re
import sysconfig
from importlib import metadata
from pathlib import Path

# Packages whose docstrings are read, and their licences (NOTICE repeats them).
DOC_PACKAGES = {"numpy": "BSD-3-Clause", "scipy": "BSD-3-Clause", "sympy": "BSD-3-Clause",
                "networkx": "BSD-3-Clause", "sklearn": "BSD-3-Clause", "pandas": "BSD-3-Clause"}
STDLIB = "PSF-2.0"
PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|PSF|Python Software Foundation|ISC)\b", re.I)
MIN_CHARS, MAX_CHARS = 600, 6_000
PAGES_PER_SOURCE = 700  # hash-chosen, so the committed file stays small


def _docstrings(path: Path) -> str:
    """A source file's docstrings, module first, each under the name it documents."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return ""
    parts = []
    doc = ast.get_docstring(tree)
    if doc:
        parts.append(doc)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 80:
                parts.append(f"{node.name}\n\n{doc}")
    return "\n\n".join(parts)[:MAX_CHARS]


def _key(page: str) -> int:
    return int(hashlib.sha256(page.encode()).hexdigest(), 16)


def split_of(page: str) -> str:
    return "test" if _key(page) % 5 == 0 else "train"


def _chosen(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: _key(r["page"]))[:PAGES_PER_SOURCE]


def pages() -> list[dict]:
    """Rows {page, split, source, licence, text}, deterministic for one environment."""
    import importlib.util

    out: list[dict] = []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    rows = []
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib).as_posix()
        if rel.startswith(("test/", "idlelib/", "lib2to3/", "site-packages/")) or "/tests/" in rel:
            continue
        text = _docstrings(path)
        if len(text) >= MIN_CHARS:
            rows.append({"page": f"stdlib/{rel}", "source": "python-stdlib", "licence": STDLIB, "text": text})
    out += _chosen(rows)
    for package, licence in DOC_PACKAGES.items():
        spec = importlib.util.find_spec(package)
        root = Path(spec.origin).parent
        rows = []
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if "tests/" in rel or "/test_" in rel:
                continue
            text = _docstrings(path)
            if len(text) >= MIN_CHARS:
                rows.append({"page": f"{package}/{rel}", "source": package, "licence": licence, "text": text})
        out += _chosen(rows)[:PAGES_PER_SOURCE // 3]
    rows = []
    for dist in metadata.distributions():
        meta = dist.metadata
        licence = " ".join([meta.get("License") or "", meta.get("License-Expression") or ""]
                           + [c for c in meta.get_all("Classifier") or [] if c.startswith("License")])
        body = (meta.get_payload() or meta.get("Description") or "").strip()
        if PERMISSIVE.search(licence) and len(body) >= MIN_CHARS and not re.search(r"\bGPL\b", licence):
            rows.append({"page": f"readme/{meta['Name'].lower()}", "source": "package-readme",
                         "licence": PERMISSIVE.search(licence).group(0), "text": body[:MAX_CHARS]})
    out += _chosen(sorted(rows, key=lambda r: r["page"]))
    for row in out:
        row["split"] = split_of(row["page"])
    return sorted(out, key=lambda r: r["page"])


SEED_PAGES = 64


def topic_seeds(rows: list[dict]) -> list[dict]:
    """Labelled examples for quality.topics: every 20th training page (by id), as documentation of
    software (topic software_dev, format documentation); the test split stays out for measuring."""
    train = sorted((r for r in rows if r["split"] == "train"), key=lambda r: r["page"])
    return [{"page": r["page"], "text": r["text"], "topic": "software_dev", "format": "documentation"}
            for r in train[::20][:SEED_PAGES]]


def main() -> None:
    import sys

    from .corpus import write_jsonl_gz

    repo = Path(__file__).resolve().parents[1]
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else repo / "quality" / "data" / "reference.jsonl.gz"
    rows = pages()
    write_jsonl_gz(out, rows)
    write_jsonl_gz(out.with_name("topic-seeds.jsonl.gz"), topic_seeds(rows))
    by = {}
    for r in rows:
        by[r["source"]] = by.get(r["source"], 0) + 1
    print(out, len(rows), "pages", by)


if __name__ == "__main__":
    main()
