"""Band keys of every document, buffered in memory up to a budget and spilled to disk beyond it.

Keys are kept per band so the grouping step can load one band at a time: peak memory there is one
band's (key, node) pairs, 16 bytes per document, whatever the number of bands.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


class BandStore:
    def __init__(self, bands: int, directory: Path, memory_bytes: int):
        self.bands = bands
        self.dir = Path(directory)
        self.memory_bytes = memory_bytes
        self._keys: list[list[np.ndarray]] = [[] for _ in range(bands)]
        self._nodes: list[np.ndarray] = []
        self._buffered = 0
        self.spilled_bytes = 0

    def add(self, keys: np.ndarray, nodes: np.ndarray) -> None:
        """keys: uint64[m, bands] for the documents `nodes` (int64[m], ascending across calls)."""
        if len(nodes) == 0:
            return
        for b in range(self.bands):
            self._keys[b].append(np.ascontiguousarray(keys[:, b]))
        self._nodes.append(np.asarray(nodes, np.int64))
        self._buffered += keys.nbytes + len(nodes) * 8
        if self._buffered > self.memory_bytes:
            self._spill()

    def _spill(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        nodes = np.concatenate(self._nodes)
        with open(self.dir / "nodes.i64", "ab") as f:
            nodes.tofile(f)
        for b in range(self.bands):
            with open(self.dir / f"band-{b:03d}.u64", "ab") as f:
                np.concatenate(self._keys[b]).tofile(f)
            self._keys[b] = []
        self.spilled_bytes += self._buffered
        self._nodes = []
        self._buffered = 0

    def load(self, band: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys, nodes) of one band: spilled part first, then the buffer, so nodes stay ascending."""
        keys, nodes = [], []
        if self.spilled_bytes:
            keys.append(np.fromfile(self.dir / f"band-{band:03d}.u64", np.uint64))
            nodes.append(np.fromfile(self.dir / "nodes.i64", np.int64))
        keys.extend(self._keys[band])
        nodes.extend(self._nodes)
        if not keys:
            return np.empty(0, np.uint64), np.empty(0, np.int64)
        return np.concatenate(keys), np.concatenate(nodes)
