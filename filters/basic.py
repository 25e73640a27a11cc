"""Day-one map stages, vectorised with Arrow compute: unicode normalisation, length bounds and a
writing-system (script) filter. Each keeps every column it does not own."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects


class NormalizeParams(Params):
    form: str = Field("NFC", pattern="^(NFC|NFKC|NFD|NFKD)$", description="Unicode normal form")
    strip_control: bool = Field(True, description="Remove control characters other than tab and newline, and the BOM")
    collapse_blank_lines: bool = Field(True, description="Collapse runs of 3+ newlines to two and strip trailing spaces")
    drop_empty: bool = Field(True, description="Reject documents that are empty after normalisation (reason `empty`)")


@register("filter.unicode", aliases=("normalize.unicode",))
class NormalizeUnicode(MapStage):
    """Normalise text to one Unicode form, remove invisible control characters, tidy whitespace.

    Example: assay filter unicode in/ out/ --form NFKC
    """

    Params = NormalizeParams

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        text = pc.fill_null(table.column("text"), "")
        text = pc.utf8_normalize(text, form=p.form)
        if p.strip_control:
            text = pc.replace_substring_regex(text, r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x{feff}\x{200b}]", "")
            text = pc.replace_substring(text, "\r\n", "\n")
        if p.collapse_blank_lines:
            text = pc.replace_substring_regex(text, r"[ \t]+\n", "\n")
            text = pc.replace_substring_regex(text, r"\n{3,}", "\n\n")
        table = set_column(table, "text", text)
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0).to_numpy(zero_copy_only=False)
        reasons = np.where(empty & p.drop_empty, "empty", None)
        return with_rejects(table, reasons)


class LengthParams(Params):
    min_chars: int = Field(0, ge=0, description="Reject documents with fewer characters (reason `too_short`)")
    max_chars: int | None = Field(None, ge=1, description="Reject documents with more characters (reason `too_long`)")
    min_words: int = Field(0, ge=0, description="Reject documents with fewer whitespace-separated words")
    max_words: int | None = Field(None, ge=1, description="Reject documents with more words")


@register("filter.length")
class LengthFilter(MapStage):
    """Keep documents whose length in characters and words lies within bounds.

    Example: assay filter length in/ out/ --min-chars 200 --max-chars 1000000
    """

    Params = LengthParams

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        text = pc.fill_null(table.column("text"), "")
        chars = pc.utf8_length(text).to_numpy(zero_copy_only=False)
        words = _word_counts(text)
        reasons = np.full(table.num_rows, None, dtype=object)
        details = np.full(table.num_rows, None, dtype=object)
        checks = [
            (chars < p.min_chars, "too_short", "chars", chars, p.min_chars, "<"),
            (words < p.min_words, "too_short", "words", words, p.min_words, "<"),
        ]
        if p.max_chars is not None:
            checks.append((chars > p.max_chars, "too_long", "chars", chars, p.max_chars, ">"))
        if p.max_words is not None:
            checks.append((words > p.max_words, "too_long", "words", words, p.max_words, ">"))
        for mask, reason, unit, values, bound, op in checks:
            hit = mask & (reasons == None)  # noqa: E711 (elementwise on an object array)
            reasons[hit] = reason
            details[hit] = [f"{v} {unit} {op} {bound}" for v in values[hit]]
        return with_rejects(table, reasons, details)


def _word_counts(text: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.count_substring_regex(text, r"\S+").to_numpy(zero_copy_only=False)


# Scripts RE2 knows by name; letters of these are counted to find a document's dominant script.
SCRIPTS = ("Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Han", "Hiragana", "Katakana",
           "Hangul", "Thai", "Armenian", "Georgian", "Bengali", "Tamil", "Ethiopic")


class ScriptParams(Params):
    allowed: list[str] = Field(default_factory=lambda: ["Latin"], description=f"Scripts to keep; any of {', '.join(SCRIPTS)}")
    min_fraction: float = Field(0.5, ge=0, le=1, description="Minimum share of letters in allowed scripts")
    min_letters: int = Field(1, ge=0, description="Documents with fewer letters are rejected as `no_letters`")

    @field_validator("allowed")
    @classmethod
    def _known_scripts(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(SCRIPTS))
        if unknown:
            raise ValueError(f"unknown scripts {unknown}; known: {', '.join(SCRIPTS)}")
        return value


@register("filter.script")
class ScriptFilter(MapStage):
    """Keep documents written mostly in the allowed scripts; adds `script` (the dominant one).

    Japanese counts Han, Hiragana and Katakana, so allow all three for it. A cheap, model-free
    pre-filter before language ID.

    Example: assay filter script in/ out/ --allowed Latin --allowed Cyrillic --min-fraction 0.6
    """

    Params = ScriptParams
    columns = {"script": pa.string()}
    version = "2"  # 2: script counts in the statistics

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        text = pc.fill_null(table.column("text"), "")
        counts = np.stack([pc.count_substring_regex(text, rf"\p{{{s}}}").to_numpy(zero_copy_only=False) for s in SCRIPTS])
        letters = pc.count_substring_regex(text, r"\pL").to_numpy(zero_copy_only=False)
        allowed = counts[[SCRIPTS.index(s) for s in p.allowed]].sum(axis=0)
        dominant = np.array(SCRIPTS, dtype=object)[counts.argmax(axis=0)]
        dominant[counts.max(axis=0) == 0] = None
        share = np.divide(allowed, letters, out=np.zeros(len(letters)), where=letters > 0)
        reasons = np.full(table.num_rows, None, dtype=object)
        details = np.full(table.num_rows, None, dtype=object)
        few = letters < max(p.min_letters, 1)
        reasons[few] = "no_letters"
        details[few] = [f"{n} letters" for n in letters[few]]
        off = ~few & (share < p.min_fraction)
        reasons[off] = "wrong_script"
        details[off] = [f"{s:.2f} of letters in {'/'.join(p.allowed)} (mostly {d})" for s, d in zip(share[off], dominant[off])]
        names, counts_per = np.unique(np.where(dominant == None, "none", dominant).astype(str), return_counts=True)  # noqa: E711
        for name, n in zip(names.tolist(), counts_per.tolist()):
            self.stats.count(f"script.{name}", n)  # the report's script distribution
        table = set_column(table, "script", pa.array(dominant, pa.string()))
        return with_rejects(table, reasons, details)
