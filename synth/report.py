"""Report section for synthesis stages, read from their manifests (never from the corpus): yields,
candidates sampled and accepted, accept/reject per verifier, candidate reject reasons, pass rates,
requests (calls, cache hits, retries), tokens and cost."""
from __future__ import annotations

import html
from pathlib import Path

from assay.pipeline.report import load_stages

GENERATORS = ("synth.arith", "synth.logic", "synth.kg")
LLM_STAGES = ("synth.rewrite", "synth.solve")


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pct(a: float, b: float) -> str:
    return f"{a / b:.0%}" if b else "–"


def _pass_rate_plot(stages: list[dict]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from assay.pipeline.report import img

    labels = ["0", "(0, .25)", "[.25, .5)", "[.5, .75)", "[.75, 1)", "1"]
    fig, ax = plt.subplots(figsize=(7, 2.8))
    width = 0.8 / len(stages)
    for i, s in enumerate(stages):
        counts = s["statistics"]["histograms"]["pass_rate"]["counts"]
        ax.bar([x + i * width for x in range(len(counts))], counts, width=width, label=s["dir"])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels)
    ax.set_xlabel("pass rate (accepted candidates / k)")
    ax.set_ylabel("items")
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return img(fig, "items by pass rate")


def report_section(run_dir: str | Path) -> str | None:
    stages = [s for s in load_stages(Path(run_dir)) if s.get("stage", "").startswith("synth.")]
    if not stages:
        return None
    parts = ["<h2>Synthesis</h2>"]
    gens = [s for s in stages if s["stage"] in GENERATORS]
    if gens:
        parts.append("<h3>Generated items</h3>" + _table(
            ["stage", "generator", "items", "seed", "bytes"],
            [[html.escape(s["dir"]), s["stage"], f"{s['counts']['rows_out']:,}", s["params"].get("seed", ""),
              f"{s['counts']['bytes_out']:,}"] for s in gens]))
    llm = [s for s in stages if s["stage"] in LLM_STAGES]
    rows, verifier_rows, reason_rows = [], [], []
    for s in llm:
        c, counters = s["counts"], (s.get("statistics") or {}).get("counters", {})
        cand, acc = counters.get("synth_candidates", 0), counters.get("synth_accepted", 0)
        calls, hits = counters.get("service_call", 0), counters.get("service_cache", 0)
        rows.append([html.escape(s["dir"]), s["stage"], html.escape(str(s["params"].get("template", ""))),
                     f"{c['rows_in']:,}", f"{c['rows_out']:,}", _pct(c.get("rows_parent", c["rows_out"]), c["rows_in"]),
                     f"{cand:,}", f"{acc:,} ({_pct(acc, cand)})", f"{calls:,}", f"{hits:,}",
                     f"{counters.get('service_retries', 0):,}", f"{counters.get('tokens_in', 0):,}",
                     f"{counters.get('tokens_out', 0):,}", f"{counters.get('cost', 0):.4f}"])
        verifiers = sorted({k.split(".")[1] for k in counters if k.startswith("verify.")})
        for v in verifiers:
            ok, bad = counters.get(f"verify.{v}.pass", 0), counters.get(f"verify.{v}.fail", 0)
            verifier_rows.append([html.escape(s["dir"]), html.escape(v), f"{ok + bad:,}", f"{ok:,}", f"{bad:,}",
                                  _pct(bad, ok + bad)])
        for key, n in sorted(counters.items(), key=lambda kv: -kv[1]):
            if key.startswith("reject."):
                reason_rows.append([html.escape(s["dir"]), html.escape(key[7:]), f"{n:,}", _pct(n, cand)])
            elif key.startswith("sandbox."):
                reason_rows.append([html.escape(s["dir"]), f"sandbox verdict {html.escape(key[8:])}", f"{n:,}",
                                    _pct(n, cand)])
    if rows:
        parts.append("<h3>LLM stages</h3><p>Yield: share of input records with at least one accepted output. "
                     "Cache hits are requests answered from the request cache (not paid again).</p>" + _table(
                         ["stage", "uses", "template", "records in", "docs out", "yield", "candidates", "accepted",
                          "calls", "cache hits", "retries", "tokens in", "tokens out", "cost"], rows))
    if verifier_rows:
        parts.append("<h3>Verifiers</h3><p>Checks run in order and stop at a candidate's first failure.</p>"
                     + _table(["stage", "verifier", "checked", "passed", "rejected", "reject rate"], verifier_rows))
    if reason_rows:
        parts.append("<h3>Candidate reject reasons</h3>" + _table(["stage", "reason", "candidates", "share"],
                                                                  reason_rows))
    with_rates = [s for s in llm if "pass_rate" in ((s.get("statistics") or {}).get("histograms") or {})]
    if with_rates:
        parts.append("<h3>Pass rates</h3>" + _pass_rate_plot(with_rates))
    return "".join(parts)
