"""`filter.lang_mix`: flag documents whose lines are in more than one language (Step 3.5's
"unnatural language mixing": two documents run together, boilerplate or menus in another language,
alternating translations), while keeping code-switching that is natural.

Each line (a line longer than `max_chars` is cut at its sentence ends) is identified with the
lid.176 model extract.lang_id uses. A line counts for its letters; the document's language is the
one with most letters (a Han, kana or Hangul character counts 3), and `lang_mix` is the share of letters in lines confidently identified as
another language. Natural code-switching is left alone by construction: a foreign word or phrase
inside a line does not change the line's language, lines with fewer than `min_letters` letters (a
name, a menu item, a date) are not judged, and a line whose top-3 languages include the document's
own (es/gl, no/da, hr/sr, ...) or that fastText scores below `min_score` is counted as the
document's language.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T

_SENTENCES = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")


class LangMixParams(Params):
    max_mix: float = Field(0.15, ge=0, le=1, description="lang_mix above which a row is mixed (rejected with --drop)")
    drop: bool = Field(False, description="Reject mixed rows (reason `lang_mixed`, detail = main+other language)")
    min_letters: int = Field(20, ge=1, description="Lines with fewer letters are not identified (names, menu items)")
    min_score: float = Field(0.6, ge=0, le=1, description="A line is another language only when fastText scores it at least this")
    max_chars: int = Field(400, ge=50, description="Longer lines are identified sentence by sentence")


def segments(text: str, max_chars: int) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if len(line) <= max_chars:
            out.append(line)
            continue
        out.extend(T.pack_pieces(_SENTENCES.split(line), max_chars))
    return out


def weight(segment: str) -> int:
    """Letters of a segment, a Han, kana or Hangul character counting 3 (about a word each, where
    an English word is about five letters) so a Chinese line weighs what its English translation does."""
    return sum(3 if "\u2e80" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" else 1 for ch in segment if ch.isalpha())


@register("filter.lang_mix")
class LangMix(MapStage):
    """Identify the language of every line (lid.176) and measure how much of a document is in
    another language than its main one: adds `lang_mix` (share of letters, 0-1), `lang_main` and
    `lang_other` (the largest other language, null when none). A foreign word or phrase inside a
    line, short lines and lines of a close language are natural and count as the main language.
    Rejects rows over --max-mix only with --drop (reason `lang_mixed`).

    Example: assay filter lang_mix runs/x/clean runs/x/one_language --drop --max-mix 0.3
    """

    Params = LangMixParams
    version = "1"
    columns = {"lang_mix": pa.float32(), "lang_main": pa.string(), "lang_other": pa.string()}
    batch_rows = 2_000

    def setup(self) -> None:
        import fasttext

        from assay.extractors.langid import model_path

        self.model = fasttext.load_model(str(model_path()))

    def identify(self, segment: str) -> list[tuple[str, float]]:
        from assay.extractors.langid import script_language

        labels, scores = self.model.predict(" ".join(segment.split()), k=3)
        top = [(label.removeprefix("__label__"), float(s)) for label, s in zip(labels, scores)]
        script_lang, share = script_language(segment)
        if script_lang in ("ja", "ko", "th") and share >= 0.5 and top[0][0] != script_lang:
            top.insert(0, (script_lang, share))  # a distinctive script settles it (lid mistakes short kana lines)
        return top

    def mix(self, text: str) -> tuple[float, str | None, str | None]:
        p = self.params
        judged = []
        for seg in segments(text or "", p.max_chars):
            letters = weight(seg)
            if letters >= p.min_letters:
                judged.append((letters, self.identify(seg)))
        if not judged:
            return 0.0, None, None
        totals: dict[str, int] = {}
        for letters, top in judged:
            totals[top[0][0]] = totals.get(top[0][0], 0) + letters
        main = max(totals, key=lambda k: (totals[k], k))
        other: dict[str, int] = {}
        for letters, top in judged:
            lang, score = top[0]
            if lang == main or score < p.min_score or any(l == main and s >= 0.05 for l, s in top[1:]):
                continue
            other[lang] = other.get(lang, 0) + letters
        all_letters = sum(letters for letters, _ in judged)
        if not other:
            return 0.0, main, None
        second = max(other, key=lambda k: (other[k], k))
        return sum(other.values()) / all_letters, main, second

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        p = self.params
        results = [self.mix(t) for t in T.text_column(table).to_pylist()]
        mix = np.array([r[0] for r in results], np.float32)
        mixed = mix > p.max_mix
        self.stats.count("lang_mix.mixed", int(mixed.sum()))
        table = set_column(table, "lang_mix", pa.array(mix, pa.float32()))
        table = set_column(table, "lang_main", pa.array([r[1] for r in results], pa.string()))
        table = set_column(table, "lang_other", pa.array([r[2] for r in results], pa.string()))
        reject = mixed & p.drop
        details = [f"{r[1]}+{r[2]} {r[0]:.2f}" if d else None for r, d in zip(results, reject)]
        return with_rejects(table, np.where(reject, "lang_mixed", None), details)
