"""Training rows from token shards (`assay.pipeline.tokens`): tokens, the mask channel, the doc index.

A row holds T+1 tokens; the model reads tokens[:-1] and predicts tokens[1:]. Mask flags belong to the
token *as a target* (so the flag of tokens[i+1] decides whether position i is trained on):

* PAD: never a target and not counted as seen;
* META: the metadata prefix. Trained on while `meta_loss` is on (before the configured switch), then
  masked while it stays in the context (Step 3.5 §A.3); the LOSS bit does not matter for META tokens;
* otherwise the LOSS bit decides (scaffolding, prompts and the like arrive with LOSS unset).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import torch

from assay.pipeline.errors import UserError
from assay.pipeline.tokens import LOSS, META, PAD, TokenDataset

from .model import IGNORE


def open_tokens(path: str | Path) -> TokenDataset:
    """A token dataset, checked against its commits first (sizes, checksums, counts: see verify)."""
    try:
        dataset = TokenDataset(path)
        dataset.verify()
        return dataset
    except (FileNotFoundError, ValueError) as exc:  # DamagedShards is a ValueError
        raise UserError(str(exc)) from None


class TokenRows:
    """Fixed-length rows of T+1 tokens over a token dataset: packed rows as they are, flat streams cut
    into windows that overlap by one token (so every stream token but the first is a target once)."""

    def __init__(self, path: str | Path, seq_len: int | None = None):
        self.dataset = open_tokens(path)
        self.layout = self.dataset.layout
        self.packed = bool(self.layout.seq_len)
        if not self.packed and not seq_len:
            raise UserError(f"{path}: a flat token stream needs data.seq_len (the model context)")
        self.width = self.layout.seq_len if self.packed else seq_len + 1
        self._tokens, self._masks, index = {}, {}, []
        for shard in self.dataset.shard_indexes():
            tok = self.dataset.tokens(shard)
            self._tokens[shard], self._masks[shard] = tok, self.dataset.mask(shard)
            if self.packed:
                starts = np.arange(len(tok), dtype=np.int64)
            else:
                starts = np.arange(0, max(len(tok) - 1, 0), self.width - 1, dtype=np.int64)
            index.append(np.stack([np.full(len(starts), shard, np.int64), starts], 1))
        self.index = np.concatenate(index) if index else np.zeros((0, 2), np.int64)
        if len(self.index) == 0:
            raise UserError(f"{path}: holds no tokens")
        self.pad_id = self.layout.pad_id if self.layout.pad_id is not None else 0

    def __len__(self) -> int:
        return len(self.index)

    @property
    def context(self) -> int:
        return self.width - 1

    def get(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """tokens int64 [n, T+1] and mask uint8 [n, T+1] for row numbers `rows` (short windows padded)."""
        tokens = np.full((len(rows), self.width), self.pad_id, np.int64)
        mask = np.full((len(rows), self.width), PAD, np.uint8)
        for i, r in enumerate(rows):
            shard, start = self.index[r]
            if self.packed:
                tokens[i], mask[i] = self._tokens[shard][start], self._masks[shard][start]
            else:
                piece = self._tokens[shard][start:start + self.width]
                tokens[i, : len(piece)] = piece
                mask[i, : len(piece)] = self._masks[shard][start:start + self.width]
        return tokens, mask


class Loader:
    """Shuffled micro-batches of rows, epoch after epoch; its state (epoch, cursor) makes resume exact."""

    def __init__(self, rows: TokenRows, batch_size: int, seed: int, shuffle: bool = True):
        self.rows, self.batch_size, self.seed, self.shuffle = rows, batch_size, seed, shuffle
        self.epoch, self.cursor = 0, 0
        self._order = self._perm(0)

    def _perm(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.rows))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.rows))

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        picked = []
        need = self.batch_size
        while need:
            take = self._order[self.cursor:self.cursor + need]
            picked.append(take)
            need -= len(take)
            self.cursor += len(take)
            if self.cursor >= len(self._order):
                self.epoch, self.cursor = self.epoch + 1, 0
                self._order = self._perm(self.epoch)
        return self.rows.get(np.concatenate(picked))

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.cursor = state["epoch"], state["cursor"]
        self._order = self._perm(self.epoch)


@dataclass
class Batch:
    idx: torch.Tensor  # [B, T] input tokens
    targets: torch.Tensor  # [B, T] next tokens, IGNORE where not trained on
    next_tokens: torch.Tensor  # [B, T] raw next tokens (MTP input embeddings)
    valid: torch.Tensor  # [B, T] input token is not padding (routing statistics, seen tokens)
    n_targets: int
    n_seen: int


def target_weights(mask: np.ndarray, meta_loss: bool) -> np.ndarray:
    """Which tokens are training targets, from their mask flags (see the module docstring)."""
    is_meta = (mask & META) != 0
    trained = ((mask & LOSS) != 0) & ~is_meta
    if meta_loss:
        trained |= is_meta
    return trained & ((mask & PAD) == 0)


def make_batch(tokens: np.ndarray, mask: np.ndarray, meta_loss: bool, device: torch.device | str = "cpu") -> Batch:
    weights = target_weights(mask[:, 1:], meta_loss)
    nxt = tokens[:, 1:]
    targets = np.where(weights, nxt, IGNORE)
    valid = (mask[:, :-1] & PAD) == 0
    to = lambda a, dt: torch.from_numpy(np.ascontiguousarray(a)).to(device=device, dtype=dt)  # noqa: E731
    return Batch(to(tokens[:, :-1], torch.long), to(targets, torch.long), to(nxt, torch.long),
                 to(valid, torch.bool), int(weights.sum()), int(valid.sum()))


def strip_prefix(tokens: np.ndarray, mask: np.ndarray, pad_id: int, extra: np.ndarray | None = None):
    """Remove META positions from each row, left-aligned and padded: evaluation without the prefix.
    A row's first token stays: it is context only, and dropping it would move the next token, which
    a row that starts inside a prefix needs as a target, into its place."""
    keep = (mask & META) == 0
    keep[:, 0] = True
    out_t = np.full_like(tokens, pad_id)
    out_m = np.full_like(mask, PAD)
    out_x = None if extra is None else np.full_like(extra, -1)
    for i in range(len(tokens)):
        k = keep[i]
        n = int(k.sum())
        out_t[i, :n], out_m[i, :n] = tokens[i][k], mask[i][k]
        if extra is not None:
            out_x[i, :n] = extra[i][k]
    return out_t, out_m, out_x


# ---- per-piece attribution for evaluation -------------------------------------------------------

class Pieces:
    """Each token's doc-index piece, and per piece its source, UTF-8 bytes and scorable tokens.

    A piece is a doc-index row (a document, or the chunk of one that a packed row holds); in a flat
    stream a document's FIM variant is a piece of its own with the document's bytes. A piece's
    *scorable* tokens are its LOSS, non-META tokens at positions that can be targets at all: every
    position but a packed row's first and a stream's first. Evaluation counts a piece (its nats and
    its bytes) only when it scored all of them, so BPB = bits of exactly the scored text / its bytes,
    whatever cut the rows or `max_rows` made."""

    def __init__(self, rows: TokenRows):
        ds, names = rows.dataset, {}
        self._ids: dict[int, np.ndarray] = {}
        source, nbytes, expected = [], [], []
        for shard in ds.shard_indexes():
            docs = ds.docs(shard)
            tok = rows._tokens[shard]
            ids = np.full(tok.size, -1, np.int64)
            if docs.num_rows:
                width = rows.width if rows.packed else 0
                src = pc.fill_null(docs.column("source"), "").to_pylist() if "source" in docs.column_names \
                    else [""] * docs.num_rows
                col = {c: docs.column(c).to_numpy() for c in ("row", "start", "length")}
                b = docs.column("bytes").to_numpy() if "bytes" in docs.column_names else np.zeros(docs.num_rows, np.int64)
                spans = list(zip(col["row"] * width + col["start"], col["length"], src, b))
                if not rows.packed and "fim_start" in docs.column_names:
                    fim = zip(docs.column("fim_start").to_numpy(), docs.column("fim_length").to_numpy(), src, b)
                    spans += [(s, n, name, nb) for s, n, name, nb in fim if s >= 0]
                for s, n, name, nb in spans:
                    ids[int(s):int(s) + int(n)] = len(source)
                    source.append(names.setdefault(name, len(names)))
                    nbytes.append(int(nb))
            scorable = target_weights(np.asarray(rows._masks[shard]).reshape(-1), meta_loss=False)
            if rows.packed:
                scorable.reshape(tok.shape)[:, 0] = False
            elif scorable.size:
                scorable[0] = False
            hit = ids[scorable & (ids >= 0)]
            expected.append(np.bincount(hit, minlength=len(source)))
            self._ids[shard] = ids.reshape(tok.shape)
        self.names = list(names)
        self.source = np.array(source, np.int64)
        self.bytes = np.array(nbytes, np.int64)
        self.expected = np.zeros(len(source), np.int64)
        for e in expected:
            self.expected[:len(e)] += e
        self.rows = rows

    def __len__(self) -> int:
        return len(self.source)

    def get(self, rows: np.ndarray) -> np.ndarray:
        """Piece id per token [n, T+1] of row numbers `rows` (-1: no piece, or padding)."""
        out = np.full((len(rows), self.rows.width), -1, np.int64)
        for i, r in enumerate(rows):
            shard, start = self.rows.index[r]
            ids = self._ids[shard]
            piece = ids[start] if self.rows.packed else ids[start:start + self.rows.width]
            out[i, : len(piece)] = piece
        return out
