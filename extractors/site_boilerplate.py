"""`extract.site_boilerplate`: drop the text blocks a site repeats across its pages (cross-page
boilerplate), after extraction, on any engine.

`extract.html` sees one page at a time, so navigation, newsletter blurbs, "related" headings and
bylines that survive its main-content selection stay. Across a site's pages they repeat, which the
article text does not. This stage is a fit-then-apply stage:

* a *site* is the host of the document's `url` (`urls.url_domain`: lower-cased, no leading `www.`);
  the `domain` column is not read (a topic tagger may have rewritten it). Documents without a URL
  pass through untouched.
* a *block* is a blank-line-separated block of the Markdown `text` (a fenced code block is one block,
  blank lines inside it included). A block is counted under a normalised form (case-folded,
  whitespace collapsed) hashed to 64 bits. Numbers are part of it: "Answer: 72" on one page and
  "Answer: 35" on another are two blocks, and pages that differ only in their numbers differ.
  Only timestamps collapse to one symbol, as they are the numbers a byline or a pager's furniture
  carries: dates (2024-03-01, 01.03.2024, 03/01/2024, March 1, 2024, 1 March 2024, 2024年3月1日,
  2024년 3월 1일), a clock time that has seconds or am/pm or follows a date, and "N days ago" (any
  unit): "Posted 3 days ago" and "Posted 15 days ago" are one block. Fenced code, Markdown tables and blocks holding a formula (`$..$`,
  `$$`, `\\(..\\)`, `\\[..\\]`) are never counted nor dropped: they repeat legitimately (the same
  `pip install` line on every page of a project's documentation). Blocks longer than
  `max_block_chars` are neither counted nor dropped either: this bounds the fit's state (below).
* fit, per shard: for each (site, block) the number of distinct documents holding it, and the number
  of documents per site; partial states combine (sorted arrays summed), so the reduce is a tree on
  the workers. reduce: per site, the blocks present on at least `min_pages` of its documents and at
  least `min_share` of them. apply: drop those blocks from `text`; `meta.site_boilerplate` records
  `{"blocks": n, "chars": c}` removed. A document left with no text is rejected (`site_boilerplate`),
  with its text as it came in.

State size: one (site, block) entry of 16 bytes (site index int32, hash uint64, count int32) per
distinct countable block per site; unique article paragraphs are most of them. Long blocks are what
`max_block_chars` leaves out; the figures per page and per million pages are in
benchmarks/results/site_boilerplate.json.

The artifact (`_artifacts/fit.json`) is sorted (sites by name, hashes ascending), so the same input
gives the same bytes on the local engine, Spark and Ray, whatever the order of the shards.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import Field

from ..pipeline.schema import dumps_meta, loads_meta
from ..pipeline.stage import FitApplyStage, Params, register, set_column, with_rejects
from .urls import url_domain

REASON = "site_boilerplate"
META_KEY = "site_boilerplate"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_FORMULA = re.compile(r"\$\$|\\\(|\\\[|\\begin\{|(?<![\\$\w])\$(?=\S)[^$\n]+?(?<=[^\s\\])\$(?!\w)")
_SPACE = re.compile(r"\s+")
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\b\.?)?"
_DATE = (r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}"
         rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH},?\s+\d{{4}}"
         r"|\d{4}\s*[年년]\s*\d{1,2}\s*[月월](?:\s*\d{1,2}\s*[日일])?")
_TIMESTAMP = re.compile(
    rf"(?<![\w.])(?:(?:{_DATE})(?:,?\s+(?:at\s+)?{_CLOCK})?|\d{{1,2}}:\d{{2}}:\d{{2}}(?:\s*[ap]\.?m\b\.?)?"
    r"|\d{1,2}:\d{2}\s*[ap]\.?m\b\.?"
    r"|\d+\s*(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?|mos?|months?|y|yrs?|years?)"
    r"\s+ago\b)(?![\w.]\w)", re.I)


class SiteBoilerplateParams(Params):
    min_pages: int = Field(3, ge=2, description="A block must be on at least this many of a site's documents")
    min_share: float = Field(0.5, gt=0, le=1, description="A block must also be on at least this share of the site's documents")
    max_block_chars: int = Field(200, ge=1, description="Longer blocks are neither counted nor dropped (bounds the fit's memory)")


# ---- blocks -------------------------------------------------------------------------------------

def split_blocks(text: str) -> list[tuple[int, int]]:
    """[start, end) spans of the blank-line-separated blocks of `text` (line ends excluded at the end
    of a block); a fenced code block is one block, blank lines inside it included."""
    spans: list[tuple[int, int]] = []
    start = end = None
    fence: str | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        marker = _FENCE.match(body)
        if fence is None and not body.strip():
            if start is not None:
                spans.append((start, end))
                start = None
        else:
            if start is None:
                start = pos
            end = pos + len(body)
            if fence is None and marker:
                fence = marker.group(1)
            elif fence is not None and marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence) \
                    and not body.strip()[len(marker.group(1)):].strip():
                fence = None
        pos += len(line)
    if start is not None:
        spans.append((start, end))
    return spans


def protected(block: str) -> bool:
    """Code, tables and formulas: content that repeats legitimately across a site's pages."""
    lines = block.splitlines()
    if any(_FENCE.match(line) for line in lines):
        return True
    if sum(1 for line in lines if line.lstrip().startswith("|")) >= 2 or any(_TABLE_RULE.match(line) and "|" in line for line in lines):
        return True
    return bool(_FORMULA.search(block))


def normalise(block: str) -> str:
    """Case-folded, whitespace collapsed, every timestamp one symbol; other numbers kept."""
    return _TIMESTAMP.sub("\x00", _SPACE.sub(" ", block).strip().casefold())


def block_hash(block: str) -> int:
    import xxhash

    return xxhash.xxh3_64_intdigest(normalise(block).encode("utf-8", "surrogatepass"))


def countable(text: str, spans: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """(index into `spans`, hash) of the blocks of `text` this stage may count or drop."""
    out = []
    for i, (a, b) in enumerate(spans):
        block = text[a:b]
        if b - a <= max_chars and not protected(block):
            out.append((i, block_hash(block)))
    return out


def remove_spans(text: str, spans: list[tuple[int, int]], drop: set[int]) -> str:
    """`text` without the blocks numbered in `drop`; each kept block follows the separator that
    preceded it in `text`, and what came before the first block and after the last stays."""
    kept = [i for i in range(len(spans)) if i not in drop]
    if not kept:
        return ""
    parts = [text[:spans[0][0]]]
    for j, i in enumerate(kept):
        if j:
            parts.append(text[spans[i - 1][1]:spans[i][0]])
        parts.append(text[spans[i][0]:spans[i][1]])
    parts.append(text[spans[-1][1]:])
    return "".join(parts)


# ---- fit state: sorted (site, block) entries with document counts ------------------------------

def _empty() -> dict:
    return {"sites": [], "docs": np.zeros(0, np.int64), "site": np.zeros(0, np.int32),
            "block": np.zeros(0, np.uint64), "count": np.zeros(0, np.int32)}


def _aggregate(site: np.ndarray, block: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries summed by (site, block), sorted by site then block."""
    if not len(site):
        return site.astype(np.int32), block.astype(np.uint64), count.astype(np.int32)
    order = np.lexsort((block, site))
    site, block, count = site[order], block[order], count[order]
    first = np.ones(len(site), bool)
    first[1:] = (site[1:] != site[:-1]) | (block[1:] != block[:-1])
    starts = np.flatnonzero(first)
    return site[starts].astype(np.int32), block[starts].astype(np.uint64), np.add.reduceat(count, starts).astype(np.int32)


def merge_states(states: list[dict | None]) -> dict:
    """One state from many (None for an empty shard): the same result in any order."""
    states = [s for s in states if s]
    if not states:
        return _empty()
    sites = sorted({name for s in states for name in s["sites"]})
    where = {name: i for i, name in enumerate(sites)}
    docs = np.zeros(len(sites), np.int64)
    site_parts, block_parts, count_parts = [], [], []
    for s in states:
        remap = np.array([where[name] for name in s["sites"]], np.int32)
        np.add.at(docs, remap, np.asarray(s["docs"], np.int64))
        site_parts.append(remap[np.asarray(s["site"], np.int64)] if len(s["site"]) else np.zeros(0, np.int32))
        block_parts.append(np.asarray(s["block"], np.uint64))
        count_parts.append(np.asarray(s["count"], np.int32))
    site, block, count = _aggregate(np.concatenate(site_parts), np.concatenate(block_parts), np.concatenate(count_parts))
    return {"sites": sites, "docs": docs, "site": site, "block": block, "count": count}


def fit_table(table: pa.Table, max_chars: int) -> dict:
    """One batch's state: each document counts once per distinct block."""
    texts = table.column("text").to_pylist()
    urls = table.column("url").to_pylist() if "url" in table.column_names else [None] * len(texts)
    where: dict[str, int] = {}
    docs: list[int] = []
    site_ids: list[int] = []
    blocks: list[int] = []
    for text, url in zip(texts, urls):
        site = url_domain(url)
        if site is None or text is None:
            continue
        i = where.setdefault(site, len(where))
        if i == len(docs):
            docs.append(0)
        docs[i] += 1
        hashes = {h for _, h in countable(text, split_blocks(text), max_chars)}
        site_ids.extend([i] * len(hashes))
        blocks.extend(hashes)
    order = sorted(where, key=where.get)  # names by first-seen index; merge_states sorts them
    state = {"sites": order, "docs": np.array(docs, np.int64), "site": np.array(site_ids, np.int32),
             "block": np.array(blocks, np.uint64), "count": np.ones(len(blocks), np.int32)}
    return merge_states([state])


# ---- the stage ---------------------------------------------------------------------------------

@register("extract.site_boilerplate")
class SiteBoilerplate(FitApplyStage):
    """Drop text blocks repeated across a site's pages (menus, newsletter blurbs, bylines) after
    extraction; code, tables and formulas always stay. Sites are URL hosts; documents without a URL
    pass through; `meta.site_boilerplate` records what went.

    Example: assay extract site_boilerplate runs/x/docs runs/x/unrepeated --min-pages 5
    """

    Params = SiteBoilerplateParams
    version = "2"  # 2: numbers other than timestamps are part of a block (issue 46)
    batch_rows = 2_000

    def fit(self, table: pa.Table, state: Any) -> Any:
        part = fit_table(table, self.params.max_block_chars)
        return merge_states([state, part]) if state else part

    def combine(self, states: list[Any]) -> Any:
        return merge_states(states)

    def reduce(self, states: list[Any]) -> Any:
        total = merge_states(states)
        p = self.params
        sites: dict[str, list[str]] = {}
        for i, name in enumerate(total["sites"]):
            n = int(total["docs"][i])
            if n < p.min_pages:
                continue
            rows = total["site"] == i
            keep = rows & (total["count"] >= p.min_pages) & (total["count"] >= p.min_share * n)
            if keep.any():
                sites[name] = [f"{int(h):016x}" for h in np.sort(total["block"][keep])]
        return {"min_pages": p.min_pages, "min_share": p.min_share, "max_block_chars": p.max_block_chars,
                "documents": int(total["docs"].sum()), "sites_seen": len(total["sites"]),
                "entries": int(len(total["block"])), "boilerplate_blocks": sum(len(v) for v in sites.values()),
                "sites": dict(sorted(sites.items()))}

    def _lookup(self, artifact: dict) -> dict[str, set[int]]:
        cached = getattr(self, "_lookup_cache", None)
        if cached is None or cached[0] is not artifact:
            cached = (artifact, {site: {int(h, 16) for h in hashes} for site, hashes in artifact["sites"].items()})
            self._lookup_cache = cached
        return cached[1]

    def apply(self, table: pa.Table, artifact: Any) -> pa.Table:
        lookup = self._lookup(artifact)
        texts = table.column("text").to_pylist()
        urls = table.column("url").to_pylist() if "url" in table.column_names else [None] * len(texts)
        metas = table.column("meta").to_pylist() if "meta" in table.column_names else None
        new_texts, new_metas, reasons, details = list(texts), list(metas) if metas else None, [], []
        changed = 0
        for r, (text, url) in enumerate(zip(texts, urls)):
            reason = detail = None
            drop_hashes = lookup.get(url_domain(url) or "") if text else None
            if drop_hashes:
                spans = split_blocks(text)
                drop = {i for i, h in countable(text, spans, self.params.max_block_chars) if h in drop_hashes}
                if drop:
                    chars = sum(spans[i][1] - spans[i][0] for i in drop)
                    self.stats.count("blocks_removed", len(drop))
                    self.stats.count("chars_removed", chars)
                    out = remove_spans(text, spans, drop)
                    if not out.strip():
                        reason, detail = REASON, f"all {len(spans)} blocks repeat across {url_domain(url)}'s pages"
                    else:
                        changed += 1
                        new_texts[r] = out
                        if new_metas is not None:
                            meta = loads_meta(new_metas[r])
                            meta[META_KEY] = {"blocks": len(drop), "chars": chars}
                            new_metas[r] = dumps_meta(meta)
            reasons.append(reason)
            details.append(detail)
        self.stats.count("docs_changed", changed)
        table = set_column(table, "text", pa.array(new_texts, table.schema.field("text").type))
        if new_metas is not None:
            table = set_column(table, "meta", pa.array(new_metas, table.schema.field("meta").type))
        return with_rejects(table, reasons, details)
