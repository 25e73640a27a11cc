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
from typing import Any

import numpy as np

from assay.pipeline.errors import UserError

from .pack import chunked_length
from .pools import Pool, reasons
from .recipe import Mixture, StageSpec


class PlanError(UserError):
    """A budget that cannot be met within an epoch cap (or from an empty pool)."""


@dataclass
class Slot:
    stage: str
    source: str
    origin: str  # the stage whose rules select documents (itself, or the replayed stage)
    share: float
    target: float
    cap: float
    pool: Pool
    reasons: np.ndarray = field(repr=False)
    eligible: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)  # tokens each eligible document places in rows
    weights: np.ndarray | None = field(repr=False)
    available: float = 0.0

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
                "documents": int(len(self.eligible)), "epochs": self.epochs, "max_epochs": self.cap}


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


def stage_slots(mixture: Mixture, stage_id: str, pools: dict[str, Pool]) -> list[Slot]:
    """The slots of one stage, with their pools' eligible documents; `pools` maps source -> Pool."""
    stage = mixture.stage(stage_id)
    parts: list[tuple[str, StageSpec, float]] = [(name, stage, share) for name, share in _shares(stage).items()]
    if stage.replay is not None:
        origins = [mixture.stage(o) for o in stage.replay.from_]
        given = {(o.id, name): o.tokens * share for o in origins for name, share in _shares(o).items()}
        total = sum(given.values())
        parts += [(name, mixture.stage(oid), stage.replay.share * t / total) for (oid, name), t in given.items()]
    slots = []
    for name, origin, share in parts:
        pool = pools[name]
        why = reasons(pool, mixture.sources[name], origin, origin.entry(name))
        eligible = np.flatnonzero(why == None)  # noqa: E711 (elementwise)
        lengths = row_tokens(pool.packed_length(stage.meta)[eligible], stage)
        weights = pool.weights()[eligible] if stage.cluster_rebalance and pool.has_column_values("cluster_weight") else None
        available = float((lengths * weights).sum() if weights is not None else lengths.sum())
        slots.append(Slot(stage.id, name, origin.id, share, share * stage.tokens, _cap(mixture, stage, origin, name),
                          pool, why, eligible, lengths, weights, available))
    return slots


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
            why = Counter(r for r in slot.reasons if r is not None).most_common(3)
            detail = ", ".join(f"{n} {r}" for r, n in why) or "the dataset is empty"
            raise PlanError(f"stage {stage.id!r}: source {slot.label!r} has no eligible documents ({detail}); "
                            f"drop it from the mix or relax the stage's rules")
        if slot.epochs > slot.cap * (1 + 1e-9):
            raise PlanError(
                f"stage {stage.id!r}: source {slot.label!r} would need {slot.epochs:.2f} epochs of its "
                f"{slot.available:,.0f} eligible tokens ({len(slot.eligible)} documents) to give {slot.target:,.0f} "
                f"tokens ({slot.share:.1%} of {stage.tokens:,}), but max_epochs is {slot.cap:g}; lower its weight, "
                f"raise max_epochs or lower the stage's tokens")


def plan_mixture(mixture: Mixture, pools: dict[str, Pool]) -> dict[str, list[Slot]]:
    """Every stage's slots, checked; raises PlanError at the first slot that cannot be met."""
    out = {}
    for stage in mixture.stages:
        slots = stage_slots(mixture, stage.id, pools)
        check(slots, stage)
        out[stage.id] = slots
    return out


def plan_rows(mixture: Mixture, plan: dict[str, list[Slot]]) -> list[list[str]]:
    """The plan as table rows: stage, source, share, tokens, eligible tokens, documents, epochs, cap."""
    rows = []
    for stage in mixture.stages:
        for slot in plan[stage.id]:
            rows.append([f"{stage.id} ({stage.seq_len})", slot.label, f"{slot.share:.1%}", f"{slot.target:,.0f}",
                         f"{slot.available:,.0f}", f"{len(slot.eligible):,}", f"{slot.epochs:.2f}", f"{slot.cap:g}"])
    return rows


PLAN_HEADERS = ["stage (seq_len)", "source", "share", "tokens", "eligible tokens", "documents", "epochs", "max"]


def precision_notes(mixture: Mixture, plan: dict[str, list[Slot]]) -> list[str]:
    """Why realized shares may miss their targets by more than 1%: documents are drawn whole, so a
    stage whose largest draw (a document, or a chunk of a row) is a big part of its budget cannot split
    shares finer than that."""
    notes = []
    for stage in mixture.stages:
        largest = max((min(int(s.lengths.max()), stage.seq_len) for s in plan[stage.id]
                       if len(s.lengths) and s.share > 0), default=0)  # a draw is at most a row
        if largest > 0.01 * stage.tokens:
            notes.append(f"stage {stage.id!r}: one document can take {largest:,} tokens, {largest / stage.tokens:.1%} "
                         f"of its {stage.tokens:,}, so realized shares can miss the targets by about that much "
                         f"(raise tokens or lower seq_len to get within 1%)")
    return notes
