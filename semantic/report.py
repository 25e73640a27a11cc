"""Report sections of the semantic family: embeddings, cluster sizes, the rebalancing curve, mining
coverage and decontamination hits per benchmark. They read manifests and `_artifacts/`, never the
corpus."""
from __future__ import annotations

import html
import json
from pathlib import Path

from assay.pipeline.dataset import MANIFEST


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fit(stage_dir: Path) -> dict:
    path = stage_dir / "_artifacts" / "fit.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _plot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def embed_section(name: str, m: dict, stage_dir: Path) -> str:
    info = m.get("embedding", {})
    n = m["counts"]["rows_out"]
    rate = n / m["wall_seconds"] if m.get("wall_seconds") else 0
    return (f"<h3>{html.escape(name)}: embeddings</h3><p>{n:,} documents embedded with "
            f"{html.escape(str(info.get('model')))} ({info.get('dim')} dimensions, {info.get('dtype')}, pooling "
            f"{html.escape(str(info.get('pooling')))}, {info.get('max_tokens')} tokens) at {rate:.1f} documents/s "
            f"on {html.escape(m.get('engine', ''))}.</p>")


def cluster_section(name: str, m: dict, stage_dir: Path) -> str:
    import numpy as np
    import pyarrow.parquet as pq

    from assay.pipeline.report import img

    fit = _fit(stage_dir)
    path = stage_dir / "_artifacts" / "clusters.parquet"
    if not path.exists():
        return f"<h3>{html.escape(name)}: clusters</h3><p>No documents to cluster.</p>"
    table = pq.read_table(path, columns=["cluster", "est_documents", "est_bytes", "top_terms", "titles"]).to_pylist()
    sizes = np.array(sorted((r["est_documents"] for r in table), reverse=True))
    plt = _plot()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(np.arange(1, len(sizes) + 1), sizes, color="#4c78a8")
    ax.set_xscale("log")
    ax.set_yscale("symlog")
    ax.set_xlabel("cluster rank")
    ax.set_ylabel("documents (estimated)")
    ax.set_title("cluster sizes")
    total = max(sum(r["est_bytes"] for r in table), 1)
    rows = [[r["cluster"], f"{r['est_documents']:,}", f"{r['est_bytes'] / total:.1%}",
             html.escape(", ".join(r["top_terms"][:6])), html.escape(" | ".join(r["titles"][:2]))]
            for r in sorted(table, key=lambda r: -r["est_bytes"])[:12]]
    return (f"<h3>{html.escape(name)}: {fit.get('clusters')} clusters</h3>"
            f"<p>k-means on a sample of {fit.get('sample', 0):,} of {fit.get('documents', 0):,} documents "
            f"({fit.get('coarse')} coarse cells); mean cosine to the centroid {fit.get('mean_similarity')}. "
            f"Largest clusters by text mass:</p>" + img(fig, "cluster sizes by rank")
            + _table(["cluster", "documents", "mass share", "top terms", "nearest titles"], rows))


def rebalance_section(name: str, m: dict, stage_dir: Path) -> str:
    from assay.pipeline.report import img

    fit = _fit(stage_dir)
    curve = fit.get("curve") or {}
    if not curve.get("rank"):
        return ""
    plt = _plot()
    fig, ax = plt.subplots(figsize=(6, 3))
    ranks = [r + 1 for r in curve["rank"]]
    ax.plot(ranks, curve["before"], label="before", color="#e45756")
    ax.plot(ranks, curve["after"], label="after", color="#4c78a8")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cluster rank")
    ax.set_ylabel(f"share of {fit.get('mass')}")
    ax.legend()
    ax.set_title("cluster mass before and after rebalancing")
    return (f"<h3>{html.escape(name)}: rebalancing ({html.escape(str(fit.get('method')))})</h3>"
            f"<p>Largest cluster's share {fit['largest_share_before']:.2%} → {fit['largest_share_after']:.2%}; "
            f"{fit['downsampled_clusters']:,} of {fit['nonempty']:,} clusters down-sampled, smallest weight "
            f"{fit['min_weight']:.3f}; expected mass kept {fit['mass_after'] / max(fit['mass_before'], 1):.1%}"
            + ("" if fit.get("reachable", True) else " (the cap is below 1/k: every cluster capped at the smallest mass)")
            + ".</p>" + img(fig, "cluster mass before and after rebalancing"))


def mine_section(name: str, m: dict, stage_dir: Path) -> str:
    fit = _fit(stage_dir)
    per_item = sorted((fit.get("per_item") or {}).items(), key=lambda kv: kv[1])
    rows = [[html.escape(k), v] for k, v in per_item[:15]]
    return (f"<h3>{html.escape(name)}: knowledge mining</h3><p>{fit.get('documents', 0):,} documents selected for "
            f"{fit.get('items_covered', 0)} of {fit.get('items', 0)} inventory items; mean similarity "
            f"{fit.get('mean_similarity')}, mean knowledge density {fit.get('mean_density')}. Least covered items:</p>"
            + _table(["item", "documents"], rows))


def decontam_section(name: str, m: dict, stage_dir: Path) -> str:
    counters = (m.get("statistics") or {}).get("counters", {})
    docs = counters.get("documents", m["counts"]["rows_in"])
    items: dict[str, int] = {}
    for key in counters:
        if key.startswith("item/"):
            bench = key.split("/", 2)[1]
            items[bench] = items.get(bench, 0) + 1
    rows = [[html.escape(b), f"{counters.get(f'benchmark/{b}', 0):,}", f"{items.get(b, 0):,}"]
            for b in sorted({k.split("/", 1)[1] for k in counters if k.startswith("benchmark/")})]
    kinds = ", ".join(f"{k.split('/', 1)[1]} {v:,}" for k, v in sorted(counters.items()) if k.startswith("kind/"))
    acted = "".join(f" {counters[k]:,} {k}." for k in ("rejected", "masked") if counters.get(k))
    params = m.get("params", {})
    how = (f"n-gram {params.get('ngram')}" if "ngram" in params else "") + (", semantic" if params.get("semantic") else "")
    return (f"<h3>{html.escape(name)}: decontamination ({html.escape(how)}, mode {html.escape(str(params.get('mode')))})</h3>"
            f"<p>{counters.get('flagged', 0):,} of {docs:,} documents carry benchmark items ({html.escape(kinds) or 'none'})."
            f"{acted}</p>" + (_table(["benchmark", "documents", "distinct items"], rows) if rows else ""))


def semdedup_section(name: str, m: dict, stage_dir: Path) -> str:
    found = _fit(stage_dir).get("duplicates", 0)
    return (f"<h3>{html.escape(name)}: semantic deduplication</h3><p>{found:,} of {m['counts']['rows_in']:,} documents "
            f"have cosine &gt; {1 - m['params']['eps']:.3f} with an earlier document of their cluster"
            f"{' and were removed' if m['params']['remove'] else ''}.</p>")


def apply_section(name: str, m: dict, stage_dir: Path) -> str:
    counters = (m.get("statistics") or {}).get("counters", {})
    params = m.get("params", {})
    done = counters.get("rejected", 0) or counters.get("masked", 0)
    return (f"<h3>{html.escape(name)}: decontamination decision</h3><p>{done:,} of {m['counts']['rows_in']:,} documents "
            f"{'rejected' if params.get('mode') == 'reject' else 'masked'} (benchmarks "
            f"{html.escape(str(params.get('benchmarks') or 'all'))}, kinds {html.escape(str(params.get('kinds') or 'all'))}, "
            f"overlap ≥ {params.get('min_overlap')}).</p>")


SECTIONS = {"semantic.embed": embed_section, "semantic.cluster": cluster_section,
            "semantic.rebalance": rebalance_section, "semantic.semdedup": semdedup_section, "semantic.mine": mine_section,
            "semantic.decontam": decontam_section, "semantic.decontam_apply": apply_section}


def report_section(run_dir: Path) -> str | None:
    parts = []
    for path in sorted(Path(run_dir).glob(f"*/{MANIFEST}"), key=lambda p: json.loads(p.read_text()).get("started_at", "")):
        manifest = json.loads(path.read_text())
        section = SECTIONS.get(manifest.get("stage", ""))
        if section is not None:
            parts.append(section(path.parent.name, manifest, path.parent))
    parts = [p for p in parts if p]
    return "<h2>Semantic: embeddings, clusters, mining, decontamination</h2>" + "".join(parts) if parts else None
