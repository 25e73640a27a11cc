"""Heuristic quality signals (Gopher quality and repetition, C4, FineWeb, symbol ratios, math and code
density), computed for a whole batch at once.

`filter.signals` only measures: it writes one `sig_<name>` float column per signal. Which values count
as a hit is decided by `filter.rules` (rules.py), so one pass of signals serves any threshold choice.
Definitions follow the published rules (Gopher: Rae et al. 2021, Table A1; C4: Raffel et al. 2020;
FineWeb: Penedo et al. 2024) as datatrove implements them, with words split by a regex instead of a
per-document tokenizer, and by dictionary segmenters for Chinese, Japanese and Thai (words.py).

With a `lang` column the stop-word signal counts that language's stop words (a calibration file's,
languages.py); rows of other languages, and all rows without the column, count Gopher's English ones.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pydantic import Field

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T
from .kernels import DUP_NS, TOP_NS, class_counts, ngram_repetition

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
# Characters that end a sentence-like line (FineWeb's "stop chars"; the common scripts' full stops).
TERMINAL = ".!?\"'…。！？｡।॥؟۔»”’։።፧။។"
_TERMINAL_RE = "[" + TERMINAL.replace("\\", "\\\\").replace('"', '\\"') + "]$"
# Full stops and question marks of scripts that do not use '.': CJK, Devanagari (। ॥), Arabic (؟),
# Urdu (۔), Armenian (։), Ethiopic (። ፧), Myanmar (။), Khmer (។).
_STOPS = r"\x{3002}\x{ff01}\x{ff1f}\x{0964}\x{0965}\x{061f}\x{06d4}\x{0589}\x{1362}\x{1367}\x{104b}\x{17d4}"
C4_END = r"[.?!\"'" + _STOPS + "]$"  # C4's, and the other scripts' ends
# Sentence ends C4 counts, and the full stops of scripts that do not use '.' (CJK ones need no space).
SENTENCE_END = r"[.!?]+[\"'”’)\]]*(\s|$)|[" + _STOPS + r"]+[\"'”’)\]」』]*"
C4_POLICY = r"terms of use|privacy policy|cookie policy|uses cookies|use of cookies|use cookies"
C4_CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
MATH_MARKS = r"\\[A-Za-z]+|\$|[=^_{}]|[∑∫√≤≥≠±×÷∞∂∇∈∀∃→≈∝]"
CODE_LINE = (r"[;{}]\s*$|^\s*(def|class|import|from|return|if|elif|for|while|try|except|public|private|"
             r"static|#include|#define|function|var|let|const|package|func)\b|^\s{4,}\S|=>|\)\s*:\s*$")

SIGNALS: dict[str, str] = {
    "gopher_words": "words that are not only punctuation",
    "gopher_mean_word_len": "mean length of those words",
    "gopher_hash_ratio": "'#' per word",
    "gopher_ellipsis_ratio": "ellipses ('...' or '…') per word",
    "gopher_bullet_lines": "share of lines starting with a bullet ('•' or '-')",
    "gopher_ellipsis_lines": "share of lines ending with an ellipsis",
    "gopher_alpha_words": "share of words with at least one letter",
    "gopher_stop_words": "distinct stop words of the row's language present (Gopher's English ones: the, be, to, "
                         "of, and, that, have, with)",
    "rep_dup_para_frac": "share of paragraphs repeating an earlier one",
    "rep_dup_para_chars": "characters in repeated paragraphs / all characters",
    "rep_dup_line_frac": "share of lines repeating an earlier one",
    "rep_dup_line_chars": "characters in repeated lines / all characters",
    **{f"rep_top_{n}gram": f"characters covered by the most frequent {n}-gram / all characters" for n in TOP_NS},
    **{f"rep_dup_{n}gram": f"characters in repeated {n}-grams / all characters" for n in DUP_NS},
    "c4_lorem": "1 if a C4-kept line contains 'lorem ipsum'",
    "c4_curly": "1 if a C4-kept line contains '{'",
    "c4_sentences": "sentences in the lines C4 keeps",
    "c4_line_drop_frac": "share of lines C4's line rules drop (no terminal punctuation, < 3 words (segmented), "
                         "javascript, policy)",
    "fw_line_punct": "share of non-blank lines ending in terminal punctuation",
    "fw_short_lines": "share of non-blank lines of at most 30 characters (a Han, kana or Hangul one counting 3)",
    "fw_char_dups": "characters in repeated non-blank lines / characters",
    "fw_newline_ratio": "newlines per word",
    "symbol_ratio": "share of non-space characters that are neither letters (with their marks) nor digits",
    "upper_ratio": "share of letters in upper case",
    "sentence_caps": "share of sentence ends followed by a word in a cased script that are capitalised (word order breaks it)",
    "math_density": "math markup and symbols per word",
    "code_lines": "share of non-blank lines that look like code",
}
COLUMNS = {f"sig_{name}": pa.float32() for name in SIGNALS}


def compute_signals(text: pa.Array, langs: np.ndarray | None = None,
                    stop_words: dict[str, tuple[str, ...]] | None = None, segment: bool = True) -> dict[str, np.ndarray]:
    """Every signal for every document of `text` (an Arrow string array without nulls). `langs`: the
    language of each row, choosing its list in `stop_words` (lang -> words; Gopher's for the rest);
    `segment`: words of Chinese, Japanese and Thai from their segmenters (words.py)."""
    n = len(text)
    chars = T._np(pc.utf8_length(text)).astype(np.float64)
    out: dict[str, np.ndarray] = {}

    # --- words: Gopher quality ---
    if segment:
        from .words import spaced

        seg = spaced(text, langs)
    else:
        seg = text
    w = T.words(seg)
    codes, dictionary = w.codes()  # word features are computed once per distinct word
    dict_len = T._np(pc.utf8_length(dictionary)).astype(np.int64)
    wlen = dict_len[codes]
    symbol_only = T._np(pc.match_substring_regex(dictionary, r"^[^\pL\pN\pM]+$"))[codes]
    has_alpha = T._np(pc.match_substring_regex(dictionary, r"\pL"))[codes]
    n_words = w.per_doc()
    real = ~symbol_only
    n_real = w.per_doc(real)
    out["gopher_words"] = n_real
    out["gopher_mean_word_len"] = T.ratio(w.per_doc(np.where(real, wlen, 0)), n_real)
    out["gopher_hash_ratio"] = T.ratio(T.count(text, "#", regex=False), n_words)
    ell = T.count(text, "...", regex=False) + T.count(text, "…", regex=False)
    out["gopher_ellipsis_ratio"] = T.ratio(ell, n_words)
    out["gopher_alpha_words"] = T.ratio(w.per_doc(has_alpha), n_words)
    is_stop = _stop_words(codes, dictionary, w.doc, langs, stop_words or {})
    if is_stop.any():
        pairs = np.unique(w.doc[is_stop] * (len(dictionary) + 1) + codes[is_stop])
        out["gopher_stop_words"] = np.bincount(pairs // (len(dictionary) + 1), minlength=n).astype(np.float64)
    else:
        out["gopher_stop_words"] = np.zeros(n)

    # --- n-gram repetition (compiled) ---
    offsets = np.concatenate(([0], np.cumsum(np.bincount(w.doc, minlength=n)))).astype(np.int64)
    top, dup = ngram_repetition(codes, dict_len[codes], offsets, np.array(TOP_NS, np.int64), np.array(DUP_NS, np.int64))
    for k, m in enumerate(TOP_NS):
        out[f"rep_top_{m}gram"] = T.ratio(top[:, k], chars)
    for k, m in enumerate(DUP_NS):
        out[f"rep_dup_{m}gram"] = T.ratio(dup[:, k], chars)

    # --- lines as Python's splitlines() sees them (no trailing empty line): bullets, ellipses ---
    lines = T.split(pc.utf8_rtrim(text, characters="\n"), "\n")
    n_lines = lines.per_doc()
    left = pc.utf8_ltrim_whitespace(lines.values)
    right = pc.utf8_rtrim_whitespace(lines.values)
    bullets = T._np(pc.or_(pc.starts_with(left, "•"), pc.starts_with(left, "-")))
    end_ell = T._np(pc.or_(pc.ends_with(right, "..."), pc.ends_with(right, "…")))
    out["gopher_bullet_lines"] = T.ratio(lines.per_doc(bullets), n_lines)
    out["gopher_ellipsis_lines"] = T.ratio(lines.per_doc(end_ell), n_lines)

    # --- repetition of paragraphs ("\n\n+" on the stripped text) and lines ("\n+") ---
    paras = T.split(pc.utf8_trim_whitespace(text), r"\n{2,}", regex=True)
    dup_n, dup_c = T.duplicates(paras)
    out["rep_dup_para_frac"] = T.ratio(dup_n, paras.per_doc())
    out["rep_dup_para_chars"] = T.ratio(dup_c, chars)
    rlines = T.split(text, r"\n+", regex=True)
    dup_n, dup_c = T.duplicates(rlines)
    out["rep_dup_line_frac"] = T.ratio(dup_n, rlines.per_doc())
    out["rep_dup_line_chars"] = T.ratio(dup_c, chars)

    # --- C4: line rules, then document rules on the kept lines ---
    stripped = pc.utf8_trim_whitespace(lines.values)
    longest_word = T._np(pc.match_substring_regex(stripped, r"\S{1000}\S"))
    cleaned = pc.replace_substring_regex(stripped, C4_CITATION, "")
    terminal = T._np(pc.match_substring_regex(cleaned, C4_END)) & ~T._np(pc.ends_with(cleaned, "..."))
    three_words = T._np(pc.match_substring_regex(_segmented_lines(seg, text, lines), r"\S+\s+\S+\s+\S"))  # 3+ words
    base = ~longest_word & terminal & three_words
    lower = pc.utf8_lower(cleaned)
    js = T._np(pc.match_substring(lower, "javascript"))
    curly = T._np(pc.match_substring(cleaned, "{"))
    policy = T._np(pc.match_substring_regex(lower, C4_POLICY))
    kept = base & ~js & ~curly & ~policy
    out["c4_lorem"] = lines.any_per_doc(base & T._np(pc.match_substring(lower, "lorem ipsum"))).astype(np.float64)
    out["c4_curly"] = lines.any_per_doc(base & ~js & curly).astype(np.float64)
    sentences = np.maximum(T._np(pc.count_substring_regex(cleaned, SENTENCE_END)), 1)
    out["c4_sentences"] = lines.per_doc(np.where(kept, sentences, 0))
    out["c4_line_drop_frac"] = T.ratio(lines.per_doc(~kept & (T._np(pc.utf8_length(stripped)) > 0)),
                                       lines.per_doc(T._np(pc.utf8_length(stripped)) > 0))

    # --- FineWeb: non-blank lines split on "\n" ---
    fl = T.split(text, "\n")
    blank = T._np(pc.equal(pc.utf8_trim_whitespace(fl.values), ""))
    nonblank = ~blank
    n_fl = fl.per_doc(nonblank)
    ends = T._np(pc.match_substring_regex(fl.values, _TERMINAL_RE))
    out["fw_line_punct"] = T.ratio(fl.per_doc(nonblank & ends), n_fl)
    out["fw_short_lines"] = T.ratio(fl.per_doc(nonblank & (line_width(fl) <= 30)), n_fl)
    _, dup_c = T.duplicates(fl, keep=nonblank)
    out["fw_char_dups"] = T.ratio(dup_c, chars - T.count(text, "\n", regex=False))
    out["fw_newline_ratio"] = T.ratio(T.count(text, "\n", regex=False), n_words)

    # --- character mix, word order, math and code ---
    classes = class_counts(text)  # \pL, \pN, \p{Lu}, \s in one compiled pass
    nonspace = chars - classes["spaces"]
    letters = classes["letters"]
    # combining marks are parts of letters (the vowel signs of Indic scripts), not symbols
    out["symbol_ratio"] = T.ratio(nonspace - letters - classes["numbers"] - classes["marks"], nonspace)
    out["upper_ratio"] = T.ratio(classes["upper"], letters)
    ends_then_word = T.count(text, r"[.!?]\s+[\p{Lu}\p{Ll}]")  # letters of scripts with case only
    out["sentence_caps"] = T.ratio(T.count(text, r"[.!?]\s+\p{Lu}"), ends_then_word, empty=1.0)
    out["math_density"] = T.ratio(T.count(text, MATH_MARKS), n_words)
    out["code_lines"] = T.ratio(fl.per_doc(nonblank & T._np(pc.match_substring_regex(fl.values, CODE_LINE))), n_fl)
    return out


# Characters that hold about a word each (a Han character, a kana syllable, a Hangul block), where a
# Latin letter is a fifth of one: filter.lang_mix's weight.
WIDE = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"
WIDE_WEIGHT = 3


def line_width(lines: T.Pieces) -> np.ndarray:
    """Length of each line with a Han, kana or Hangul character counting WIDE_WEIGHT, so that "a
    short line" (FineWeb's 30 characters) means the same content in every script; lines without
    those characters are their length (English is measured as before)."""
    width = lines.lengths().astype(np.int64)
    wide = lines.matches(WIDE)
    if wide.any():
        rows = np.flatnonzero(wide)
        width[rows] += (WIDE_WEIGHT - 1) * T._np(pc.count_substring_regex(lines.values.take(pa.array(rows)), WIDE))
    return width


def _segmented_lines(seg: pa.Array, text: pa.Array, lines: T.Pieces) -> pa.Array:
    """The lines of `text` as the segmenter spaced them (`seg`), stripped: C4's "three words" of a
    line of Chinese, Japanese or Thai are its words, not its spaces. Segmenting adds spaces only, so
    the lines match one to one; should they not, the raw lines."""
    if seg is text:
        return pc.utf8_trim_whitespace(lines.values)
    seg_lines = T.split(pc.utf8_rtrim(seg, characters="\n"), "\n")
    if len(seg_lines.values) != len(lines.values):
        return pc.utf8_trim_whitespace(lines.values)
    return pc.utf8_trim_whitespace(seg_lines.values)


def _stop_words(codes: np.ndarray, dictionary: pa.Array, doc: np.ndarray, langs, lists: dict) -> np.ndarray:
    """bool per word: a stop word of its row's language (Gopher's English list where none is given)."""
    def codes_of(words) -> np.ndarray:
        return np.flatnonzero(T._np(pc.is_in(dictionary, value_set=pa.array(list(words), pa.string()))))

    if langs is None or not lists:
        return np.isin(codes, codes_of(STOP_WORDS))
    enc = pc.dictionary_encode(pa.array(np.asarray(langs, dtype=object), pa.string()))
    names = enc.dictionary.to_pylist()
    row_code = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), np.int64)[doc]
    is_stop = np.zeros(len(codes), dtype=bool)
    for k, name in [(-1, None)] + list(enumerate(names)):  # -1: rows without a language
        mask = row_code == k
        if mask.any():
            is_stop[mask] = np.isin(codes[mask], codes_of(lists.get(name) or STOP_WORDS))
    return is_stop


class SignalsParams(Params):
    languages: bool = Field(True, description="Count each row's own language's stop words (its `lang` column; the "
                                              "calibration file's lists); off, or without the column: Gopher's English ones")
    segment: bool = Field(True, description="Words of Chinese, Japanese and Thai from dictionary segmenters "
                                            "(filters/words.py) instead of runs of characters")
    calibration: str | None = Field(None, description="Calibration file (`assay filter calibrate`) whose stop words "
                                                      "to count; default: the shipped one (filters/data/thresholds.json)")
    lang_column: str = Field("lang", description="Column holding each row's language (extract.lang_id writes it)")


@register("filter.signals")
class Signals(MapStage):
    """Measure heuristic quality signals (Gopher quality and repetition, C4, FineWeb, symbol, bullet and
    ellipsis ratios, word order, math and code density) into `sig_<name>` columns; drops nothing.

    Words of every script: Chinese, Japanese and Thai are segmented into words, and with a `lang`
    column the stop words counted are that language's. Thresholds are applied by `filter.rules`
    (per language, from the same calibration), so one pass of signals serves many threshold choices.

    Example: assay filter signals runs/x/lang runs/x/signals
    """

    Params = SignalsParams
    columns = COLUMNS
    # 2: segmented words, per-language stop words, CJK/Devanagari/Arabic sentence ends; 3: CJK line
    # width, C4 words of segmented lines, sentence ends of more scripts
    version = "3"
    reads = {"calibration": "file"}

    def read_files(self) -> dict[str, list[str]]:
        from .languages import DEFAULT_FILE

        files = super().read_files()
        if self.params.calibration is None:
            files["calibration"] = [str(DEFAULT_FILE)]
        return files

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        langs = stops = None
        if p.languages and p.lang_column in table.column_names:
            from .languages import load

            langs = table.column(p.lang_column).to_numpy(zero_copy_only=False)
            stops = load(p.calibration).stop_words()
        sig = compute_signals(T.text_column(table), langs, stops, p.segment)
        for name, values in sig.items():
            table = set_column(table, f"sig_{name}", pa.array(values.astype(np.float32), pa.float32()))
            if name in ("gopher_words", "fw_line_punct", "fw_short_lines", "math_density", "sentence_caps"):
                self.stats.sketch(f"signal.{name}", values)
        return with_rejects(table, [None] * table.num_rows)
