"""Packing whole pieces into fixed-length rows: best-fit decreasing, and greedy for comparison.

Only a document longer than a row is cut (Ding et al. 2024, "Fewer Truncations Improve Language
Modeling"), before packing, into the pieces `chunks` gives: whole rows, except its last piece and,
when that last piece would be shorter than `min_piece(seq_len)`, its first, which gives the last the
difference. So a document that fits a row is never split, its metadata prefix is never split (it
sits in the first piece, which starts at BOS), and no piece of a split document is shorter than
min_piece. A piece after the first starts with one token of overlap, the previous piece's last
token, as context only (its loss bit cleared): a row's first token is never a training target, so
the overlap makes every token of a document a target exactly once, and the pieces reassemble into
the document. A continuation repeats neither BOS (BOS marks where a document starts) nor the prefix
(it is the document's, trained on or masked once; repeating it would spend tokens on every row).

Best fit reads `lookahead` pieces at a time, longest first, and puts each into the open row with the
least room that still holds it (a new row when none does); rows close when full, and the fullest
closes when more than lookahead / 8 are open. When the pieces run out, `more(room)` may top up the
open rows with pieces that fit them, so a stage's last rows are full too. The packer reads only
lengths, so the same drawn sequence is packed by best fit and by greedy to compare their waste.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np

T = TypeVar("T")

MIN_PIECE = 32  # the shortest piece of a split document (a quarter of the row in rows under 128 tokens)


def min_piece(seq_len: int) -> int:
    return min(MIN_PIECE, seq_len // 4)


@dataclass
class Waste:
    documents: int = 0
    tokens: int = 0      # tokens of the documents drawn, cropped and cut ones included
    cropped: int = 0     # in no row: tails of long documents a stage crops to a row (long_docs: crop)
    cut: int = 0         # in no row: tails of long documents a slot's share ended inside (sample.py)
    padded: int = 0
    overlap: int = 0     # tokens repeated as the first (context-only) token of a continuation piece
    rows: int = 0

    def to_json(self, seq_len: int) -> dict:
        capacity = self.rows * seq_len
        return {"rows": self.rows, "documents": self.documents, "document_tokens": self.tokens,
                "cropped_tokens": self.cropped, "cut_tokens": self.cut, "padded_tokens": self.padded,
                "overlap_tokens": self.overlap,
                "kept_fraction": 1 - self.cropped / self.tokens if self.tokens else 1.0,
                "cropped_fraction": self.cropped / self.tokens if self.tokens else 0.0,
                "cut_fraction": self.cut / self.tokens if self.tokens else 0.0,
                "in_rows_fraction": 1 - (self.cropped + self.cut) / self.tokens if self.tokens else 1.0,
                "padded_fraction": self.padded / capacity if capacity else 0.0,
                "overlap_fraction": self.overlap / capacity if capacity else 0.0,
                "waste_fraction": (self.cropped + self.padded + self.overlap) / (self.tokens + self.padded + self.overlap)
                if self.tokens else 0.0}  # what packing wastes: a cut is the draw's choice (like a document not drawn)


def chunks(length: int, seq_len: int, head: int = 1) -> list[tuple[int, int]]:
    """(offset, tokens) of the pieces of a `length`-token document: one piece if it fits a row; else
    whole rows, each after the first starting with the previous one's last token again, and the
    rest. A rest shorter than min_piece takes the difference from the first piece, if the first
    still holds its `head` tokens (BOS and the prefix, and a text token)."""
    if length <= seq_len:
        return [(0, length)]
    count = 1 + -(-(length - seq_len) // (seq_len - 1))
    rest = length + count - 1 - (count - 1) * seq_len  # the last piece's tokens, its overlap included
    give = max(0, min_piece(seq_len) - rest)
    first = seq_len - give if seq_len - give >= head else seq_len
    out = [(0, first)]
    while out[-1][0] + out[-1][1] < length:
        start = out[-1][0] + out[-1][1] - 1
        out.append((start, min(length - start, seq_len)))
    return out


def chunked_length(length, seq_len: int):
    """Tokens a document (or an array of them) occupies in rows when split: its own plus one of
    overlap per later piece."""
    return length + np.maximum(0, -(-(length - seq_len) // (seq_len - 1)))


def best_fit(items: Iterable[T], seq_len: int, lookahead: int, length: Callable[[T], int],
             waste: Waste | None = None, more: Callable[[int], T | None] | None = None) -> Iterator[list[tuple[T, int]]]:
    """Rows as lists of (item, tokens); every item whole (at most seq_len tokens: split or crop
    longer documents first). Deterministic: ties go to the earliest item and the earliest row.
    `more(room)`, once the items run out, gives another item of at most `room` tokens, or None."""
    waste = waste if waste is not None else Waste()
    source = iter(items)
    rooms: list[tuple[int, int]] = []  # (room, row number) of the open rows, sorted
    rows: dict[int, list[tuple[T, int]]] = {}
    opened = 0
    ready: list[list[tuple[T, int]]] = []  # rows closed, in the order they closed

    def close(row: int, room: int) -> None:
        waste.padded += room
        waste.rows += 1
        ready.append(rows.pop(row))

    def place(item: T) -> None:
        nonlocal opened
        n = length(item)
        if not 0 < n <= seq_len:
            raise ValueError(f"a piece of {n} tokens cannot go into rows of {seq_len}")
        i = bisect_left(rooms, (n, -1))
        if i < len(rooms):
            room, row = rooms.pop(i)
        else:
            room, row = seq_len, opened
            rows[row] = []
            opened += 1
        rows[row].append((item, n))
        if room - n:
            insort(rooms, (room - n, row))
        else:
            close(row, 0)

    max_open = max(1, lookahead // 8)
    while True:
        window = [item for _, item in zip(range(lookahead), source)]
        for _, _, item in sorted(((-length(item), k, item) for k, item in enumerate(window)), key=lambda x: x[:2]):
            place(item)
        while len(rooms) > max_open:
            close(*reversed(rooms.pop(0)))
        yield from ready
        ready.clear()
        if len(window) < lookahead:
            break
    while more is not None and rooms:
        item = more(rooms[-1][0])  # nothing fits the largest room: nothing fits any
        if item is None:
            break
        place(item)
    for room, row in sorted(rooms, key=lambda x: x[1]):
        close(row, room)
    yield from ready


class Greedy:
    """Greedy BOS-aligned packing, fed one length at a time (to measure it beside best fit)."""

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self.waste = Waste()
        self.space = 0  # room left in the open row (0: none open)

    def add(self, full: int) -> None:
        self.waste.documents += 1
        self.waste.tokens += full
        if self.space == 0:
            self.space = self.seq_len
            self.waste.rows += 1
        take = min(full, self.space)
        self.waste.cropped += full - take
        self.space -= take

    def finish(self) -> Waste:
        self.waste.padded += self.space
        self.space = 0
        return self.waste
