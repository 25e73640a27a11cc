"""Report section for the history stages: records per repository and language, reject reasons and
template yields, read from the stages' manifests (their statistics and ledgers), not the corpus."""
from __future__ import annotations

import html
import json
from pathlib import Path

from assay.pipeline.dataset import MANIFEST

SOURCES = ("synth.commits", "synth.prs", "synth.swebench")
CHECKS = ("synth.verify", "synth.leakage")
TOP = 15


def _counters(manifest: dict, prefix: str) -> dict[str, float]:
    counters = (manifest.get("statistics") or {}).get("counters") or {}
    return {k[len(prefix):]: v for k, v in counters.items() if k.startswith(prefix)}


def _table(head: tuple[str, ...], rows: list[tuple]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c)) if not isinstance(c, (int, float)) else f'{c:,.0f}'}</td>"
                                    for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _rejects(manifest: dict) -> list[tuple]:
    rejected = (manifest.get("counts") or {}).get("rejected") or {}
    return sorted(((reason, slot["rows"]) for reason, slot in rejected.items()), key=lambda x: -x[1])


def _plot(languages: dict[str, float], title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from assay.pipeline.report import img

    names = sorted(languages, key=lambda k: -languages[k])[:TOP]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(names) + 1.2))
    ax.barh(names[::-1], [languages[n] for n in names[::-1]], color="#4c72b0")
    ax.set_xlabel("records")
    ax.set_title(title)
    fig.tight_layout()
    return img(fig, f"{title}: records per language")


def stage_section(name: str, manifest: dict) -> str:
    stage = manifest.get("stage", "")
    counts = manifest.get("counts") or {}
    parts = [f"<h3>{html.escape(name)} ({html.escape(stage)})</h3>",
             f"<p>{counts.get('rows_in', 0):,} in, {counts.get('rows_out', 0):,} out, "
             f"{counts.get('rows_rejected', 0):,} rejected.</p>"]
    if stage in SOURCES:
        repos = _counters(manifest, "records.repo.")
        langs = _counters(manifest, "records.language.")
        if repos:
            top = sorted(repos.items(), key=lambda x: -x[1])[:TOP]
            more = f" ({len(repos) - TOP} more repositories)" if len(repos) > TOP else ""
            parts.append("<h4>Records per repository" + more + "</h4>" + _table(("repository", "records"), top))
        if langs:
            parts.append(_plot(langs, f"{name}: languages"))
        events = _counters(manifest, "events.")
        if events:
            parts.append(_table(("events", "count"), sorted(events.items())))
    if stage == "synth.templates":
        made = _counters(manifest, "templates.made.")
        skipped = _counters(manifest, "templates.skipped.")
        rows = [(t, made.get(t, 0), sum(v for k, v in skipped.items() if k.startswith(t + ".")),
                 ", ".join(f"{k.split('.', 1)[1]}: {v:.0f}" for k, v in sorted(skipped.items()) if k.startswith(t + ".")))
                for t in sorted({*made, *(k.split(".")[0] for k in skipped)})]
        parts.append("<h4>Template yields</h4>" + _table(("template", "documents", "not made", "why not"), rows))
    rejects = _rejects(manifest)
    if rejects:
        parts.append("<h4>Reject reasons</h4>" + _table(("reason", "rows"), rejects))
    return "".join(parts)


def report_section(run_dir: Path) -> str | None:
    found = []
    for path in Path(run_dir).glob(f"*/{MANIFEST}"):
        manifest = json.loads(path.read_text())
        if manifest.get("stage") in SOURCES + CHECKS + ("synth.templates",):
            found.append((manifest.get("started_at") or "", path.parent.name, manifest))
    parts = [stage_section(name, manifest) for _, name, manifest in sorted(found)]  # in run order
    if not parts:
        return None
    return ("<h2>Code history</h2><p>Change records from git histories, GHArchive and SWE-bench, checked by "
            "re-applying their diffs, guarded against SWE-bench leakage and rendered as PR-Dialogue documents.</p>"
            + "".join(parts))
