"""Packing documents into fixed-length, BOS-aligned rows: best fit, and greedy for comparison.

Every row starts at a document's BOS; a document longer than a row is cropped to one row (its tail is
*cropped* waste). Best fit keeps a lookahead of documents sorted by length and fills each row with
the longest document that still fits, again and again; the room no document fits is padded
(*padded* waste), or filled with the head of the shortest document when that crops fewer tokens. Greedy takes documents in order and crops the one that overflows a row to fill it; it never
pads but crops far more. Both read only lengths, so the same drawn sequence can be packed both ways
and their waste compared.
"""
from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


@dataclass
class Waste:
    documents: int = 0
    tokens: int = 0      # document tokens drawn, before cropping
    cropped: int = 0
    padded: int = 0
    rows: int = 0

    def to_json(self, seq_len: int) -> dict:
        capacity = self.rows * seq_len
        return {"rows": self.rows, "documents": self.documents, "document_tokens": self.tokens,
                "cropped_tokens": self.cropped, "padded_tokens": self.padded,
                "cropped_fraction": self.cropped / self.tokens if self.tokens else 0.0,
                "padded_fraction": self.padded / capacity if capacity else 0.0,
                "waste_fraction": (self.cropped + self.padded) / (self.tokens + self.padded) if self.tokens else 0.0}


def best_fit(items: Iterable[T], seq_len: int, lookahead: int, length: Callable[[T], int],
             waste: Waste | None = None, on_crop: Callable[[T, int], None] | None = None
             ) -> Iterator[list[tuple[T, int]]]:
    """Rows as lists of (item, tokens taken). Deterministic: ties go to the earliest item.

    When no document fits the room left in a row, the shortest one is cropped into it if that
    loses fewer tokens than padding would (`on_crop(item, tokens lost)` is told)."""
    waste = waste if waste is not None else Waste()
    source = iter(items)
    buffer: list[tuple[int, int, T]] = []  # (taken length, arrival, item), sorted
    arrival = 0
    exhausted = False

    def refill() -> None:
        nonlocal arrival, exhausted
        while not exhausted and len(buffer) < lookahead:
            try:
                item = next(source)
            except StopIteration:
                exhausted = True
                return
            full = length(item)
            take = min(full, seq_len)
            waste.documents += 1
            waste.tokens += full
            waste.cropped += full - take
            # negative arrival: among equal lengths the earliest sorts last, where bisect finds it
            insort(buffer, (take, -arrival, item), key=lambda x: (x[0], x[1]))
            arrival += 1

    while True:
        refill()
        if not buffer:
            return
        row: list[tuple[T, int]] = []
        space = seq_len
        while space > 0:
            refill()
            i = bisect_right(buffer, space, key=lambda x: x[0]) - 1
            if i < 0:
                # crop the shortest document into the room only if that loses less than padding, and
                # only while more documents can come (the draw makes up for cropped tokens)
                if exhausted or not buffer or buffer[0][0] - space >= space:
                    break
                take, _, item = buffer.pop(0)
                waste.cropped += take - space
                if on_crop is not None:
                    on_crop(item, take - space)
                row.append((item, space))
                space = 0
                break
            take, _, item = buffer.pop(i)
            row.append((item, take))
            space -= take
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
