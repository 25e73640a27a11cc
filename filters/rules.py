"""Thresholds over the heuristic signals: the cheap decision step after `filter.signals`.

Each rule compares one `sig_` column with a threshold. `filter.rules` writes which rules a document
hits (`rules_hit`, `rules_hit_count`) and the heuristic pass fraction `quality_heuristics`; it rejects
only when asked (`drop: true`). Rules known to misfire on mathematics and code (MiMo §2.1) are bypassed
per content type, or for documents the signals show to be math- or code-heavy.

Thresholds are per language: with a `lang` column, a row of a calibrated language takes that
language's thresholds (languages.py; calibrate.py derives them), a row of another language its
writing system's, and English and unidentified rows the published ones below.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T
from .kernels import DUP_NS, TOP_NS

# name: (signal, comparison, default threshold, family). A rule hits when `signal <op> threshold`.
RULES: dict[str, tuple[str, str, float, str]] = {
    "gopher_short_doc": ("gopher_words", "<", 50, "gopher"),
    "gopher_long_doc": ("gopher_words", ">", 100_000, "gopher"),
    "gopher_short_words": ("gopher_mean_word_len", "<", 3, "gopher"),
    "gopher_long_words": ("gopher_mean_word_len", ">", 10, "gopher"),
    "gopher_hashes": ("gopher_hash_ratio", ">", 0.1, "gopher"),
    "gopher_ellipsis": ("gopher_ellipsis_ratio", ">", 0.1, "gopher"),
    "gopher_bullets": ("gopher_bullet_lines", ">", 0.9, "gopher"),
    "gopher_end_ellipsis": ("gopher_ellipsis_lines", ">", 0.3, "gopher"),
    "gopher_alpha": ("gopher_alpha_words", "<", 0.8, "gopher"),
    "gopher_stop_words": ("gopher_stop_words", "<", 2, "gopher"),
    "rep_para": ("rep_dup_para_frac", ">", 0.3, "repetition"),
    "rep_para_chars": ("rep_dup_para_chars", ">", 0.2, "repetition"),
    "rep_line": ("rep_dup_line_frac", ">", 0.3, "repetition"),
    "rep_line_chars": ("rep_dup_line_chars", ">", 0.2, "repetition"),
    **{f"rep_top_{n}gram": (f"rep_top_{n}gram", ">", t, "repetition") for n, t in zip(TOP_NS, (0.2, 0.18, 0.16))},
    **{f"rep_dup_{n}gram": (f"rep_dup_{n}gram", ">", t, "repetition") for n, t in zip(DUP_NS, (0.15, 0.14, 0.13, 0.12, 0.11, 0.10))},
    "c4_lorem_ipsum": ("c4_lorem", ">", 0.5, "c4"),
    "c4_curly_bracket": ("c4_curly", ">", 0.5, "c4"),
    "c4_few_sentences": ("c4_sentences", "<", 5, "c4"),
    "fw_line_punct": ("fw_line_punct", "<", 0.12, "fineweb"),
    "fw_short_lines": ("fw_short_lines", ">", 0.67, "fineweb"),
    "fw_char_dups": ("fw_char_dups", ">", 0.01, "fineweb"),
    "fw_list_ratio": ("fw_newline_ratio", ">", 0.3, "fineweb"),
    # Beyond the three published sets: symbol soup and scrambled word order.
    "symbol_soup": ("symbol_ratio", ">", 0.35, "extra"),
    "word_order": ("sentence_caps", "<", 0.5, "extra"),
}
FAMILIES = ("gopher", "repetition", "c4", "fineweb", "extra")

# Rules that wrongly fire on good math and code pages: words without letters, '{', '#', '$', short
# formula lines, few "sentences", symbol-heavy text.
MATH_CODE_SENSITIVE = ["gopher_short_words", "gopher_hashes", "gopher_alpha", "gopher_bullets", "gopher_stop_words",
                       "c4_curly_bracket", "c4_few_sentences", "fw_line_punct", "fw_short_lines", "fw_list_ratio",
                       "fw_char_dups", "symbol_soup", "word_order"]


class RulesParams(Params):
    families: list[str] = Field(default_factory=lambda: list(FAMILIES), description=f"Rule families to apply: {', '.join(FAMILIES)}")
    thresholds: dict[str, float | None] = Field(default_factory=dict, description="Per-rule threshold overrides; null disables a rule")
    bypass: dict[str, list[str]] = Field(
        default_factory=lambda: {"code": ["*"], "math": list(MATH_CODE_SENSITIVE), "code_blocks": list(MATH_CODE_SENSITIVE)},
        description="Rules skipped per content type ('*' = all); 'math' and 'code_blocks' are documents whose "
                    "sig_math_density / sig_code_lines reach math_density / code_lines")
    math_density: float = Field(0.08, ge=0, description="sig_math_density at or above which a document counts as math")
    code_lines: float = Field(0.2, ge=0, le=1, description="sig_code_lines at or above which a document counts as code-heavy")
    languages: bool = Field(True, description="Per-language thresholds for rows whose `lang` column names a language "
                                              "(the calibration file's; its script's for other languages)")
    calibration: str | None = Field(None, description="Calibration file from `assay filter calibrate`; default: the "
                                                      "shipped one (filters/data/thresholds.json, 60 languages)")
    lang_column: str = Field("lang", description="Column holding each row's language (extract.lang_id writes it)")
    drop: bool = Field(False, description="Reject documents that hit a rule (reason `heuristic`, detail = the rules)")
    max_hits: int = Field(0, ge=0, description="With drop: reject only documents with more hits than this")

    @field_validator("families")
    @classmethod
    def _families(cls, v: list[str]) -> list[str]:
        bad = sorted(set(v) - set(FAMILIES))
        if bad:
            raise ValueError(f"unknown rule families {bad}; known: {', '.join(FAMILIES)}")
        return v

    @field_validator("thresholds", "bypass")
    @classmethod
    def _rules(cls, v: dict) -> dict:
        names = v if all(isinstance(x, (float, int, type(None))) for x in v.values()) else [r for rs in v.values() for r in rs]
        bad = sorted(set(names) - set(RULES) - {"*"})
        if bad:
            raise ValueError(f"unknown rules {bad}; see `assay stages filter.rules`")
        return v


def active_rules(p: RulesParams) -> dict[str, tuple[str, str, float]]:
    out = {}
    for name, (signal, op, default, family) in RULES.items():
        threshold = p.thresholds.get(name, default)
        if family in p.families and threshold is not None:
            out[name] = (signal, op, float(threshold))
    return out


def decide(table: pa.Table, p: RulesParams) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(hits: bool[docs, rules], rule names, applicable: bool[docs, rules]) from the sig_ columns."""
    hits, names, applicable, _ = decide_by_language(table, p)
    return hits, names, applicable


def decide_by_language(table: pa.Table, p: RulesParams) -> tuple[np.ndarray, list[str], np.ndarray, dict[str, np.ndarray]]:
    """decide(), and the rows of each language (empty without per-language thresholds)."""
    rules = active_rules(p)
    names = list(rules)
    n = table.num_rows
    hits = np.zeros((n, len(names)), dtype=bool)
    applicable = np.ones((n, len(names)), dtype=bool)
    thresholds = np.array([rules[name][2] for name in names], dtype=np.float64)[None, :]
    groups: dict[str, np.ndarray] = {}
    if p.languages and p.lang_column in table.column_names and names:
        from .languages import load, row_thresholds

        text = T.text_column(table) if "text" in table.column_names else None
        thresholds, disabled, groups = row_thresholds(
            load(p.calibration), table.column(p.lang_column).to_numpy(zero_copy_only=False), text, names,
            thresholds[0], {k for k, v in p.thresholds.items() if v is not None})
        applicable &= ~disabled
    for j, name in enumerate(names):
        signal, op, _ = rules[name]
        threshold = thresholds[:, j]
        values = table.column(f"sig_{signal}").to_numpy(zero_copy_only=False).astype(np.float64)
        hits[:, j] = (values < threshold) if op == "<" else (values > threshold)
    kinds = _kinds(table, p)
    for kind, skipped in p.bypass.items():
        rows = kinds.get(kind)
        if rows is None or not rows.any():
            continue
        cols = [j for j, name in enumerate(names) if "*" in skipped or name in skipped]
        applicable[np.ix_(rows, cols)] = False
    return hits & applicable, names, applicable, groups


def _kinds(table: pa.Table, p: RulesParams) -> dict[str, np.ndarray]:
    kinds: dict[str, np.ndarray] = {}
    if "content_type" in table.column_names:
        ct = table.column("content_type").to_numpy(zero_copy_only=False)
        for value in set(p.bypass) - {"math", "code_blocks"}:
            kinds[value] = ct == value
    if "sig_math_density" in table.column_names:
        kinds["math"] = table.column("sig_math_density").to_numpy(zero_copy_only=False) >= p.math_density
    if "sig_code_lines" in table.column_names:
        kinds["code_blocks"] = table.column("sig_code_lines").to_numpy(zero_copy_only=False) >= p.code_lines
    return kinds


@register("filter.rules")
class Rules(MapStage):
    """Apply thresholds to the `sig_` columns of `filter.signals`: `rules_hit` (names), `rules_hit_count`,
    `quality_heuristics` (share of applicable rules passed, in [0, 1]). Annotates; rejects only with --drop.

    With a `lang` column, each language is judged by its own thresholds (see the module doc), and
    the statistics count rows seen and kept per language (`lang.<code>.docs`, `lang.<code>.kept`).

    Example: assay filter rules runs/x/signals runs/x/rules --drop --thresholds '{fw_line_punct: 0.1}'
    """

    Params = RulesParams
    columns = {"rules_hit": pa.list_(pa.string()), "rules_hit_count": pa.int32(), "quality_heuristics": pa.float32()}
    version = "2"  # 2: per-language thresholds
    reads = {"calibration": "file"}

    def read_files(self) -> dict[str, list[str]]:
        from .languages import DEFAULT_FILE

        files = super().read_files()
        if self.params.calibration is None and self.params.languages:
            files["calibration"] = [str(DEFAULT_FILE)]
        return files

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        hits, names, applicable, groups = decide_by_language(table, p)
        count = hits.sum(axis=1)
        n_app = applicable.sum(axis=1)
        score = np.where(n_app > 0, 1 - count / np.maximum(n_app, 1), 1.0)
        table = set_column(table, "rules_hit", hit_lists(hits, names))
        table = set_column(table, "rules_hit_count", pa.array(count.astype(np.int32), pa.int32()))
        table = set_column(table, "quality_heuristics", pa.array(score.astype(np.float32), pa.float32()))
        for j, name in enumerate(names):
            self.stats.count(f"rule.{name}.hit", int(hits[:, j].sum()))
            self.stats.count(f"rule.{name}.applied", int(applicable[:, j].sum()))
        self.stats.count("rule.docs", table.num_rows)
        self.stats.histogram("rules_hit_count", count, list(range(0, 12)) + [64])
        kept = count <= p.max_hits
        for lang, rows in groups.items():
            self.stats.count(f"lang.{lang}.docs", len(rows))
            self.stats.count(f"lang.{lang}.kept", int(kept[rows].sum()))
        reasons = np.full(table.num_rows, None, dtype=object)
        details = np.full(table.num_rows, None, dtype=object)
        if p.drop:
            bad = count > p.max_hits
            reasons[bad] = "heuristic"
            details[bad] = [",".join(names[j] for j in np.flatnonzero(row)) for row in hits[bad]]
        return with_rejects(table, reasons, details)


def hit_lists(hits: np.ndarray, names: list[str]) -> pa.Array:
    """A list<string> column of the hit rule names per row, built from offsets (no per-row Python)."""
    rows, cols = np.nonzero(hits)
    offsets = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=hits.shape[0])))).astype(np.int32)
    values = pa.array(np.array(names, dtype=object)[cols] if len(cols) else [], pa.string())
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)
