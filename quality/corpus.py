"""Contrast sets for training and judging scorers, built from real pages: the main content of a page
(a benchmark's ground truth) is `clean`; the same page's full text with menus, footers and link lists
(`full`), its words shuffled (`shuffled`) and keyword spam made from its own vocabulary (`spam`) are
junk. Pages are split by a hash of their id, so a page and its variants never straddle two splits.

`python -m assay.quality.corpus OUT_DIR` rebuilds the committed training and calibration sets
(quality/data/) from ../shared/data (aeb and magic-html article pages); the test split is never
written there.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import re
from pathlib import Path
from typing import Iterator

from assay.pipeline.dataset import atomic_write_bytes

KINDS = ("clean", "full", "shuffled", "spam")
_SPLITS = {"train": range(0, 6), "calib": range(6, 8), "test": range(8, 10)}
_SPAM_FILLERS = [
    "best {a} {b}", "buy {a} online", "cheap {a} {b} deals", "{a} {b} {c}", "top 10 {a}", "{a} near me",
    "free {a} {b} download", "{a} reviews", "official {a} {b} site", "{a} {b} price", "{a} for sale", "{a} {c} 2024",
]
_STOP = set("the a an and or of to in on for with is are was were be been by at as it its this that from "
            "have has had not but they their he she his her we you i our your will would can could".split())


def split_of(page_id: str, forced_test: frozenset[str] = frozenset()) -> str:
    if page_id in forced_test:
        return "test"
    bucket = int(hashlib.sha256(page_id.encode()).hexdigest(), 16) % 10
    return next(name for name, r in _SPLITS.items() if bucket in r)


def full_text(html: str) -> str:
    """Everything a reader of the page sees as text: navigation, link lists, footers included."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=False, alt_texts=False, links=False, list_bullets=True,
                              preserve_formatting=True, skip_elements=["script", "style", "noscript"])


# Characters of scripts written without spaces: a "word" of their text is one character
_UNSPACED = "\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_UNITS = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")
_IS_UNSPACED = re.compile(f"[{_UNSPACED}]")


def _join(units: list[str]) -> str:
    """Units back into a line: a space between two words, none next to a character of an unspaced script."""
    out = ""
    for u in units:
        if out and not (_IS_UNSPACED.match(u) or _IS_UNSPACED.match(out[-1])):
            out += " "
        out += u
    return out


def shuffled(text: str, rng: random.Random) -> str:
    """The same words (characters, in Chinese, Japanese or Thai) in random order; line breaks stay where
    they were."""
    lines = [_UNITS.findall(line) for line in text.split("\n")]
    units = [u for line in lines for u in line]
    rng.shuffle(units)
    out, i = [], 0
    for line in lines:
        out.append(_join(units[i:i + len(line)]))
        i += len(line)
    return "\n".join(out)


def keywords(text: str, k: int = 12) -> list[str]:
    """The page's most frequent words of four letters or more (in unspaced scripts: character pairs)."""
    counts: dict[str, int] = {}
    lower = text.lower()
    found = [w for w in re.findall(r"[^\W\d_][\w\-]{3,}", lower) if not _IS_UNSPACED.search(w)]
    for run in re.findall(f"[{_UNSPACED}]+", lower):
        found += [run[i:i + 2] for i in range(0, len(run) - 1, 2)]
    for w in found:
        if w not in _STOP:
            counts[w] = counts.get(w, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]] or ["page"]


def spam(text: str, rng: random.Random) -> str:
    """Keyword spam from the page's own frequent words: phrase lists, stuffed titles and a tag cloud."""
    kws = keywords(text)
    target = max(400, min(len(text), 4000))
    parts: list[str] = []
    size = 0
    while size < target:
        style = rng.random()
        if style < 0.5:
            line = " | ".join(rng.choice(_SPAM_FILLERS).format(a=rng.choice(kws), b=rng.choice(kws), c=rng.choice(kws))
                              for _ in range(rng.randint(2, 5)))
        elif style < 0.8:
            a, b = rng.sample(kws, 2) if len(kws) > 1 else (kws[0], kws[0])
            line = (f"{a.title()} {b} - the best {a} {b} and {a} deals. Looking for {a}? "
                    f"Find {a} {b}, {a} tips and cheap {b} here. {a.title()} {a} {b}!")
        else:
            line = ", ".join(rng.choice(kws) for _ in range(rng.randint(8, 20)))
        parts.append(line)
        size += len(line) + 1
    return "\n".join(parts)


def variants(page_id: str, clean: str, html: str | None) -> Iterator[tuple[str, str]]:
    rng = random.Random(page_id)
    yield "clean", clean
    if html is not None:
        full = full_text(html)
        if len(full) > len(clean) * 1.1:  # a page whose full text adds nothing is not a contrast
            yield "full", full
    yield "shuffled", shuffled(clean, rng)
    yield "spam", spam(clean, rng)


def _pages(shared: Path) -> Iterator[tuple[str, str, str, str]]:
    """(page id, url, main text, html) for the article pages of aeb and the article and forum pages of
    magic-html, in every language."""
    aeb = shared / "extraction" / "aeb"
    truth = json.loads((aeb / "ground-truth.json").read_text())
    for pid, item in sorted(truth.items()):
        path = aeb / "html" / f"{pid}.html.gz"
        if path.exists() and len(item.get("articleBody", "")) >= 500:
            yield pid, item.get("url", ""), item["articleBody"], _decode(path)
    for family in ("article", "forum"):  # forum: the posts of a thread are its main content
        magic = shared / "extraction" / "magic-html" / "benchmark" / "data" / family
        for pid, item in sorted(json.loads((magic / "base.json").read_text()).items()):
            path = magic / "htmls" / f"{pid}.html.gz"
            text = item.get("content", "")
            if path.exists() and len(text) >= 500:
                yield pid, item.get("url", ""), text, _decode(path)


def _decode(path: Path) -> str:
    from assay.extractors.html import decode_html

    return decode_html(gzip.decompress(path.read_bytes()))[0]


def build(shared: Path, forced_test: frozenset[str] = frozenset()) -> dict[str, list[dict]]:
    """Rows {page, split, kind, label, url, text} for every page and variant, grouped by split."""
    out: dict[str, list[dict]] = {name: [] for name in _SPLITS}
    for pid, url, clean, html in _pages(shared):
        split = split_of(pid, forced_test)
        for kind, text in variants(pid, clean, html):
            out[split].append({"page": pid, "split": split, "kind": kind, "label": int(kind == "clean"), "url": url, "text": text})
    return out


def write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    data = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows).encode()
    packed = io.BytesIO()
    # mtime=0 and a fixed name in the header: the same rows give the same bytes as the committed files
    with gzip.GzipFile(path.with_suffix(".tmp").name, "wb", 9, packed, mtime=0) as fh:
        fh.write(data)
    atomic_write_bytes(path, packed.getvalue(), fenced=False)


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def sample_page_ids(repo: Path) -> frozenset[str]:
    """Pages the bundled sample corpus holds: always test, so tests on the sample judge unseen pages."""
    return frozenset(p.name.split(".")[0] for p in (repo / "examples" / "sample" / "html").glob("*.html.gz"))


def main() -> None:
    import sys

    repo = Path(__file__).resolve().parents[1]
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else repo / "quality" / "data"
    shared = Path(sys.argv[2]) if len(sys.argv) > 2 else repo.parent / "shared" / "data"
    sets = build(shared, sample_page_ids(repo))
    for name in ("train", "calib"):
        write_jsonl_gz(out / f"contrast-{name}.jsonl.gz", sets[name])
        print(name, len(sets[name]), "rows")
    print("test (not written)", len(sets["test"]), "rows")


if __name__ == "__main__":
    main()
