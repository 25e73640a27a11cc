"""What a cluster is about, for a person reading the cluster table: its most distinctive words
(tf-idf over clusters) and the titles of the sampled documents nearest its centroid."""
from __future__ import annotations

import re

import numpy as np

_WORD = re.compile(r"[^\W\d_]{3,}")
STOPWORDS = frozenset("""
the and for are but not you all any can had her was one our out has him his how its may new now old see two
who boy did she use way many then them these some would make like into time very when come could more that
this with from have they will your what about which their there been were said each other than first water
also after back only most over such where just where those being because does should here through while
between both under again never same another well must even much what why self none true false return def
import class print else elif from while pass""".split())


def title(text: str, width: int = 90) -> str:
    """The first line with a word in it, cut to `width` characters."""
    for line in (text or "").splitlines():
        line = line.strip()
        if _WORD.search(line):
            return line if len(line) <= width else line[: width - 1] + "…"
    return ""


def top_terms(snippets: list[str], cluster: np.ndarray, k: int, n_terms: int) -> list[list[str]]:
    """The `n_terms` words with the highest tf-idf per cluster (tf: documents of the cluster using
    the word; idf over clusters), from short snippets of sampled documents."""
    vocab: dict[str, int] = {}
    pair_doc, pair_term = [], []
    for d, text in enumerate(snippets):
        for word in sorted({w.lower() for w in _WORD.findall(text or "")} - STOPWORDS):  # sorted: same ids every run
            pair_doc.append(d)
            pair_term.append(vocab.setdefault(word, len(vocab)))
    out: list[list[str]] = [[] for _ in range(k)]
    if not pair_doc:
        return out
    words = np.array(list(vocab), dtype=object)
    key = cluster[np.array(pair_doc)].astype(np.int64) * len(vocab) + np.array(pair_term)
    pairs, tf = np.unique(key, return_counts=True)
    c, t = pairs // len(vocab), pairs % len(vocab)
    df = np.bincount(t, minlength=len(vocab))
    score = tf * np.log((len(np.unique(c)) + 1) / df[t])
    order = np.lexsort((-score, c))
    c, t = c[order], t[order]
    starts = np.searchsorted(c, np.arange(k))
    ends = np.searchsorted(c, np.arange(k), side="right")
    for cl in range(k):
        out[cl] = [str(w) for w in words[t[starts[cl]:min(ends[cl], starts[cl] + n_terms)]]]
    return out
