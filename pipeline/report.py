"""`assay report`: one self-contained HTML page (PNG plots inlined) for a run directory.

Core sections: the funnel (rows and bytes per stage), rejects by reason, per-stage timings and the
ledger check. Stage families add sections through their package's `REPORT_SECTIONS` ("module:function"
references, each `function(run_dir) -> html | None`; see families.py), shown in pipeline order: a
family's sections come where its first stage ran.
"""
from __future__ import annotations

import base64
import html
import importlib
import io
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .dataset import MANIFEST, atomic_write_text, read_json


def plain_text_figures() -> None:
    """Figures without TeX: a label is the name as given, so a source or arm named `a$x^$b` is drawn
    as typed, not parsed as (broken) math. Called before any figure of a report is made."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False


def _plain_log_ticks(fig) -> None:
    """Log axes label their ticks in mathtext (`$\\mathdefault{10^{1}}$`); with math parsing off
    (`plain_text_figures`) that would be drawn as typed, so they get plain numbers (1, 10, 100)."""
    import matplotlib
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, NullFormatter

    if matplotlib.rcParams["text.parse_math"]:
        return
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            if isinstance(axis.get_minor_formatter(), LogFormatterSciNotation):
                axis.set_minor_formatter(NullFormatter())


def _overlap(boxes: list) -> bool:
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def tick_angle(labels: list, renderer) -> int | None:
    """The rotation that keeps x tick labels apart: 0 when their boxes do not touch, 30° when
    neighbours' baselines, slanted, are a line height apart (spacing × sin 30°), else 90° when the
    spacing holds a line; None when even upright labels would touch."""
    if len(labels) < 2:
        return 0
    boxes = [t.get_window_extent(renderer) for t in labels]
    if not _overlap([b.padded(1) for b in boxes]):
        return 0
    centers = [(b.x0 + b.x1) / 2 for b in boxes]
    gap = min(b - a for a, b in zip(centers, centers[1:]))
    height = max(b.height for b in boxes) + 2
    return 30 if gap * 0.5 >= height else 90 if gap >= height else None


def tidy(fig) -> None:
    """Make a figure's text readable before it is saved, whichever section drew it: a line of one
    point gets a marker (drawn as a line it is invisible, or reads as a "curve"), a title wider than
    its axes is wrapped, x tick labels that run into each other are slanted or turned upright (and
    thinned to every n-th when even that leaves them touching), and the layout is tightened."""
    import textwrap
    import warnings

    _plain_log_ticks(fig)
    for ax in fig.axes:
        for line in ax.get_lines():
            if len(line.get_xdata()) < 2 and line.get_marker() in (None, "None", "", " ", "none"):
                line.set_marker("o")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        width = ax.get_window_extent(renderer).width
        text = ax.title.get_text()
        drawn = ax.title.get_window_extent(renderer).width if text else 0
        if drawn > width:
            ax.title.set_text(textwrap.fill(" ".join(text.split()), max(12, int(len(text) * width / drawn) - 2)))
        lo, hi = sorted(ax.get_xlim())
        labels = sorted((t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()
                         and lo - 1e-9 <= t.get_position()[0] <= hi + 1e-9),
                        key=lambda t: t.get_window_extent(renderer).x0)
        if any(t.get_rotation() for t in labels):  # measured upright, so that tidying twice changes nothing
            for t in labels:
                t.set(rotation=0, ha="center", va="top", rotation_mode="default")
            fig.canvas.draw()
        angle, step = tick_angle(labels, renderer), 1
        while angle is None:  # too many to fit upright: keep every step-th
            step += 1
            angle = tick_angle(labels[::step], renderer)
        for i, t in enumerate(labels):
            t.set_visible(i % step == 0)
            if angle == 30:
                t.set(rotation=30, ha="right", va="top", rotation_mode="anchor")
            elif angle == 90:
                t.set(rotation=90, ha="center", va="top", rotation_mode="default")
    with warnings.catch_warnings():  # "not compatible with tight_layout" for some legends: the rest still fits
        warnings.simplefilter("ignore")
        fig.tight_layout()


def png_bytes(fig) -> bytes:
    """A matplotlib figure as PNG bytes, tidied (`tidy`), cropped to what it draws (and closed)."""
    import matplotlib.pyplot as plt

    tidy(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def png_data_uri(fig) -> str:
    """Render a matplotlib figure to an inline PNG data URI (and close it)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode()


def img(fig, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="{png_data_uri(fig)}">'


def load_stages(run_dir: Path) -> list[dict[str, Any]]:
    """Manifests of the run's stages, in run order when `_run.json` knows it."""
    run = read_json(run_dir / "_run.json") or {}
    order = run.get("order") or []
    manifests = {}
    for path in sorted(run_dir.glob(f"*/{MANIFEST}")):
        manifests[path.parent.name] = json.loads(path.read_text())
    ordered = [s for s in order if s in manifests]
    rest = sorted(set(manifests) - set(ordered), key=lambda s: manifests[s].get("started_at", ""))
    logged = run.get("stages") or {}

    def why(stage_dir: str) -> str:  # this run's reason (skipped or ran, and why), else when it last ran
        entry = logged.get(stage_dir) or {}
        if entry.get("skipped"):
            return "skipped (unchanged)"
        return f"ran: {entry.get('why') or manifests[stage_dir].get('ran_because') or 'new'}"

    return [dict(manifests[s], dir=s, why=why(s)) for s in ordered + rest]


def _human(n: float) -> str:
    """3 significant figures at most: 950, 1.2K, 12.5K, 125K (an axis's tick labels stay short)."""
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if unit == "" or abs(n) >= 100 else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}P"


def _funnel_plot(stages: list[dict]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["dir"] for s in stages]
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(12, max(2.5, 0.35 * len(names) + 1)))
    for ax, unit in zip(axes, ("rows", "bytes")):
        kept = [s["counts"][f"{unit}_out"] for s in stages]
        rejected = [s["counts"][f"{unit}_rejected"] for s in stages]
        ax.barh(names, kept, color="#4c78a8", label="out")
        ax.barh(names, rejected, left=kept, color="#e45756", label="rejected")
        ax.invert_yaxis()
        suffix = "B" if unit == "bytes" else ""  # bound now: a lambda would see the loop's last unit
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _, suffix=suffix: _human(v) + suffix))
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # labels like "1.2MB" need room: five at most
        ax.set_title(f"{unit} per stage", pad=10)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    return img(fig, "funnel: rows and bytes per stage")


def _timing_plot(stages: list[dict]) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, max(2.0, 0.3 * len(stages) + 1)))
    ax.barh([s["dir"] for s in stages], [s.get("wall_seconds", 0) for s in stages], color="#72b7b2")
    ax.invert_yaxis()
    ax.set_xlabel("wall seconds")
    ax.set_title("time per stage")
    fig.tight_layout()
    return img(fig, "wall time per stage")


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _core_sections(stages: list[dict]) -> list[str]:
    rows = []
    for s in stages:
        c = s["counts"]
        ok = c["rows_in"] == c.get("rows_parent", c["rows_out"]) + c["rows_rejected"]
        rows.append([
            html.escape(s["dir"]), html.escape(s["stage"]), html.escape(s.get("engine", "")),
            f"{c['rows_in']:,}", f"{c['rows_out']:,}", f"{c['rows_rejected']:,}",
            _human(c["bytes_in"]) + "B", _human(c["bytes_out"]) + "B", f"{s.get('wall_seconds', 0):.2f}",
            "✔ balanced" if ok else "✘ UNBALANCED", html.escape(s.get("why", "")),
        ])
    ledger = _table(["stage", "uses", "engine", "rows in", "rows out", "rejected", "bytes in", "bytes out",
                     "seconds", "ledger", "last run"], rows)
    reject_rows = []
    for s in stages:
        examples = s.get("reject_examples", {})
        # Of the rows the stage decided on: a one-to-many stage's rejects may be rows it created, which
        # its input count does not hold (a share of the input could pass 100%).
        decided = max(s["counts"]["rows_out"] + s["counts"]["rows_rejected"], 1)
        for reason, slot in s["counts"]["rejected"].items():
            share = slot["rows"] / decided
            reject_rows.append([html.escape(s["dir"]), html.escape(reason), f"{slot['rows']:,}", f"{share:.1%}",
                                _human(slot["bytes"]) + "B", _examples(examples.get(reason, []))])
    rejects = (_table(["stage", "reason", "rows", "share of stage output + rejects", "bytes", "examples"], reject_rows)
               if reject_rows else "<p>No rejects.</p>")
    return [
        "<h2>Funnel</h2>" + _funnel_plot(stages) + ledger,
        "<h2>Sources in and out</h2>" + _sources(stages),
        "<h2>Rejects by reason</h2>" + rejects,
        "<h2>Languages and scripts</h2>" + _distributions(stages),
        "<h2>Document lengths</h2>" + _lengths(stages),
        "<h2>Timings</h2>" + _timing_plot(stages),
        "<h2>Recipe and params</h2>" + _params(stages),
    ]


def _summary(run_dir: Path, stages: list[dict], warnings: str) -> str:
    """What a reader wants first: what ran (stages, documents read and in the final outputs), what
    was removed and why (the largest reject reasons), and each family's headline (an ablation's
    verdict: which arm won and by how much), then the warnings; the sections below hold the detail."""
    read = [s for s in stages if s.get("kind") == "source"]
    finals = _final_stages(stages)
    rows_read = sum(s["counts"]["rows_out"] + s["counts"]["rows_rejected"] for s in read)
    bytes_read = sum(s["counts"]["bytes_out"] + s["counts"]["bytes_rejected"] for s in read)
    skipped = sum(1 for s in stages if s.get("why", "").startswith("skipped"))
    ran = (f"{len(stages)} stages" + (f" ({skipped} unchanged since the last run, not re-run)" if skipped else "")
           + f": read {rows_read:,} documents ({_human(bytes_read)}B) from {len(read)} source"
           + ("s" if len(read) != 1 else "") + "; the final outputs ("
           + ", ".join(html.escape(s["dir"]) for s in finals) + f") hold "
           + f"{sum(s['counts']['rows_out'] for s in finals):,} rows "
           + f"({_human(sum(s['counts']['bytes_out'] for s in finals))}B).")
    reasons: dict[str, list] = {}
    for s in stages:
        for reason, slot in s["counts"]["rejected"].items():
            entry = reasons.setdefault(reason, [0, 0, []])
            entry[0] += slot["rows"]
            entry[1] += slot["bytes"]
            entry[2].append(s["dir"])
    top = sorted(reasons.items(), key=lambda kv: (-kv[1][0], kv[0]))
    if top:
        removed = (f"Removed {sum(e[0] for _, e in top):,} rows ({_human(sum(e[1] for _, e in top))}B) for "
                   f"{len(top)} reason{'s' if len(top) != 1 else ''}; the largest: " + "; ".join(
                       f"{html.escape(reason)} {rows:,} ({_human(nbytes)}B, in {html.escape(', '.join(where))})"
                       for reason, (rows, nbytes, where) in top[:5]) + ". Examples under Rejects by reason.")
    else:
        removed = "Nothing was removed."
    items = [ran, removed] + _family_summary(run_dir)
    return ("<h2>Summary</h2><ul class='summary'>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"
            + warnings)


def _family_summary(run_dir: Path) -> list[str]:
    from .families import load_families

    lines = []
    for name, family in sorted(load_families().items()):
        for ref in family.report_summary():
            module_name, _, func = ref.partition(":")
            lines += getattr(importlib.import_module(module_name), func)(run_dir) or []
    return lines


def crash_rejects(stages: list[dict]) -> list[tuple[str, str, int]]:
    """(stage, reason, rows) for reject reasons that mean a program failed (an extractor crashed, a
    service errored): worth a warning at the top, unlike a document that was simply bad."""
    out = []
    for s in stages:
        for reason, slot in s["counts"]["rejected"].items():
            if "crash" in reason or reason.endswith("_error"):
                out.append((s["dir"], reason, slot["rows"]))
    return out


def _distributions(stages: list[dict]) -> str:
    """Documents per language (language ID's `language.*` counters) and per dominant script (the
    script filter's `script.*`), from the first stage that recorded each: read from manifests."""
    parts = []
    for prefix, label in (("language.", "language"), ("script.", "script")):
        for s in stages:
            counters = (s.get("statistics") or {}).get("counters") or {}
            found = {k[len(prefix):]: v for k, v in counters.items() if k.startswith(prefix)}
            if found:
                total = sum(found.values())
                top = sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))
                rows = [[html.escape(name), f"{int(n):,}", f"{n / total:.1%}"] for name, n in top[:15]]
                if len(top) > 15:
                    rest = sum(n for _, n in top[15:])
                    rows.append([f"{len(top) - 15} others", f"{int(rest):,}", f"{rest / total:.1%}"])
                parts.append(f"<h3>{label} (stage {html.escape(s['dir'])}, {int(total):,} documents)</h3>"
                             + _table([label, "documents", "share"], rows))
                break
    return "".join(parts) or "<p>No stage recorded languages or scripts (add extract.lang_id or filter.script).</p>"


def _examples(rows: list[dict]) -> str:
    if not rows:
        return ""
    items = "".join(f"<li><code>{html.escape(str(r.get('id')))}</code> {html.escape(r.get('detail') or '')}"
                    f"<pre>{html.escape(r.get('text') or '')}</pre></li>" for r in rows)
    return f"<details><summary>{len(rows)} example{'s' if len(rows) > 1 else ''}</summary><ul>{items}</ul></details>"


def _sources(stages: list[dict]) -> str:
    """Per source: rows the readers produced, rows rejected anywhere, rows in the run's final outputs,
    and the share kept where it means one: rows of a source that one-to-many stages multiplied, or that
    several final outputs hold, are not a share of the rows read ("kept 175.9%")."""
    finals = _final_stages(stages)
    table: dict[str, list[int]] = {}
    multiplied: set[str] = set()
    for s in stages:
        for source, slot in s.get("sources", {}).items():
            row = table.setdefault(source, [0, 0, 0, 0])
            if s.get("kind") == "source":
                row[0] += slot["out"] + slot["rejected"]
            row[1] += slot["rejected"]
            if s in finals:
                row[2] += slot["out"]
                row[3] += bool(slot["out"])
            if s.get("cardinality", "one_to_one") != "one_to_one" and s.get("kind") != "source":
                multiplied.add(source)
    if not table:
        return "<p>No per-source counts recorded.</p>"
    rows = [[html.escape(src or "(none)"), f"{a:,}", f"{r:,}", f"{o:,}",
             f"{o / a:.1%}" if a and src not in multiplied and n <= 1 else "–"]
            for src, (a, r, o, n) in sorted(table.items())]
    return _table(["source", "read", "rejected (all stages)", "in final outputs", "kept"], rows) + (
        f"<p>Final outputs: {', '.join(html.escape(s['dir']) for s in finals)}. Kept is \u2013 where stages "
        "made several rows from one (or merged rows) or several final outputs hold the source's rows.</p>")


def _final_stages(stages: list[dict]) -> list[dict]:
    consumed = {Path(i["path"]).name for s in stages for i in s.get("inputs", [])}
    return [s for s in stages if s["dir"] not in consumed and not s.get("fused_into")]


def _length_totals(stages: list[dict]) -> dict[str, list[int]]:
    from .dataset import add_bins

    totals: dict[str, list[int]] = {}
    for s in stages:
        for source, slot in s.get("sources", {}).items():
            if "lengths" in slot:
                totals[source] = add_bins(totals.get(source), slot["lengths"])
    return totals


def _lengths(stages: list[dict]) -> str:
    """Per source, documents by UTF-8 length of `text`: as the readers produced them and in the run's
    final outputs (the shard writers' `lengths` bins, LENGTH_EDGES)."""
    from .dataset import LENGTH_EDGES

    panels = [("as read", _length_totals([s for s in stages if s.get("kind") == "source"])),
              ("in final outputs", _length_totals(_final_stages(stages)))]
    panels = [(title, data) for title, data in panels if data]
    if not panels:
        return "<p>No stage recorded document lengths.</p>"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 3.4), squeeze=False)
    from matplotlib.ticker import FuncFormatter

    # geometric bin centres; the open last bin is drawn one octave up
    centers = [(max(lo, 8.0) * (hi if hi != float("inf") else 2 * lo)) ** 0.5
               for lo, hi in zip(LENGTH_EDGES[:-1], LENGTH_EDGES[1:])]
    for ax, (title, data) in zip(axes[0], panels):
        top = sorted(data.items(), key=lambda kv: (-sum(kv[1]), kv[0]))[:8]
        for source, counts in top:
            ax.plot(centers, counts, marker="o", markersize=3, label=f"{source or '(none)'} ({sum(counts):,})")
        used = [i for counts in data.values() for i, n in enumerate(counts) if n]
        ax.set_xlim(centers[max(min(used) - 1, 0)], centers[min(max(used) + 1, len(centers) - 1)])
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _human(v) + "B"))
        ax.set_xlabel("document length (UTF-8 bytes)")
        ax.set_ylabel("documents")
        ax.set_title(f"documents by length, {title}", pad=10)
        ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return img(fig, "document length histograms per source")


def _params(stages: list[dict]) -> str:
    rows = [[html.escape(s["dir"]), html.escape(s["stage"]), f"<code>{html.escape(json.dumps(s.get('params', {}), sort_keys=True))}</code>",
             html.escape(", ".join(Path(i["path"]).name for i in s.get("inputs", [])))] for s in stages]
    return "<details><summary>every stage's params</summary>" + _table(["stage", "uses", "params", "inputs"], rows) + "</details>"


def _extra_sections(run_dir: Path, stages: list[dict]) -> list[str]:
    from .families import family_of, load_families
    from .stage import registry

    known = registry()
    first_seen: dict[str, int] = {}
    for position, manifest in enumerate(stages):
        cls = known.get(manifest.get("stage", ""))
        family = family_of(cls) if cls else None
        if family is not None:
            first_seen.setdefault(family, position)
    families = load_families()
    ordered = sorted(families, key=lambda name: (first_seen.get(name, len(stages)), name))
    out = []
    for name in ordered:
        for ref in families[name].report_sections():
            module_name, _, func = ref.partition(":")
            fragment = getattr(importlib.import_module(module_name), func or "report_section")(run_dir)
            if fragment:
                out.append(fragment)
    return out


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2em}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}th{background:#f4f4f4}
td:first-child,td:nth-child(2),th:first-child{text-align:left}
img{max-width:100%;margin:.5em 0}
.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:.4em .8em}
pre{white-space:pre-wrap;max-width:480px;font-size:12px;text-align:left;margin:.2em 0}
details{text-align:left}
#summary{background:#f6f8fa;border:1px solid #ddd;padding:.2em 1em;margin:1em 0}
.summary li{margin:.35em 0}
"""


def write_report(run_dir: str | Path, out: str | Path | None = None, shown_as: str | None = None) -> Path:
    from . import storage

    if storage.is_url(run_dir) or (out is not None and storage.is_url(out)):
        return _write_remote_report(storage.as_path(run_dir), out)
    run_dir = Path(run_dir)
    stages = load_stages(run_dir)
    if not stages:
        raise FileNotFoundError(f"{run_dir}: no completed stages (no */_manifest.json) to report on")
    run = read_json(run_dir / "_run.json") or {}
    title = run.get("recipe") or run_dir.name
    plain_text_figures()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections = _core_sections(stages) + _extra_sections(run_dir, stages)
    total = sum(s.get("wall_seconds", 0) for s in stages)
    resumed = [s["dir"] for s in stages if s.get("resumed_shards")]
    warning = (f"<p class='warn'>Resumed: {', '.join(html.escape(r) for r in resumed)} kept shards committed by an "
               "earlier, interrupted run (identical by construction).</p>" if resumed else "")
    warning += "".join(f"<p class='warn'>Crashes: stage {html.escape(sid)} rejected {n:,} row(s) as {html.escape(reason)}: "
                       "the code failed on them, not the data; see Rejects by reason.</p>"
                       for sid, reason, n in crash_rejects(stages))
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Assay report: {html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>Assay report: {html.escape(title)}</h1>"
        f"<p class='sub'>output: {html.escape(shown_as or str(run_dir.resolve()))} · engine {html.escape(str(run.get('engine', '?')))}"
        f" · {len(stages)} stages · {total:.1f} s of stage time · assay {__version__} · {when}</p>"
        + f"<section id='summary'>{_summary(run_dir, stages, warning)}</section>"
        + "".join(f"<section>{s}</section>" for s in sections)
        + "</body></html>"
    )
    target = Path(out) if out else run_dir / "report.html"
    atomic_write_text(target, page)
    return target


def _write_remote_report(run_dir, out) -> Path:
    """A report of a run on a store: its manifests, run logs and artifacts (not its shards or
    checkpoints) mirrored to a local folder, rendered there, and the page uploaded."""
    import shutil
    import tempfile

    from . import storage

    local = Path(tempfile.mkdtemp(prefix="assay-report-"))
    try:
        if storage.is_remote(run_dir):
            for name in storage.files_under(run_dir):
                base = name.rsplit("/", 1)[-1]
                if base.startswith("part-") or "/checkpoints/" in f"/{name}" or "/_fit/" in f"/{name}" or \
                        base == "report.html":
                    continue  # data, not what a report reads
                (local / name).parent.mkdir(parents=True, exist_ok=True)
                (local / name).write_bytes(storage.read_bytes(run_dir / name))
        page = write_report(local if storage.is_remote(run_dir) else run_dir, local / "report.html",
                            shown_as=str(run_dir))
        target = storage.as_path(out) if out else run_dir / "report.html"
        atomic_write_text(target, page.read_text())
        return target
    finally:
        shutil.rmtree(local, ignore_errors=True)
