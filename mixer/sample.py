"""Drawing documents for a stage: one seeded stream per slot, interleaved to hold the target shares.

A slot's stream passes over its eligible documents in a fresh seeded permutation per epoch (under
cluster rebalance a document appears floor(w) times per pass, plus once more with probability frac(w))
and stops before it would exceed `max_epochs` passes' worth of tokens. A document longer than a row
comes as its pieces (pack.chunks), one draw each, so no single pull moves a source's share by more
than a row (unless the stage crops long documents). The interleaver pulls from the slot whose next
document keeps it closest to its share, so realized shares stay within about one document of the
targets while the stage fills; the whole stage is a deterministic function of the seed and the
pools, drawn lazily, never held in memory.

Documents are drawn whole. As a slot nears its share, it takes the next of its documents (within
SCAN places of its permutation) that fits what the slot has left, or when none does the one that
overshoots it least, so it ends within SLACK of the budget past its share without cutting a
document. Only when every one of them would overshoot by more than that and one is longer than a
row (a paper or a book in a small stage) is the shortest such cut where the share ends (never
inside its first piece's BOS and prefix, nor into a piece under min_piece), the rest counted as
cropped on its last piece. A document that fits a row is never cut.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import xxhash

from .pack import chunked_length, chunks, min_piece
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


SCAN = 64  # places of a slot's permutation searched for a document that fits what the slot has left
SLACK = 0.01  # of the budget: how far past its share a slot may end to finish its last document whole


class SlotStream:
    def __init__(self, slot: Slot, index: int, seed: int, seq_len: int, meta: bool, fim_rate: float,
                 split: bool = True):
        self.slot, self.index, self.seq_len, self.split = slot, index, seq_len, split
        self._chunks: list[Draw] = []  # the rest of a document being drawn piece by piece
        self.key = (seed, slot.stage, slot.source, slot.origin)
        pool = slot.pool
        self.full = pool.packed_length(meta)[slot.eligible]
        self.fim_full = self.full - pool.text_tokens[slot.eligible] + pool.fim_length[slot.eligible]
        self.head = 2 + pool.prefix[slot.eligible] * bool(meta)  # BOS, prefix, a text token: the first piece's least
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
        self._peeked_counts = self._counts = 0.0
        self.cuts = False  # the document being drawn is cut where the slot's share ends
        self._head = 2  # BOS, prefix and a text token of the document being drawn
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

    def peek(self, room: float = np.inf, slack: float = 0.0) -> Draw | None:
        """The next draw, without taking it (None once the pool or the cap is spent); a document is
        chosen for `room`, the tokens the slot has left, give or take `slack` (module docstring)."""
        if self._peeked is None and not self.done:
            self._peeked, self._peeked_counts = self._advance(room, slack), self._counts
        return self._peeked

    def next(self) -> Draw | None:
        d = self.peek()
        self._peeked = None
        self.taken += self._peeked_counts  # a document counts once, as the plan counts it
        return d

    def _choose(self, room: float, slack: float, whole: bool) -> int | None:
        """The place (from the current one) of the document to draw next, among the next SCAN and
        within the cap: the first that fits `room`; else the one that overshoots it least, if by at
        most `slack`; else the shortest longer than a row, to be cut where the share ends
        (`self.cuts`); else the shortest. None: the cap allows none of them. `whole`: only a
        document that fits `room` in one piece, among all the pass has left."""
        places = slice(self._pos, None if whole else self._pos + SCAN)
        j = self._order[places]
        counted = self.slot.lengths[j]  # as the plan counts it, for the cap
        length = np.where(self._fim[places] & self.has_fim[j], self.fim_full[j], self.full[j])
        placed = chunked_length(length, self.seq_len) if self.split else np.minimum(length, self.seq_len)
        allowed = self.used + counted <= self.limit * (1 + 1e-9)
        fits = allowed & (placed <= room) & ((length <= self.seq_len) | (not whole))
        self.cuts = False
        if fits.any():
            return self._pos + int(np.argmax(fits))
        if whole or not allowed.any():
            return None
        least = int(np.argmin(np.where(allowed, placed, np.inf)))
        long = allowed & (length > self.seq_len)
        if placed[least] - room > slack and long.any():
            self.cuts = True
            return self._pos + int(np.argmin(np.where(long, placed, np.inf)))
        return self._pos + least

    def _advance(self, room: float, slack: float = 0.0, whole: bool = False) -> Draw | None:
        self._counts = 0.0  # what the draw adds to `taken`
        if self._chunks:
            return self._chunks.pop(0)
        if self._pos >= len(self._order) and not self._next_pass():
            self.done = True
            return None
        k = self._choose(room, slack, whole)
        if k is None:
            self.done = not whole  # the cap: never a token past max_epochs passes
            return None
        p = self._pos  # the chosen document moves up to this place, with its FIM draw
        self._order[[p, k]] = self._order[[k, p]]
        self._fim[[p, k]] = self._fim[[k, p]]
        j = int(self._order[p])
        self._head = int(self.head[j])
        self.used += float(self.slot.lengths[j])
        self._counts = float(self.slot.lengths[j])
        fim = bool(self._fim[p] and self.has_fim[j])
        self._pos += 1
        length = int(self.fim_full[j] if fim else self.full[j])
        doc = int(self.slot.eligible[j])
        if not self.split:
            take = min(length, self.seq_len)
            return Draw(self.index, doc, self.epoch, fim, length, take, 0, length - take)
        parts = [Draw(self.index, doc, self.epoch, fim, length, n, o)
                 for o, n in chunks(length, self.seq_len, self._head)]
        self._chunks = parts[1:]
        return parts[0]

    def fitting(self, room: int) -> Draw | None:
        """A whole document of at most `room` tokens, in one piece, if one is within SCAN places of
        the permutation and the cap (to top up a stage's last rows); a peeked draw stays next."""
        if self.done or self._chunks:
            return None
        d = self._peeked
        if d is not None and d.take == d.length <= room:
            return self.next()
        d = self._advance(room, whole=True)
        self.taken += self._counts
        return d

    @property
    def inside(self) -> bool:
        """The document being drawn has pieces left."""
        return bool(self._chunks) or (self._peeked is not None and self._peeked.offset > 0)

    def cut(self, d: Draw, room: float) -> Draw:
        """`d`, a piece of a document cut where the slot's share ends (`room` tokens from now),
        shortened to it (but to no less than min_piece, nor than BOS, the prefix and a text token),
        the last the slot takes of the document: the rest is counted as cropped."""
        least = max(min_piece(self.seq_len), 0 if d.offset else self._head)
        take = min(d.take, max(int(np.ceil(room)), least))
        self._chunks = []
        return replace(d, take=take, cropped=d.length - d.offset - take)

    @property
    def epochs(self) -> float:
        return self.taken / self.slot.available if self.slot.available else 0.0


def draw_stage(slots: list[Slot], streams: list[SlotStream], budget: float, exact: bool = False) -> Iterator[Draw]:
    """Documents in stage order until `budget` tokens (as placed in rows) are drawn. Each pull goes
    to the slot whose next document leaves it least far ahead of its share, so shares stay close to
    their targets even when single documents are large against the budget.

    `exact` (documents split across rows): every slot draws until it reaches its share of the
    budget, ending on whole documents within SLACK of the budget of it (the module docstring says
    how); a document it starts is finished, unless it had to start one it must cut."""
    shares = np.array([max(s.share, 1e-12) for s in slots])
    target = np.array([s.share for s in slots]) * budget
    slack = SLACK * budget
    credit = np.zeros(len(slots))
    ahead = np.full(len(slots), np.inf)
    while exact or credit.sum() < budget:
        for j, stream in enumerate(streams):
            open_ = slots[j].share > 0 and not (exact and credit[j] >= target[j] - 0.5 and not stream.inside)
            nxt = stream.peek(target[j] - credit[j] if exact else np.inf, slack) if open_ else None
            ahead[j] = (credit[j] + nxt.take) / shares[j] if nxt is not None else np.inf
        j = int(np.argmin(ahead))
        if not np.isfinite(ahead[j]):
            return
        d = streams[j].next()
        if exact and streams[j].cuts and credit[j] + d.take > target[j] - 0.5:
            d = streams[j].cut(d, target[j] - credit[j])
        credit[j] += d.take
        yield d
