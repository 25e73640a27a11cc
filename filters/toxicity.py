"""`filter.toxicity`: score how much of each document is offensive or sexually explicit, offline.

Each document is cut into chunks of a few sentences (the scorers were made for comment-sized text, a
whole page would dilute one), and each chunk gets a score in [0, 1]:

* English (`lang` en, or every row when there is no `lang` column): the linear SVM of
  `alt-profanity-check` (MIT; bag of words and characters, trained on labelled toxic comments,
  shipped in the wheel), its probability that the chunk is offensive;
* every language: 1 when the chunk holds two words or phrases of its language's list or of English's
  (one gives 0.5)
  (English profanity turns up in every language's web); lists are the LDNOOBW ones (CC BY 4.0,
  26 languages, see data/NOTICE) plus any a user gives. Words are matched whole, as filters/words.py
  segments them, so Chinese, Japanese and Thai entries match words, not substrings.

The document's `toxicity` is the chunk scores averaged by chunk length: the share of its text that
is toxic, so a long article quoting one slur is not rejected while a page of abuse or porn spam is.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects

from . import textops as T
from . import words as W

LISTS = Path(__file__).parent / "data" / "badwords"
_SPLIT = re.compile(r"\n+|(?<=[.!?;])\s+|(?<=[。！？；])")
_WORD = None
# Distinct list words that make a chunk fully toxic: the lists hold words with an innocent sense too
# (sex, anal, 人種 "race"), and one of them alone makes a chunk half toxic.
LIST_WORDS = 2


class ToxicityParams(Params):
    threshold: float = Field(0.4, ge=0, le=1, description="toxicity at or above which a row is toxic (rejected with --drop)")
    drop: bool = Field(False, description="Reject toxic rows (reason `toxic`, detail = the score)")
    model: bool = Field(True, description="Score English chunks with alt-profanity-check's model (off: word lists only)")
    shipped_lists: bool = Field(True, description="Use the shipped LDNOOBW word lists (26 languages)")
    lists: list[str] = Field(default_factory=list, description="More word lists: files of one word or phrase a line, "
                                                                  "for every language")
    chunk_chars: int = Field(300, ge=20, description="Sentences and lines are packed into chunks of about this many characters")


def _words(text: str) -> list[str]:
    global _WORD
    if _WORD is None:
        import regex

        _WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+")
    return [w.lower() for w in _WORD.findall(text)]


@functools.cache
def shipped_list(lang: str) -> frozenset[tuple[str, ...]]:
    path = LISTS / f"{lang}.txt"
    return _entries(path.read_text(encoding="utf-8").splitlines(), lang) if path.exists() else frozenset()


def _entries(lines: list[str], lang: str | None) -> frozenset[tuple[str, ...]]:
    out = set()
    for line in lines:
        line = line.split("#", 1)[0].strip() if not line.startswith("#") else ""
        if line:
            ws = [w.lower() for w in W.words(line, lang)]
            if ws:
                out.add(tuple(ws))
    return frozenset(out)


def chunks(text: str, size: int) -> list[str]:
    """`text` cut at sentence ends and line breaks, the pieces packed into chunks of about `size`
    characters (a comment is scored with its neighbours, as the model was trained on comments)."""
    return T.pack_pieces(_SPLIT.split(text), size)


def hits(ws: list[str], entries: frozenset[tuple[str, ...]], longest: int) -> set[tuple[str, ...]]:
    """The list entries among the word n-grams of `ws` (up to `longest` words)."""
    found = set()
    for i in range(len(ws)):
        for k in range(1, min(longest, len(ws) - i) + 1):
            if tuple(ws[i:i + k]) in entries:
                found.add(tuple(ws[i:i + k]))
    return found


@register("filter.toxicity")
class Toxicity(MapStage):
    """Score offensive and sexually explicit text: `toxicity` is the share of a document's text (by
    chunks of a few sentences) that alt-profanity-check's English model or a word list (LDNOOBW's,
    26 languages, or yours) finds toxic, `toxic_words` the list words found. Annotates only; rejects
    rows at or above --threshold with --drop (reason `toxic`). Other languages than English need a
    `lang` column (extract.lang_id) to get their list.

    Example: assay filter toxicity runs/x/clean runs/x/safe --drop --threshold 0.5
    """

    Params = ToxicityParams
    version = "1"
    columns = {"toxicity": pa.float32(), "toxic_words": pa.int32()}
    reads = {"lists": "file"}

    def setup(self) -> None:
        from assay.pipeline import storage

        p = self.params
        extra = [line for path in p.lists for line in storage.read_bytes(path).decode("utf-8", "replace").splitlines()]
        self.extra = _entries(extra, None)
        self._entries: dict[str | None, tuple[frozenset, int]] = {}
        self.scorer = None
        if p.model:
            try:
                from profanity_check import predict_prob  # loads the vectorizer and model (about 1 s)
            except ImportError as e:
                raise ImportError("filter.toxicity's model needs alt-profanity-check (pip install 'assay[safety]'), "
                                  "or run it with --no-model (word lists only)") from e
            self.scorer = predict_prob

    def entries(self, lang: str | None) -> tuple[frozenset, int]:
        if lang in self._entries:
            return self._entries[lang]
        p = self.params
        found = set(self.extra)
        if p.shipped_lists:
            found |= shipped_list("en")
            if lang:
                found |= shipped_list(lang)
        self._entries[lang] = frozenset(found), max((len(e) for e in found), default=1)
        return self._entries[lang]

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        p = self.params
        text = T.text_column(table)
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else None
        segmented = W.spaced(text, langs).to_pylist()
        doc_of, lengths, scores, english = [], [], [], []
        word_hits = np.zeros(table.num_rows, np.int32)
        for i, t in enumerate(segmented):
            lang = langs[i] if langs else "en"
            entries, longest = self.entries(lang)
            for c in chunks(t, p.chunk_chars):
                found = hits(_words(c), entries, longest)
                word_hits[i] += len(found)
                doc_of.append(i)
                lengths.append(len(c))
                scores.append(min(1.0, len(found) / LIST_WORDS))
                english.append(c if lang == "en" and self.scorer is not None else None)
        scores = np.array(scores, np.float64)
        ask = [k for k, c in enumerate(english) if c is not None and scores[k] < 1]
        if ask:
            scores[ask] = np.maximum(scores[ask], self.scorer([english[k] for k in ask]))
        doc_of, lengths = np.array(doc_of, np.int64), np.array(lengths, np.float64)
        total = np.bincount(doc_of, lengths, minlength=table.num_rows)
        toxic = np.bincount(doc_of, lengths * scores, minlength=table.num_rows)
        toxicity = np.where(total > 0, toxic / np.maximum(total, 1), 0.0).astype(np.float32)
        flagged = toxicity >= p.threshold
        self.stats.count("toxicity.flagged", int(flagged.sum()))
        self.stats.count("toxicity.word_docs", int((word_hits > 0).sum()))
        table = set_column(table, "toxicity", pa.array(toxicity, pa.float32()))
        table = set_column(table, "toxic_words", pa.array(word_hits, pa.int32()))
        reject = flagged & p.drop
        details = [f"{s:.2f}" if r else None for s, r in zip(toxicity.tolist(), reject)]
        return with_rejects(table, np.where(reject, "toxic", None), details)
