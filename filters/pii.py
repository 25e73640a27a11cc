"""PII and secrets: find e-mail addresses, phone numbers, IP addresses, payment card numbers, API keys
and tokens, secrets assigned in code and configuration, and private keys; replace each with a typed
placeholder (`<EMAIL>`, `<PHONE>`, ...) or only count them. Counts per type go to the statistics and
a `pii_counts` column; a few masked examples per type go to the statistics for the report.

What counts as each kind, and how code is read (its string literals and comments only), is in
`pii_detect.py`: the rules read context, so version strings, section numbers, hashes, big integers
and `getpass.getpass()` are left alone (issue 46; measured in benchmarks/pii.py on a labelled set).
One RE2 pass over the batch picks the documents that hold anything a rule could take; only those
go through Python.
"""
from __future__ import annotations

import os
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from assay.pipeline.schema import loads_meta
from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T
from .pii_detect import DEFAULT_SKIP_IPS, TYPES, Found, find, luhn_ok, shape

__all__ = ["Pii", "PiiParams", "TYPES", "luhn_ok", "redact_text"]

# Per kind, RE2 patterns that match wherever that kind's rules could find something (looser than the
# rules): one vectorised pass each over the batch says which documents need which rules in Python.
CANDIDATES = {
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    "api_key": r"AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AIza|_live_|sk-|hf_|SG\.|npm_|eyJ",
    "secret": (r"(?i)(?:pass|pwd|secret|key|token|auth|dsn|credential)[\w\]\[]*[\"']?[ \t]*(?:=|:|,)[ \t]*[\"'`]?"
               r"[^\s\"'`]|://[^\s/@]*:[^\s/]{3,}@|://[0-9A-Za-z]{24,}@|(?:\s-u|--user)[ \t]|@(?:tcp|unix)\(|#[ \t]*define"),
    "email": r"[A-Za-z0-9_%+\-]@[A-Za-z0-9]",
    "ip": r"\d\.\d{1,3}\.\d{1,3}\.\d",
    "phone": (r"(?:^|[^\w+\-.])\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}|\(\d{3}\)|\d{3}[ .\-]\d{3}[ .\-]\d{4}"
              r"|(?:^|[^\w+\-.])0\d{1,4}[ \-/]\d{2}"),
    "card": r"\d(?:[ \-]?\d){12}",
}
CONTEXT = 60  # characters each side of an example


class PiiParams(Params):
    types: list[str] = Field(default_factory=lambda: list(TYPES), description=f"What to find: {', '.join(TYPES)}")
    mode: Literal["redact", "count"] = Field("redact", description="redact: replace with <TYPE> placeholders; count: leave text as is")
    skip_ips: list[str] = Field(default_factory=lambda: list(DEFAULT_SKIP_IPS),
                                description="Addresses that are not personal (kept as they are)")
    code: Literal["strings", "text", "skip"] = Field(
        "strings", description="Documents of content_type code: strings (only their string literals and comments are "
                               "searched, a secret must be a literal; languages Pygments lexes, by file suffix), text "
                               "(read as any text), skip (left as they are)")
    examples: int = Field(3, ge=0, le=20, description="Masked before/after examples kept per type for the report")

    @field_validator("types")
    @classmethod
    def _types(cls, v: list[str]) -> list[str]:
        bad = sorted(set(v) - set(TYPES))
        if bad:
            raise ValueError(f"unknown PII types {bad}; known: {', '.join(TYPES)}")
        return v


def redact_text(text: str, spans: list[Found]) -> tuple[str, list[int]]:
    """`text` with each span replaced by its placeholder, and where each placeholder starts."""
    parts, starts, at, length = [], [], 0, 0
    for f in spans:
        parts.append(text[at:f.start])
        length += f.start - at
        starts.append(length)
        placeholder = f"<{f.kind.upper()}>"
        parts.append(placeholder)
        length += len(placeholder)
        at = f.end
    parts.append(text[at:])
    return "".join(parts), starts


def example(text: str, redacted: str, spans: list[Found], starts: list[int], i: int) -> dict:
    """One span in context, from the redacted text (other spans stay placeholders): `before` shows
    the span's shape only (letters x, digits 0), `after` its placeholder."""
    f, at = spans[i], starts[i]
    placeholder = f"<{f.kind.upper()}>"
    left, right = redacted[max(0, at - CONTEXT):at], redacted[at + len(placeholder):at + len(placeholder) + CONTEXT]
    return {"before": left + shape(text[f.start:f.end]) + right, "after": left + placeholder + right}


def _suffixes(table: pa.Table, rows: np.ndarray) -> dict[int, str | None]:
    """File suffix of each code row among `rows` (meta.suffix from read.text, else the url's)."""
    metas = table.column("meta").to_pylist() if "meta" in table.column_names else None
    urls = table.column("url").to_pylist() if "url" in table.column_names else None
    out = {}
    for i in rows:
        suffix = None
        if metas and metas[i]:
            try:
                suffix = loads_meta(metas[i]).get("suffix")
            except ValueError:
                suffix = None
        if not suffix and urls and urls[i]:
            suffix = os.path.splitext(urls[i].split("?", 1)[0])[1] or None
        out[int(i)] = suffix
    return out


@register("filter.pii")
class Pii(MapStage):
    """Find e-mails, phone numbers, IP addresses, card numbers, API keys/tokens, secrets assigned in
    code and configuration, and private keys, by rules that read context (version strings, section
    numbers, hashes and big integers are not PII); in code only string literals and comments count.
    Replace them with <EMAIL>, <PHONE>, <IP>, <CARD>, <API_KEY>, <SECRET>, <PRIVATE_KEY> (mode
    redact) or only count them (mode count).

    Adds `pii_counts` (a map type -> count, only types found) and `pii_total`; drops nothing; keeps a
    few masked examples per type in the statistics (the report shows them).

    Example: assay filter pii runs/x/clean runs/x/redacted --types email --types phone --code skip
    """

    Params = PiiParams
    version = "2"  # 2: context rules, code read by its own rules (issue 46)
    columns = {"pii_counts": pa.map_(pa.string(), pa.int32()), "pii_total": pa.int32()}

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        text = T.text_column(table)
        counts = {k: np.zeros(table.num_rows, np.int32) for k in p.types}
        wanted = np.stack([T._np(pc.match_substring_regex(text, CANDIDATES[k])).astype(bool) for k in p.types], axis=1) \
            if p.types else np.zeros((table.num_rows, 0), bool)
        rows = np.flatnonzero(wanted.any(axis=1))
        code = np.zeros(table.num_rows, bool)
        if "content_type" in table.column_names:
            code = T._np(pc.fill_null(pc.equal(table.column("content_type"), "code"), False)).astype(bool)
        if p.code == "skip":
            rows = rows[~code[rows]]
        suffixes = _suffixes(table, rows[code[rows]]) if p.code == "strings" else {}
        values = text.to_pylist() if len(rows) else []
        changed = False
        for i in rows:
            original = values[i]
            kinds = [k for k, w in zip(p.types, wanted[i]) if w]
            spans = find(original, kinds, p.skip_ips, code_suffix=suffixes.get(int(i)))
            if not spans:
                continue
            redacted, starts = redact_text(original, spans)
            for j, f in enumerate(spans):
                counts[f.kind][i] += 1
                if p.examples and self.stats.wants_sample(f"pii.{f.kind}", p.examples):
                    self.stats.sample(f"pii.{f.kind}", example(original, redacted, spans, starts, j), p.examples)
            if p.mode == "redact":
                values[i] = redacted
                changed = True
        self.stats.count("pii_code_docs", int(code.sum()) if p.code == "strings" else 0)
        if changed:
            table = set_column(table, "text", pa.array(values, pa.string()))
        kinds = list(counts)
        matrix = np.stack([counts[k] for k in kinds], axis=1) if kinds else np.zeros((table.num_rows, 0), np.int32)
        nz_rows, cols = np.nonzero(matrix)
        offsets = np.concatenate(([0], np.cumsum(np.bincount(nz_rows, minlength=table.num_rows)))).astype(np.int32)
        keys = pa.array(np.array(kinds, dtype=object)[cols] if len(cols) else [], pa.string())
        items = pa.array(matrix[nz_rows, cols], pa.int32())
        table = set_column(table, "pii_counts", pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items))
        table = set_column(table, "pii_total", pa.array(matrix.sum(axis=1).astype(np.int32), pa.int32()))
        for k in kinds:
            self.stats.count(f"pii.{k}", int(counts[k].sum()))
            self.stats.count(f"pii_docs.{k}", int((counts[k] > 0).sum()))
        return with_rejects(table, [None] * table.num_rows)
