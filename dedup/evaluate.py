"""Measure near-dup quality on a corpus with planted near-duplicates at known edit rates.

`plant` takes real, mutually distinct texts and adds edited copies: each word is, with probability
`rate`, replaced by a corpus word, deleted, or followed by an inserted corpus word. `distinct_texts`
makes the base set mutually distinct first (exact all-pairs Jaccard via a sparse product), so every
pair that a dedup run groups across different originals is a real false positive.

`score` compares predicted groups with the truth: recall per edit rate and for pairs whose exact
shingle Jaccard is >= 0.8, and pair precision over every pair a predicted group implies.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .shingles import jaccard, shingle_sets


def distinct_texts(texts: list[str], ngram: int = 5, max_jaccard: float = 0.3, min_shingles: int = 20) -> list[str]:
    """Greedy subset of `texts` (in order) whose shingle sets pairwise have Jaccard < max_jaccard."""
    from scipy import sparse

    sets = shingle_sets(pa.array(texts, pa.string()), ngram)
    keep_idx = [i for i, s in enumerate(sets) if len(s) >= min_shingles]
    sets = [sets[i] for i in keep_idx]
    if not sets:
        return []
    vocab, inverse = np.unique(np.concatenate(sets), return_inverse=True)
    rows = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    x = sparse.csr_matrix((np.ones(len(rows), np.int32), (rows, inverse)), shape=(len(sets), len(vocab)))
    inter = sparse.triu(x @ x.T, k=1).tocoo()
    sizes = np.array([len(s) for s in sets])
    jac = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    dropped: set[int] = set()
    for i, j, _ in sorted(zip(inter.row.tolist(), inter.col.tolist(), jac.tolist())):
        if _ >= max_jaccard and i not in dropped:
            dropped.add(j)
    return [texts[keep_idx[k]] for k in range(len(sets)) if k not in dropped]


def edit_words(text: str, rate: float, vocab: list[str], rng: np.random.Generator) -> str:
    words = text.split()
    out: list[str] = []
    draws = rng.random(len(words))
    ops = rng.integers(0, 3, len(words))
    picks = rng.integers(0, len(vocab), len(words))
    for w, d, op, pick in zip(words, draws, ops, picks):
        if d >= rate:
            out.append(w)
        elif op == 0:  # substitute
            out.append(vocab[pick])
        elif op == 1:  # insert after
            out.extend([w, vocab[pick]])
        # op == 2: delete
    return " ".join(out)


@dataclass
class Planted:
    texts: list[str]
    origin: np.ndarray  # index of the base document each text comes from
    rate: np.ndarray  # edit rate of the copy; NaN for base documents


def plant(base: list[str], rates: list[float], copies_per_rate: int, seed: int = 0) -> Planted:
    """Base texts plus `copies_per_rate` edited copies per rate, each of a different base document,
    shuffled together (deterministic in `seed`)."""
    rng = np.random.default_rng(seed)
    vocab = sorted({w for t in base[:2000] for w in t.split()})
    texts, origin, rate = list(base), list(range(len(base))), [np.nan] * len(base)
    for r in rates:
        chosen = rng.choice(len(base), size=min(copies_per_rate, len(base)), replace=False)
        for i in chosen.tolist():
            texts.append(edit_words(base[i], r, vocab, rng))
            origin.append(i)
            rate.append(r)
    order = rng.permutation(len(texts))
    return Planted([texts[i] for i in order], np.asarray(origin)[order], np.asarray(rate, dtype=float)[order])


def score(planted: Planted, groups: list[str], ngram: int = 5, segmented: bool = False) -> dict:
    """Recall per edit rate (copy grouped with its original), recall for pairs with Jaccard >= 0.8
    (of shingles as the stage made them: `segmented` or not), and pair precision (fraction of
    implied same-group pairs that share an origin)."""
    groups = list(groups)
    base_pos = {int(o): i for i, (o, r) in enumerate(zip(planted.origin, planted.rate)) if np.isnan(r)}
    copies = [i for i, r in enumerate(planted.rate) if not np.isnan(r)]
    pair_a = [base_pos[int(planted.origin[i])] for i in copies]
    texts = pa.array(planted.texts, pa.string())
    sets_a = shingle_sets(texts.take(pa.array(pair_a, pa.int64())), ngram, segmented)
    sets_b = shingle_sets(texts.take(pa.array(copies, pa.int64())), ngram, segmented)
    sims = np.array([jaccard(a, b) for a, b in zip(sets_a, sets_b)])
    found = np.array([groups[a] == groups[b] for a, b in zip(pair_a, copies)])
    rates = planted.rate[copies]
    per_rate = {}
    for r in sorted(set(rates.tolist())):
        m = rates == r
        per_rate[f"{r:g}"] = {
            "pairs": int(m.sum()),
            "mean_jaccard": round(float(sims[m].mean()), 4),
            "recall": round(float(found[m].mean()), 4),
        }
    hi = sims >= 0.8
    by_group: dict[str, Counter] = defaultdict(Counter)
    for g, o in zip(groups, planted.origin.tolist()):
        by_group[g][o] += 1
    predicted = sum(sum(c.values()) * (sum(c.values()) - 1) // 2 for c in by_group.values())
    correct = sum(k * (k - 1) // 2 for c in by_group.values() for k in c.values())
    return {
        "documents": len(planted.texts),
        "per_edit_rate": per_rate,
        "pairs_jaccard_ge_0.8": int(hi.sum()),
        "recall_jaccard_ge_0.8": round(float(found[hi].mean()), 4) if hi.any() else None,
        "predicted_pairs": int(predicted),
        "precision": round(correct / predicted, 4) if predicted else 1.0,
    }


def origin_scores(origin: np.ndarray, groups) -> dict:
    """Recall (copies grouped with the document they copy) and pair precision (implied same-group
    pairs that share an origin) of dup_group values, for a corpus where origin[i] is the index of
    the document row i was copied from (its own index for an original)."""
    import pyarrow.compute as pc

    groups = pa.chunked_array([groups]) if isinstance(groups, pa.Array) else groups
    group = pc.dictionary_encode(pa.chunked_array(groups).combine_chunks()).indices.to_numpy().astype(np.int64)
    copies = np.flatnonzero(origin != np.arange(len(origin)))
    _, per_group = np.unique(group, return_counts=True)
    _, per_pair = np.unique(group * len(origin) + origin, return_counts=True)
    predicted = int((per_group * (per_group - 1) // 2).sum())
    correct = int((per_pair * (per_pair - 1) // 2).sum())
    return {"recall": round(float(np.mean(group[copies] == group[origin[copies]])), 4) if len(copies) else None,
            "precision": round(correct / predicted, 4) if predicted else 1.0,
            "planted_copies": int(len(copies)), "predicted_pairs": predicted}


def real_texts(data_dir) -> list[tuple[str, str]]:
    """(source, text) of the real documents in the project's shared data folder, in a fixed order:
    news/blog/forum article bodies, Python files, MATH problems with solutions, GSM8K problems."""
    import json
    from pathlib import Path

    root = Path(data_dir)
    out: list[tuple[str, str]] = []
    aeb = json.loads((root / "extraction/aeb/ground-truth.json").read_text())
    out += [("aeb", aeb[k]["articleBody"]) for k in sorted(aeb)]
    for kind in ("article", "forum"):
        base = json.loads((root / f"extraction/magic-html/benchmark/data/{kind}/base.json").read_text())
        out += [(f"magic-html-{kind}", base[k]["content"]) for k in sorted(base)]
    for path in sorted((root / "code/thealgorithms-python").rglob("*.py")):
        out.append(("code", path.read_text(errors="replace")))
    for line in (root / "decontam/math/math_test.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.append(("math", rec["problem"] + "\n\n" + rec["solution"]))
    for line in (root / "decontam/gsm8k/test.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.append(("gsm8k", rec["question"] + "\n\n" + rec["answer"]))
    return [(s, t) for s, t in out if t and t.strip()]
