"""Drawing documents for a stage: one seeded stream per slot, interleaved to hold the target shares.

A slot's stream passes over its eligible documents in a fresh seeded permutation per epoch (under
cluster rebalance a document appears floor(w) times per pass, plus once more with probability frac(w))
and stops before it would exceed `max_epochs` passes' worth of tokens. A document longer than a row
comes as its row-sized chunks (pack.chunks), one draw each, so no single pull moves a source's share
by more than a row (unless the stage crops long documents). The interleaver pulls from
the slot whose next document keeps it closest to its share, so realized shares stay within about one
document of the targets while the stage fills; the whole stage is a deterministic function of the seed and the pools, drawn
lazily, never held in memory.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import xxhash

from .pack import chunks
from .plan import Slot


@dataclass(frozen=True)
class Draw:
    slot: int       # index of the slot in the stage
    doc: int        # row in the slot's pool
    epoch: int
    fim: bool       # use the document's FIM variant
    length: int     # packed length (BOS + prefix + body + EOS) before cropping
    take: int       # tokens it will occupy: its chunk, or length cropped to seq_len
    offset: int = 0   # position of its first token in the document's packed sequence (BOS = 0)
    cropped: int = 0  # tokens of the document cut off (a stage that crops long documents)


def _seed(*parts: object) -> int:
    return xxhash.xxh64_intdigest("\x00".join(map(str, parts)).encode())


class SlotStream:
    def __init__(self, slot: Slot, index: int, seed: int, seq_len: int, meta: bool, fim_rate: float,
                 split: bool = True):
        self.slot, self.index, self.seq_len, self.split = slot, index, seq_len, split
        self._chunks: list[Draw] = []  # the rest of a document being drawn chunk by chunk
        self.abandoned = 0
        self.key = (seed, slot.stage, slot.source, slot.origin)
        pool = slot.pool
        self.full = pool.packed_length(meta)[slot.eligible]
        self.fim_full = self.full - pool.text_tokens[slot.eligible] + pool.fim_length[slot.eligible]
        self.has_fim = (pool.fim_start[slot.eligible] >= 0) & (fim_rate > 0)
        self.fim_rate = fim_rate
        self.limit = slot.cap * slot.available  # tokens this slot may consume, counted as the plan counts
        self.used = 0.0   # tokens drawn or peeked (for the cap)
        self.taken = 0.0  # tokens drawn (for the epochs realized)
        self.epoch = -1
        self._order = np.zeros(0, np.int64)
        self._fim = np.zeros(0, bool)
        self._pos = 0
        self._peeked: Draw | None = None
        self.done = slot.available <= 0

    def _next_pass(self) -> bool:
        self.epoch += 1
        rng = np.random.default_rng(_seed(*self.key, self.epoch))
        members = np.arange(len(self.slot.eligible))
        if self.slot.weights is not None:
            w = self.slot.weights
            copies = np.floor(w).astype(np.int64) + (rng.random(len(w)) < (w - np.floor(w)))
            members = np.repeat(members, copies)
        self._order = rng.permutation(members)
        self._fim = rng.random(len(self._order)) < self.fim_rate
        self._pos = 0
        return len(self._order) > 0

    def peek(self) -> Draw | None:
        """The next draw, without taking it (None once the pool or the cap is spent)."""
        if self._peeked is None and not self.done:
            self._peeked = self._advance()
        return self._peeked

    def next(self) -> Draw | None:
        d = self.peek()
        self._peeked = None
        if d is not None and d.offset == 0:  # a document counts once, as the plan counts it
            self.taken += float(self.slot.lengths[self._last])
        return d

    def _advance(self) -> Draw | None:
        if self._chunks:
            return self._chunks.pop(0)
        if self._pos >= len(self._order) and not self._next_pass():
            self.done = True
            return None
        j = self._last = int(self._order[self._pos])
        counted = float(self.slot.lengths[j])
        if self.used + counted > self.limit * (1 + 1e-9):
            self.done = True  # the cap: never a token past max_epochs passes
            return None
        self.used += counted
        fim = bool(self._fim[self._pos] and self.has_fim[j])
        self._pos += 1
        length = int(self.fim_full[j] if fim else self.full[j])
        doc = int(self.slot.eligible[j])
        if not self.split:
            take = min(length, self.seq_len)
            return Draw(self.index, doc, self.epoch, fim, length, take, 0, length - take)
        parts = [Draw(self.index, doc, self.epoch, fim, length, n, o) for o, n in chunks(length, self.seq_len)]
        self._chunks = parts[1:]
        return parts[0]

    def unfinished(self) -> int:
        """Tokens of started documents that were left undrawn (overlap excluded): a slot that reached
        its share inside a document, and the chunks still pending when the stage ended."""
        rest = self._chunks + ([self._peeked] if self._peeked is not None and self._peeked.offset else [])
        return self.abandoned + sum(d.take - 1 for d in rest)

    def stop_inside(self, d: Draw, take: int) -> Draw:
        """`d` shortened to `take` tokens; the rest of its document is left undrawn and the slot is done."""
        self.abandoned += d.take - take + sum(c.take - 1 for c in self._chunks)
        self._chunks = []
        self.done = True
        return replace(d, take=take)

    @property
    def epochs(self) -> float:
        return self.taken / self.slot.available if self.slot.available else 0.0


def draw_stage(slots: list[Slot], streams: list[SlotStream], budget: int,
               credit: np.ndarray | None = None, exact: bool = False) -> Iterator[Draw]:
    """Documents in stage order until `budget` tokens (as placed in rows) are drawn. Each pull goes
    to the slot whose next document leaves it least far ahead of its share, so shares stay close to
    their targets even when single documents are large against the budget.

    `exact` (documents split across rows): a slot stops at its share of the budget, inside its last
    document if need be (the rest is left undrawn), so shares hold to a few tokens whatever the
    document and row sizes.

    `credit` (tokens per slot) is shared with the packer: when it crops a document to fill a row it
    takes the cropped tokens back, and later pulls make up for them."""
    shares = np.array([max(s.share, 1e-12) for s in slots])
    target = np.array([s.share for s in slots]) * budget
    credit = np.zeros(len(slots)) if credit is None else credit
    ahead = np.full(len(slots), np.inf)
    while credit.sum() < budget:
        for j, stream in enumerate(streams):
            nxt = stream.peek() if slots[j].share > 0 and not (exact and credit[j] >= target[j] - 0.5) else None
            ahead[j] = (credit[j] + nxt.take) / shares[j] if nxt is not None else np.inf
        j = int(np.argmin(ahead))
        if not np.isfinite(ahead[j]):
            return
        d = streams[j].next()
        room = int(round(target[j] - credit[j]))
        if exact and d.take > room:
            d = streams[j].stop_inside(d, max(room, 1))
        credit[j] += d.take
        yield d
