"""Held-out bits-per-byte, overall and per source.

BPB = summed NLL in nats over the scored tokens / (ln 2 x UTF-8 bytes of exactly those tokens' text).
Scored tokens are LOSS targets; META prefixes and padding never are. Attribution is per doc-index
piece (data.Pieces): a piece counts, with its nats and the `bytes` the doc index gives it (the raw
text's bytes, so the figure does not depend on the tokenizer), only when every one of its scorable
tokens was scored. So a document cut by `max_rows` or by the end of a flat window, or a FIM variant,
adds either all of its text and bytes or none; nats of tokens outside every counted piece are not
scored. With the prefix kept in context the model may read it (conditional); `no_prefix` removes META
tokens from the rows first (unconditional: what a model without metadata at inference sees). A packed
row's first token is context only (a document's BOS, or the first token of a continuation chunk,
whose bytes the doc index leaves out).
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from assay.pipeline.tokens import META

from .data import Pieces, TokenRows, strip_prefix, target_weights
from .model import GPT, IGNORE


def evaluate(model: GPT, path: str | Path, batch_size: int = 16, max_rows: int | None = None,
             no_prefix: bool = True, seq_len: int | None = None, device: str | torch.device = "cpu",
             autocast=None) -> dict:
    rows = TokenRows(path, seq_len)
    n = len(rows) if max_rows is None else min(len(rows), max_rows)
    pieces = Pieces(rows)
    variants = {"prefix": False, "no_prefix": True} if no_prefix else {"prefix": False}
    k = len(pieces)
    acc = {v: (np.zeros(k), np.zeros(k, np.int64)) for v in variants}
    has_meta = False
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, n, batch_size):
            r = np.arange(lo, min(lo + batch_size, n))
            tokens, mask = rows.get(r)
            src = pieces.get(r)
            batch_meta = bool((mask & META).any())
            has_meta |= batch_meta
            for name, strip in variants.items():
                if strip and not batch_meta:  # no prefix to remove: the same rows score the same
                    part = prefix_part
                else:
                    t, m, s = strip_prefix(tokens, mask, rows.pad_id, src) if strip else (tokens, mask, src)
                    w = target_weights(m[:, 1:], meta_loss=False)
                    targets = np.where(w, t[:, 1:], IGNORE)
                    idx = torch.from_numpy(t[:, :-1]).to(device)
                    with autocast or nullcontext():
                        nats = model.token_nats(idx, torch.from_numpy(targets).to(device)).double().cpu().numpy()
                    w &= s[:, 1:] >= 0
                    bucket = s[:, 1:][w]
                    part = np.bincount(bucket, weights=nats[w], minlength=k), np.bincount(bucket, minlength=k)
                if not strip:
                    prefix_part = part
                acc[name][0][:] += part[0]
                acc[name][1][:] += part[1]
    finally:
        model.train(was_training)
    out = _summary(acc["prefix"], pieces, n)
    if no_prefix and has_meta:
        out["no_prefix"] = _summary(acc["no_prefix"], pieces, n)
    return out


def _bpb(nats: float, nbytes: int) -> float | None:
    return nats / (math.log(2) * nbytes) if nbytes > 0 else None


def _summary(acc, pieces: Pieces, n_rows: int) -> dict:
    nats, count = acc
    counted = (count == pieces.expected) & (pieces.expected > 0)
    k = len(pieces.names)
    by = lambda values: np.bincount(pieces.source[counted], weights=values[counted], minlength=k)  # noqa: E731
    src_nats, src_count, src_bytes = by(nats), by(count).astype(np.int64), by(pieces.bytes).astype(np.int64)
    per = {}
    for i, name in enumerate(pieces.names):
        per[name or "(none)"] = {"bpb": _bpb(src_nats[i], int(src_bytes[i])), "nats": round(float(src_nats[i]), 3),
                                 "tokens": int(src_count[i]), "bytes": int(src_bytes[i]),
                                 "loss": round(float(src_nats[i] / max(src_count[i], 1)), 5)}
    total_bytes = int(src_bytes.sum())
    return {"bpb": _bpb(float(src_nats.sum()), total_bytes),
            "loss": round(float(src_nats.sum() / max(src_count.sum(), 1)), 5), "tokens": int(src_count.sum()),
            "bytes": total_bytes, "rows": n_rows, "pieces": int(counted.sum()),
            "pieces_partly_scored": int(((count > 0) & ~counted).sum()), "per_source": per}
