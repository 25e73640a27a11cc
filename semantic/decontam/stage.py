"""Benchmark decontamination stages: `semantic.decontam` finds benchmark items inside documents and
writes `decontam_hits`; `semantic.decontam_apply` decides from those hits, later and separately.

A hit is (benchmark, item, kind, overlap, start, end): kind `exact` when every key of the item was
found (the whole item is in the document, digits masked), `ngram` when only some were (overlap =
the share found), `semantic` when a passage's embedding is within the threshold of the item's
(overlap = the cosine). start/end are the character span from the first matched window to the last,
in the text as it was read. A hit needs `min_hits` distinct keys (capped at the item's own key
count) and `min_overlap`; the defaults flag a document when at least a third of an item's 13-token
windows appear in it, which the evaluation in benchmarks/semantic.py chose on held-out items
(MiMo's "any 16-gram" rule is `ngram: 16, min_overlap: 0`).

The index is built once, on the driver (`prepare`, about a second and 25 MB for the shipped
registry), and published through the output's scratch folder: every worker, local, Spark or Ray,
loads it instead of building its own (the stage contract's `shared` attributes).
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, Resources, register, set_column, with_rejects

HIT = pa.struct([("benchmark", pa.string()), ("item", pa.string()), ("kind", pa.string()),
                 ("overlap", pa.float32()), ("start", pa.int64()), ("end", pa.int64())])
HITS = pa.list_(HIT)
Kind = Literal["exact", "ngram", "semantic"]


class DecontamParams(Params):
    benchmarks: str | None = Field(None, description="Benchmark registry YAML (default: the one shipped with Assay)")
    only: list[str] | None = Field(None, description="Check only these benchmarks of the registry")
    since: dt.date | None = Field(None, description="Check only benchmarks/items dated on or after this day")
    ngram: int = Field(13, ge=4, le=64, description="Window length in normalised tokens (16 = MiMo)")
    min_tokens: int = Field(6, ge=1, description="Items shorter than ngram but this long match as a whole window; "
                                                  "shorter ones only as a whole document")
    min_hits: int = Field(1, ge=1, description="Distinct windows of an item a document must contain")
    min_overlap: float = Field(0.34, ge=0, le=1, description="Share of an item's windows a document must contain")
    min_word_share: float = Field(0.34, ge=0, le=1, description="Windows with fewer informative words keep their digits")
    max_items_per_gram: int = Field(20, ge=1, description="Windows shared by more items are boilerplate, not keys")
    segment: bool = Field(False, description="Windows of words in every script: Chinese, Japanese and Thai are cut into "
                                             "words first (filters/words.py), not read a character a token")
    mode: Literal["flag", "reject", "mask"] = Field("flag", description="flag: annotate only; reject: drop "
                                                                        "flagged documents; mask: cut the matched spans")
    mask_with: str = Field("", description="Text that replaces a masked span")
    semantic: bool = Field(False, description="Also match passages by embedding similarity (slow: embeds every window)")
    semantic_threshold: float = Field(0.85, gt=0, le=1, description="Cosine similarity that counts as a match")
    semantic_window: int = Field(64, ge=8, description="Passage length in words for semantic matching")
    model: str | None = Field(None, description="sentence-transformers directory (default: the wheel's MiniLM)")
    cache_dir: str | None = Field("~/.cache/assay/decontam", description="Where item embeddings are cached")


@register("semantic.decontam")
class Decontam(MapStage):
    """Find benchmark items (exact with digit masking, n-gram, optionally semantic) and write `decontam_hits`.

    Example: assay decontam runs/x/docs runs/x/decontam --mode reject --ngram 16
    """

    Params = DecontamParams
    columns = {"decontam_hits": HITS}
    reads = {"benchmarks": "file", "model": "file", "cache_dir": "place"}
    resources = Resources(cpus=1, memory_gb=1)

    shared = ("items", "index")  # built once on the driver; workers load them instead of rebuilding
    items = index = None

    def read_files(self) -> dict[str, list[str]]:
        from .registry import SHIPPED

        registry = Path(self.params.benchmarks) if self.params.benchmarks else SHIPPED
        files = {"benchmarks": [str(registry.parent)]}  # the registry and the benchmark files beside it
        if self.params.semantic:
            from ..model import model_path

            files["model"] = [model_path(self.params.model)]
        return files

    def prepare(self) -> None:
        from .index import NgramIndex, items_csr
        from .registry import load_items, load_registry

        if self.index is not None:
            return
        p = self.params
        registry, base = load_registry(p.benchmarks)
        self.items = load_items(registry, base, p.only, p.since)
        texts = self.items.texts
        if p.segment:
            from .segment import for_matching

            texts = for_matching(pa.array([t or "" for t in texts], pa.string()))[0]
        hashes, offsets = items_csr(texts, self.items.token_hashes)
        self.index = NgramIndex(hashes, offsets, p.ngram, p.min_tokens, p.max_items_per_gram, p.min_word_share)

    def setup(self) -> None:
        p = self.params
        self.prepare()  # a no-op where the driver's index was loaded
        self.matcher = None
        if p.semantic:
            from ..model import Encoder
            from .similar import SemanticMatcher

            self.encoder = Encoder(p.model, threads=max(1, int(self.resources.cpus)))
            self.matcher = SemanticMatcher(self.encoder, self.items.texts, p.semantic_threshold, p.semantic_window,
                                           p.cache_dir)

    def teardown(self) -> None:
        self.index = self.matcher = self.items = None
        if getattr(self, "encoder", None) is not None:
            self.encoder.close()
            self.encoder = None

    def find(self, texts: pa.Array | pa.ChunkedArray, langs: list[str | None] | None = None) -> list[list[dict] | None]:
        """The hits of each document (None when it has none)."""
        from assay.dedup.hashing import string_buffers

        p = self.params
        texts = pc.fill_null(texts, "")
        texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
        read, rewritten = texts, None
        if p.segment:
            from .segment import for_matching

            words, rewritten = for_matching(texts, langs)
            read = pa.array(words, pa.string())
        offsets, data = string_buffers(read)
        doc, item, count, start, end = self.index.scan(data, offsets)
        found: dict[int, dict[int, dict]] = {}
        nkeys = self.index.item_nkeys
        for d, i, c, s, e in zip(doc.tolist(), item.tolist(), count.tolist(), start.tolist(), end.tolist()):
            overlap = c / nkeys[i]
            if c < min(p.min_hits, nkeys[i]) or overlap < p.min_overlap:
                continue
            found.setdefault(d, {})[i] = {"kind": "exact" if c == nkeys[i] else "ngram", "overlap": overlap,
                                          "start": s, "end": e, "bytes": True}
        if self.matcher is not None:
            py_texts = texts.to_pylist()
            for d, i, score, s, e in self.matcher.match(py_texts):
                found.setdefault(d, {}).setdefault(i, {"kind": "semantic", "overlap": score, "start": s, "end": e})
        out: list[list[dict] | None] = [None] * len(texts)
        for d, hits in found.items():
            raw = data[offsets[d]:offsets[d + 1]].tobytes()
            back = None
            if rewritten is not None and rewritten[d]:  # offsets in the segmented text -> the document's
                from .segment import to_original

                back = to_original(texts[d].as_py(), raw.decode("utf-8", "replace"))
            rows = []
            for i, hit in sorted(hits.items()):
                s, e = hit["start"], hit["end"]
                if hit.pop("bytes", False):  # byte offsets to character offsets
                    s, e = len(raw[:s].decode("utf-8", "replace")), len(raw[:e].decode("utf-8", "replace"))
                    if back is not None:
                        s, e = int(back[s]), int(back[e])
                rows.append({"benchmark": self.items.benchmarks[i], "item": self.items.ids[i], "kind": hit["kind"],
                             "overlap": round(float(hit["overlap"]), 4), "start": s, "end": e})
            out[d] = rows
        return out

    def process(self, table: pa.Table) -> pa.Table:
        langs = table.column("lang").to_pylist() if "lang" in table.column_names else None
        hits = self.find(table.column("text"), langs)
        self.stats.count("documents", table.num_rows)
        record_stats(self.stats, hits)
        table = set_column(table, "decontam_hits", pa.array(hits, HITS))
        return decide(table, self.params.mode, self.params.mask_with, stats=self.stats)


def record_stats(stats, hits: list[list[dict] | None]) -> None:
    """Flagged documents, per benchmark and per kind, and which items were found (for the report)."""
    for doc_hits in hits:
        if not doc_hits:
            continue
        stats.count("flagged")
        for bench in {h["benchmark"] for h in doc_hits}:
            stats.count(f"benchmark/{bench}")
        for kind in {h["kind"] for h in doc_hits}:
            stats.count(f"kind/{kind}")
        for h in doc_hits:
            stats.count(f"item/{h['benchmark']}/{h['item']}")


def decide(table: pa.Table, mode: str, mask_with: str = "", keep=None, stats=None) -> pa.Table:
    """Apply a mode to a table whose `decontam_hits` are set; `keep(hit)` selects the hits that count."""
    hits = table.column("decontam_hits").to_pylist()
    if keep is not None:
        hits = [[h for h in doc if keep(h)] or None if doc else None for doc in hits]
    if stats is not None and mode != "flag":
        stats.count("rejected" if mode == "reject" else "masked", sum(1 for h in hits if h))
    if mode == "flag":
        return table
    if mode == "reject":
        reasons = ["contaminated" if h else None for h in hits]
        details = [", ".join(sorted({f"{x['benchmark']}:{x['item']} ({x['kind']})" for x in h}))[:500] if h else None
                   for h in hits]
        return with_rejects(table, reasons, details)
    texts = table.column("text").to_pylist()
    masked = [mask_spans(t, [(x["start"], x["end"]) for x in h], mask_with) if h else t for t, h in zip(texts, hits)]
    return set_column(table, "text", pa.array(masked, pa.string()))


def mask_spans(text: str, spans: list[tuple[int, int]], replacement: str = "") -> str:
    """`text` with every span replaced; overlapping or touching spans are merged into one."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif end > start:
            merged.append([start, end])
    out, pos = [], 0
    for start, end in merged:
        out += [text[pos:start], replacement]
        pos = end
    return "".join(out) + text[pos:]


class DecontamApplyParams(Params):
    mode: Literal["reject", "mask"] = Field("reject", description="reject flagged documents, or mask the spans")
    benchmarks: list[str] | None = Field(None, description="Only hits of these benchmarks count (default: all)")
    kinds: list[Kind] | None = Field(None, description="Only hits of these kinds count (default: all)")
    min_overlap: float = Field(0.0, ge=0, le=1, description="Only hits with at least this overlap count")
    mask_with: str = Field("", description="Text that replaces a masked span")


@register("semantic.decontam_apply")
class DecontamApply(MapStage):
    """Decide from `decontam_hits` written earlier: reject or mask, for the benchmarks and kinds chosen.

    Example: assay semantic decontam_apply runs/x/decontam runs/x/clean --kinds exact --kinds ngram
    """

    Params = DecontamApplyParams

    def process(self, table: pa.Table) -> pa.Table:
        from assay.pipeline.errors import UserError

        if "decontam_hits" not in table.column_names:
            raise UserError(f"stage {self.stage_id!r}: its input has no decontam_hits column; run semantic.decontam first")
        p = self.params

        def keep(hit: dict) -> bool:
            return ((p.benchmarks is None or hit["benchmark"] in p.benchmarks)
                    and (p.kinds is None or hit["kind"] in p.kinds) and hit["overlap"] >= p.min_overlap)

        return decide(table, p.mode, p.mask_with, keep, self.stats)
