"""Vectorised text pieces over Arrow batches: split every document of a batch into lines or words at
once, compute per-piece features with Arrow compute, and sum them back per document with bincount.

The heuristic, code and scorer stages share these so a batch is tokenised by RE2 and NumPy, not by a
Python loop per document.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# A word is a run of letters, digits and combining marks; every other visible character is a token of
# its own (as spaCy's blank English tokenizer splits punctuation off words).
_SYMBOL = r"([^\pL\pN\pM\s])"


def text_column(table: pa.Table, name: str = "text") -> pa.Array:
    col = table.column(name)
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return pc.fill_null(col, "")


@dataclass
class Pieces:
    """The pieces (lines, words, ...) of every document of a batch, flattened.

    `values` holds the pieces in document order, `doc` the row each came from, `n_docs` the batch size."""

    values: pa.Array
    doc: np.ndarray
    n_docs: int

    def per_doc(self, weights=None) -> np.ndarray:
        """Sum of `weights` (a bool/number per piece; 1 when None) per document."""
        if weights is not None:
            weights = np.asarray(weights, dtype=np.float64)
        return np.bincount(self.doc, weights=weights, minlength=self.n_docs)

    def any_per_doc(self, mask) -> np.ndarray:
        return self.per_doc(np.asarray(mask, dtype=bool)) > 0

    def lengths(self) -> np.ndarray:
        return _np(pc.utf8_length(self.values))

    def matches(self, pattern: str, ignore_case: bool = False) -> np.ndarray:
        return _np(pc.match_substring_regex(self.values, pattern, ignore_case=ignore_case))

    def codes(self) -> tuple[np.ndarray, pa.Array]:
        """Dictionary codes of the pieces (equal pieces, equal code across the batch) and the dictionary."""
        enc = pc.dictionary_encode(self.values)
        return _np(enc.indices).astype(np.int64), enc.dictionary


def _np(arr) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.to_numpy(zero_copy_only=False)


def split(text: pa.Array, pattern: str, regex: bool = False) -> Pieces:
    lists = pc.split_pattern_regex(text, pattern) if regex else pc.split_pattern(text, pattern)
    return Pieces(pc.list_flatten(lists), _np(pc.list_parent_indices(lists)).astype(np.int64), len(text))


def words(text: pa.Array) -> Pieces:
    """Words and single punctuation tokens of every document."""
    spaced = pc.replace_substring_regex(text, _SYMBOL, r" \1 ")
    lists = pc.utf8_split_whitespace(spaced)
    values = pc.list_flatten(lists)
    doc = _np(pc.list_parent_indices(lists)).astype(np.int64)
    nonempty = pc.greater(pc.binary_length(values), 0)  # Arrow splits on every space: drop the empty pieces
    return Pieces(values.filter(nonempty), doc[_np(nonempty)], len(text))


def duplicates(pieces: Pieces, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per document: how many pieces repeat an earlier equal piece of the same document, and their
    characters (Gopher's duplicate line/paragraph counts). `keep` masks pieces out of the count."""
    codes, _ = pieces.codes()
    lengths = pieces.lengths()
    doc = pieces.doc
    if keep is not None:
        codes, lengths, doc = codes[keep], lengths[keep], doc[keep]
    if not len(codes):
        zero = np.zeros(pieces.n_docs)
        return zero, zero.copy()
    key = doc * (int(codes.max()) + 1) + codes
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    repeat = np.empty(len(key), dtype=bool)
    repeat[order] = np.concatenate(([False], sorted_key[1:] == sorted_key[:-1]))
    count = np.bincount(doc, weights=repeat.astype(np.float64), minlength=pieces.n_docs)
    chars = np.bincount(doc, weights=np.where(repeat, lengths, 0).astype(np.float64), minlength=pieces.n_docs)
    return count, chars


def ratio(num, den, empty: float = 0.0) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.full(num.shape, empty, dtype=np.float64), where=den > 0)


def count(text: pa.Array, pattern: str, regex: bool = True, ignore_case: bool = False) -> np.ndarray:
    fn = pc.count_substring_regex if regex else pc.count_substring
    return _np(fn(text, pattern, ignore_case=ignore_case)).astype(np.float64)


def pack_pieces(pieces, size: int) -> list[str]:
    """Pieces of text (sentences, lines) joined with spaces into chunks of at most about `size`
    characters; a piece longer than `size` is a chunk of its own. Empty pieces are skipped."""
    out, current = [], ""
    for piece in pieces:
        if not piece or not piece.strip():
            continue
        if current and len(current) + len(piece) > size:
            out.append(current)
            current = ""
        current = f"{current} {piece}" if current else piece
    if current:
        out.append(current)
    return out
