"""A byte-level tokenizer and a small token-shard writer, for tests, examples and CPU ablations.

Bytes are the tokenizer-neutral choice for comparing data arms: the same for every arm, nothing
trained on either. Ids 0-255 are bytes; BOS, EOS and PAD follow. Each document becomes
BOS [META prefix] text EOS; documents are concatenated and cut into packed rows of `seq_len` that
overlap by one token: a row's first token (context only, never a target) is the previous row's last,
so every token but the stream's first is a target exactly once. A document may continue in the next
row; the doc index gets one piece per row, whose `bytes` are those of its text tokens that are
targets, so a document's pieces add up to its text's bytes. The mixer writes the real shards; this
writer follows the same format (`assay.pipeline.tokens`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import xxhash

from assay.pipeline.dataset import MANIFEST, Lease, check_output, finalize, prepare_output, read_json_safe, write_artifact
from assay.pipeline.tokens import DOC_INDEX_SCHEMA, LOSS, META, PAD, TokenLayout, TokenShardWriter

BYTE_INDEX_SCHEMA = DOC_INDEX_SCHEMA.append(pa.field("content_hash", pa.string()))  # held-out overlap checks

BOS, EOS, PAD_ID = 256, 257, 258
VOCAB = 259
TOKENIZER_SPEC = {"type": "bytes", "bos": BOS, "eos": EOS, "pad": PAD_ID, "vocab_size": VOCAB}


def encode(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)


def decode(ids: Iterable[int]) -> str:
    return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def doc_tokens(text: str, meta: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, mask) of one document: BOS is context only; prefix tokens are META; text and EOS LOSS."""
    prefix = encode(meta) if meta else np.zeros(0, np.int64)
    body = encode(text)
    tokens = np.concatenate([[BOS], prefix, body, [EOS]]).astype(np.int64)
    mask = np.concatenate([[0], np.full(len(prefix), META), np.full(len(body) + 1, LOSS)]).astype(np.uint8)
    return tokens, mask


def write_byte_dataset(docs: list[dict], out: str | Path, seq_len: int = 257, shards: int = 1) -> Path:
    """Write documents ({"text", "source", "doc_id"?, "meta"?, "content_type"?}) as a packed byte-level
    token dataset. Deterministic: equal inputs give equal bytes (and an equal fingerprint)."""
    out = Path(out)
    spec = json.dumps(TOKENIZER_SPEC, sort_keys=True)
    digest = hashlib.sha256(spec.encode())
    for d in docs:
        digest.update(json.dumps([d.get("text"), d.get("source"), d.get("meta")]).encode())
    fingerprint = f"bytes-{seq_len}-{shards}-{digest.hexdigest()[:24]}"
    check_output(out)
    if (read_json_safe(out / MANIFEST) or {}).get("fingerprint") == fingerprint:
        return out  # written already
    with Lease(out, fingerprint) as lease:
        prepare_output(out, fingerprint, lease.previous_fingerprint())
        write_artifact(out, "tokenizer.json", spec)  # under _artifacts/: a name Assay owns
        layout = TokenLayout(vocab_size=VOCAB, seq_len=seq_len, bos_id=BOS, eos_id=EOS, pad_id=PAD_ID,
                             tokenizer="_artifacts/tokenizer.json", tokenizer_sha256=hashlib.sha256(spec.encode()).hexdigest())
        per = -(-len(docs) // shards) if docs else 0
        for s in range(shards):
            part = docs[s * per:(s + 1) * per]
            writer = TokenShardWriter(out, s, layout, "bytes")
            tokens, mask, index = _pack(part, seq_len, s * per)
            writer.write(tokens, mask, index)
            writer.counts.rows_in = writer.counts.rows_out = len(part)
            writer.counts.bytes_in = writer.counts.bytes_out = int(sum(len(d["text"].encode()) for d in part))
            writer.commit()
        finalize(out, {"stage": "bytes", "stage_id": "bytes", "kind": "input", "output_kind": "tokens",
                       "fingerprint": fingerprint, "engine": "none", "wall_seconds": 0, "tokens": layout.to_json()},
                 shards)
    return out


def _pack(docs: list[dict], seq_len: int, first: int) -> tuple[np.ndarray, np.ndarray, pa.Table]:
    toks, masks, pieces = [], [], []
    stride = seq_len - 1  # rows overlap by one token
    pos = 0  # the document's first token in the concatenated stream
    for j, d in enumerate(docs):
        t, m = doc_tokens(d["text"], d.get("meta"))
        n_prefix = int((m == META).sum())
        content_hash = xxhash.xxh3_128_hexdigest(d["text"].encode("utf-8", "surrogatepass"))
        body = (pos + 1 + n_prefix, pos + len(t) - 1)  # the text's tokens in the stream
        for row in range(max(pos - 1, 0) // stride, (pos + len(t) - 1) // stride + 1):
            row_lo = row * stride
            lo, hi = max(pos, row_lo), min(pos + len(t), row_lo + seq_len)
            if lo >= hi:
                continue
            # Targets of this row are its positions after the first; of them, the text's are bytes.
            targets = max(0, min(hi, body[1]) - max(lo, row_lo + 1, body[0]))
            pieces.append({"row": row, "start": lo - row_lo, "length": hi - lo,
                           "prefix_length": max(0, min(hi, pos + 1 + n_prefix) - max(lo, pos + 1)),
                           "doc_id": d.get("doc_id") or f"doc-{first + j}", "content_hash": content_hash,
                           "source": d.get("source", ""),
                           "content_type": d.get("content_type", "web"), "bytes": targets})
        toks.append(t)
        masks.append(m)
        pos += len(t)
    flat_t = np.concatenate(toks) if toks else np.zeros(0, np.int64)
    flat_m = np.concatenate(masks) if masks else np.zeros(0, np.uint8)
    rows = -(-(len(flat_t) - 1) // stride) if len(flat_t) > 1 else len(flat_t)
    tokens = np.full((rows, seq_len), PAD_ID, np.int64)
    mask = np.full((rows, seq_len), PAD, np.uint8)
    for r in range(rows):
        piece = slice(r * stride, r * stride + seq_len)
        n = len(flat_t[piece])
        tokens[r, :n], mask[r, :n] = flat_t[piece], flat_m[piece]
    pieces = [p for p in pieces if p["row"] < rows]
    index = pa.Table.from_pylist(pieces, schema=BYTE_INDEX_SCHEMA)
    return tokens, mask, index
