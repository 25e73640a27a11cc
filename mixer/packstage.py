"""`mix.pack`: one training stage of a mixture, drawn and packed into token shards.

It reads the tokenized streams of the stage's sources (and of the sources it replays) in a fixed
order, draws documents (sample.py), packs them best-fit into rows of seq_len (pack.py), assembles
each piece (assemble.py) and writes shards through `TokenShardWriter`. It runs on the driver: the
draw is one sequential, seeded decision over document lengths, and the tokens stream from memory
maps, so an engine would add nothing but transfers. Tokenization, the heavy part, is `mix.tokenize`
on any engine.

The ledger is many-to-many: each input document is the parent of the pieces it placed (counted in
the shard holding its first piece) or rejected with a reason (tier_excluded, code_hits, too_short,
too_long, not_in_source / not_in_mix, or not_selected when eligible but not drawn), counted in the
last shard, whose `_rejects/` file lists them by id.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field

from assay.pipeline.dataset import REJECTS_DIR, artifact_path, write_artifact
from assay.pipeline.schema import REJECT_DETAIL, REJECT_REASON, REJECT_STAGE
from assay.pipeline.stage import GlobalContext, GlobalStage, Params, register
from assay.pipeline.tokens import DOC_INDEX_SCHEMA, PAD, TokenLayout, TokenShardWriter, shard_stem

from .assemble import PACKED_EXTRA, Assembler
from .pack import Greedy, Waste, best_fit
from .plan import Slot, check, stage_slots
from .pools import NOT_IN_SOURCE, Pool
from .recipe import Mixture
from .sample import Draw, SlotStream, draw_stage
from .tokenizer import SPECIALS, Vocab

PACKED_INDEX_SCHEMA = pa.schema(list(DOC_INDEX_SCHEMA) + PACKED_EXTRA)
TOKENIZER_ARTIFACT = "tokenizer.json"
MIX_ARTIFACT = "mix.json"
WRITE_ROWS = 256  # rows gathered before one write: few syscalls, little memory


class PackParams(Params):
    mixture: dict[str, Any] = Field(description="The mixture, trimmed to this stage and the stages it replays")
    stage: str = Field(description="Which stage of the mixture to build")
    inputs: dict[str, int] = Field(description="Source name -> index of its tokenized dataset among the inputs")
    tokenizer: str = Field(description="The tokenizer.json the inputs were tokenized with")
    specials: dict[str, str] = Field(default_factory=lambda: dict(SPECIALS))


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
    version = "1"

    def output_schema(self, input_schemas=()) -> pa.Schema:
        return PACKED_INDEX_SCHEMA

    def describe_output(self, out_root: Path) -> dict[str, Any]:
        return json.loads(artifact_path(out_root, MIX_ARTIFACT).read_text())

    def run_local(self, ctx: GlobalContext) -> int:
        mixture = Mixture.model_validate(self.params.mixture)
        stage = mixture.stage(self.params.stage)
        loaded: dict[int, Pool] = {}
        pools = {}
        for name, index in self.params.inputs.items():
            if index not in loaded:
                loaded[index] = Pool.load(ctx.inputs[index].path)
            pools[name] = loaded[index]
        slots = stage_slots(mixture, stage.id, pools)
        check(slots, stage)
        vocab = Vocab.load(self.params.tokenizer, self.params.specials)
        write_artifact(ctx.out_root, TOKENIZER_ARTIFACT, vocab.path.read_bytes())  # shards carry their tokenizer
        layout = TokenLayout(vocab.vocab_size, stage.seq_len, vocab.ids["bos"], vocab.ids["eos"], vocab.ids["pad"],
                             f"_artifacts/{TOKENIZER_ARTIFACT}", vocab.sha256)
        writer = ShardedOutput(ctx.out_root, layout, self.stage_id, max(1, mixture.shard_tokens // stage.seq_len),
                               list(loaded.values()))
        split = stage.long_docs == "split"
        streams = [SlotStream(s, j, mixture.seed, stage.seq_len, stage.meta, stage.fim_rate, split)
                   for j, s in enumerate(slots)]
        assembler = Assembler(slots, stage, vocab.ids, vocab.token_bytes)
        greedy = Greedy(stage.seq_len)
        placed = np.zeros(len(slots), np.int64)
        pieces = np.zeros(len(slots), np.int64)
        fims = np.zeros(len(slots), np.int64)

        credit = np.zeros(len(slots))

        fit = Waste()

        # Split documents fill rows to the last token: the draw is whole rows less the one token of
        # overlap the packer may add to a row when it splits a piece into its room, and each slot
        # stops at its share of it (inside a document if need be).
        budget = -(-stage.tokens // (stage.seq_len - 1)) * (stage.seq_len - 1) if split else stage.tokens

        def drawn():
            for d in draw_stage(slots, streams, budget, credit, exact=split):
                if d.offset == 0:
                    greedy.add(d.length)
                else:  # a continuation chunk: one of its tokens repeats the previous chunk's last
                    fit.tokens -= 1
                    fit.overlap += 1
                yield d

        def cropped(d: Draw, lost: int) -> None:
            credit[d.slot] -= lost

        def split_piece(d: Draw, n: int) -> tuple[Draw, Draw]:
            credit[d.slot] += 1  # the tail's overlap token is placed too
            return replace(d, take=n), replace(d, offset=d.offset + n - 1, take=d.take - n + 1)

        for row in best_fit(drawn(), stage.seq_len, mixture.lookahead, lambda d: d.take if split else d.length,
                            fit, cropped, split_piece if split else None):
            writer.add_row(row, slots, assembler)
            for d, take in row:
                placed[d.slot] += take
                pieces[d.slot] += 1
                fims[d.slot] += d.fim and d.offset == 0
        assembler.close()
        fit.unfinished = sum(stream.unfinished() for stream in streams)
        writer.finish(_rejects(slots, writer), stage.id)
        summary = _summary(stage, slots, streams, placed, pieces, fims, assembler, fit, greedy.finish(), vocab)
        write_artifact(ctx.out_root, MIX_ARTIFACT, {"tokens": layout.to_json(), "mix": summary})
        return writer.shards


class ShardedOutput:
    """Rows into shards of `rows_per_shard`, with the per-shard ledger and doc index."""

    def __init__(self, root: Path, layout: TokenLayout, stage_id: str, rows_per_shard: int, pools: list[Pool]):
        self.root, self.layout, self.stage_id, self.rows_per_shard = root, layout, stage_id, rows_per_shard
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
        self.writer = TokenShardWriter(self.root, self.shards, self.layout, self.stage_id)
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
            ix["cropped"].append(d.length - take if d.cropped or take < d.take else 0)
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


def _summary(stage, slots, streams, placed, pieces, fims, assembler, fit: Waste, greedy: Waste, vocab) -> dict:
    total = int(placed.sum())
    per_slot = []
    by_source: dict[str, dict[str, float]] = {}
    for j, (slot, stream) in enumerate(zip(slots, streams)):
        item = dict(slot.summary(), tokens=int(placed[j]), realized_share=placed[j] / total if total else 0.0,
                    pieces=int(pieces[j]), fim_pieces=int(fims[j]), realized_epochs=stream.epochs)
        per_slot.append(item)
        agg = by_source.setdefault(slot.source, {"target_share": 0.0, "tokens": 0})
        agg["target_share"] += slot.share
        agg["tokens"] += int(placed[j])
    for agg in by_source.values():
        agg["realized_share"] = agg["tokens"] / total if total else 0.0
    return {
        "stage": stage.id, "seq_len": stage.seq_len, "target_tokens": stage.tokens, "tokens": total,
        "replay_tokens": int(sum(placed[j] for j, s in enumerate(slots) if s.replay)),
        "tokenizer_sha256": vocab.sha256, "vocab_size": vocab.vocab_size,
        "meta": stage.meta, "mask_roles": stage.mask_roles, "fim_rate": stage.fim_rate,
        "slots": per_slot, "sources": by_source, "masks": assembler.counts.to_json(),
        "packing": {"best_fit": fit.to_json(stage.seq_len), "greedy": greedy.to_json(stage.seq_len)},
    }
