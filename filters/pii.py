"""PII and secrets: find e-mail addresses, phone numbers, IP addresses, payment card numbers (Luhn
checked), API keys and tokens, and private keys; replace each with a typed placeholder (`<EMAIL>`,
`<PHONE>`, ...) or only count them. Counts per type go to the statistics and a `pii_counts` column.

Every pattern but the card check runs as one RE2 pass over the batch; card candidates are few, so only
documents holding one go through Python for the Luhn sum.
"""
from __future__ import annotations

import re
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T

# Order matters: keys and tokens before the generic patterns that would eat parts of them.
PATTERNS: dict[str, str] = {
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
CARD = r"\b(?:\d[ \-]?){12,18}\d\b"
TYPES = ("private_key", "api_key", "secret", "email", "ip", "phone", "card")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class PiiParams(Params):
    types: list[str] = Field(default_factory=lambda: list(TYPES), description=f"What to find: {', '.join(TYPES)}")
    mode: Literal["redact", "count"] = Field("redact", description="redact: replace with <TYPE> placeholders; count: leave text as is")
    skip_ips: list[str] = Field(default_factory=lambda: ["127.0.0.1", "0.0.0.0", "255.255.255.255"],
                                description="Addresses that are not personal (kept as they are)")

    @field_validator("types")
    @classmethod
    def _types(cls, v: list[str]) -> list[str]:
        bad = sorted(set(v) - set(TYPES))
        if bad:
            raise ValueError(f"unknown PII types {bad}; known: {', '.join(TYPES)}")
        return v


def redact(text: pa.Array, types: list[str], mode: str = "redact", skip_ips=()) -> tuple[pa.Array, dict[str, np.ndarray]]:
    counts: dict[str, np.ndarray] = {}
    for kind, pattern in PATTERNS.items():
        if kind not in types:
            continue
        n = T.count(text, pattern)
        if kind == "ip" and skip_ips:
            for ip in skip_ips:
                n -= T.count(text, r"\b" + re.escape(ip) + r"\b")
        counts[kind] = np.maximum(n, 0)
        if mode == "redact" and n.any():
            if kind == "secret":  # keep the key name and separator, hide the value
                text = _python_sub(text, re.compile(pattern), lambda m: m.group(0)[: m.end(1) - m.start(0)] + "<SECRET>")
            elif kind == "ip" and skip_ips:
                keep = set(skip_ips)
                text = _python_sub(text, re.compile(pattern), lambda m: m.group(0) if m.group(0) in keep else "<IP>")
            else:
                text = pc.replace_substring_regex(text, pattern, f"<{kind.upper()}>")
    if "card" in types:
        counts["card"], text = _cards(text, mode == "redact")
    return text, counts


def _python_sub(text: pa.Array, regex: re.Pattern, fn) -> pa.Array:
    """Python re.sub on the rows holding a match only, for substitutions that decide per match (the
    patterns are written in the syntax RE2 and Python share)."""
    rows = np.flatnonzero(T._np(pc.match_substring_regex(text, regex.pattern)))
    if not len(rows):
        return text
    values = text.to_pylist()
    for i in rows:
        values[i] = regex.sub(fn, values[i])
    return pa.array(values, pa.string())


def _cards(text: pa.Array, redact_them: bool) -> tuple[np.ndarray, pa.Array]:
    counts = np.zeros(len(text))
    rows = np.flatnonzero(T._np(pc.match_substring_regex(text, CARD)))
    if not len(rows):
        return counts, text
    regex = re.compile(CARD)
    values = text.to_pylist()
    for i in rows:
        found = 0

        def sub(m: re.Match) -> str:
            nonlocal found
            digits = re.sub(r"\D", "", m.group(0))
            if 13 <= len(digits) <= 19 and luhn_ok(digits):
                found += 1
                return "<CARD>"
            return m.group(0)

        new = regex.sub(sub, values[i])
        counts[i] = found
        if redact_them:
            values[i] = new
    return counts, (pa.array(values, pa.string()) if redact_them else text)


@register("filter.pii")
class Pii(MapStage):
    """Find e-mails, phone numbers, IP addresses, card numbers (Luhn-checked), API keys/tokens,
    secrets assigned in code and private keys; replace them with <EMAIL>, <PHONE>, <IP>, <CARD>,
    <API_KEY>, <SECRET>, <PRIVATE_KEY> (mode redact) or only count them (mode count).

    Adds `pii_counts` (a map type -> count, only types found) and `pii_total`; drops nothing.

    Example: assay filter pii runs/x/clean runs/x/redacted --types email --types phone
    """

    Params = PiiParams
    columns = {"pii_counts": pa.map_(pa.string(), pa.int32()), "pii_total": pa.int32()}

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        text, counts = redact(T.text_column(table), p.types, p.mode, p.skip_ips)
        if p.mode == "redact":
            table = set_column(table, "text", text)
        kinds = list(counts)
        matrix = np.stack([counts[k] for k in kinds], axis=1).astype(np.int32) if kinds else np.zeros((table.num_rows, 0), np.int32)
        rows, cols = np.nonzero(matrix)
        offsets = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=table.num_rows)))).astype(np.int32)
        keys = pa.array(np.array(kinds, dtype=object)[cols] if len(cols) else [], pa.string())
        items = pa.array(matrix[rows, cols], pa.int32())
        table = set_column(table, "pii_counts", pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items))
        table = set_column(table, "pii_total", pa.array(matrix.sum(axis=1).astype(np.int32), pa.int32()))
        for k in kinds:
            self.stats.count(f"pii.{k}", int(counts[k].sum()))
            self.stats.count(f"pii_docs.{k}", int((counts[k] > 0).sum()))
        return with_rejects(table, [None] * table.num_rows)
