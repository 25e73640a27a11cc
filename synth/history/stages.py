"""The map stages over change records: the round-trip check, the leakage guard and the templates.

    synth.verify     re-applies each record's diff to its before-state (one-to-one)
    synth.leakage    drops records that match a SWE-bench instance (one-to-one)
    synth.templates  one record -> a localization and a repair document with segments (one-to-many)

Importing this module registers them and the sources (sources.py).
"""
from __future__ import annotations

from typing import ClassVar, Literal

import pyarrow as pa
from pydantic import Field

from assay.pipeline.schema import PARENT_ID, REJECT_DETAIL, REJECT_REASON, child_id
from assay.pipeline.stage import MapStage, Params, add_columns, register, with_rejects

from . import sources  # noqa: F401  (registers synth.commits, synth.prs, synth.swebench)
from .records import Reject, round_trip
from .templates import RENDERERS, SEGMENTS_TYPE, TEMPLATES, TemplateLimits


# ---- checks over records -------------------------------------------------------------------------

@register("synth.verify")
class Verify(MapStage):
    """Re-apply each record's diff to its before-state; a record whose result differs from its
    after-state is rejected (`diff_mismatch`, `bad_patch`). Records with excerpt files are checked
    by rebuilding the excerpts from the hunks. Run it on records written elsewhere or transformed since.

    Example: assay synth verify runs/x/commits runs/x/verified
    """

    def process(self, table: pa.Table) -> pa.Table:
        reasons, details = [], []
        cols = {c: table.column(c).to_pylist() for c in ("diff", "files")}
        for diff, files in zip(cols["diff"], cols["files"]):
            try:
                if not files:
                    raise Reject("no_patch", "the record has no changed files")
                round_trip(diff or "", files)
            except Reject as exc:
                reasons.append(exc.reason)
                details.append(exc.detail)
            else:
                reasons.append(None)
                details.append(None)
        self.stats.count("verified", reasons.count(None))
        return with_rejects(table, reasons, details)


class LeakageParams(Params):
    registry: str | None = Field(None, description="Registry file (default: the shipped SWE-bench registry)")
    datasets: list[str] | None = Field(None, description="Benchmarks to guard (default: all in the registry), "
                                                         "e.g. swe-bench-verified")
    match: list[Literal["pr", "commit", "patch"]] = Field(["pr", "commit", "patch"],
                                                          description="How a record may match an instance")
    scope: Literal["instance", "repository"] = Field("instance", description="`repository` drops every record "
                                                                             "from a benchmark repository")


@register("synth.leakage")
class Leakage(MapStage):
    """Drop records that leak a SWE-bench instance: same repository and PR number, same repository
    and base commit (the record's commit or its parent), or a file edit whose signature (the removed
    and added lines, whitespace-collapsed) equals one of the instance's patch. Reject: swebench_leak.

    Example: assay synth leakage runs/x/commits runs/x/clean --datasets swe-bench-verified
    """

    Params = LeakageParams
    reads = {"registry": "file"}

    def setup(self) -> None:
        from .swebench import Registry

        self.registry = Registry.load(self.params.registry, self.params.datasets)

    def process(self, table: pa.Table) -> pa.Table:
        names = table.column_names
        get = {c: (table.column(c).to_pylist() if c in names else [None] * table.num_rows)
               for c in ("repo", "pr_number", "commit", "base_commit", "diff")}
        reasons, details = [], []
        for repo, pr, commit, base, diff in zip(*get.values()):
            hit = self.registry.match(repo, pr, [commit, base], diff, tuple(self.params.match), self.params.scope)
            if hit is None:
                reasons.append(None)
                details.append(None)
                continue
            entry, how = hit
            self.stats.count(f"leaks.{how}")
            reasons.append("swebench_leak")
            details.append(f"{'/'.join(entry['datasets'])} {entry['instance_id']} (matched by {how})")
        return with_rejects(table, reasons, details)


# ---- templates -------------------------------------------------------------------------------------

class TemplatesParams(Params):
    templates: list[Literal["localization", "repair"]] = Field(list(TEMPLATES), description="Templates to apply")
    max_chars: int = Field(120_000, description="Documents longer than this are not written")
    min_distractors: int = Field(3, description="Listing entries besides the answer that localization needs")


@register("synth.templates")
class Templates(MapStage):
    """Turn each change record into PR-Dialogue documents: `localization` (problem + repository
    listing -> files to edit) and `repair` (problem + file contents -> SEARCH/REPLACE blocks, kept
    only when applying them reproduces the change). Each document has `segments` (roles scaffold,
    user, assistant) concatenating to its text and `parent_id` = the record's id. A record for which
    no template works is rejected with the first template's reason.

    Example: assay synth templates runs/x/commits runs/x/dialogue --templates repair
    """

    Params = TemplatesParams
    cardinality = "one_to_many"
    columns = {"template": pa.string(), "segments": SEGMENTS_TYPE}
    HEAVY: ClassVar[tuple[str, ...]] = ("files", "tree")  # the record's; reachable through parent_id

    def process(self, table: pa.Table) -> pa.Table:
        limits = TemplateLimits(self.params.max_chars, self.params.min_distractors)
        out = []
        for row in table.to_pylist():
            made, failed = 0, []
            for name in self.params.templates:
                try:
                    doc = RENDERERS[name](row, limits)
                except Reject as exc:
                    failed.append((name, exc))
                    self.stats.count(f"templates.skipped.{name}.{exc.reason}")
                    continue
                made += 1
                self.stats.count(f"templates.made.{name}")
                url = f"{row.get('url') or row['id']}#{name}"
                out.append(dict(row, **{h: None for h in self.HEAVY}, id=child_id(row["id"], name),
                                text=doc.text, url=url, template=name, segments=doc.parts, parent_id=row["id"],
                                reject_reason=None, reject_detail=None))
            if not made:
                name, exc = failed[0]
                detail = "; ".join(f"{n}: {e.reason} ({e.detail})" for n, e in failed)
                out.append(dict(row, template=None, segments=None, parent_id=row["id"],
                                reject_reason=exc.reason, reject_detail=detail[:2000]))
        schema = add_columns(table.schema, {**self.columns, PARENT_ID: pa.string(),
                                            REJECT_REASON: pa.string(), REJECT_DETAIL: pa.string()})
        return pa.Table.from_pylist(out, schema=schema)
