"""`semantic.mine`: knowledge mining (Step 3.5 §C.1.2): documents retrieved from the shared embedding
store for each item of a curated inventory, ranked by similarity and knowledge density, selected
with coverage in mind, for the synthesis stages to rephrase or turn into QA.

Inventory: a text file, one entity, concept or relation per line (`#` comments; an optional
`entity:` / `concept:` / `relation:` prefix is kept as the item's kind). Items are embedded with the
model the documents were embedded with.

Fit (every shard): an exact inner-product faiss index over the shard's vectors answers every item's
query; each item keeps its `candidates` nearest documents above `min_similarity`, with their
knowledge density. Reduce (driver): per item, score = (1 - density_weight) * similarity +
density_weight * density; then rounds in which every item takes its best document not yet taken,
so a popular item cannot crowd out a rare one, until each has `per_item` or the `max_documents`
budget is spent. Apply: selected documents get `mined_for` (the items they were picked for) and
`mine_score`; the rest are rejected as `not_mined` (mode select) or kept unmarked (mode annotate).
The selection is also written to `_artifacts/selection.parquet`.

Knowledge density is a transparent heuristic unless `density_column` names a model score in [0, 1]
(for example a quality classifier's): the share of content words, of names and numbers, and of
definitional phrasing ("is a", "refers to", "consists of", ...), damped for very short texts.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline.errors import UserError
from assay.pipeline.stage import FitApplyStage, Params, Resources, register, set_column, with_rejects

from .side import WithEmbeddings
from .terms import STOPWORDS, title

_WORDS = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_CUES = re.compile(r"\b(?:is an?|are an?|refers? to|defined as|consists? of|known as|called|because|therefore|"
                   r"such as|for example|discovered|invented|located in|born in|founded)\b", re.I)
_KINDS = ("entity", "concept", "relation")


def knowledge_density(text: str) -> float:
    """A score in [0, 1]: content words, names and numbers, definitional phrasing, enough length."""
    words = _WORDS.findall(text or "")
    if not words:
        return 0.0
    n = len(words)
    content = sum(1 for w in words if len(w) > 3 and w.lower() not in STOPWORDS) / n
    names = sum(1 for i, w in enumerate(words) if i and (w[0].isupper() or w[0].isdigit())) / n
    cues = len(_CUES.findall(text)) * 100 / n
    score = 0.45 * content + 0.25 * min(1.0, names * 4) + 0.30 * min(1.0, cues / 3)
    return round(score * min(1.0, n / 150), 4)


def read_inventory(path: str) -> list[tuple[str, str]]:
    """(kind, text) per inventory line."""
    from assay.pipeline import storage

    try:  # a local path or a URL (s3://...)
        lines = storage.as_path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"inventory {path}: {exc.strerror}") from None
    items = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        kind, sep, rest = line.partition(":")
        if sep and kind.strip().lower() in _KINDS and rest.strip():
            items.append((kind.strip().lower(), rest.strip()))
        else:
            items.append(("item", line))
    if not items:
        raise UserError(f"inventory {path}: no items (one entity, concept or relation per line)")
    return items


class MineParams(Params):
    inventory: str = Field(description="Text file: one entity, concept or relation per line")
    per_item: int = Field(20, ge=1, description="Documents selected per inventory item")
    candidates: int = Field(100, ge=1, description="Nearest documents kept per item before ranking")
    min_similarity: float = Field(0.3, ge=-1, le=1, description="Cosine a candidate must reach")
    density_weight: float = Field(0.3, ge=0, le=1, description="Weight of knowledge density in the score")
    density_column: str | None = Field(None, description="Column holding a density score in [0, 1] "
                                                         "(default: the built-in heuristic)")
    max_documents: int | None = Field(None, ge=1, description="Overall budget of selected documents")
    mode: Literal["select", "annotate"] = Field("select", description="select: reject the rest; annotate: keep all")
    model: str | None = Field(None, description="The model the documents were embedded with (default: MiniLM)")


@register("semantic.mine")
class Mine(WithEmbeddings, FitApplyStage):
    """Retrieve knowledge-dense documents for each inventory item by embedding search.

    Example: assay mine runs/x/docs runs/x/embeddings runs/x/mined --inventory inventory.txt
    """

    Params = MineParams
    columns = {"mined_for": pa.list_(pa.string()), "mine_score": pa.float32()}
    resources = Resources(cpus=1, memory_gb=2)
    requires = ("faiss", "torch", "sentence_transformers")
    reads = {"inventory": "file", "model": "file"}

    def tasks(self, inputs):
        tasks = super().tasks(inputs)
        made_with = ((inputs[1].manifest or {}).get("embedding") or {}).get("model_path", self.params.model)
        if made_with != self.params.model:
            raise UserError(f"stage {self.stage_id!r}: the embeddings were made with model {made_with!r}; "
                            f"set `model: {made_with}` so the inventory is embedded the same way")
        return tasks

    def read_files(self) -> dict[str, list[str]]:
        from .model import model_path

        return {"inventory": [self.params.inventory], "model": [model_path(self.params.model)]}

    def setup(self) -> None:
        self.items = read_inventory(self.params.inventory)
        self.queries = None  # embedded on first use: the apply phase needs no model

    def _query_vectors(self) -> np.ndarray:
        if self.queries is None:
            from .model import Encoder

            encoder = Encoder(self.params.model, threads=max(1, int(self.resources.cpus)))
            self.queries = encoder.encode([text for _, text in self.items])
            encoder.close()
        return self.queries

    def teardown(self) -> None:
        self.queries = None

    def fit(self, table: pa.Table, state: dict | None) -> dict:
        import faiss

        from assay.dedup.hashing import hash_strings

        vectors = np.ascontiguousarray(self.batch_vectors, np.float32)
        if not len(vectors):
            return state or _empty()
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        sims, rows = index.search(self._query_vectors(), min(self.params.candidates, len(vectors)))
        hit = (rows >= 0) & (sims >= self.params.min_similarity)
        item_idx, pos = np.nonzero(hit)
        rows_hit = rows[item_idx, pos]
        wanted = np.unique(rows_hit)
        texts = pc.take(table.column("text"), pa.array(wanted)).to_pylist()
        if self.params.density_column:
            if self.params.density_column not in table.column_names:
                raise UserError(f"stage {self.stage_id!r}: no column {self.params.density_column!r} for density")
            dens = pc.take(table.column(self.params.density_column), pa.array(wanted)).to_numpy(zero_copy_only=False)
        else:
            dens = np.array([knowledge_density(t) for t in texts])
        where = np.searchsorted(wanted, rows_hit)
        ids = table.column("id").combine_chunks()
        part = {
            "item": item_idx.astype(np.int32), "sim": sims[item_idx, pos].astype(np.float32),
            "density": np.nan_to_num(dens.astype(np.float32))[where],
            "id": pc.take(ids, pa.array(rows_hit)).to_pylist(),
            "hash": hash_strings(pc.take(ids, pa.array(rows_hit))),
            "title": [title(texts[w]) for w in where],
        }
        return _top_per_item(_concat([state, part]) if state else part, self.params.candidates)

    def combine(self, states: list[dict | None]) -> dict:
        return _top_per_item(_concat([s for s in states if s] or [_empty()]), self.params.candidates)

    def reduce(self, states: list[dict | None]) -> dict:
        p = self.params
        pool = self.combine(states)
        score = (1 - p.density_weight) * pool["sim"] + p.density_weight * pool["density"]
        # per item, best first (ties: id hash, the same on every engine)
        order = np.lexsort((pool["hash"], -score, pool["item"]))
        ranked: dict[int, list[int]] = {}
        for i in order:
            ranked.setdefault(int(pool["item"][i]), []).append(int(i))
        chosen: dict[str, dict] = {}
        taken = {it: 0 for it in ranked}
        cursor = {it: 0 for it in ranked}
        budget = p.max_documents or float("inf")
        for _ in range(p.per_item):  # rounds: every item takes its best document not yet taken
            for it in sorted(ranked):
                rows = ranked[it]
                while cursor[it] < len(rows) and pool["id"][rows[cursor[it]]] in chosen:
                    doc = chosen[pool["id"][rows[cursor[it]]]]  # already picked for another item: it serves this one too
                    if it not in doc["items"]:
                        doc["items"].append(it)
                    cursor[it] += 1
                if cursor[it] >= len(rows) or len(chosen) >= budget:
                    continue
                r = rows[cursor[it]]
                cursor[it] += 1
                taken[it] += 1
                chosen[pool["id"][r]] = {"items": [it], "score": float(score[r]), "sim": float(pool["sim"][r]),
                                         "density": float(pool["density"][r]), "title": pool["title"][r]}
        names = [text for _, text in self.items]
        selection = pa.table({
            "id": list(chosen),
            "items": [[names[i] for i in sorted(c["items"])] for c in chosen.values()],
            "score": pa.array([c["score"] for c in chosen.values()], pa.float32()),
            "similarity": pa.array([c["sim"] for c in chosen.values()], pa.float32()),
            "density": pa.array([c["density"] for c in chosen.values()], pa.float32()),
            "title": [c["title"] for c in chosen.values()],
        })
        per_item = [taken.get(i, 0) for i in range(len(self.items))]
        summary = {"items": len(self.items), "items_covered": int(sum(1 for n in per_item if n)),
                   "documents": len(chosen), "per_item": dict(zip(names, per_item)),
                   "mean_similarity": round(float(np.mean([c["sim"] for c in chosen.values()])), 4) if chosen else None,
                   "mean_density": round(float(np.mean([c["density"] for c in chosen.values()])), 4) if chosen else None}
        return {"selection": selection, "summary": summary}

    def save_artifact(self, out_root: Path, artifact: dict) -> None:
        import pyarrow.parquet as pq

        from assay.pipeline.dataset import write_artifact

        buf = io.BytesIO()
        pq.write_table(artifact["selection"], buf, compression="zstd")
        write_artifact(out_root, "selection.parquet", buf.getvalue())
        write_artifact(out_root, "fit.json", json.dumps(artifact["summary"], indent=2, ensure_ascii=False))

    def load_artifact(self, out_root: Path) -> dict:
        import pyarrow.parquet as pq

        import pyarrow as pa

        from assay.pipeline.dataset import read_artifact

        sel = pq.read_table(pa.BufferReader(read_artifact(out_root, "selection.parquet")))
        return {i: (items, s) for i, items, s in zip(sel.column("id").to_pylist(), sel.column("items").to_pylist(),
                                                      sel.column("score").to_pylist())}

    def apply(self, table: pa.Table, artifact: dict) -> pa.Table:
        found = [artifact.get(i) for i in table.column("id").to_pylist()]
        table = set_column(table, "mined_for", pa.array([f[0] if f else None for f in found], pa.list_(pa.string())))
        table = set_column(table, "mine_score", pa.array([f[1] if f else None for f in found], pa.float32()))
        self.stats.count("mined", sum(1 for f in found if f))
        if self.params.mode == "annotate":
            return table
        return with_rejects(table, [None if f else "not_mined" for f in found])


_FIELDS = ("item", "sim", "density", "id", "hash", "title")


def _empty() -> dict:
    return {"item": np.zeros(0, np.int32), "sim": np.zeros(0, np.float32), "density": np.zeros(0, np.float32),
            "id": [], "hash": np.zeros(0, np.uint64), "title": []}


def _concat(parts: list[dict]) -> dict:
    out = {}
    for f in _FIELDS:
        if isinstance(parts[0][f], list):
            out[f] = [x for p in parts for x in p[f]]
        else:
            out[f] = np.concatenate([p[f] for p in parts])
    return out


def _top_per_item(pool: dict, keep: int) -> dict:
    """Each item's `keep` most similar candidates (ties: id hash), one row per (item, document)."""
    order = np.lexsort((pool["hash"], -pool["sim"], pool["item"]))
    item = pool["item"][order]
    n = len(order)
    group_start = np.maximum.accumulate(np.where(np.r_[True, item[1:] != item[:-1]], np.arange(n), 0)) if n else order
    pick = order[np.arange(n) - group_start < keep]
    return {f: ([pool[f][i] for i in pick] if isinstance(pool[f], list) else pool[f][pick]) for f in _FIELDS}
