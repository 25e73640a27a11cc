"""Packing documents into fixed-length rows: best fit, and greedy for comparison.

A document longer than a row is *split* (the default): it continues across rows as chunks of at most
a row, each packed like any other piece. A chunk after the first starts with one token of overlap,
the previous chunk's last token, as context only (its loss bit cleared), so every token of a document
is trained on exactly once and the chunks reassemble into the document. Best fit keeps a lookahead of
pieces sorted by length and fills each row with the longest piece that still fits, again and again;
when none fits the room left, the shortest piece is split there (its head fills the row, its tail,
with one token of overlap, goes back among the pieces), so only the stage's last rows are padded.

With `split=None` (a stage's `long_docs: crop`) a document is *cropped* to one row instead (its tail
is cropped waste) and rows start at a document's BOS; the room no document fits is padded, or filled
with the head of the shortest document when that crops fewer tokens. Greedy takes documents in order
and crops the one that overflows a row to fill it; it never pads but crops far more. Both read only
lengths, so the same drawn sequence can be packed both ways and their waste compared.
"""
from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass
class Waste:
    documents: int = 0
    tokens: int = 0      # document tokens drawn, before cropping
    cropped: int = 0
    padded: int = 0
    overlap: int = 0     # tokens repeated as the first (context-only) token of a continuation chunk
    unfinished: int = 0  # tokens of started documents whose later chunks the budget left undrawn
    # (not drawn, so not waste: a stage ends inside its last documents, as a token budget must)
    rows: int = 0

    def to_json(self, seq_len: int) -> dict:
        capacity = self.rows * seq_len
        return {"rows": self.rows, "documents": self.documents, "document_tokens": self.tokens,
                "cropped_tokens": self.cropped, "padded_tokens": self.padded, "overlap_tokens": self.overlap,
                "unfinished_tokens": self.unfinished,
                "unfinished_fraction": self.unfinished / (self.tokens + self.unfinished) if self.tokens else 0.0,
                "kept_fraction": 1 - self.cropped / self.tokens if self.tokens else 1.0,
                "cropped_fraction": self.cropped / self.tokens if self.tokens else 0.0,
                "padded_fraction": self.padded / capacity if capacity else 0.0,
                "overlap_fraction": self.overlap / capacity if capacity else 0.0,
                "waste_fraction": (self.cropped + self.padded + self.overlap) / (self.tokens + self.padded + self.overlap)
                if self.tokens else 0.0}


def chunks(length: int, seq_len: int) -> list[tuple[int, int]]:
    """(offset, tokens) of the row-sized chunks of a `length`-token document: the first holds
    `seq_len` tokens, each later one the previous chunk's last token again and up to seq_len - 1 more."""
    out = [(0, min(length, seq_len))]
    while out[-1][0] + out[-1][1] < length:
        start = out[-1][0] + out[-1][1] - 1
        out.append((start, min(length - start, seq_len)))
    return out


def chunked_length(length, seq_len: int):
    """Tokens a document (or an array of them) occupies in rows when split: its own plus one of
    overlap per later chunk."""
    return length + np.maximum(0, -(-(length - seq_len) // (seq_len - 1)))


def best_fit(items: Iterable[T], seq_len: int, lookahead: int, length: Callable[[T], int],
             waste: Waste | None = None, on_crop: Callable[[T, int], None] | None = None,
             split: Callable[[T, int], tuple[T, T]] | None = None) -> Iterator[list[tuple[T, int]]]:
    """Rows as lists of (item, tokens taken). Deterministic: ties go to the earliest item.

    `split(item, n)` -> (head of n tokens, tail holding the rest and one token of overlap) splits
    items: longer than a row on arrival, or the shortest one into the room no item fits. Without it,
    items are cropped to a row, and when none fits the room the shortest is cropped into it if that
    loses fewer tokens than padding would (`on_crop(item, tokens lost)` is told)."""
    waste = waste if waste is not None else Waste()
    source = iter(items)
    buffer: list[tuple[int, int, T]] = []  # (taken length, arrival, item), sorted
    arrival = 0
    exhausted = False

    def put(take: int, item: T) -> None:
        nonlocal arrival
        # negative arrival: among equal lengths the earliest sorts last, where bisect finds it
        insort(buffer, (take, -arrival, item), key=lambda x: (x[0], x[1]))
        arrival += 1

    def refill() -> None:
        nonlocal exhausted
        while not exhausted and len(buffer) < lookahead:
            try:
                item = next(source)
            except StopIteration:
                exhausted = True
                return
            full = length(item)
            waste.documents += 1
            waste.tokens += full
            if split is None:
                waste.cropped += full - min(full, seq_len)
                put(min(full, seq_len), item)
                continue
            while full > seq_len:
                head, item = split(item, seq_len)
                put(seq_len, head)
                full -= seq_len - 1
                waste.overlap += 1
            put(full, item)

    while True:
        refill()
        if not buffer:
            return
        row: list[tuple[T, int]] = []
        space = seq_len
        while space > 0:
            refill()
            i = bisect_right(buffer, space, key=lambda x: x[0]) - 1
            if i >= 0:
                take, _, item = buffer.pop(i)
                row.append((item, take))
                space -= take
                continue
            if split is not None and space >= 2 and buffer:
                take, _, item = buffer.pop(0)  # the shortest piece: its head fills the row
                head, tail = split(item, space)
                row.append((head, space))
                put(take - space + 1, tail)
                waste.overlap += 1
                space = 0
                break
            # crop the shortest document into the room only if that loses less than padding, and
            # only while more documents can come (the draw makes up for cropped tokens)
            if split is not None or exhausted or not buffer or buffer[0][0] - space >= space:
                break
            take, _, item = buffer.pop(0)
            waste.cropped += take - space
            if on_crop is not None:
                on_crop(item, take - space)
            row.append((item, space))
            space = 0
        waste.padded += space
        waste.rows += 1
        yield row


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
