"""Turning a drawn document into the tokens and mask it places in a row.

A document is BOS, the metadata prefix (when the stage keeps it; flagged META and LOSS, so the trainer
may train on it, mask it or drop it), the text (or its FIM variant), and EOS; a piece is the part of
it the packer gave a row (all of it, one of the pieces of a long document, or the head of a cropped
one). The text's LOSS bit is cleared on the spans whose `segments` role the stage masks
(scaffolding, user turns). BOS is never a target. Tokens are read from the tokenized streams with
positioned reads, so only the piece being placed is ever in memory (memory maps would leave every
page the stage touched resident).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from assay.pipeline.tokens import LOSS, MASK_SUFFIX, META, TOKENS_SUFFIX, TokenDataset, shard_stem

from .plan import Slot
from .recipe import StageSpec
from .sample import Draw


@dataclass
class MaskCounts:
    tokens: int = 0        # non-padding tokens placed
    loss: int = 0          # with LOSS
    meta: int = 0          # with META (prefix)
    role_masked: int = 0   # text tokens whose role the stage masks

    def to_json(self) -> dict:
        frac = lambda n: n / self.tokens if self.tokens else 0.0  # noqa: E731
        return {"tokens": self.tokens, "loss_fraction": frac(self.loss), "meta_fraction": frac(self.meta),
                "role_masked_fraction": frac(self.role_masked),
                "loss_fraction_prefix_masked": frac(self.loss - self.meta)}


@dataclass
class Assembler:
    slots: list[Slot]
    stage: StageSpec
    ids: dict[str, int]
    token_bytes: np.ndarray
    counts: MaskCounts = field(default_factory=MaskCounts)
    _streams: dict = field(default_factory=dict)

    def _stream(self, slot: Slot, shard: int) -> "StreamFile":
        key = (str(slot.pool.path), shard)
        if key not in self._streams:
            self._streams[key] = StreamFile(TokenDataset(slot.pool.path), shard)
        return self._streams[key]

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()

    def piece(self, d: Draw, take: int) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(tokens, mask, prefix tokens in the piece, text bytes it trains on) of tokens
        [d.offset, d.offset + take) of a drawn document's sequence BOS, prefix, text (or FIM variant),
        EOS. A piece that continues a document starts with one token of overlap: context only."""
        slot = self.slots[d.slot]
        pool, i = slot.pool, d.doc
        stream = self._stream(slot, int(pool.shard[i]))
        s, p, n = int(pool.start[i]), int(pool.prefix[i]), int(pool.length[i])
        p = p if self.stage.meta else 0
        if d.fim:
            start, length = int(pool.fim_start[i]), int(pool.fim_length[i])
        else:
            start, length = s + int(pool.prefix[i]), n - int(pool.prefix[i])
        lo, hi = d.offset, d.offset + take
        parts_t, parts_m = [], []
        if lo == 0:
            parts_t.append(np.array([self.ids["bos"]]))
            parts_m.append(np.zeros(1, np.uint8))
        a, b = max(lo, 1) - 1, min(hi, 1 + p) - 1  # prefix positions in the piece
        if b > a:
            t, m = stream.read(s + a, b - a)
            parts_t.append(t)
            parts_m.append(m)
        a, b = max(lo, 1 + p) - 1 - p, min(hi, 1 + p + length) - 1 - p  # text positions
        body_t = np.zeros(0, np.int64)
        if b > a:
            body_t, body_m = stream.read(start + a, b - a)
            if not d.fim and self.stage.mask_roles and pool.has_roles[i]:
                self.counts.role_masked += _mask_roles(body_m, pool, i, self.stage.mask_roles, a)
            parts_t.append(body_t)
            parts_m.append(body_m)
        if hi == 2 + p + length:
            parts_t.append(np.array([self.ids["eos"]]))
            parts_m.append(np.array([LOSS], np.uint8))
        tokens = np.concatenate(parts_t)
        mask = np.concatenate(parts_m)
        if lo > 0:
            mask[0] &= ~np.uint8(LOSS)  # the overlap token: the previous piece trained on it
            body_t = body_t[1:] if lo > p else body_t  # and counted its bytes
        whole = lo == 0 and hi == d.length
        nbytes = int(pool.bytes[i]) if whole else int(self.token_bytes[body_t].sum())
        self.counts.tokens += len(tokens)
        self.counts.loss += int(np.count_nonzero(mask & LOSS))
        self.counts.meta += int(np.count_nonzero(mask & META))
        return tokens, mask, max(0, min(hi, 1 + p) - max(lo, 1)), nbytes


def _mask_roles(body_mask: np.ndarray, pool, i: int, masked: list[str], first: int = 0) -> int:
    """Clear LOSS on the spans of masked roles in a piece of the text that starts at text token
    `first`; returns how many tokens it cleared."""
    names = pool.column("role_names")[i].as_py()
    lengths = pool.column("role_lengths")[i].as_py()
    cleared = 0
    offset = -first
    for role, length in zip(names, lengths):
        if role in masked and offset < len(body_mask) and offset + length > 0:
            span = body_mask[max(offset, 0):offset + length]
            cleared += int(np.count_nonzero(span & LOSS))
            span &= ~np.uint8(LOSS)
        offset += length
    return cleared


class StreamFile:
    """Positioned reads of one flat token stream shard and its mask."""

    def __init__(self, ds: TokenDataset, shard: int):
        stem = shard_stem(shard)
        self.dtype = ds.layout.dtype
        self.tokens = open(ds.local(stem + TOKENS_SUFFIX), "rb")  # a store's shard: its cached local copy
        self.mask = open(ds.local(stem + MASK_SUFFIX), "rb")

    def read(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        size = self.dtype.itemsize
        t = np.frombuffer(os.pread(self.tokens.fileno(), count * size, start * size), self.dtype)
        m = np.frombuffer(os.pread(self.mask.fileno(), count, start), np.uint8).copy()  # masks get edited
        return t, m

    def close(self) -> None:
        self.tokens.close()
        self.mask.close()


# Doc index columns of packed shards beyond the core ones (pipeline/tokens.py DOC_INDEX_SCHEMA).
PACKED_EXTRA = [
    pa.field("content_hash", pa.string()),  # of the document's text (held-out overlap checks)
    pa.field("mix_source", pa.string()),  # the mixture's source name
    pa.field("replay_of", pa.string()),   # the replayed stage, null for the stage's own mix
    pa.field("epoch", pa.int32()),
    pa.field("fim", pa.bool_()),
    pa.field("cropped", pa.int64()),      # tokens of the document after this piece in no row (long_docs: crop, or
    # a long document the budget ended inside): set on its last piece, 0 on every other
    pa.field("offset", pa.int64()),       # the piece's first token in its document's sequence (BOS = 0)
]
