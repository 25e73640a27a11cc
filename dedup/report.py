"""Report section for dedup stages: group-size histogram and removal rate per source.

For every dedup.url / dedup.exact / dedup.minhash stage of a run it reads `dup_group`, `dup_keep` and
`source` from the stage's output and rejects (rows it removed itself) and renders two plots and a table.
"""
from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline.dataset import MANIFEST, Dataset

_ANNOTATING = ("dedup.url", "dedup.exact", "dedup.minhash")


def _decisions(ds: Dataset) -> pa.Table:
    """Every row's decision: kept rows from the output, removed ones from _rejects/ if the stage removed."""
    cols = ["dup_group", "dup_keep", "source"]
    parts = [ds.read(columns=cols)]
    rejects = ds.read_rejects()
    if rejects.num_rows and "dup_group" in rejects.column_names:
        parts.append(rejects.select(cols))
    return pa.concat_tables(parts, promote_options="permissive")


def _plots(sizes: Counter, rates: dict[str, tuple[int, int]], title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from assay.pipeline.report import img

    # Constrained layout makes room for the long source names and keeps the stage's title above both
    # panels' own titles (tight_layout ignores a suptitle, which then sat on them).
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 1.6 + 0.35 * max(len(rates), 4)), layout="constrained")
    xs = sorted(sizes)
    ax1.bar([str(x) if x < 10 else f"{x}" for x in xs], [sizes[x] for x in xs], color="#4c72b0")
    ax1.set_yscale("log")
    ax1.set_xlabel("group size (documents)")
    ax1.set_ylabel("groups")
    ax1.set_title("duplicate groups by size")
    if len(xs) > 12:
        ax1.set_xticks(range(0, len(xs), max(1, len(xs) // 12)))
    names = sorted(rates)
    ax2.barh(names, [rates[n][1] / rates[n][0] if rates[n][0] else 0 for n in names], color="#dd8452")
    ax2.set_xlabel("fraction not kept")
    ax2.set_title("removal rate per source")
    fig.suptitle(title)
    return img(fig, f"{title}: group sizes and removal rate per source")


def stage_section(name: str, manifest: dict, ds: Dataset) -> str:
    table = _decisions(ds)
    if table.num_rows == 0:
        return ""
    groups = Counter(table.column("dup_group").to_pylist())
    sizes = Counter(n for n in groups.values() if n > 1)
    dropped = pc.invert(pc.fill_null(table.column("dup_keep"), True))
    per_source = table.append_column("dropped", dropped).group_by("source").aggregate([("dropped", "count"), ("dropped", "sum")])
    rates = {
        str(s): (int(n), int(d or 0))
        for s, n, d in zip(*(per_source.column(c).to_pylist() for c in ("source", "dropped_count", "dropped_sum")))
    }
    rows = "".join(
        f"<tr><td>{html.escape(s)}</td><td>{n:,}</td><td>{d:,}</td><td>{d / n:.1%}</td></tr>" for s, (n, d) in sorted(rates.items())
    )
    total = sum(n for n, _ in rates.values())
    removed = sum(d for _, d in rates.values())
    params = html.escape(json.dumps(manifest.get("params", {}), sort_keys=True))
    return (
        f"<h3>{html.escape(name)} ({html.escape(manifest.get('stage', ''))}, plan {html.escape(str(manifest.get('plan', '')))})</h3>"
        f"<p>{total:,} documents, {sum(sizes.values()):,} groups of 2+, {removed:,} not kept ({removed / total:.1%}). "
        f"Largest group: {max(sizes) if sizes else 1}. Params: <code>{params}</code></p>"
        + _plots(sizes, rates, name)
        + f"<table><tr><th>source</th><th>documents</th><th>not kept</th><th>rate</th></tr>{rows}</table>"
    )


def report_section(run_dir: Path) -> str | None:
    parts = []
    for path in sorted(Path(run_dir).glob(f"*/{MANIFEST}")):
        manifest = json.loads(path.read_text())
        if manifest.get("stage") in _ANNOTATING:
            section = stage_section(path.parent.name, manifest, Dataset(path.parent))
            if section:
                parts.append(section)
    if not parts:
        return None
    return "<h2>Deduplication</h2>" + "".join(parts)
