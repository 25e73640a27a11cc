"""Token shards: the output kind the mixer writes and the trainer reads.

A token dataset is a directory like a document dataset (`_shards/` markers, `_manifest.json` last),
whose shards are three files each::

    part-00000.tokens       token ids, little-endian uint16 (vocab < 65,536) or uint32, no header;
                            `seq_len` > 0: packed rows of exactly seq_len tokens (shape rows x seq_len);
                            `seq_len` = 0: one flat stream of documents
    part-00000.mask         uint8 per token, bit flags (below); same length as the tokens
    part-00000.docs.parquet one row per document piece: row, start, length, prefix_length, doc_id,
                            source, content_type, bytes, ... (whatever else the writer adds)

Raw little-endian arrays are what `np.memmap` (and Megatron-style loaders) read without a copy; the
layout (dtype, seq_len, special ids, tokenizer hash) lives in the manifest's `tokens` entry, so a
reader never guesses. Mask flags instead of a 0/1 mask let one set of shards serve training with loss
on the metadata prefix, with the prefix masked, and without it (the trainer decides per step).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import storage
from .dataset import MANIFEST, SHARDS_DIR, Counts, ShardFiles, read_json

# Mask bits. A token is a training target when LOSS is set; META marks the metadata prefix (the
# trainer chooses to train on it, mask it, or drop it); PAD marks padding (never a target).
# The mixer sets LOSS on prefix tokens too (META | LOSS), so reading LOSS alone trains on the prefix.
LOSS = 1
META = 2
PAD = 4


def loss_targets(mask: np.ndarray, meta_loss: bool = True) -> np.ndarray:
    """Boolean array of training targets: LOSS tokens, minus the metadata prefix when `meta_loss` is
    False (the prefix stays in context, masked from the loss; Step 3.5 switches after ~3.8T tokens)."""
    targets = (mask & LOSS) > 0
    return targets if meta_loss else targets & ((mask & META) == 0)

TOKENS_SUFFIX = ".tokens"
MASK_SUFFIX = ".mask"
DOCS_SUFFIX = ".docs.parquet"


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 65_536 else np.dtype("<u4")


@dataclass(frozen=True)
class TokenLayout:
    """What a reader must know to interpret the shard bytes; stored in the manifest as `tokens`."""

    vocab_size: int
    seq_len: int  # 0 = flat stream
    bos_id: int | None = None
    eos_id: int | None = None
    pad_id: int | None = None
    tokenizer: str | None = None  # file name inside the dataset directory (e.g. tokenizer.json)
    tokenizer_sha256: str | None = None

    @property
    def dtype(self) -> np.dtype:
        return token_dtype(self.vocab_size)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__, dtype=self.dtype.str)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TokenLayout":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def shard_stem(index: int) -> str:
    return f"part-{index:05d}"


class TokenShardWriter:
    """Writes one token shard: tokens, mask and doc index stream to temp files, renamed on commit.

    `write(tokens, mask, docs)` appends rows (2-D arrays for packed layouts, 1-D for streams) and
    their document-index rows; `write(table)` with a `reject_reason` column keeps rejected input
    documents in `_rejects/` like any stage. The ledger is many-to-many: input documents (noted with
    `note_inputs`) are rejected or are the parents (`doc_id` in the index) of the pieces written."""

    def __init__(self, root: Path, index: int, layout: TokenLayout, stage_id: str = ""):
        self.root = storage.as_path(root)
        self.index = index
        self.layout = layout
        self.stage_id = stage_id
        self.counts = Counts()
        stem = shard_stem(index)
        self.files = ShardFiles(self.root, index)
        self._tok = self.files.open_binary(stem + TOKENS_SUFFIX)
        self._mask = self.files.open_binary(stem + MASK_SUFFIX)
        self._docs_path = self.files.temp(stem + DOCS_SUFFIX)
        self._docs: pq.ParquetWriter | None = None
        self._rejects = None  # a ShardWriter for rejected documents, made on first use
        self._rejected_ids: set[str] = set()
        self._inputs: set[str] = set()
        self._parents: set[str] = set()
        self.n_tokens = 0
        self.n_loss = 0

    def note_inputs(self, table: pa.Table) -> None:
        from .schema import text_bytes

        self.counts.rows_in += table.num_rows
        self.counts.bytes_in += text_bytes(table)
        if "id" in table.column_names:
            self._inputs.update(table.column("id").to_pylist())

    def write(self, tokens: np.ndarray | pa.Table | tuple, mask: np.ndarray | None = None,
              docs: pa.Table | None = None) -> None:
        if isinstance(tokens, tuple):  # what a stage's run_task yields: (tokens, mask, docs)
            tokens, mask, docs = (tokens + (None,))[:3]
        if isinstance(tokens, pa.Table):
            self._write_rejects(tokens)
            return
        tokens = np.ascontiguousarray(tokens)
        mask = np.ascontiguousarray(mask, dtype=np.uint8)
        if tokens.shape != mask.shape:
            raise ValueError(f"tokens {tokens.shape} and mask {mask.shape} differ in shape")
        if self.layout.seq_len and (tokens.ndim != 2 or tokens.shape[1] != self.layout.seq_len):
            raise ValueError(f"packed shards take rows of seq_len={self.layout.seq_len}; got shape {tokens.shape}")
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.layout.vocab_size):
            raise ValueError(f"token id out of range [0, {self.layout.vocab_size})")
        self._tok.write(tokens.astype(self.layout.dtype, copy=False).tobytes())
        self._mask.write(mask.tobytes())
        self.n_tokens += tokens.size
        self.n_loss += int(np.count_nonzero(mask & LOSS))
        if docs is not None and docs.num_rows:
            if self._docs is None:
                self._docs = pq.ParquetWriter(self._docs_path, docs.schema, compression="zstd")
            self._docs.write_table(docs)
            if self._inputs:  # this writer keeps the ledger; else its caller does (the mixer's packer)
                self.counts.rows_out += docs.num_rows
                self.counts.rows_created += docs.num_rows
                self._parents.update(docs.column("doc_id").to_pylist())

    def _write_rejects(self, table: pa.Table) -> None:
        from .dataset import LedgerError, ShardWriter
        from .schema import REJECT_DETAIL, REJECT_REASON

        if REJECT_REASON not in table.column_names or table.column(REJECT_REASON).null_count:
            raise LedgerError(f"stage {self.stage_id!r}: a token stage yields tables only for rejected documents")
        if self._rejects is None:
            schema = pa.schema([f for f in table.schema if f.name not in (REJECT_REASON, REJECT_DETAIL)])
            self._rejects = ShardWriter(self.root, self.index, schema, self.stage_id)
            self._rejects.files = self.files  # one commit renames every file of the shard
        self._rejects.write(table)
        for reason, slot in self._rejects.counts.rejected.items():
            self.counts.rejected[reason] = dict(slot)
        self._rejected_ids.update(table.column("id").to_pylist())

    def commit(self) -> Counts:
        from .dataset import LedgerError

        if self._docs is None:  # an empty index still has a schema
            self._docs = pq.ParquetWriter(self._docs_path, DOC_INDEX_SCHEMA, compression="zstd")
        self._docs.close()
        if self._rejects is not None:
            self._rejects.close_writers()
        rejected = self._rejected_ids
        # Inputs noted here (a stage run by an engine): check lineage per shard. Otherwise the caller
        # (the mixer's packer) keeps the ledger itself and the stage-level check applies.
        lost = self._inputs - self._parents - rejected
        if self._inputs:
            self.counts.rows_parent = len(self._inputs & self._parents)
        if self._inputs and (lost or not self.counts.balanced()):
            raise LedgerError(f"stage {self.stage_id!r} token shard {self.index}: "
                              + (f"{len(lost)} input document(s) neither packed nor rejected" if lost
                                 else "ledger does not balance: " + self.counts.imbalance()))
        self._tok.flush()
        self._mask.flush()
        sums = {suffix: _file_sum(self.files.temp_of(shard_stem(self.index) + suffix))
                for suffix in (TOKENS_SUFFIX, MASK_SUFFIX, DOCS_SUFFIX)}
        self.files.commit(self.counts, extra={"tokens": self.n_tokens, "loss_tokens": self.n_loss, "files": sums})
        return self.counts

    def abort(self) -> None:
        if self._docs is not None:
            self._docs.close()
        if self._rejects is not None:
            self._rejects.close_writers()
        self.files.abort()


def _file_sum(path: Path) -> dict[str, Any]:
    """A shard file's size and xxh3 checksum, recorded at commit and checked before the data is used."""
    import xxhash

    h = xxhash.xxh3_64()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            h.update(block)
    return {"bytes": os.path.getsize(path), "xxh3": h.hexdigest()}


class DamagedShards(ValueError):
    """A token dataset whose files are not what its commits recorded (truncated, changed or missing)."""


_VERIFIED: dict[tuple[str, int], bool] = {}  # (dataset, manifest mtime): checked in this process


# The columns every doc index has; writers may add more (meta, fim, part, ...).
DOC_INDEX_SCHEMA = pa.schema([
    pa.field("row", pa.int64()),          # packed: the row; stream: 0
    pa.field("start", pa.int64()),        # offset of the piece's first token in its row (or stream)
    pa.field("length", pa.int64()),       # tokens of this piece, prefix included
    pa.field("prefix_length", pa.int64()),  # of which metadata prefix tokens
    pa.field("doc_id", pa.string()),
    pa.field("source", pa.string()),
    pa.field("content_type", pa.string()),
    pa.field("bytes", pa.int64()),        # UTF-8 bytes of the document text in this piece (for bits-per-byte)
])


class TokenDataset:
    """Read side: memory-mapped tokens and masks per shard, the doc index, the layout. A dataset on a
    store is read through a local cache (storage.cached_copy: fetched once per object version), so
    memory mapping works the same."""

    def __init__(self, path: str | os.PathLike):
        self.path = storage.as_path(path)
        manifest = read_json(self.path / MANIFEST)
        if manifest is None:
            raise FileNotFoundError(f"{self.path}: not a complete token dataset (no {MANIFEST})")
        if manifest.get("output_kind") != "tokens":
            raise ValueError(f"{self.path}: holds {manifest.get('output_kind', 'documents')}, not tokens")
        self.manifest = manifest
        self.layout = TokenLayout.from_json(manifest["tokens"])

    def shard_indexes(self) -> list[int]:
        return sorted(int(p.name.split("-")[1].split(".")[0]) for p in storage.glob(self.path, f"part-*{TOKENS_SUFFIX}"))

    def local(self, name: str) -> Path:
        """A local path holding the dataset's file `name` (the file itself, or its cached copy)."""
        return storage.cached_copy(self.path / name)

    def verify(self) -> None:
        """Check every shard against what its commit recorded (the shard count against the manifest,
        each file's size and checksum, the token count) before anything trains or scores on it: a
        truncated `.tokens` file is an error naming the file, never half the rows read silently."""
        key = (str(storage.resolve(self.path)), storage.file_version(self.path / MANIFEST))
        if _VERIFIED.get(key):
            return
        markers = {int(p.stem.split("-")[1]): json.loads(p.read_text())
                   for p in storage.glob(self.path / SHARDS_DIR, "part-*.json")}
        expected = self.manifest.get("shards")
        present = set(self.shard_indexes())
        if expected is not None and (set(markers) != set(range(expected)) or present - set(markers)):
            raise DamagedShards(f"{self.path}: {len(present)} token shards and {len(markers)} commit markers where "
                                f"the manifest says {expected}; rebuild it")
        for index, marker in sorted(markers.items()):
            stem = shard_stem(index)
            for suffix, want in (marker.get("files") or {}).items():
                if not storage.exists(self.path / (stem + suffix)):
                    raise DamagedShards(f"{self.path / (stem + suffix)}: missing; rebuild the dataset")
                path = self.local(stem + suffix)
                got = path.stat().st_size
                if got != want["bytes"]:
                    raise DamagedShards(f"{path}: {got:,} bytes where its commit recorded {want['bytes']:,} "
                                        "(truncated or changed); rebuild the dataset")
                if _file_sum(path)["xxh3"] != want["xxh3"]:
                    raise DamagedShards(f"{path}: its checksum differs from the one its commit recorded "
                                        "(changed after it was written); rebuild the dataset")
            if "tokens" in marker and storage.exists(self.path / (stem + TOKENS_SUFFIX)):
                have = self.local(stem + TOKENS_SUFFIX).stat().st_size // self.layout.dtype.itemsize
                if have != int(marker["tokens"]):
                    raise DamagedShards(f"{self.path / (stem + TOKENS_SUFFIX)}: {have:,} tokens where its commit "
                                        f"recorded {int(marker['tokens']):,}; rebuild the dataset")
        _VERIFIED[key] = True

    def _map(self, index: int, suffix: str, dtype: np.dtype) -> np.ndarray:
        path = self.local(shard_stem(index) + suffix)
        if path.stat().st_size == 0:
            flat = np.zeros(0, dtype)
        else:
            flat = np.memmap(path, dtype=dtype, mode="r")
        return flat.reshape(-1, self.layout.seq_len) if self.layout.seq_len else flat

    def tokens(self, index: int) -> np.ndarray:
        return self._map(index, TOKENS_SUFFIX, self.layout.dtype)

    def mask(self, index: int) -> np.ndarray:
        return self._map(index, MASK_SUFFIX, np.dtype(np.uint8))

    def docs(self, index: int) -> pa.Table:
        return storage.read_parquet(self.path / (shard_stem(index) + DOCS_SUFFIX))

    def n_tokens(self) -> int:
        return sum(int(json.loads(p.read_text()).get("tokens", 0)) for p in storage.glob(self.path / SHARDS_DIR, "*.json"))

    def iter_rows(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(tokens, mask) per packed row, in shard order."""
        for index in self.shard_indexes():
            tokens, mask = self.tokens(index), self.mask(index)
            for r in range(len(tokens)):
                yield tokens[r], mask[r]

    @property
    def tokenizer_path(self) -> Path | None:
        return self.local(self.layout.tokenizer) if self.layout.tokenizer else None
