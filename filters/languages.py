"""Per-language thresholds and stop words for the heuristic rules: the calibration file and its lookup.

A calibration file (JSON; `assay filter calibrate` writes one, `filters/data/thresholds.json` ships)
holds, per language, the threshold of every rule whose signal depends on the language (word counts,
word lengths, stop words, sentence punctuation, capitalisation, line shapes), the stop words its
`gopher_stop_words` signal counts, and, per writing system, the median thresholds of its languages
for documents whose language the file does not hold. The anchor language (English) keeps the
published thresholds, so English documents are judged exactly as before; see calibrate.py for how
the other languages' thresholds are derived from it.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_FILE = Path(__file__).parent / "data" / "thresholds.json"
# Languages whose rows keep the global thresholds: the anchor, and "unknown" as language ID writes it.
UNDETERMINED = ("und", "", None)
# Scripts a row's letters are counted in to find its thresholds when its language is not calibrated.
SCRIPTS = ("Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Bengali", "Han", "Hiragana",
           "Katakana", "Hangul", "Thai", "Armenian", "Georgian", "Tamil", "Telugu", "Kannada", "Malayalam",
           "Gujarati", "Gurmukhi", "Sinhala", "Ethiopic", "Khmer", "Lao", "Myanmar")
# Japanese is written in three scripts: rows in any of them count as one.
_SCRIPT_ALIAS = {"Hiragana": "Japanese", "Katakana": "Japanese"}


@dataclass
class Calibration:
    """What a calibration file holds (see the module doc)."""

    anchor: str
    languages: dict[str, dict] = field(default_factory=dict)  # lang -> {script, thresholds, stop_words, ...}
    scripts: dict[str, dict] = field(default_factory=dict)  # script -> {thresholds}
    meta: dict = field(default_factory=dict)

    def thresholds(self, lang: str) -> dict[str, float | None] | None:
        entry = self.languages.get(lang)
        return entry["thresholds"] if entry else None

    def stop_words(self) -> dict[str, tuple[str, ...]]:
        return {lang: tuple(e.get("stop_words") or ()) for lang, e in self.languages.items() if e.get("stop_words")}

    def to_json(self) -> dict:
        return {"anchor": self.anchor, "meta": self.meta, "languages": self.languages, "scripts": self.scripts}


def load(path: str | Path | None = None) -> Calibration:
    """The calibration file at `path` (the shipped one when None), read once per process."""
    return _load(str(Path(path).resolve()) if path else str(DEFAULT_FILE))


@functools.cache
def _load(path: str) -> Calibration:
    from assay.pipeline import storage
    from assay.pipeline.errors import UserError

    try:
        data = json.loads(storage.read_bytes(path))
        return Calibration(data["anchor"], data.get("languages", {}), data.get("scripts", {}), data.get("meta", {}))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a calibration file ({e}); write one with `assay filter calibrate`") from e


def dominant_scripts(text: pa.Array) -> np.ndarray:
    """The script most of each row's letters are written in (object array; None without letters)."""
    counts = np.stack([pc.count_substring_regex(text, rf"\p{{{s}}}").to_numpy(zero_copy_only=False) for s in SCRIPTS])
    names = np.array([_SCRIPT_ALIAS.get(s, s) for s in SCRIPTS], dtype=object)
    # kana plus Han is Japanese: fold Han into Japanese where the row holds any kana
    han, kana = SCRIPTS.index("Han"), [SCRIPTS.index("Hiragana"), SCRIPTS.index("Katakana")]
    japanese = counts[kana].sum(axis=0) > 0
    counts[kana[0]] += np.where(japanese, counts[han] + counts[kana[1]], 0)
    counts[han] = np.where(japanese, 0, counts[han])
    counts[kana[1]] = np.where(japanese, 0, counts[kana[1]])
    out = names[counts.argmax(axis=0)]
    out[counts.max(axis=0) == 0] = None
    return out


def row_thresholds(cal: Calibration, langs: np.ndarray, text: pa.Array | None, names: list[str],
                   base: np.ndarray, fixed: set[str]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(thresholds float[n, rules], disabled bool[n, rules], rows per language) for rows in `langs`:
    a calibrated language's thresholds, or its script's for an uncalibrated one (found from `text`),
    or `base` (the global thresholds). Rules in `fixed` (set by the user) keep `base` everywhere."""
    n = len(langs)
    values = np.tile(base, (n, 1))
    disabled = np.zeros((n, len(names)), dtype=bool)
    enc = pc.dictionary_encode(pc.fill_null(pa.array(np.asarray(langs, dtype=object), pa.string()), "und"))
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(enc.dictionary) + 1))
    groups = {name: order[bounds[k]:bounds[k + 1]] for k, name in enumerate(enc.dictionary.to_pylist())
              if bounds[k + 1] > bounds[k]}
    unknown = [lang for lang in groups if lang not in cal.languages and lang not in UNDETERMINED and lang != cal.anchor]
    scripts = None
    if unknown and text is not None:
        rows = np.concatenate([groups[lang] for lang in unknown])
        scripts = np.full(n, None, dtype=object)
        scripts[rows] = dominant_scripts(text.take(pa.array(rows)))
    for lang, rows in groups.items():
        table = cal.thresholds(lang)
        if table is not None:
            _apply(values, disabled, rows, table, names, fixed)
        elif lang in unknown:
            # no stop words for this language: its stop-word count means nothing
            disabled[np.ix_(rows, [j for j, r in enumerate(names) if r == "gopher_stop_words" and r not in fixed])] = True
            if scripts is not None:
                for script in {s for s in scripts[rows] if s}:
                    entry = cal.scripts.get(script)
                    if entry:
                        _apply(values, disabled, rows[scripts[rows] == script], entry["thresholds"], names, fixed)
    return values, disabled, groups


def _apply(values, disabled, rows, table: dict, names: list[str], fixed: set[str]) -> None:
    for j, name in enumerate(names):
        if name in table and name not in fixed:
            if table[name] is None:
                disabled[rows, j] = True
            else:
                values[rows, j] = table[name]

