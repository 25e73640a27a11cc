"""The planner: what each source contributes to each stage, and the epochs that implies.

A stage's budget splits into *slots*: one per source in its `mix` (sharing 1 - replay share by
weight) and, with `replay`, one per source of each replayed stage (sharing the replay share in
proportion to the tokens that stage gave the source). A slot draws from the documents its rules
admit; for replay those are the replayed stage's rules, so replay brings back data like the earlier
stage's and nothing else. A document counts with every token it places in rows (split across rows,
with the chunks' overlap; cropped to a row where the stage crops long documents). Epochs = target
tokens / eligible tokens (weighted by cluster_weight under
cluster_rebalance); a slot that would pass over its pool more often than its cap is refused here,
before anything is built.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from assay.pipeline.errors import UserError
from assay.pipeline.dataset import Dataset
from assay.pipeline.tokens import TokenDataset

from .pack import chunked_length
from .pools import PREFIX_TOO_LONG, Pool, reasons
from .recipe import Mixture, StageSpec


class PlanError(UserError):
    """A budget that cannot be met within an epoch cap (or from an empty pool)."""


@dataclass
class _SlotFacts:
    """What a slot's summary, the plan table and the checks read: shared by a `Slot` (over pools) and
    its `SlotTotals` (added up over parts of them, on the workers), which add `available`."""

    stage: str
    source: str
    origin: str  # the stage whose rules select documents (itself, or the replayed stage)
    share: float
    target: float
    cap: float

    @property
    def replay(self) -> bool:
        return self.origin != self.stage

    @property
    def epochs(self) -> float:
        return self.target / self.available if self.available else float("inf")

    @property
    def label(self) -> str:
        return f"{self.source} (replay of {self.origin})" if self.replay else self.source

    def summary(self) -> dict[str, Any]:
        return {"source": self.source, "origin": self.origin, "replay": self.replay, "share": self.share,
                "target_tokens": round(self.target), "available_tokens": round(self.available),
                "documents": int(self.documents), "epochs": self.epochs, "max_epochs": self.cap}


@dataclass
class Slot(_SlotFacts):
    pool: Pool
    reasons: np.ndarray = field(repr=False)
    eligible: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)  # tokens each eligible document places in rows
    weights: np.ndarray | None = field(repr=False)
    available: float = 0.0

    @property
    def documents(self) -> int:
        return len(self.eligible)

    @property
    def longest(self) -> int:
        return int(self.lengths.max()) if len(self.lengths) else 0

    def excluded(self) -> Counter:
        return Counter(r for r in self.reasons if r is not None)


@dataclass
class SlotTotals(_SlotFacts):
    """A slot's figures over some of its pools' documents (a shard, a bucket): they add up, so
    workers count them and the driver sums a few numbers per slot, never a document's."""

    available: float = 0.0
    documents: int = 0
    longest: int = 0
    reasons: Counter = field(default_factory=Counter)

    def add(self, other: "SlotTotals") -> "SlotTotals":
        self.available += other.available
        self.documents += other.documents
        self.longest = max(self.longest, other.longest)
        self.reasons.update(other.reasons)
        return self

    def excluded(self) -> Counter:
        return self.reasons


def _shares(stage: StageSpec) -> dict[str, float]:
    weights = {name: stage.entry(name).weight for name in stage.mix}
    total = sum(weights.values())
    keep = 1.0 - (stage.replay.share if stage.replay else 0.0)
    return {name: keep * w / total for name, w in weights.items()}


def _cap(mixture: Mixture, stage: StageSpec, origin: StageSpec, source: str) -> float:
    for value in (origin.entry(source).max_epochs, stage.max_epochs, mixture.sources[source].max_epochs):
        if value is not None:
            return value
    return mixture.max_epochs


def slot_parts(mixture: Mixture, stage_id: str) -> list[tuple[str, StageSpec, float]]:
    """(source, the stage whose rules select its documents, share) of each slot of a stage."""
    stage = mixture.stage(stage_id)
    parts: list[tuple[str, StageSpec, float]] = [(name, stage, share) for name, share in _shares(stage).items()]
    if stage.replay is not None:
        origins = [mixture.stage(o) for o in stage.replay.from_]
        given = {(o.id, name): o.tokens * share for o in origins for name, share in _shares(o).items()}
        total = sum(given.values())
        parts += [(name, mixture.stage(oid), stage.replay.share * t / total) for (oid, name), t in given.items()]
    return parts


def stage_sources(mixture: Mixture, stage_id: str) -> list[str]:
    """The sources a stage draws from, its own and those it replays."""
    return sorted({name for name, _, _ in slot_parts(mixture, stage_id)})


def stage_slots(mixture: Mixture, stage_id: str, pools: dict[str, Pool]) -> list[Slot]:
    """The slots of one stage, with their pools' eligible documents; `pools` maps source -> Pool."""
    stage = mixture.stage(stage_id)
    return [_slot_of(mixture, stage, name, origin, share, pools[name])
            for name, origin, share in slot_parts(mixture, stage_id)]


def _slot_of(mixture: Mixture, stage: StageSpec, name: str, origin: StageSpec, share: float, pool: Pool) -> Slot:
    why = reasons(pool, mixture.sources[name], origin, origin.entry(name))
    if stage.meta:  # BOS, the prefix and a text token must fit the first piece: a prefix never crosses a row
        why[(pool.prefix + 2 > stage.seq_len) & (why == None)] = PREFIX_TOO_LONG  # noqa: E711
    eligible = np.flatnonzero(why == None)  # noqa: E711 (elementwise)
    lengths = row_tokens(pool.packed_length(stage.meta)[eligible], stage)
    weights = pool.weights()[eligible] if stage.cluster_rebalance and pool.has_column_values("cluster_weight") else None
    available = float((lengths * weights).sum() if weights is not None else lengths.sum())
    return Slot(stage.id, name, origin.id, share, share * stage.tokens, _cap(mixture, stage, origin, name),
                pool, why, eligible, lengths, weights, available)


def slot_totals(mixture: Mixture, stage_id: str, pools: dict[str, Pool], bucket: dict[str, np.ndarray] | None = None,
                buckets: int = 1) -> list[list[SlotTotals]]:
    """[bucket][slot] totals of a stage over `pools` (some of the sources' documents: a shard's);
    a slot whose source is not among them counts nothing. `bucket` gives each pool's documents their
    bucket (all in bucket 0 without it)."""
    stage = mixture.stage(stage_id)
    out = [[] for _ in range(buckets)]
    for name, origin, share in slot_parts(mixture, stage_id):
        made = [SlotTotals(stage.id, name, origin.id, share, share * stage.tokens, _cap(mixture, stage, origin, name))
                for _ in range(buckets)]
        for b, totals in enumerate(made):
            out[b].append(totals)
        if name not in pools:
            continue
        slot = _slot_of(mixture, stage, name, origin, share, pools[name])
        where = bucket[name] if bucket is not None else np.zeros(len(slot.pool), np.int64)
        chosen = where[slot.eligible]
        w = slot.weights if slot.weights is not None else 1.0
        available = np.bincount(chosen, weights=slot.lengths * w, minlength=buckets)
        documents = np.bincount(chosen, minlength=buckets)
        longest = np.zeros(buckets, np.int64)
        np.maximum.at(longest, chosen, slot.lengths)
        left_out = slot.reasons != None  # noqa: E711 (elementwise)
        why = Counter(zip(where[left_out].tolist(), slot.reasons[left_out].tolist()))
        for b, totals in enumerate(made):
            totals.available, totals.documents, totals.longest = float(available[b]), int(documents[b]), int(longest[b])
            totals.reasons = Counter({r: n for (k, r), n in why.items() if k == b})
    return out


def row_tokens(lengths: np.ndarray, stage: StageSpec) -> np.ndarray:
    """Tokens documents of these packed lengths place in a stage's rows (pack.chunked_length)."""
    if stage.long_docs == "crop":
        return np.minimum(lengths, stage.seq_len)
    return chunked_length(lengths, stage.seq_len)


def check(slots: list[Slot], stage: StageSpec) -> None:
    """Refuse, in one line, a slot that cannot give its tokens within its cap."""
    for slot in slots:
        if slot.target <= 0:
            continue
        if slot.available == 0:
            why = slot.excluded().most_common(3)
            detail = ", ".join(f"{n} {r}" for r, n in why) or "the dataset is empty"
            raise PlanError(f"stage {stage.id!r}: source {slot.label!r} has no eligible documents ({detail}); "
                            f"drop it from the mix or relax the stage's rules")
        if slot.epochs > slot.cap * (1 + 1e-9):
            raise PlanError(
                f"stage {stage.id!r}: source {slot.label!r} would need {slot.epochs:.2f} epochs of its "
                f"{slot.available:,.0f} eligible tokens ({slot.documents} documents) to give {slot.target:,.0f} "
                f"tokens ({slot.share:.1%} of {stage.tokens:,}), but max_epochs is {slot.cap:g}; lower its weight, "
                f"raise max_epochs or lower the stage's tokens")


def plan_mixture(mixture: Mixture, tokenized: dict[str, Path], engine: Any) -> dict[str, list[SlotTotals]]:
    """Every stage's slots, checked; raises PlanError at the first slot that cannot be met. `tokenized`
    maps source -> its tokenized dataset. Each shard's documents are counted on the engine's workers
    (`Engine.map`) and the driver adds up a few numbers per slot, so it never holds a document."""
    paths = sorted({str(p) for p in tokenized.values()})
    items = [(path, index) for path in paths for index in TokenDataset(path).shard_indexes()]
    names = {path: [n for n, p in tokenized.items() if str(p) == path] for path in paths}
    found = waves(engine, documents_in(paths) <= mixture.pack_docs)(partial(_shard_totals, mixture, names), items)
    out: dict[str, list[SlotTotals]] = {}
    for stage in mixture.stages:
        slots = slot_totals(mixture, stage.id, {})[0]  # [bucket][slot]: the one bucket's every slot
        for part in found:
            for total, more in zip(slots, part[stage.id]):
                total.add(more)
        check(slots, stage)
        out[stage.id] = slots
    return out


def documents_in(paths: list) -> int:
    """Documents of the (tokenized) datasets at `paths`, from their manifests."""
    return sum(int((Dataset(p).manifest or {}).get("counts", {}).get("rows_out", 0)) for p in paths)


def waves(engine: Any, small: bool):
    """`engine.map`, or a plain loop for the local engine when the job is one bucket's worth of
    documents: starting a process pool would take longer than the work (the results are the same)."""
    if small and engine.name == "local":
        return lambda fn, items: [fn(item) for item in items]
    return engine.map


def _shard_totals(mixture: Mixture, names: dict[str, list[str]], item: tuple[str, int]) -> dict[str, list[SlotTotals]]:
    path, index = item
    pool = Pool.load(path, [index])
    pools = {name: pool for name in names[path]}
    return {stage.id: slot_totals(mixture, stage.id, pools)[0] for stage in mixture.stages}


def plan_rows(mixture: Mixture, plan: dict[str, list[Slot]]) -> list[list[str]]:
    """The plan as table rows: stage, source, share, tokens, eligible tokens, documents, epochs, cap."""
    rows = []
    for stage in mixture.stages:
        for slot in plan[stage.id]:
            rows.append([f"{stage.id} ({stage.seq_len})", slot.label, f"{slot.share:.1%}", f"{slot.target:,.0f}",
                         f"{slot.available:,.0f}", f"{slot.documents:,}", f"{slot.epochs:.2f}", f"{slot.cap:g}"])
    return rows


PLAN_HEADERS = ["stage (seq_len)", "source", "share", "tokens", "eligible tokens", "documents", "epochs", "max"]


def precision_notes(mixture: Mixture, plan: dict[str, list[Slot]]) -> list[str]:
    """Why realized shares may miss their targets by more than 1%: documents are drawn whole, so a
    stage whose largest draw (a document, or a chunk of a row) is a big part of its budget cannot split
    shares finer than that."""
    notes = []
    for stage in mixture.stages:
        largest = max((min(s.longest, stage.seq_len) for s in plan[stage.id]
                       if s.documents and s.share > 0), default=0)  # a draw is at most a row
        if largest > 0.01 * stage.tokens:
            notes.append(f"stage {stage.id!r}: one document can take {largest:,} tokens, {largest / stage.tokens:.1%} "
                         f"of its {stage.tokens:,}, so realized shares can miss the targets by about that much "
                         f"(raise tokens or lower seq_len to get within 1%)")
    return notes
