"""Held-out bits-per-byte, overall and per source.

BPB = summed NLL in nats over the scored tokens / (ln 2 x UTF-8 bytes of the documents), the bytes
taken from the doc index `bytes` column (the raw text's bytes, so the figure does not depend on the
tokenizer). Scored tokens are LOSS targets; META prefixes and padding never are. With the prefix kept in
context the model may read it (conditional); `no_prefix` removes META tokens from the rows first
(unconditional: what a model without metadata at inference sees). In packed rows each row's first
token is context only, never scored; that bias is the same for every model on a fixed set.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from assay.pipeline.tokens import META

from .data import SourceMap, TokenRows, strip_prefix, target_weights
from .model import GPT, IGNORE


def evaluate(model: GPT, path: str | Path, batch_size: int = 16, max_rows: int | None = None,
             no_prefix: bool = True, seq_len: int | None = None, device: str | torch.device = "cpu",
             autocast=None) -> dict:
    rows = TokenRows(path, seq_len)
    n = len(rows) if max_rows is None else min(len(rows), max_rows)
    smap = SourceMap(rows, limit=n)
    variants = {"prefix": False, "no_prefix": True} if no_prefix else {"prefix": False}
    k = len(smap.names) + 1  # last bucket: scored tokens outside every doc piece
    acc = {v: (np.zeros(k), np.zeros(k, np.int64)) for v in variants}
    has_meta = False
    was_training = model.training
    model.eval()
    try:
        for lo in range(0, n, batch_size):
            r = np.arange(lo, min(lo + batch_size, n))
            tokens, mask = rows.get(r)
            src = smap.get(r)
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
                    bucket = np.where(s[:, 1:] >= 0, s[:, 1:], k - 1)[w]
                    part = np.bincount(bucket, weights=nats[w], minlength=k), np.bincount(bucket, minlength=k)
                if not strip:
                    prefix_part = part
                acc[name][0][:] += part[0]
                acc[name][1][:] += part[1]
    finally:
        model.train(was_training)
    out = _summary(acc["prefix"], smap, n)
    if no_prefix and has_meta:
        out["no_prefix"] = _summary(acc["no_prefix"], smap, n)
    return out


def _bpb(nats: float, nbytes: int) -> float | None:
    return round(nats / (math.log(2) * nbytes), 5) if nbytes > 0 else None


def _summary(acc, smap: SourceMap, n_rows: int) -> dict:
    nats, count = acc
    total_bytes = int(smap.bytes.sum())
    per = {}
    for i, name in enumerate(smap.names):
        per[name or "(none)"] = {"bpb": _bpb(nats[i], int(smap.bytes[i])), "nats": round(float(nats[i]), 3),
                                 "tokens": int(count[i]), "bytes": int(smap.bytes[i]),
                                 "loss": round(float(nats[i] / max(count[i], 1)), 5)}
    return {"bpb": _bpb(float(nats.sum()), total_bytes), "loss": round(float(nats.sum() / max(count.sum(), 1)), 5),
            "tokens": int(count.sum()), "bytes": total_bytes, "rows": n_rows, "per_source": per}
