"""Loading a checkpoint back into a model, for `assay eval` and anything else that scores text."""
from __future__ import annotations

from pathlib import Path

import torch

from assay.pipeline import storage
from assay.pipeline.errors import UserError

from .config import TrainConfig
from .data import TokenRows, open_tokens
from .evaluate import evaluate
from .train import autocast_for, build_model, latest_checkpoint, read_checkpoint, resolve_device


def load_model(path: str | Path, max_len: int | None = None, device: str | None = None):
    """(model in eval mode, its TrainConfig, the checkpoint dict) from a .pt file or a run directory."""
    path = storage.as_path(path)  # a file or folder, or a URL (pipeline/storage.py)
    if storage.is_dir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise UserError(f"{path}: no checkpoints/step-*.pt in this run directory")
        path = found
    if not storage.exists(path):
        raise UserError(f"{path}: no such checkpoint")
    ckpt = read_checkpoint(path)
    cfg = TrainConfig.model_validate(ckpt["config"])
    if device:
        cfg.device = device
    model = build_model(cfg, ckpt["vocab_size"], max(max_len or 0, ckpt["context"]))
    model.load_state_dict(ckpt["model"])
    return model.to(resolve_device(cfg)).eval(), cfg, ckpt


def evaluate_checkpoint(path: str | Path, sets: dict[str, str], batch_size: int = 16, max_rows: int | None = None,
                        no_prefix: bool = True) -> dict:
    # Packed rows fix their own width; RoPE tables must cover the longest.
    widths = [open_tokens(p).layout.seq_len - 1 for p in sets.values()]
    model, cfg, ckpt = load_model(path, max(widths + [0]))
    device = next(model.parameters()).device
    out = {}
    for name, p in sets.items():
        rows = TokenRows(p, cfg.data.seq_len or ckpt["context"])
        if rows.layout.vocab_size != ckpt["vocab_size"]:
            raise UserError(f"--data {name}: vocab {rows.layout.vocab_size} differs from the model's {ckpt['vocab_size']}")
        sha = ckpt.get("layout", {}).get("tokenizer_sha256")
        if sha and rows.layout.tokenizer_sha256 and sha != rows.layout.tokenizer_sha256:
            raise UserError(f"--data {name}: tokenized with another tokenizer than the model's training data")
        out[name] = evaluate(model, p, batch_size, max_rows, no_prefix, cfg.data.seq_len or ckpt["context"],
                             device, autocast_for(cfg, device))
    return out
