"""Realistic contamination, for measuring decontamination: a benchmark item as it turns up in crawled
data. Every function is deterministic for a given `rng` (numpy Generator).

* `embed_in`: the item inside a longer document, between paragraphs of other text;
* `change_numbers`: every number replaced by another (a "new" problem with the same words);
* `reflow`: line breaks moved, spaces doubled, case changed, punctuation and quotes altered;
* `markup`: the item as an HTML fragment (tags, entities) or Markdown (emphasis, list markers);
* `paraphrase`: light rewording: about one word in `every` replaced by a synonym or dropped, and
  filler words inserted, which breaks long n-grams the way a human or LLM rewrite does;
* `in_code_file`: a code item (a function prompt) among other functions of a source file.
"""
from __future__ import annotations

import re

import numpy as np

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[A-Za-z]+")
SYNONYMS = {
    "find": "determine", "compute": "calculate", "total": "overall", "many": "several", "each": "every",
    "buys": "purchases", "sells": "markets", "makes": "earns", "number": "count", "what": "which",
    "how": "in what way", "people": "persons", "money": "cash", "day": "daily period", "week": "seven days",
    "bought": "purchased", "gave": "handed", "more": "additional", "than": "compared to", "has": "owns",
    "value": "amount", "given": "provided", "following": "next", "which": "what", "if": "when",
    "the": "this", "is": "equals", "are": "become", "of": "from", "and": "plus", "in": "within",
    "to": "towards", "for": "regarding", "with": "using", "she": "the woman", "he": "the man",
}
FILLERS = ["actually", "then", "now", "also", "so", "indeed", "basically"]


def embed_in(item: str, before: list[str], after: list[str]) -> str:
    """The item as one paragraph among others."""
    return "\n\n".join([*before, item, *after])


def change_numbers(text: str, rng: np.random.Generator) -> str:
    def other(m: re.Match) -> str:
        old = m.group(0)
        new = str(int(rng.integers(2, 999)))
        return new if new != old else str(int(new) + 1)

    return _NUMBER.sub(other, text)


def reflow(text: str, rng: np.random.Generator) -> str:
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < 0.1:
            w = w.upper()
        elif r < 0.2:
            w = w.capitalize()
        elif r < 0.3:
            w = w.lower()
        w = w.replace('"', "\u201c").replace("'", "\u2019") if rng.random() < 0.5 else w
        w = w.rstrip(",;") if rng.random() < 0.5 else w
        if rng.random() < 0.05:
            w += ","
        out.append(w)
        out.append("\n" if rng.random() < 0.12 else ("  " if rng.random() < 0.2 else " "))
    return "".join(out).strip()


def markup(text: str, rng: np.random.Generator) -> str:
    sentences = re.split(r"(?<=[.?!])\s+", text)
    if rng.random() < 0.5:  # HTML
        parts = []
        for s in sentences:
            s = _WORD.sub(lambda m: f"<b>{m.group(0)}</b>" if rng.random() < 0.08 else m.group(0), s)
            s = re.sub(r"\s+", lambda m: "&nbsp;" if rng.random() < 0.1 else " ", s)
            parts.append(f"<p class=\"q\">{s}</p>")
        return "<div>" + "\n".join(parts) + "</div>"
    parts = []
    for s in sentences:
        s = _WORD.sub(lambda m: f"**{m.group(0)}**" if rng.random() < 0.08 else m.group(0), s)
        parts.append(("- " if rng.random() < 0.3 else "") + s)
    return "## Problem\n\n" + "\n".join(parts)


def paraphrase(text: str, rng: np.random.Generator, every: int = 6) -> str:
    words = text.split(" ")
    out = []
    for i, w in enumerate(words):
        key = w.lower().strip(".,?!;:")
        if i % every == every // 2:
            r = rng.random()
            if key in SYNONYMS and r < 0.7:
                w = w.lower().replace(key, SYNONYMS[key], 1)
            elif r < 0.85:
                out.append(FILLERS[int(rng.integers(len(FILLERS)))])
            else:
                continue  # dropped
        out.append(w)
    return " ".join(out)


def in_code_file(item: str, other_code: list[str]) -> str:
    """A function prompt placed between other functions of a module, with a module docstring."""
    head = '"""Utility functions collected from several places."""\nimport math\n\n\n'
    half = len(other_code) // 2
    return head + "\n\n".join([*other_code[:half], item.rstrip() + "\n    pass\n", *other_code[half:]])
