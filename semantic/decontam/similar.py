"""Semantic-similarity decontamination (LongCat's neural path): passages of a document whose embedding
is within a cosine threshold of a benchmark item's.

n-grams miss a benchmark item reworded (synonyms, reordered clauses); an embedding does not. Each
document is cut into windows of `window` words (half-overlapping), every window is embedded and its
nearest item found in an exact inner-product faiss index. Items of hash-only benchmarks have no
text and are skipped. The item vectors are computed once per worker and cached on disk, keyed by
the model and the item texts, because embedding a whole registry takes a minute on a CPU.
"""
from __future__ import annotations

import hashlib
import io
import os
import re

import numpy as np

from assay.pipeline import storage
from assay.pipeline.dataset import atomic_write_bytes

_WORD = re.compile(r"\S+")
_BLOCK = re.compile(r"\S(?:.*?\S)?(?=\n[ \t]*\n|\s*$)", re.S)  # text between blank lines


class SemanticMatcher:
    def __init__(self, encoder, texts: list[str | None], threshold: float, window: int, cache_dir: str | None):
        import faiss

        self.encoder, self.threshold, self.window = encoder, threshold, window
        self.items = np.array([i for i, t in enumerate(texts) if t], np.int64)
        vectors = self._item_vectors([texts[i] for i in self.items], cache_dir)
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)

    def _item_vectors(self, texts: list[str], cache_dir: str | None) -> np.ndarray:
        digest = hashlib.sha256(repr((self.encoder.path, self.encoder.max_tokens)).encode())
        for t in texts:
            digest.update(t.encode("utf-8", "surrogatepass") + b"\x00")
        path = None
        if cache_dir:  # a folder or a URL (pipeline/storage.py): hosts without a shared disk share it there
            folder = cache_dir if storage.is_url(cache_dir) else os.path.expanduser(cache_dir)
            path = storage.as_path(folder) / f"items-{digest.hexdigest()[:24]}.npy"
        if path is not None and storage.exists(path):
            return np.load(io.BytesIO(storage.read_bytes(path))).astype(np.float32)
        vectors = self.encoder.encode(texts)
        if path is not None:
            buffer = io.BytesIO()
            np.save(buffer, vectors.astype(np.float16))
            atomic_write_bytes(path, buffer.getvalue())  # whole or not at all, on disk or a store
        return vectors

    def windows(self, text: str) -> list[tuple[int, int]]:
        """Character spans to embed: every paragraph (an item pasted into a page is usually one)
        of 8 to 2 x `window` words, and half-overlapping windows of `window` words across the text."""
        words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
        if not words:
            return []
        spans = set()
        for block in _BLOCK.finditer(text):
            n = len(block.group(0).split())
            if 8 <= n <= 2 * self.window:
                spans.add((block.start(), block.end()))
        step = max(1, self.window // 2)
        for s in range(0, max(1, len(words) - step), step):
            last = min(s + self.window, len(words)) - 1
            spans.add((words[s][0], words[last][1]))
        return sorted(spans)

    def match(self, texts: list[str]) -> list[tuple[int, int, float, int, int]]:
        """(document, item index, cosine, char start, char end): the best window per (doc, item)."""
        owners, spans, pieces = [], [], []
        for d, text in enumerate(texts):
            for start, end in self.windows(text or ""):
                owners.append(d)
                spans.append((start, end))
                pieces.append(text[start:end])
        if not pieces:
            return []
        scores, nearest = self.index.search(self.encoder.encode(pieces), 1)
        best: dict[tuple[int, int], tuple[float, int, int]] = {}
        for w in np.nonzero(scores[:, 0] >= self.threshold)[0]:
            key = (owners[w], int(self.items[nearest[w, 0]]))
            if key not in best or scores[w, 0] > best[key][0]:
                best[key] = (float(scores[w, 0]), *spans[w])
        return [(d, item, score, s, e) for (d, item), (score, s, e) in sorted(best.items())]
