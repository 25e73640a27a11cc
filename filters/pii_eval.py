"""Scoring a PII detector against labelled documents (tests/fixtures/pii/: {"text", "pii": [[kind,
value], ...]} per document): per kind, the labelled occurrences found and missed, and the spans found
that are no labelled occurrence (false positives), with false positives per 100 documents.

A labelled occurrence counts as found when a detected span overlaps it and is of its kind, or of the
same family: API keys, secrets and private keys are one family (a token assigned to `api_key` is
as rightly redacted as either). A detected span that overlaps no labelled occurrence of its family
is a false positive, counted under the kind the detector gave it.
"""
from __future__ import annotations

from typing import Callable, Iterable

KINDS = ("email", "phone", "ip", "card", "api_key", "secret", "private_key")
FAMILY = {"api_key": "key", "secret": "key", "private_key": "key"}

Span = tuple[str, int, int]  # kind, start, end


def family(kind: str) -> str:
    return FAMILY.get(kind, kind)


def occurrences(text: str, labels: Iterable[tuple[str, str]]) -> list[Span]:
    out = []
    for kind, value in labels:
        at = text.find(value)
        while at >= 0:
            out.append((kind, at, at + len(value)))
            at = text.find(value, at + 1)
    return out


def score(rows: list[dict], detect: Callable[[dict], list[Span]], keep_examples: int = 0) -> dict:
    """Per kind {tp, fn, fp, precision, recall}, and over all kinds, with false positives per 100
    documents; `keep_examples` of each kind's false positives and misses as (id, context)."""
    tally = {k: {"tp": 0, "fn": 0, "fp": 0} for k in KINDS}
    fps: dict[str, list] = {k: [] for k in KINDS}
    misses: dict[str, list] = {k: [] for k in KINDS}
    for row in rows:
        text = row["text"]
        truth = occurrences(text, row.get("pii") or ())
        found = detect(row)
        for kind, a, b in truth:
            hit = any(family(k) == family(kind) and s < b and a < e for k, s, e in found)
            tally[kind]["tp" if hit else "fn"] += 1
            if not hit and len(misses[kind]) < keep_examples:
                misses[kind].append((row["id"], text[max(0, a - 40):b + 20]))
        for kind, s, e in found:
            if not any(family(k) == family(kind) and a < e and s < b for k, a, b in truth):
                tally[kind]["fp"] += 1
                if len(fps[kind]) < keep_examples:
                    fps[kind].append((row["id"], text[max(0, s - 40):e + 20]))
    out = {}
    for kind, t in tally.items():
        out[kind] = dict(t, precision=_ratio(t["tp"], t["tp"] + t["fp"]), recall=_ratio(t["tp"], t["tp"] + t["fn"]))
    total = {key: sum(t[key] for t in tally.values()) for key in ("tp", "fn", "fp")}
    out["all"] = dict(total, precision=_ratio(total["tp"], total["tp"] + total["fp"]),
                      recall=_ratio(total["tp"], total["tp"] + total["fn"]))
    out["documents"] = len(rows)
    out["fp_per_100_docs"] = round(100 * total["fp"] / max(len(rows), 1), 2)
    if keep_examples:
        out["false_positives"] = {k: v for k, v in fps.items() if v}
        out["misses"] = {k: v for k, v in misses.items() if v}
    return out


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None
