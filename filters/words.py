"""Words for every script: one segmenter for the signals, MinHash shingles, decontamination n-grams
and the quality models.

Scripts written without spaces get a dictionary segmenter, each shipping its dictionary in its wheel
(nothing is downloaded at run time) and imported only when a document needs it:

* Chinese (Han without kana): `jieba_fast_dat` (MIT; jieba's dictionary and algorithm in C++,
  6 MB/s here against jieba's 0.7, HMM off so unknown words stay characters);
* Japanese (a document holding kana, or `lang` ja): `fugashi` (MIT) with `unidic-lite` (UniDic,
  BSD-3), MeCab's `-Owakati` output, 3 MB/s;
* Thai: `pythainlp` (Apache-2.0) with its dictionary, through the `nlpo3` engine (Apache-2.0,
  Rust; 2.6 MB/s against newmm's 1.2);
* Korean is written with spaces, so its words are the Unicode ones by default; `korean=True`
  splits them into morphemes with `kiwipiepy` (LGPL-2.1 library, Apache-2.0 model in
  `kiwipiepy_model`), about 0.03 MB/s: an option for shingles, too slow for the filters.

Everything else keeps the Unicode word boundaries the callers already use (runs of letters, marks
and digits). The batch entry point, `spaced`, returns every text with a space between every two words
of those scripts, so the whitespace and Unicode-class tokenizers downstream (filters/textops.py,
dedup/tokens.py) see words instead of characters; rows without such scripts are returned untouched.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEGMENTED = ("zh", "ja", "th", "ko")
# RE2 (Arrow) test for a row that needs a segmenter: Han, kana or Thai (Hangul only with korean=True).
_NEEDS = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}]"
_NEEDS_KO = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Hangul}]"
_KANA = r"[\p{Hiragana}\p{Katakana}]"


@functools.cache
def _runs():
    import regex

    # Japanese runs take kana and the marks written inside words (ー, 々); Chinese runs Han only.
    return {
        "ja": regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\u30fc\u3005\u3006\u30f5\u30f6]+"),
        "zh": regex.compile(r"[\p{Han}\u3007]+"),
        "th": regex.compile(r"\p{Thai}+"),
        "ko": regex.compile(r"\p{Hangul}+"),
    }


PACKAGES = {"zh": "jieba-fast-dat", "ja": "fugashi unidic-lite", "th": "pythainlp nlpo3", "ko": "kiwipiepy"}


@functools.cache
def segmenter(kind: str) -> Callable[[str], list[str]]:
    """The word splitter of one segmented language (loaded once per process, on first use)."""
    try:
        return _load(kind)
    except ImportError as e:
        raise ImportError(f"segmenting {kind} words needs {PACKAGES[kind]} (pip install 'assay[lang]'): {e}") from e


def _load(kind: str) -> Callable[[str], list[str]]:
    if kind == "zh":
        import logging

        import jieba_fast_dat as jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()  # without it the first calls return single characters
        return functools.partial(jieba.lcut, HMM=False)
    if kind == "ja":
        import fugashi

        tagger = fugashi.Tagger("-Owakati")  # unidic-lite's dictionary, found by fugashi itself
        return lambda run: tagger.parse(run).split()
    if kind == "th":
        from pythainlp.tokenize import word_tokenize

        return functools.partial(word_tokenize, engine="nlpo3", keep_whitespace=False)
    if kind == "ko":
        from kiwipiepy import Kiwi

        kiwi = Kiwi()

        def morphemes(run: str) -> list[str]:  # surface spans; a contracted ending shares its
            out, end = [], 0  # characters with the stem before it, and is dropped
            for t in kiwi.tokenize(run):
                if t.start >= end:
                    out.append(run[t.start:t.start + t.len])
                    end = t.start + t.len
            return out

        return morphemes
    raise ValueError(f"no segmenter for {kind!r}; segmented: {', '.join(SEGMENTED)}")


def kind_of(text: str, lang: str | None) -> str:
    """Which segmenter a document's Han runs take: Japanese when its language says so or it holds kana."""
    if lang == "ja":
        return "ja"
    if lang in ("zh", "yue", "wuu"):
        return "zh"
    import regex

    return "ja" if regex.search(r"[\p{Hiragana}\p{Katakana}]", text) else "zh"


def _spaced_text(text: str, lang: str | None, korean: bool) -> str:
    runs = _runs()
    cjk = kind_of(text, lang)
    kinds = [cjk, "th"] + (["ko"] if korean else [])
    for kind in kinds:
        pattern = runs[kind]
        if not pattern.search(text):
            continue
        text = _segment_runs(text, pattern, segmenter(kind), _SEPARATOR.get(kind, "\n"))
    return text


# What the runs are joined by for one segmenter call: a character no run holds that the segmenter
# returns as a word of its own (MeCab drops line breaks, keeps a full stop).
_SEPARATOR = {"ja": "\u3002"}


def _segment_runs(text: str, pattern, split: Callable[[str], list[str]], sep: str) -> str:
    """`text` with each run of `pattern` replaced by its words, spaced. The runs go to the segmenter
    joined by `sep`, in one call (a call per run cost more than the segmenting), and come back split
    at it; should the count not match, each run is segmented alone."""
    runs = pattern.findall(text)
    words = split(sep.join(runs))
    pieces, current = [], []
    for w in words:
        if w == sep:
            pieces.append(current)
            current = []
        elif w.strip():
            current.append(w)
    pieces.append(current)
    if len(pieces) != len(runs):  # a segmenter that dropped a line break: one call per run
        pieces = [split(run) for run in runs]
    it = iter(pieces)
    return pattern.sub(lambda m: " " + " ".join(next(it)) + " ", text)


def needs_segmenting(texts: pa.Array, korean: bool = False) -> np.ndarray:
    """bool per row: it holds a letter of a script the segmenters handle."""
    hit = pc.match_substring_regex(texts, _NEEDS_KO if korean else _NEEDS)
    return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)


def spaced(texts: pa.Array, langs: Iterable[str | None] | None = None, korean: bool = False) -> pa.Array:
    """`texts` with a space between every two words of Chinese, Japanese and Thai (and Korean
    morphemes with `korean`); rows holding none of those scripts are untouched, and when no row
    holds any the input array itself is returned."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = pc.fill_null(texts, "")
    rows = np.flatnonzero(needs_segmenting(texts, korean))
    if not len(rows):
        return texts
    langs = list(langs) if langs is not None else None
    sub = texts.take(pa.array(rows)).to_pylist()
    done = [_spaced_text(t, langs[i] if langs is not None else None, korean) for t, i in zip(sub, rows.tolist())]
    mask = np.zeros(len(texts), bool)
    mask[rows] = True
    return pc.replace_with_mask(texts, pa.array(mask), pa.array(done, texts.type))


def words(text: str, lang: str | None = None, korean: bool = False) -> list[str]:
    """The words of one text: segmented runs, and Unicode word runs (letters, marks, digits) elsewhere."""
    import regex

    return regex.findall(r"[\p{L}\p{M}\p{N}]+", _spaced_text(text, lang, korean))
