"""`mix.tokenize`: documents to a flat token stream, as a map stage (so it runs on every engine).

Each output shard is a token dataset with `seq_len` 0 (pipeline/tokens.py): per document the stream
holds its metadata prefix (bracketed by the meta special tokens), its text tokens, and for code its
fill-in-the-middle variant; BOS and EOS are added at packing. The doc index row carries what the
packer needs to choose and assemble documents without re-reading text: lengths, tier, code_hits,
cluster_weight, the role of each `segments` span (in tokens) and where the FIM variant lies.

Segments are encoded one by one, so a role boundary is always a token boundary and the masks the
packer derives cover exactly the spans the roles name. The FIM split points are drawn per document
from (seed, id), so every engine and every rerun splits a document the same way.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from assay.pipeline.schema import text_bytes
from assay.pipeline.stage import MapStage, Params, Task, register
from assay.pipeline.tokens import DOC_INDEX_SCHEMA, LOSS, META, TokenLayout, TokenShardWriter

from .tokenizer import SPECIALS, Vocab

# The flat stream's doc index: the core columns plus what selection and assembly read.
STREAM_INDEX_SCHEMA = pa.schema(list(DOC_INDEX_SCHEMA) + [
    pa.field("content_hash", pa.string()),          # of the text: what held-out overlap checks compare
    pa.field("tier", pa.string()),
    pa.field("code_hits", pa.int64()),
    pa.field("cluster_weight", pa.float64()),
    pa.field("role_names", pa.list_(pa.string())),   # null: one `context` segment
    pa.field("role_lengths", pa.list_(pa.int64())),  # text tokens per segment
    pa.field("fim_start", pa.int64()),               # -1: no FIM variant
    pa.field("fim_length", pa.int64()),
])


class TokenizeParams(Params):
    tokenizer: str = Field(description="tokenizer.json (with the mixer's special tokens)")
    specials: dict[str, str] = Field(default_factory=lambda: dict(SPECIALS), description="Special token strings")
    meta_fields: list[str] = Field(default_factory=list, description="Fields of the metadata prefix (empty: none)")
    fim_content_types: list[str] = Field(default_factory=list, description="Content types that get a FIM variant")
    seed: int = Field(0, description="Seeds the FIM split points")


@dataclass
class Encoded:
    """One batch in stream form: tokens and mask, and the doc index with batch-relative offsets."""

    tokens: np.ndarray
    mask: np.ndarray
    docs: pa.Table


@register("mix.tokenize")
class Tokenize(MapStage):
    """Tokenize documents into a flat token stream with metadata prefixes, segment roles and FIM variants.

    Example: assay mix tokenize runs/demo/deduped runs/tok --tokenizer tokenizer.json"""

    Params = TokenizeParams
    output_kind = "tokens"
    reads = {"tokenizer": "file"}
    requires = ("tokenizers",)
    version = "1"
    batch_rows = 1_000  # documents per batch: bounds a worker's text, ids and index in memory

    def setup(self) -> None:
        self.vocab = Vocab.load(self.params.tokenizer, self.params.specials)
        self._meta_cache: dict[str, np.ndarray] = {}

    def teardown(self) -> None:
        self.vocab = None

    def layout(self) -> TokenLayout:
        if getattr(self, "_layout", None) is None:  # kept past teardown: the manifest needs no second setup
            self.ensure_setup()
            v = self.vocab
            self._layout = TokenLayout(v.vocab_size, 0, v.ids["bos"], v.ids["eos"], v.ids["pad"], None, v.sha256)
        return self._layout

    def output_schema(self, input_schemas=()) -> pa.Schema:
        return STREAM_INDEX_SCHEMA

    def open_writer(self, out_root: Path, task: Task, schema: pa.Schema):
        self.ensure_setup()
        return StreamWriter(TokenShardWriter(out_root, task.index, self.layout(), self.stage_id))

    def describe_output(self, out_root: Path) -> dict[str, Any]:
        return {"tokens": self.layout().to_json()}

    def run_task(self, task: Task, writer) -> Iterator[Encoded]:
        self.ensure_setup()
        for table in self.read_batches(task, writer):
            yield self.encode(table)

    def process(self, table: pa.Table) -> pa.Table:  # the stream is written by run_task, not row tables
        raise NotImplementedError("mix.tokenize writes token streams; use run_task")

    # ---- per batch ------------------------------------------------------------------------------

    def encode(self, table: pa.Table) -> Encoded:
        n = table.num_rows
        texts = pc.fill_null(table.column("text"), "").to_pylist()
        ids = table.column("id").to_pylist()
        ctypes = table.column("content_type").to_pylist()
        segments = table.column("segments").to_pylist() if "segments" in table.column_names else [None] * n
        prefixes = self._prefixes(table)
        fim_types = set(self.params.fim_content_types)

        # Every string to encode, encoded together; `plan` says per document which pieces it used.
        strings: list[str] = []
        plan: list[tuple[list[str] | None, int, int, bool]] = []  # (roles, first piece, pieces, fim)
        for i in range(n):
            roles, pieces = _split_segments(texts[i], segments[i])
            if roles is not None and len(pieces) and "".join(pieces) != texts[i]:
                self.stats.count("segments_mismatch")
                roles, pieces = None, [texts[i]]
            first = len(strings)
            strings.extend(pieces)
            fim = ctypes[i] in fim_types and len(texts[i]) > 1
            if fim:
                strings.extend(_fim_pieces(texts[i], ids[i], self.params.seed))
            plan.append((roles, first, len(pieces), fim))
        flat, offsets = self.vocab.encode_flat(strings)
        piece = lambda k: flat[offsets[k]:offsets[k + 1]]  # noqa: E731

        sp = {name: np.array([tid], np.int32) for name, tid in self.vocab.ids.items()}
        parts: list[np.ndarray] = []
        flags: list[int] = []
        starts = np.zeros(n, np.int64)
        lengths = np.zeros(n, np.int64)
        prefix_len = np.zeros(n, np.int64)
        fim_start = np.full(n, -1, np.int64)
        fim_len = np.zeros(n, np.int64)
        role_names: list[list[str] | None] = []
        role_lengths: list[list[int] | None] = []
        offset = 0
        for i, (roles, first, count, fim) in enumerate(plan):
            prefix = prefixes[i]
            seg_lengths = (offsets[first + 1:first + count + 1] - offsets[first:first + count]).tolist()
            starts[i] = offset
            prefix_len[i] = len(prefix)
            lengths[i] = len(prefix) + sum(seg_lengths)
            parts.append(prefix)
            flags.append(META | LOSS)
            parts.append(flat[offsets[first]:offsets[first + count]])  # the segments, back to back
            flags.append(LOSS)
            offset += lengths[i]
            if fim:
                k = first + count
                # prefix-suffix-middle: the model sees what comes before and after, then writes the middle
                fim_parts = [sp["fim_prefix"], piece(k), sp["fim_suffix"], piece(k + 2), sp["fim_middle"], piece(k + 1)]
                fim_start[i] = offset
                fim_len[i] = sum(len(x) for x in fim_parts)
                parts.extend(fim_parts)
                flags.extend([LOSS] * 6)
                offset += fim_len[i]
            role_names.append(roles)
            role_lengths.append(seg_lengths if roles is not None else None)

        part_lengths = np.fromiter((len(p) for p in parts), np.int64, count=len(parts))
        tokens = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        mask = np.repeat(np.asarray(flags, np.uint8), part_lengths)

        nbytes = pc.binary_length(pc.cast(pc.fill_null(table.column("text"), ""), pa.binary())).to_numpy(zero_copy_only=False)
        docs = pa.table({
            "row": np.zeros(n, np.int64), "start": starts, "length": lengths, "prefix_length": prefix_len,
            "doc_id": pa.array(ids, pa.string()), "content_hash": content_hashes(table.column("text")),
            "source": table.column("source"),
            "content_type": table.column("content_type"), "bytes": nbytes.astype(np.int64),
            "tier": _optional(table, "tier", pa.string()), "code_hits": _optional(table, "code_hits", pa.int64()),
            "cluster_weight": _optional(table, "cluster_weight", pa.float64()),
            "role_names": pa.array(role_names, pa.list_(pa.string())),
            "role_lengths": pa.array(role_lengths, pa.list_(pa.int64())),
            "fim_start": fim_start, "fim_length": fim_len,
        }, schema=STREAM_INDEX_SCHEMA)
        self.stats.count("documents", n)
        self.stats.count("text_tokens", int((lengths - prefix_len).sum()))
        self.stats.count("prefix_tokens", int(prefix_len.sum()))
        self.stats.count("fim_variants", int((fim_start >= 0).sum()))
        self.stats.sketch("doc_tokens", lengths - prefix_len)
        return Encoded(tokens, mask, docs)

    def _prefixes(self, table: pa.Table) -> list[np.ndarray]:
        """Token ids of each document's metadata prefix (encoded once per distinct string)."""
        fields = self.params.meta_fields
        empty = np.zeros(0, np.int32)
        if not fields:
            return [empty] * table.num_rows
        columns = {f: table.column(f).to_pylist() for f in fields if not f.startswith("meta.") and f in table.column_names}
        metas = None
        if any(f.startswith("meta.") for f in fields) and "meta" in table.column_names:
            metas = [json.loads(m) if m else {} for m in table.column("meta").to_pylist()]
        strings = []
        for i in range(table.num_rows):
            pairs = []
            for f in fields:
                if f.startswith("meta."):
                    value = metas[i].get(f[5:]) if metas else None
                else:
                    value = columns[f][i] if f in columns else None
                if value not in (None, ""):
                    pairs.append(f"{f.removeprefix('meta.')}: {value}")
            strings.append(meta_string(pairs))
        missing = sorted({s for s in strings if s and s not in self._meta_cache})
        if missing:
            sp = self.vocab.ids
            for s, ids in zip(missing, self.vocab.encode(missing)):
                self._meta_cache[s] = np.array([sp["meta_start"], *ids, sp["meta_end"]], np.int32)
        return [self._meta_cache[s] if s else empty for s in strings]


def meta_string(pairs: list[str]) -> str:
    """The human-readable metadata string, e.g. "content_type: code; lang: en; source: repo"."""
    return "; ".join(pairs)


def _split_segments(text: str, segments: list[dict] | None) -> tuple[list[str] | None, list[str]]:
    if not segments:
        return None, [text]
    return [s.get("role") or "context" for s in segments], [s.get("text") or "" for s in segments]


def content_hashes(texts: pa.ChunkedArray | pa.Array) -> pa.Array:
    """xxh3-128 of each text (row ids name where a row came from; overlap between a training and a
    held-out set is a question of content)."""
    return pa.array([xxhash.xxh3_128_hexdigest(t.encode("utf-8", "surrogatepass")) if t is not None else None
                     for t in texts.to_pylist()], pa.string())


def fim_cut(text: str, doc_id: str, seed: int) -> tuple[int, int]:
    """Two character positions, uniform over the text, fixed by (seed, id)."""
    h = xxhash.xxh64_intdigest(doc_id.encode(), seed=seed ^ 0xF1F1)
    n = len(text) + 1
    a, b = ((h & 0xFFFFFFFF) * n) >> 32, ((h >> 32) * n) >> 32
    return (a, b) if a <= b else (b, a)


def _fim_pieces(text: str, doc_id: str, seed: int) -> tuple[str, str, str]:
    """(prefix, middle, suffix) of a document split at its FIM cut points."""
    a, b = fim_cut(text, doc_id, seed)
    return text[:a], text[a:b], text[b:]


def _optional(table: pa.Table, name: str, typ: pa.DataType):
    if name in table.column_names:
        return pc.cast(table.column(name), typ)
    return pa.nulls(table.num_rows, typ)


class StreamWriter:
    """Adapts a TokenShardWriter to the map-stage protocol: counts input documents, appends each
    encoded batch with its offsets made shard-relative. One document in, one document out."""

    def __init__(self, inner: TokenShardWriter):
        self.inner = inner
        self.files = inner.files
        self.counts = inner.counts

    def note_inputs(self, table: pa.Table) -> None:
        self.counts.rows_in += table.num_rows
        self.counts.bytes_in += text_bytes(table)

    def write(self, batch: Encoded) -> None:
        base = self.inner.n_tokens
        docs = batch.docs
        docs = docs.set_column(docs.schema.get_field_index("start"), "start", pc.add(docs.column("start"), base))
        fim = docs.column("fim_start")
        shifted = pc.if_else(pc.greater_equal(fim, 0), pc.add(fim, base), fim)
        docs = docs.set_column(docs.schema.get_field_index("fim_start"), "fim_start", shifted)
        self.inner.write(batch.tokens, batch.mask, docs)
        self.counts.rows_out += docs.num_rows
        self.counts.bytes_out += int(pc.sum(docs.column("bytes")).as_py() or 0)

    def commit(self):
        return self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()
