"""Real text for the semantic tests, from the repository alone: the sample corpus (examples/sample) and
the benchmark registry shipped with the decontamination stage."""
from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample"


@lru_cache(maxsize=None)
def code_files() -> tuple[str, ...]:
    """TheAlgorithms Python files of the sample corpus, in path order."""
    return tuple(p.read_text(encoding="utf-8", errors="replace") for p in sorted((SAMPLE / "code").rglob("*.py")))


@lru_cache(maxsize=None)
def web_pages() -> tuple[str, ...]:
    """Main text of the sample HTML pages (news, blogs, forums), in file order."""
    from resiliparse.extract.html2text import extract_plain_text

    texts = []
    for path in sorted((SAMPLE / "html").glob("*.html.gz")):
        html = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        text = extract_plain_text(html, main_content=True)
        if len(text) > 400:
            texts.append(text)
    return tuple(texts)


@lru_cache(maxsize=None)
def benchmark(name: str) -> tuple[tuple[str, str], ...]:
    """(item id, text) of one benchmark of the shipped registry."""
    from assay.semantic.decontam.registry import load_items, load_registry

    registry, base = load_registry()
    items = load_items(registry, base, only=[name])
    return tuple(zip(items.ids, items.texts))


def topic_corpus(per_topic: int = 30) -> tuple[list[str], list[str]]:
    """(texts, topic) of documents whose topic is known: Python code, GitHub issues, grade-school
    word problems, competition math, and news/blog pages."""
    topics = {
        "code": [t[:1500] for t in code_files()[:per_topic]],
        "issue": [t for _, t in benchmark("swebench-lite")[:per_topic]],
        "word-problem": [t for _, t in benchmark("gsm8k")[:per_topic]],
        "math": [t for _, t in benchmark("math")[:per_topic]],
        "web": [t[:1500] for t in web_pages()[:per_topic]],
    }
    texts, labels = [], []
    for label, docs in topics.items():
        texts += docs
        labels += [label] * len(docs)
    return texts, labels
