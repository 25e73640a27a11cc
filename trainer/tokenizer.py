"""The model's own tokenizer, for scoring text a model was not trained on (tasks) and for reading a
token dataset back as text (the contamination check).

A token dataset names its tokenizer file in its layout (`_artifacts/tokenizer.json`, with its
sha256): trainer/bytes.py writes a byte spec (`{"type": "bytes", ...}`), the mixer a Hugging Face
`tokenizers` file. A checkpoint carries that file's text and sha256 (`ckpt["tokenizer"]`, written at
save), so it scores tasks on its own, moved anywhere. A checkpoint written before that carries only
the layout: the tokenizer is then looked up in its training dataset, and the sha256 must match. A
tokenizer named by hand (`--tokenizer`) is checked against the same sha256. Anything else is refused
in one line: text encoded by another tokenizer would score garbage without a sign.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from assay.pipeline import storage
from assay.pipeline.errors import UserError


@dataclass
class ModelTokenizer:
    kind: str  # "bytes" or "bpe"
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    sha256: str
    _hf: Any = None  # a tokenizers.Tokenizer for "bpe"

    @classmethod
    def from_text(cls, text: str, layout: dict | None = None, where: str = "tokenizer") -> "ModelTokenizer":
        layout = layout or {}
        sha = hashlib.sha256(text.encode()).hexdigest()
        try:
            spec = json.loads(text)
        except json.JSONDecodeError:
            raise UserError(f"{where}: not a tokenizer file (not JSON)") from None
        if isinstance(spec, dict) and spec.get("type") == "bytes":
            return cls("bytes", spec.get("bos"), spec.get("eos"), spec.get("pad"), sha)
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_str(text)
        except Exception as exc:  # tokenizers raises a bare Exception on a foreign file
            raise UserError(f"{where}: not a tokenizer the tokenizers library can load ({exc})") from None
        tok.encode_special_tokens = True  # task text is text: "<|eos|>" in a question is not EOS
        return cls("bpe", layout.get("bos_id"), layout.get("eos_id"), layout.get("pad_id"), sha, tok)

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        if self.kind == "bytes":
            return [np.frombuffer(t.encode("utf-8"), np.uint8).astype(np.int64) for t in texts]
        return [np.asarray(e.ids, np.int64) for e in self._hf.encode_batch_fast(texts, add_special_tokens=False)]

    def decode(self, ids: np.ndarray) -> str:
        """Text of token ids; special tokens (BOS, EOS, PAD, ids beyond the bytes) are left out."""
        if self.kind == "bytes":
            ids = np.asarray(ids)
            return ids[ids < 256].astype(np.uint8).tobytes().decode("utf-8", errors="replace")
        return self._hf.decode([int(i) for i in ids], skip_special_tokens=True)

    def specials(self) -> set[int]:
        return {i for i in (self.bos_id, self.eos_id, self.pad_id) if i is not None}


def dataset_tokenizer_text(path: str, layout: dict) -> str | None:
    """The text of the tokenizer file a token dataset names in its layout, checked against its
    sha256; None when the layout names no file or the file is gone."""
    name = layout.get("tokenizer")
    if not name:
        return None
    file = storage.as_path(path) / name
    if not storage.exists(file):
        return None
    data = storage.read_bytes(file)
    sha = layout.get("tokenizer_sha256")
    if sha and hashlib.sha256(data).hexdigest() != sha:
        raise UserError(f"{file}: its sha256 differs from the one the dataset's layout records")
    return data.decode("utf-8")


def checkpoint_record(train_path: str, layout: dict) -> dict | None:
    """What a checkpoint carries of its tokenizer: the file's text and sha256 (None: not found)."""
    text = dataset_tokenizer_text(train_path, layout)
    return {"text": text, "sha256": hashlib.sha256(text.encode()).hexdigest(), "source": str(train_path)} if text else None


def for_checkpoint(ckpt: dict, override: str | None = None, where: str = "checkpoint") -> ModelTokenizer:
    """The tokenizer a checkpoint was trained with: `override` (a tokenizer file, checked), else the
    one it carries, else its training dataset's, else a one-line refusal."""
    layout = ckpt.get("layout") or {}
    want = layout.get("tokenizer_sha256")
    if override:
        target = storage.as_path(override)
        if not storage.exists(target):
            raise UserError(f"--tokenizer {override}: no such file")
        text = storage.read_bytes(target).decode("utf-8")
        tok = ModelTokenizer.from_text(text, layout, str(override))
        if want and tok.sha256 != want:
            raise UserError(f"--tokenizer {override}: sha256 {tok.sha256[:12]} is not the model's training tokenizer "
                            f"({want[:12]})")
        return tok
    carried = ckpt.get("tokenizer")
    if carried:
        return ModelTokenizer.from_text(carried["text"], layout, where)
    train = ((ckpt.get("config") or {}).get("data") or {}).get("train")
    text = None
    if train:
        try:
            text = dataset_tokenizer_text(train, layout)
        except UserError:
            text = None
    if text is None:
        raise UserError(f"{where}: carries no tokenizer and its training data's ({train or 'unknown'}) is not "
                        f"there (sha256 {str(want)[:12]}); pass the tokenizer file with --tokenizer")
    return ModelTokenizer.from_text(text, layout, where)


def for_dataset(path: str, layout: dict) -> ModelTokenizer | None:
    text = dataset_tokenizer_text(path, layout)
    return ModelTokenizer.from_text(text, layout, str(path)) if text else None
