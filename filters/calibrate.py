"""Calibrate the heuristic rules per language: the thresholds that keep each language's reference text
as the anchor language's (English) thresholds keep English (FineWeb-2's approach).

For a rule `signal < t` (or `>`) with the anchor threshold t:

1. quantile: the share q of the anchor's reference documents the rule hits, when the reference gives
   one (0.01 <= q <= 0.25; a rule hitting more of the anchor's own good text is measuring the
   reference, not junk): the language's threshold is the value that hits the same share q of its
   own reference documents (its q-quantile; the (1-q)-quantile for `>` rules);
2. otherwise (the anchor's reference never or always hits the rule, as clean text does for most of
   them) the threshold moves with the language's typical value, the median m of the signal:
   `scale` rules (counts, lengths, shares that a script may lack) take t * m_lang / m_anchor, and a
   lower bound that scales to 0 (a script without that punctuation or case) is disabled; `shift`
   rules (shares a script raises for every text: symbols, short lines) take t + m_lang - m_anchor;
   `loosen` rules shift only up (repeated word n-grams: a segmenter's short words repeat more).

Rules whose signal means the same in every language (repeated lines and paragraphs, hashes,
ellipses, bullets, lorem ipsum, braces, duplicated characters) keep the anchor threshold. Stop
words: per language, the `stop_words` words of `stopwordsiso` (MIT) most frequent in the language's
general text (wordfreq) that stand alone in a tenth of its reference documents, or, without a
frequency list, those found in the most reference documents; the anchor keeps Gopher's eight. Each writing system
gets the median thresholds of its languages, for rows of languages the file does not hold.

On parallel text (the same documents in every language, as the shipped UDHR reference) the anchor's
share is 0 for most rules and the medians compare like for like; on a user's corpus (`assay filter
calibrate`) the quantile step does most of the work.
"""
from __future__ import annotations

import datetime
from collections import Counter

import numpy as np
import pyarrow as pa

from .kernels import DUP_NS, TOP_NS
from .languages import Calibration, dominant_scripts
from .rules import RULES
from .signals import STOP_WORDS, compute_signals
from . import textops as T

METHODS: dict[str, str] = {
    "gopher_short_doc": "scale", "gopher_long_doc": "scale", "gopher_short_words": "scale",
    "gopher_long_words": "scale", "gopher_stop_words": "scale", "gopher_alpha": "scale",
    "c4_few_sentences": "scale", "fw_line_punct": "scale", "word_order": "scale", "fw_list_ratio": "scale",
    "fw_short_lines": "shift", "symbol_soup": "shift",
    # n-grams of words: a segmenter's short words (Japanese morphemes) repeat more in any text; a
    # translation that repeats the reference's formulas less says nothing of the language's junk
    **{f"rep_top_{n}gram": "loosen" for n in TOP_NS}, **{f"rep_dup_{n}gram": "loosen" for n in DUP_NS},
}
# Signals that count things: their thresholds stay whole numbers.
COUNTS = ("gopher_words", "gopher_stop_words", "c4_sentences")
Q_MIN = 0.01
# A rule that hits more of the anchor's own reference than this is measuring the reference (the
# declaration's formulas are repeated n-grams), not junk: its quantile would carry that over.
Q_MAX = 0.25
SIGNIFICANT = 4


# wordfreq's names for languages lid.176 writes otherwise
_WORDFREQ_NAMES = {"no": "nb", "tl": "fil", "hr": "sh", "bs": "sh"}


def frequent_words(lang: str, n: int = 1000) -> list[str]:
    """The `n` most frequent words of `lang` in general text (wordfreq, Apache-2.0; its lists are
    counts over Wikipedia, subtitles, news, books and web text), most frequent first; [] for a
    language wordfreq has no list of its own for (it would answer with a neighbour's)."""
    import wordfreq

    name = _WORDFREQ_NAMES.get(lang, lang)
    if name not in wordfreq.available_languages("best"):
        return []
    return wordfreq.top_n_list(name, n)


def stop_word_lists(texts: list[str], langs: list[str], k: int = 8, anchor: str = "en",
                    min_share: float = 0.1) -> dict[str, tuple[str, ...]]:
    """Per language: its `k` stop words (see the module doc). Ranked by the language's general word
    frequency where wordfreq has it, so that a reference's topic words ("personne", "حق" in the
    declaration) are not taken for function words; a word must still stand alone, as the
    segmentation writes it, in `min_share` of the language's documents (Korean particles, which
    attach to the word before them, do not). Languages without a frequency list: the words found
    in the most documents."""
    import stopwordsiso

    from .words import spaced

    words = T.words(spaced(pa.array(texts, pa.string()), langs))
    values = np.asarray(words.values.to_pylist(), dtype=object)
    out: dict[str, tuple[str, ...]] = {}
    lang_arr = np.asarray(langs, dtype=object)
    for lang in sorted(set(langs)):
        if lang == anchor:
            out[lang] = STOP_WORDS
            continue
        rows = np.flatnonzero(lang_arr == lang)
        mask = np.isin(words.doc, rows)
        df = Counter(w for w, _ in set(zip(values[mask].tolist(), words.doc[mask].tolist())))
        listed = stopwordsiso.stopwords(lang) if stopwordsiso.has_lang(lang) else set()
        by_df = [w for w, _ in sorted(df.items(), key=lambda kv: (-kv[1], kv[0]))
                 if any(ch.isalpha() for ch in w) and (w in listed if listed else w == w.lower())]
        general = [w for w in frequent_words(lang) if (w in listed or not listed) and df.get(w, 0) >= min_share * len(rows)
                   and any(ch.isalpha() for ch in w)]
        ranked = general + [w for w in by_df if w not in general] if general else by_df
        out[lang] = tuple(ranked[:k])
    return out


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT}g}")


def calibrate(texts: list[str], langs: list[str], anchor: str = "en", min_docs: int = 20, stop_words: int = 8,
              source: str = "") -> Calibration:
    """A calibration from reference documents (`texts`, each with its language in `langs`)."""
    counts = Counter(langs)
    if counts.get(anchor, 0) < min_docs:
        raise ValueError(f"the anchor language {anchor!r} has {counts.get(anchor, 0)} documents; {min_docs} are needed")
    kept = [i for i, lang in enumerate(langs) if counts[lang] >= min_docs]
    texts, langs = [texts[i] for i in kept], [langs[i] for i in kept]
    stops = stop_word_lists(texts, langs, stop_words, anchor)
    arr = pa.array(texts, pa.string())
    lang_arr = np.asarray(langs, dtype=object)
    sig = compute_signals(arr, lang_arr, stops)
    scripts = dominant_scripts(arr)
    base = lang_arr == anchor
    languages: dict[str, dict] = {}
    for lang in sorted(set(langs)):
        rows = lang_arr == lang
        table, how = {}, {}
        for rule, method in METHODS.items():
            signal, op, t, _ = RULES[rule]
            table[rule], how[rule] = _threshold(sig[signal][base], sig[signal][rows], op, float(t), method, lang == anchor)
            if signal in COUNTS and table[rule] is not None:
                table[rule] = float(round(table[rule])) if table[rule] >= 1 or op == ">" else None
        script = Counter(s for s in scripts[rows] if s).most_common(1)
        languages[lang] = {"script": script[0][0] if script else None, "documents": int(rows.sum()),
                           "thresholds": table, "methods": how, "stop_words": list(stops[lang])}
    by_script: dict[str, dict] = {}
    for script in sorted({e["script"] for e in languages.values() if e["script"]}):
        members = [e for e in languages.values() if e["script"] == script]
        table = {}
        for rule in METHODS:
            values = [e["thresholds"][rule] for e in members if e["thresholds"][rule] is not None]
            table[rule] = _round(float(np.median(values))) if len(values) * 2 > len(members) else None
        table["gopher_stop_words"] = None  # a language's own words; none for a language not calibrated
        by_script[script] = {"languages": sorted(lang for lang, e in languages.items() if e["script"] == script),
                             "thresholds": table}
    meta = {"source": source, "anchor": anchor, "min_docs": min_docs, "stop_words_per_language": stop_words,
            "created": datetime.date.today().isoformat(), "method": __doc__.split("\n\n")[1].strip()}
    return Calibration(anchor, languages, by_script, meta)


def _threshold(ref: np.ndarray, own: np.ndarray, op: str, t: float, method: str, is_anchor: bool):
    """(threshold or None, how it was found) of one rule for one language (see the module doc)."""
    if is_anchor:
        return t, "anchor"
    q = float(np.mean(ref < t) if op == "<" else np.mean(ref > t))
    if Q_MIN <= q <= Q_MAX:
        return _round(float(np.quantile(own, q if op == "<" else 1 - q))), f"quantile {q:.3f}"
    m_ref, m_own = float(np.median(ref)), float(np.median(own))
    if method == "shift" or (method == "loosen" and m_own > m_ref):
        return _round(min(t + m_own - m_ref, 1.0)), f"shift {m_own - m_ref:+.3g}"
    if method == "loosen":
        return t, f"anchor (median {m_own - m_ref:+.3g})"
    if m_ref <= 0:
        return t, "anchor (median 0)"
    value = t * m_own / m_ref
    if op == "<" and value <= 0:
        return None, "disabled (median 0)"
    return _round(value), f"scale {m_own / m_ref:.3g}"
