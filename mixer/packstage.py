"""`mix.pack`: one training stage of a mixture, drawn and packed into token shards, on any engine.

The stage's documents are split into buckets by a hash of their id (ceil(documents / pack_docs)
of them, fewer when the stage is too small for each to fill `BUCKET_ROWS` rows), so each bucket is
a random part of every source and its size depends on the data alone; the output is the same bytes
on every engine and worker count. The plan runs as waves of tasks on the engine's workers
(`Engine.map`, as semantic.semdedup does), handing files over in the output's scratch folder:

1. per tokenized shard: its doc index into one file per bucket, and each slot's eligible tokens per
   bucket (plan.slot_totals);
2. per bucket but the last: the draw (sample.py) and best-fit packing (pack.py) over lengths alone,
   to count its rows, so every bucket knows which shard numbers are its own;
3. per bucket: the same draw and packing again, each piece assembled (assemble.py) and written
   through `TokenShardWriter` into the bucket's shards, its documents' ledger with them.

Each bucket gives a slot the slot's tokens in proportion to the eligible tokens the bucket holds for
it, so every bucket runs the plan's epochs and the shares hold over the whole stage. The driver
reads a few numbers per slot and bucket and writes the manifest; it never holds a document or a
token. A stage of one bucket is the old single seeded pass, byte for byte.

The ledger is many-to-many: each input document is the parent of the pieces it placed (counted in
the shard holding its first piece) or rejected with a reason (tier_excluded, code_hits, too_short,
too_long, not_in_source / not_in_mix, or not_selected when eligible but not drawn), counted in the
last shard of its bucket, whose `_rejects/` file lists them by id.
"""
from __future__ import annotations

import io
import json
from dataclasses import asdict, fields
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from pydantic import Field

from assay.pipeline import storage
from assay.pipeline.dataset import REJECTS_DIR, artifact_path, atomic_write_bytes, write_artifact
from assay.pipeline.schema import REJECT_DETAIL, REJECT_REASON, REJECT_STAGE
from assay.pipeline.stage import GlobalContext, GlobalStage, Params, register
from assay.pipeline.tokens import DOC_INDEX_SCHEMA, PAD, TokenDataset, TokenLayout, TokenShardWriter, shard_stem

from .assemble import PACKED_EXTRA, Assembler, MaskCounts
from .pack import Greedy, Waste, best_fit
from .plan import Slot, SlotTotals, check, documents_in, slot_totals, stage_slots, waves
from .pools import NOT_IN_SOURCE, Pool
from .recipe import Mixture
from .sample import Draw, SlotStream, draw_stage
from .tokenize import STREAM_INDEX_SCHEMA
from .tokenizer import SPECIALS, Vocab

PACKED_INDEX_SCHEMA = pa.schema(list(DOC_INDEX_SCHEMA) + PACKED_EXTRA)
TOKENIZER_ARTIFACT = "tokenizer.json"
MIX_ARTIFACT = "mix.json"
WRITE_ROWS = 256  # rows gathered before one write: few syscalls, little memory
BUCKET_ROWS = 64  # rows of the stage each bucket fills at least: its last row may be padded


class PackParams(Params):
    mixture: dict[str, Any] = Field(description="The mixture, trimmed to this stage and the stages it replays")
    stage: str = Field(description="Which stage of the mixture to build")
    inputs: dict[str, int] = Field(description="Source name -> index of its tokenized dataset among the inputs")
    tokenizer: str = Field(description="The tokenizer.json the inputs were tokenized with")
    specials: dict[str, str] = Field(default_factory=lambda: dict(SPECIALS))


def bucket_count(documents: int, tokens: int, seq_len: int, pack_docs: int) -> int:
    """Buckets of a stage: one per `pack_docs` input documents, but each with BUCKET_ROWS rows."""
    return max(1, min(-(-documents // pack_docs), tokens // seq_len // BUCKET_ROWS))


def bucket_of(doc_ids: pa.ChunkedArray, buckets: int) -> np.ndarray:
    """Each document's bucket, from its id alone."""
    if buckets == 1:
        return np.zeros(len(doc_ids), np.int64)
    return np.fromiter((xxhash.xxh3_64_intdigest((i or "").encode()) % buckets for i in doc_ids.to_pylist()), np.int64,
                       len(doc_ids))


@register("mix.pack")
class Pack(GlobalStage):
    """Draw one mixture stage from tokenized sources and pack it into fixed-length token shards.

    Normally run by `assay mix build`, which writes its params from the mixture.

    Example: assay mix build examples/mixtures/step35-mini.yaml runs/demo/mix-step35
    """

    Params = PackParams
    output_kind = "tokens"
    cardinality = "many_to_many"
    reads = {"tokenizer": "file"}
    version = "3"  # 2: packed in buckets of documents on the engine's workers; 3: whole pieces (issue #46)

    def output_schema(self, input_schemas=()) -> pa.Schema:
        return PACKED_INDEX_SCHEMA

    def describe_output(self, out_root: Path) -> dict[str, Any]:
        return json.loads(artifact_path(out_root, MIX_ARTIFACT).read_text())

    def run_local(self, ctx: GlobalContext) -> int:
        mixture = Mixture.model_validate(self.params.mixture)
        stage = mixture.stage(self.params.stage)
        vocab = Vocab.load(self.params.tokenizer, self.params.specials)
        write_artifact(ctx.out_root, TOKENIZER_ARTIFACT, vocab.path.read_bytes())  # shards carry their tokenizer
        layout = TokenLayout(vocab.vocab_size, stage.seq_len, vocab.ids["bos"], vocab.ids["eos"], vocab.ids["pad"],
                             f"_artifacts/{TOKENIZER_ARTIFACT}", vocab.sha256)
        paths = [str(ds.path) for ds in ctx.inputs]
        documents = documents_in(paths)
        buckets = bucket_count(documents, stage.tokens, stage.seq_len, mixture.pack_docs)
        scratch = ctx.shared_scratch(self.stage_id)
        engine = ctx.engine
        items = [(k, index) for k, path in enumerate(paths) for index in TokenDataset(path).shard_indexes()]
        found = waves(engine, documents <= mixture.pack_docs)(partial(_scan, self, scratch, paths, buckets), items)
        per_bucket = slot_totals(mixture, stage.id, {}, None, buckets)  # zeros, added up below
        for part in found:
            for mine, more in zip(per_bucket, part):
                for total, extra in zip(mine, more):
                    total.add(extra)
        totals = slot_totals(mixture, stage.id, {})[0]
        for row in per_bucket:
            for total, extra in zip(totals, row):
                total.add(extra)
        check(totals, stage)
        pack = partial(_pack_bucket, self, ctx.out_root, scratch, paths, layout,
                       [[t.available for t in row] for row in per_bucket], [t.available for t in totals])
        counted = engine.map(pack, [(b, None) for b in range(buckets - 1)])  # the last bucket's count is not needed
        first = np.concatenate([[0], np.cumsum(counted, dtype=np.int64)]).tolist()
        done = engine.map(pack, [(b, first[b]) for b in range(buckets)])
        written = [d["shards"] for d in done]
        if written[:-1] != counted:  # the two passes over a bucket must agree
            raise RuntimeError(f"stage {self.stage_id!r}: buckets wrote {written} shards, counted {counted}")
        summary = _summary(stage, totals, done, vocab)
        summary["packing"]["buckets"] = buckets
        write_artifact(ctx.out_root, MIX_ARTIFACT, {"tokens": layout.to_json(), "mix": summary})
        ctx.extra["pack"] = {"documents": documents, "buckets": buckets}
        return int(first[-1] + written[-1])

    run_spark = run_ray = run_local  # the same waves; Engine.map puts them on that engine's workers


def _bucket_dir(scratch, b: int):
    return scratch / f"bucket-{b:05d}"


def _sources_of(stage: Pack, k: int) -> list[str]:
    return [name for name, i in stage.params.inputs.items() if i == k]


def _scan(stage: Pack, scratch, paths: list[str], buckets: int, item: tuple[int, int]) -> list[list[SlotTotals]]:
    """Wave 1, one tokenized shard: its doc index into its buckets' files; [bucket][slot] totals."""
    k, index = item
    pool = Pool.load(paths[k], [index])
    where = bucket_of(pool.column("doc_id"), buckets)
    table = pool.docs.append_column("shard", pa.array(pool.shard))
    for b in np.unique(where).tolist():
        sink = io.BytesIO()
        pq.write_table(table.filter(pa.array(where == b)), sink)
        atomic_write_bytes(_bucket_dir(scratch, b) / f"{k:04d}-{index:06d}.parquet", sink.getvalue())
    mixture = Mixture.model_validate(stage.params.mixture)
    names = _sources_of(stage, k)
    return slot_totals(mixture, stage.params.stage, {n: pool for n in names}, {n: where for n in names}, buckets)


def _bucket_pool(scratch, path: str, k: int, b: int) -> Pool:
    files = storage.glob(_bucket_dir(scratch, b), f"{k:04d}-*.parquet")
    if not files:
        return Pool.of(path, np.zeros(0, np.int32), STREAM_INDEX_SCHEMA.empty_table())
    table = pa.concat_tables([storage.read_parquet(f) for f in files])
    return Pool.of(path, table.column("shard").to_numpy().astype(np.int32), table.drop(["shard"]))


def _pack_bucket(stage: Pack, out_root, scratch, paths: list[str], layout: TokenLayout, available: list[list[float]],
                 total: list[float], item: tuple[int, int | None]):
    """Waves 2 and 3, one bucket: with `first` None, the number of shards its rows fill; else those
    rows written as shards `first`, `first` + 1, ..., and the bucket's figures for the summary."""
    b, first = item
    mixture = Mixture.model_validate(stage.params.mixture)
    spec = mixture.stage(stage.params.stage)
    pools = [_bucket_pool(scratch, path, k, b) for k, path in enumerate(paths)]
    slots = stage_slots(mixture, spec.id, {name: pools[k] for name, k in stage.params.inputs.items()})
    packer = BucketPacker(mixture, spec, slots, [a / t if t else 0.0 for a, t in zip(available[b], total)],
                          len(available) > 1)
    rows_per_shard = max(1, mixture.shard_tokens // spec.seq_len)
    if first is None:
        return max(1, -(-sum(1 for _ in packer.rows()) // rows_per_shard))
    vocab = Vocab.load(stage.params.tokenizer, stage.params.specials)
    assembler = Assembler(slots, spec, vocab.ids, vocab.token_bytes)
    writer = ShardedOutput(out_root, layout, stage.stage_id, rows_per_shard, pools, first)
    try:
        for row in packer.rows():
            writer.add_row(row, slots, assembler)
    finally:
        assembler.close()
    writer.finish(_rejects(slots, writer), spec.id)
    return dict(packer.figures(), masks=asdict(assembler.counts), shards=writer.shards)


class BucketPacker:
    """The draw and the best-fit packing of one bucket: its rows, as lists of (draw, tokens taken),
    the same every time they are asked for."""

    def __init__(self, mixture: Mixture, stage, slots: list[Slot], part: list[float], bucketed: bool):
        self.mixture, self.stage, self.slots = mixture, stage, slots
        self.split = stage.long_docs == "split"
        budget = stage.tokens
        if bucketed:  # the bucket's part of each slot: its share of the slot's eligible tokens
            weights = np.array([s.share for s in slots]) * np.array(part)
            budget = budget * float(weights.sum())
            for slot, w in zip(slots, weights):
                slot.share = float(w / weights.sum()) if weights.sum() else 0.0
        self.budget = budget

    def rows(self):
        stage, slots, split = self.stage, self.slots, self.split
        self.streams = streams = [SlotStream(s, j, self.mixture.seed, stage.seq_len, stage.meta, stage.fim_rate, split)
                                  for j, s in enumerate(slots)]
        self.greedy = greedy = Greedy(stage.seq_len)
        self.fit = fit = Waste()
        self.placed = np.zeros(len(slots), np.int64)
        self.pieces = np.zeros(len(slots), np.int64)
        self.fims = np.zeros(len(slots), np.int64)

        def count(d: Draw) -> Draw:
            self.placed[d.slot] += d.take  # every piece drawn goes into a row
            self.pieces[d.slot] += 1
            self.fims[d.slot] += d.fim and d.offset == 0
            if d.offset == 0:
                greedy.add(d.length)
                fit.documents += 1
                fit.tokens += d.length
            else:  # a continuation: its first token repeats the previous piece's last
                fit.overlap += 1
            if split:
                fit.cut += d.cropped  # a slot's share ended inside it
            else:
                fit.cropped += d.cropped
            return d

        def top_up(room: int) -> Draw | None:
            """A whole document for the last rows' room, from the slot least ahead of its share."""
            ahead = self.placed / np.maximum([s.share for s in slots], 1e-12)
            for j in np.argsort(ahead, kind="stable"):
                d = streams[j].fitting(room) if slots[j].share > 0 else None
                if d is not None:
                    return count(d)
            return None

        drawn = (count(d) for d in draw_stage(slots, streams, self.budget, exact=split))
        yield from best_fit(drawn, stage.seq_len, self.mixture.lookahead, lambda d: d.take, fit, top_up)

    def figures(self) -> dict[str, Any]:
        return {"placed": self.placed.tolist(), "pieces": self.pieces.tolist(), "fims": self.fims.tolist(),
                "taken": [s.taken for s in self.streams], "fit": asdict(self.fit), "greedy": asdict(self.greedy.finish())}

class ShardedOutput:
    """Rows into shards of `rows_per_shard`, with the per-shard ledger and doc index."""

    def __init__(self, root: Path, layout: TokenLayout, stage_id: str, rows_per_shard: int, pools: list[Pool],
                 first: int = 0):
        self.root, self.layout, self.stage_id, self.rows_per_shard = root, layout, stage_id, rows_per_shard
        self.first = first  # the number of the first shard it writes
        self.pools = pools
        self.pool_index = {id(p): k for k, p in enumerate(pools)}
        self.used = [np.zeros(len(p), bool) for p in pools]
        self.shards = 0
        self.writer: TokenShardWriter | None = None
        self.rows_in_shard = 0
        self._reset_batch()

    def _reset_batch(self) -> None:
        self.tokens: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.index: dict[str, list] = {f.name: [] for f in PACKED_INDEX_SCHEMA}
        self.index_pool: list[int] = []
        self.index_doc: list[int] = []

    def _open(self) -> None:
        self.writer = TokenShardWriter(self.root, self.first + self.shards, self.layout, self.stage_id)
        self.writer.counts.rows_parent = 0
        self.shards += 1
        self.rows_in_shard = 0

    def add_row(self, row: list[tuple[Draw, int]], slots: list[Slot], assembler: Assembler) -> None:
        if self.writer is None or self.rows_in_shard == self.rows_per_shard:
            self._flush()
            if self.writer is not None:
                self.writer.commit()
            self._open()
        seq_len = self.layout.seq_len
        tokens = np.full(seq_len, self.layout.pad_id, np.int64)
        mask = np.full(seq_len, PAD, np.uint8)
        offset = 0
        counts = self.writer.counts
        for d, take in row:
            slot = slots[d.slot]
            t, m, prefix, nbytes = assembler.piece(d, take)
            tokens[offset:offset + take] = t
            mask[offset:offset + take] = m
            k = self.pool_index[id(slot.pool)]
            if not self.used[k][d.doc]:
                self.used[k][d.doc] = True
                counts.rows_parent += 1
                counts.rows_in += 1
                counts.bytes_in += int(slot.pool.bytes[d.doc])
            counts.rows_out += 1
            counts.rows_created += 1
            counts.bytes_out += nbytes
            ix = self.index
            ix["row"].append(self.rows_in_shard)
            ix["start"].append(offset)
            ix["length"].append(take)
            ix["prefix_length"].append(prefix)
            ix["bytes"].append(nbytes)
            ix["mix_source"].append(slot.source)
            ix["replay_of"].append(slot.origin if slot.replay else None)
            ix["epoch"].append(d.epoch)
            ix["fim"].append(d.fim)
            ix["cropped"].append(d.cropped)
            ix["offset"].append(d.offset)
            self.index_pool.append(k)
            self.index_doc.append(d.doc)
            offset += take
        self.tokens.append(tokens)
        self.masks.append(mask)
        self.rows_in_shard += 1
        if len(self.tokens) >= WRITE_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.tokens:
            return
        ix = self.index
        for name, value in _doc_columns(self.pools, np.array(self.index_pool), np.array(self.index_doc)).items():
            ix[name] = value
        docs = pa.table({f.name: pa.array(ix[f.name], f.type) if isinstance(ix[f.name], list) else ix[f.name]
                         for f in PACKED_INDEX_SCHEMA}, schema=PACKED_INDEX_SCHEMA)
        self.writer.write(np.stack(self.tokens), np.stack(self.masks), docs)
        self._reset_batch()

    def finish(self, rejects: pa.Table, stage_id: str) -> None:
        """Write the last rows and the rejects into the last shard and commit it."""
        if self.writer is None:
            self._open()
        self._flush()
        counts = self.writer.counts
        reasons = rejects.column(REJECT_REASON).to_pylist()
        nbytes = rejects.column("bytes").to_numpy(zero_copy_only=False)
        for reason in sorted(set(reasons)):
            chosen = np.array([r == reason for r in reasons])
            counts.add_rejects(reason, int(chosen.sum()), int(nbytes[chosen].sum()))
        counts.rows_in += rejects.num_rows
        counts.bytes_in += int(nbytes.sum())
        table = rejects.drop(["bytes"]).append_column(REJECT_STAGE, pa.array([stage_id] * rejects.num_rows, pa.string()))
        if table.num_rows:
            pq.write_table(table, self.writer.files.temp(f"{REJECTS_DIR}/{shard_stem(self.writer.index)}.parquet"),
                           compression="zstd")
        self.writer.commit()


def _doc_columns(pools: list[Pool], pool_ids: np.ndarray, docs: np.ndarray) -> dict[str, pa.Array]:
    """doc_id, content_hash, source and content_type of pieces that come from several pools, in piece order."""
    order = np.argsort(pool_ids, kind="stable")
    parts: dict[str, list[pa.Array]] = {"doc_id": [], "content_hash": [], "source": [], "content_type": []}
    for k in np.unique(pool_ids):
        chosen = pa.array(docs[pool_ids == k])
        for name in parts:
            parts[name].append(pools[k].column(name).take(chosen).combine_chunks())
    back = pa.array(np.argsort(order, kind="stable"))
    return {name: pa.concat_arrays(arrays).take(back) if arrays else pa.array([], pa.string())
            for name, arrays in parts.items()}


def _rejects(slots: list[Slot], output: ShardedOutput) -> pa.Table:
    """Every input document no piece came from, with why: the first rule that kept it out of every
    slot reading its pool, or not_selected if some slot could have drawn it."""
    tables = []
    for pool, used in zip(output.pools, output.used):
        reason = np.full(len(pool), None, object)
        eligible = np.zeros(len(pool), bool)
        for slot in (s for s in slots if s.pool is pool):
            eligible |= slot.reasons == None  # noqa: E711
            fill = (reason == None) & (slot.reasons != None) & (slot.reasons != NOT_IN_SOURCE)  # noqa: E711
            reason[fill] = slot.reasons[fill]
        reason[reason == None] = "not_in_mix"  # noqa: E711
        reason[eligible] = "not_selected"
        out = np.flatnonzero(~used)
        idx = pa.array(out)
        tables.append(pa.table({
            "id": pool.column("doc_id").take(idx), "source": pool.column("source").take(idx),
            "content_type": pool.column("content_type").take(idx),
            REJECT_REASON: pa.array(reason[out].tolist(), pa.string()),
            REJECT_DETAIL: pa.nulls(len(out), pa.string()),
            "bytes": pa.array(pool.bytes[out], pa.int64()),
        }))
    return pa.concat_tables(tables) if tables else pa.table({})


def _summary(stage, totals: list[SlotTotals], buckets: list[dict], vocab: Vocab) -> dict:
    """The stage's figures, added up over its buckets."""
    add = lambda key: np.sum([b[key] for b in buckets], axis=0)  # noqa: E731
    placed, pieces, fims, taken = add("placed"), add("pieces"), add("fims"), add("taken")
    fit, greedy = (Waste(**{f.name: sum(b[key][f.name] for b in buckets) for f in fields(Waste)})
                   for key in ("fit", "greedy"))
    masks = MaskCounts(**{f.name: sum(b["masks"][f.name] for b in buckets) for f in fields(MaskCounts)})
    total = int(placed.sum())
    per_slot = []
    by_source: dict[str, dict[str, float]] = {}
    for j, slot in enumerate(totals):
        item = dict(slot.summary(), tokens=int(placed[j]), realized_share=placed[j] / total if total else 0.0,
                    pieces=int(pieces[j]), fim_pieces=int(fims[j]),
                    realized_epochs=float(taken[j] / slot.available) if slot.available else 0.0)
        per_slot.append(item)
        agg = by_source.setdefault(slot.source, {"target_share": 0.0, "tokens": 0})
        agg["target_share"] += slot.share
        agg["tokens"] += int(placed[j])
    for agg in by_source.values():
        agg["realized_share"] = agg["tokens"] / total if total else 0.0
    return {
        "stage": stage.id, "seq_len": stage.seq_len, "target_tokens": stage.tokens, "tokens": total,
        "replay_tokens": int(sum(placed[j] for j, s in enumerate(totals) if s.replay)),
        "tokenizer_sha256": vocab.sha256, "vocab_size": vocab.vocab_size,
        "meta": stage.meta, "mask_roles": stage.mask_roles, "fim_rate": stage.fim_rate,
        "slots": per_slot, "sources": by_source, "masks": masks.to_json(),
        "packing": {"best_fit": fit.to_json(stage.seq_len), "greedy": greedy.to_json(stage.seq_len)},
    }
