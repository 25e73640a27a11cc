"""Turning a drawn document into the tokens and mask it places in a row.

A piece is BOS, the metadata prefix (when the stage keeps it; flagged META and LOSS, so the trainer
may train on it, mask it or drop it), the text (or its FIM variant), and EOS; cropped to the tokens
the packer gave it. The text's LOSS bit is cleared on the spans whose `segments` role the stage masks
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
        """(tokens, mask, prefix tokens in the piece, text bytes in the piece) of a drawn document."""
        slot = self.slots[d.slot]
        pool, i = slot.pool, d.doc
        stream = self._stream(slot, int(pool.shard[i]))
        s, p, n = int(pool.start[i]), int(pool.prefix[i]), int(pool.length[i])
        p = p if self.stage.meta else 0
        room = take - 1  # after BOS
        parts_t = [np.array([self.ids["bos"]])]
        parts_m = [np.zeros(1, np.uint8)]
        if p:
            k = min(p, room)
            t, m = stream.read(s, k)
            parts_t.append(t)
            parts_m.append(m)
            room -= k
        if d.fim:
            start, length = int(pool.fim_start[i]), int(pool.fim_length[i])
        else:
            start, length = s + int(pool.prefix[i]), n - int(pool.prefix[i])
        k = min(length, room)
        body_t, body_m = stream.read(start, k)
        if not d.fim and self.stage.mask_roles and pool.has_roles[i]:
            self.counts.role_masked += _mask_roles(body_m, pool, i, self.stage.mask_roles)
        parts_t.append(body_t)
        parts_m.append(body_m)
        room -= k
        if room > 0:
            parts_t.append(np.array([self.ids["eos"]]))
            parts_m.append(np.array([LOSS], np.uint8))
        tokens = np.concatenate(parts_t)
        mask = np.concatenate(parts_m)
        cropped = take < d.length
        nbytes = int(self.token_bytes[body_t].sum()) if cropped else int(pool.bytes[i])
        self.counts.tokens += len(tokens)
        self.counts.loss += int(np.count_nonzero(mask & LOSS))
        self.counts.meta += int(np.count_nonzero(mask & META))
        return tokens, mask, min(p, take - 1), nbytes


def _mask_roles(body_mask: np.ndarray, pool, i: int, masked: list[str]) -> int:
    """Clear LOSS on the spans of masked roles; returns how many tokens it cleared."""
    names = pool.column("role_names")[i].as_py()
    lengths = pool.column("role_lengths")[i].as_py()
    cleared = 0
    offset = 0
    for role, length in zip(names, lengths):
        if role in masked and offset < len(body_mask):
            span = body_mask[offset:offset + length]
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
    pa.field("mix_source", pa.string()),  # the mixture's source name
    pa.field("replay_of", pa.string()),   # the replayed stage, null for the stage's own mix
    pa.field("epoch", pa.int32()),
    pa.field("fim", pa.bool_()),
    pa.field("cropped", pa.int64()),      # tokens of the document cut off at the row's end
]
