"""Report section for the quality stages, read from manifests' statistics (never the corpus): rule hit
rates, code rule hits, PII counts, score histograms, tier shares per source, topic, format and site shares."""
from __future__ import annotations

import html
from pathlib import Path

from assay.pipeline.report import load_stages

from .tiers import TIERS

QUALITY_STAGES = ("filter.rules", "filter.pii", "quality.code_rules", "quality.tier", "quality.calibrate", "quality.tiers",
                  "quality.fasttext", "quality.lm", "quality.dsir", "quality.math", "quality.topics")


def _table(headers, rows) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _score_plot(hists: dict, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from assay.pipeline.report import img

    names = sorted(h for h in hists if h.startswith("quality_") and h != "quality_bucket")
    if not names:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for name in names:
        edges, counts = hists[name]["edges"], hists[name]["counts"]
        total = max(sum(counts), 1)
        ax.step(edges[:-1], [c / total for c in counts], where="post", label=name)
    ax.set_xlabel("score")
    ax.set_ylabel("share of documents")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return img(fig, f"{title}: score histograms")


def _pii(counters: dict, samples: dict) -> str:
    """Matches and documents per type, then the stage's masked examples: the match's shape (letters
    x, digits 0) in its context, and what the text became."""
    pii = sorted((k.split(".", 1)[1], v) for k, v in counters.items() if k.startswith("pii."))
    if not pii:
        return ""
    code = int(counters.get("pii_code_docs", 0))
    out = ("<p>PII found" + (f" ({code:,} code documents: string literals and comments only)" if code else "") + "</p>"
           + _table(["type", "matches", "documents"],
                    [(k, f"{int(v):,}", f"{int(counters.get(f'pii_docs.{k}', 0)):,}") for k, v in pii]))
    rows = [(name.split(".", 1)[1], item["before"], item["after"])
            for name, slot in sorted(samples.items()) if name.startswith("pii.") for item in slot["items"]]
    if rows:
        cells = "".join(f"<tr><td>{html.escape(kind)}</td><td><pre>{html.escape(before)}</pre></td>"
                        f"<td><pre>{html.escape(after)}</pre></td></tr>" for kind, before, after in rows)
        out += ("<p>PII examples: the match masked (letters x, digits 0) in its context, and the text after</p>"
                f"<table class=\"pii-examples\"><tr><th>type</th><th>before (masked)</th><th>after</th></tr>{cells}</table>")
    return out


def stage_section(manifest: dict) -> str:
    stats = manifest.get("statistics") or {}
    counters = stats.get("counters", {})
    parts = [f"<h3>{html.escape(manifest.get('dir', ''))} ({html.escape(manifest.get('stage', ''))})</h3>"]
    docs = counters.get("rule.docs")
    rules = sorted({k.split(".")[1] for k in counters if k.startswith("rule.") and k.endswith(".hit")})
    if rules and docs:
        rows = [(r, f"{hit:,}", f"{hit / applied:.1%}" if applied else "–", f"{applied:,}")
                for r in rules
                for hit, applied in [(int(counters.get(f"rule.{r}.hit", 0)), int(counters.get(f"rule.{r}.applied", docs)))]]
        parts.append(f"<p>Heuristic rule hit rates over the documents each rule applies to (of {int(docs):,}; "
                     "content types a rule bypasses do not count); annotated, not dropped unless drop=true</p>"
                     + _table(["rule", "hits", "rate", "applied to"], rows))
    code = sorted((k.split(".", 1)[1], v) for k, v in counters.items() if k.startswith("code_rule."))
    if code and counters.get("code.docs"):
        n = counters["code.docs"]
        parts.append(f"<p>Code rules over {int(n):,} code files</p>"
                     + _table(["rule", "files", "rate"], [(r, f"{int(v):,}", f"{v / n:.1%}") for r, v in code if v]))
    parts.append(_pii(counters, stats.get("samples", {})))
    tiers: dict[str, dict[str, float]] = {}
    for key, value in counters.items():
        if key.startswith("tier_tokens."):
            _, rest = key.split(".", 1)
            source, tier = rest.rsplit(".", 1)
            tiers.setdefault(source, {})[tier] = value
    if tiers:
        rows = []
        for source, shares in sorted(tiers.items()):
            total = sum(shares.values()) or 1
            rows.append([source] + [f"{shares.get(t, 0) / total:.1%}" for t in TIERS])
        parts.append("<p>Tier shares per source (token-weighted)</p>" + _table(["source", *TIERS], rows))
        parts.append(_mix("source", tiers))
    within: dict[str, dict[str, float]] = {}
    for key, value in counters.items():
        if key.startswith("mix_tokens."):
            group, tier = key[len("mix_tokens."):].rsplit(".", 1)
            within.setdefault(group, {})[tier] = value
    if within:
        parts.append(_mix(next(iter(within)).split("=", 1)[0], {g.split("=", 1)[1]: v for g, v in within.items()}))
    for kind, label in (("topic", "Topic"), ("format", "Format"), ("site", "Site")):
        shares = sorted(((k.split(".", 1)[1], v) for k, v in counters.items() if k.startswith(f"{kind}_docs.")),
                        key=lambda kv: -kv[1])
        total = sum(v for _, v in shares) or 1
        if shares:
            parts.append(f"<p>{label} shares (documents; top 15)</p>"
                         + _table([kind, "documents", "share"], [(k, f"{int(v):,}", f"{v / total:.1%}") for k, v in shares[:15]]))
    parts.append(_score_plot(stats.get("histograms", {}), manifest.get("dir", "")))
    return "".join(parts) if len(parts) > 1 else ""


def mix_shares(tiers: dict[str, dict[str, float]]) -> list[tuple[str, float, float]]:
    """(group, share of all tokens, share of the top three tiers' tokens): the mix before and after."""
    total = sum(sum(v.values()) for v in tiers.values()) or 1
    top = sum(v.get(t, 0) for v in tiers.values() for t in TIERS[:3]) or 1
    return [(g, sum(v.values()) / total, sum(v.get(t, 0) for t in TIERS[:3]) / top) for g, v in sorted(tiers.items())]


def _mix(column: str, tiers: dict[str, dict[str, float]]) -> str:
    rows = [(g, f"{before:.1%}", f"{after:.1%}") for g, before, after in mix_shares(tiers)]
    return (f"<p>Mix by {column} before and after tiering (token shares: all documents, top three tiers)</p>"
            + _table([column, "all", "top three"], rows))


def report_section(run_dir) -> str | None:
    sections = [stage_section(m) for m in load_stages(Path(run_dir)) if m.get("stage") in QUALITY_STAGES]
    sections = [s for s in sections if s]
    return "<h2>Quality</h2>" + "".join(sections) if sections else None
