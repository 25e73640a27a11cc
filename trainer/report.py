"""Report section: training curves of every training run under a run directory, and ablation tables.

Finds training runs (datasets whose output kind is `run`) and ablations (`ablation.json`) in the directory
itself and one or two levels below, so a pipeline workdir with a `train/` run in it gets the section.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from assay.pipeline import storage
from assay.pipeline.dataset import MANIFEST, atomic_write_text, read_json_safe
from assay.pipeline.report import CSS, img

ABLATION = "ablation.json"


def _runs(root: Path) -> list[Path]:
    cands = [root, *root.glob("*"), *root.glob("*/*")]
    return [p for p in cands if (read_json_safe(p / MANIFEST) or {}).get("output_kind") == "run"
            and not (p.parent / ABLATION).exists() and not (p.parent.parent / ABLATION).exists()]


def _ablations(root: Path) -> list[Path]:
    return [p for p in [root, *root.glob("*")] if (p / ABLATION).exists()]


def curves_figure(runs: dict[str, list[dict]]):
    """Loss vs tokens (train) and BPB vs tokens (eval) for named metric streams. A panel is drawn only
    where some stream has two points or more: a run evaluated once has its BPB in the tables, not as
    a one-point "curve". None when neither panel has one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loss, bpb = {}, {}
    for name, recs in runs.items():
        train = [r for r in recs if r.get("kind") == "train"]
        loss[name] = [(r["tokens"], r["loss"]) for r in train]
        ev = [r for r in recs if r.get("kind") == "eval"]
        for set_name in (ev[0]["eval"] if ev else {}):
            bpb[f"{name} · {set_name}"] = [(r["tokens"], r["eval"][set_name]["bpb"]) for r in ev
                                           if r["eval"][set_name]["bpb"] is not None]
    panels = [(streams, xlabel, ylabel, title) for streams, xlabel, ylabel, title in (
        (loss, "tokens", "train loss (nats/token)", "training loss"),
        (bpb, "tokens", "bits per byte", "held-out BPB during training"))
        if any(len(pts) > 1 for pts in streams.values())]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.6), squeeze=False)
    for ax, (streams, xlabel, ylabel, title) in zip(axes[0], panels):
        for name, pts in streams.items():
            if pts:
                ax.plot(*zip(*pts), marker="o" if streams is bpb else None, label=name, lw=1)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _moe_figure(recs: list[dict]):
    import matplotlib.pyplot as plt

    train = [r for r in recs if r.get("kind") == "train" and r.get("moe")]
    if not train:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    n_layers = len(train[0]["moe"])
    for layer in range(n_layers):
        xs = [r["tokens"] for r in train]
        for ax, key in zip(axes, ("load_max_mean", "act_rms_max_median", "act_rms_min_median")):
            ax.plot(xs, [r["moe"][layer].get(key) or 0 for r in train], label=f"layer {layer}", lw=1)
    for ax, title in zip(axes, ("expert load max/mean", "act RMS max/median (blow-up)",
                                "act RMS min/median (dead expert)")):
        ax.set(title=title, xlabel="tokens")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _expert_html(root: Path) -> str:
    """Expert load and activation per arm (its first seed's run): does routing stay balanced on
    each mixture, and how much of the model a token activates."""
    from .train import SUMMARY, read_metrics

    first: dict[str, Path] = {}
    for run in sorted((root / "runs").glob("*-s*")):
        if (run / SUMMARY).exists():
            first.setdefault(run.name.rsplit("-s", 1)[0], run)
    rows, streams = [], {}
    for arm, run in first.items():
        summary = read_json_safe(run / SUMMARY) or {}
        params = summary.get("params") or {}
        recs = [r for r in read_metrics(run) if r.get("kind") == "train" and r.get("moe")]
        if not recs:
            continue
        streams[arm] = recs
        last = recs[-1]["moe"]
        rows.append([html.escape(arm), html.escape(run.name),
                     f"{max(layer.get('load_max_mean') or 0 for layer in last):.2f}",
                     f"{max(layer.get('act_rms_max_median') or 0 for layer in last):.2f}",
                     f"{params.get('active', 0) / max(params.get('total', 1), 1):.1%}",
                     f"{params.get('active_non_embedding', 0):,}"])
    if not rows:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
    for arm, recs in streams.items():
        xs = [r["tokens"] for r in recs]
        for ax, key in zip(axes, ("load_max_mean", "act_rms_max_median")):
            ax.plot(xs, [max(layer.get(key) or 0 for layer in r["moe"]) for r in recs], label=arm, lw=1)
    for ax, title in zip(axes, ("expert load max/mean (worst layer)", "act RMS max/median (worst layer)")):
        ax.set(title=title, xlabel="tokens")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return ("<h4>Experts</h4>" + _table(["arm", "run", "final load max/mean", "final act RMS max/median",
                                         "active / total params", "active non-embedding params"], rows)
            + img(fig, "expert load per arm"))


def _run_html(run: Path) -> str:
    from .train import SUMMARY, read_metrics

    recs = read_metrics(run)
    summary = read_json_safe(run / SUMMARY) or {}
    parts = [f"<h3>Training run {html.escape(run.name)}</h3>"]
    if summary:
        p = summary.get("params", {})
        parts.append(f"<p>{p.get('total', 0) / 1e6:.2f}M params ({p.get('active', 0) / 1e6:.2f}M active), "
                     f"{summary.get('steps')} steps, {summary.get('tokens'):,} tokens "
                     f"({summary.get('tokens_trained', 0):,} trained on), {summary.get('tokens_per_s')} tokens/s on "
                     f"{html.escape(str(summary.get('device')))}, loss spikes: {summary.get('spikes')}</p>")
        rows = []
        for name, ev in (summary.get("eval") or {}).items():
            for src, r in ev["per_source"].items():
                rows.append([html.escape(name), html.escape(src), r["bpb"], r["tokens"], r["bytes"]])
            rows.append([html.escape(name), "<b>all</b>", ev["bpb"], ev["tokens"], ev["bytes"]])
            if "no_prefix" in ev:
                rows.append([html.escape(name), "all, prefix removed", ev["no_prefix"]["bpb"], "", ""])
        if rows:
            parts.append(_table(["eval set", "source", "BPB", "tokens", "bytes"], rows))
        if summary.get("tasks"):
            parts.append(suite_html(summary["tasks"]))
    curves = curves_figure({run.name: recs}) if recs else None
    if curves is not None:
        parts.append(img(curves, "training curves"))
    if recs:
        fig = _moe_figure(recs)
        if fig is not None:
            parts.append(img(fig, "expert telemetry"))
        warns = sorted({w for r in recs for w in r.get("warnings", [])})
        if warns:
            parts.append("<p>Warnings seen: " + html.escape("; ".join(warns)) + "</p>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def verdict(pair: dict, arms: dict, alpha: float, method: str, measure: str = "bits per byte",
            where: str = "on held-out text", unit: str = " BPB", lower_is_better: bool = True) -> str:
    """One comparison in words: which arm won and by how much (lower BPB is better, or higher for
    a task metric), both arms' mean ± std, the 95% CI of the gap and the p-value, whether that is
    significant, and a caution when few seeds stand behind it. `pair` is an entry of ablate.compare
    (arm a is the better one)."""
    a, b = pair["a"], pair["b"]
    ra, rb = arms[a], arms[b]
    n = pair.get("n") or len(ra["values"])
    gap = abs(rb["mean"] - ra["mean"])
    better = "lower is better" if lower_is_better else "higher is better"
    means = (f"{a} {ra['mean']:.3f} ± {ra['std']:.3f} vs {b} {rb['mean']:.3f} ± {rb['std']:.3f}{unit} over "
             f"{n} seed{'s' if n != 1 else ''}")
    ci = pair.get("ci95")
    lo, hi = sorted((-ci[1], -ci[0]) if lower_is_better else (ci[0], ci[1])) if ci else (0, 0)
    ci_text = f", 95% CI of the gap {lo:+.3f} to {hi:+.3f}" if ci else ""
    p_text = f"{method} p = {pair['p_value']:.2g}"
    if pair["significant"]:
        text = (f"{a} beat {b} by {gap:.3f} {measure} {where} ({better}): {means}{ci_text}; "
                f"{p_text}, significant at alpha {alpha:g}.")
    else:
        text = (f"{a} and {b} could not be told apart: {a} is ahead by {gap:.3f} {measure} ({better}; "
                f"{means}{ci_text}), but {p_text} is not below alpha {alpha:g}, so this run does not "
                f"say which data is better.")
    if n < 5:
        text += (f" Caution: {n} seed{'s' if n != 1 else ''} per arm estimate the seed noise only roughly; "
                 f"5 or more make the p-value and the interval trustworthy.")
    return text


def short_verdict(pair: dict, measure: str) -> str:
    """One metric's call in a few words, for the summary line beside the others: the better arm (or
    none) and the p-value. `pair` is an entry of ablate.compare (arm a is the better one)."""
    p = f"p {pair['p_value']:.2g}"
    if pair["significant"]:
        return f"{pair['a']} better on {measure} ({p})"
    return f"no difference on {measure} ({p}; {pair['a']} ahead)"


def router_html(res: dict) -> str:
    """Per arm and layer, the router's final expert loads and its collapse flags (routing.py), worst seed first."""
    router = res.get("router")
    if not router:
        return ""
    from .routing import COLLAPSE_SHARE, describe

    rows = []
    for arm, h in router.items():
        for seed, layers in h["seeds"].items():
            for layer in layers:
                rows.append([html.escape(arm), seed, layer["layer"], " / ".join(f"{x:.0%}" for x in layer["load"]),
                             f"{layer['load_max_mean']:.2f}", f"{layer['peak_load_max_mean']:.2f} at "
                             f"{layer['peak_at_tokens']:,}", f"{layer['router_entropy']:.2f}",
                             f"{layer['routing_confidence']:.2f}", f"{layer['bias_spread']:.2f}",
                             f"{layer['collapsed_windows']} of {layer['windows']}",
                             "<b>yes</b>" if layer["collapsed"] else "no"])
    return ("<h4>Router</h4><p>Expert load per layer in each run's last telemetry window (share of its tokens per "
            f"routed expert), the busiest expert's load over the mean at the end and at its peak, the router's entropy, "
            f"the chosen expert's score and the bias spread at the end; a window is collapsed when one expert takes "
            f"{COLLAPSE_SHARE:.0%} of its tokens. " + html.escape(" ".join(describe(a, h) for a, h in router.items()))
            + "</p>" + _table(["arm", "seed", "layer", "final load per expert", "final load max/mean", "peak max/mean",
                               "entropy", "chosen score", "bias spread", "collapsed windows", "collapsed at the end"],
                              rows))


def ablation_html(root: Path) -> str:
    res = json.loads((root / ABLATION).read_text())
    parts = [f"<h3>Ablation {html.escape(res['name'])}</h3>", contamination_html(res),
             f"<p>{len(res['seeds'])} seeds per arm, {res['tokens']:,} tokens each; metric: BPB on "
             f"{html.escape(res['metric_set'])}; significance: {html.escape(res['significance'])} "
             f"(alpha {res['alpha']}).</p>"]
    rows = [[html.escape(a), f"{r['mean']:.4f} ± {r['std']:.4f}", ", ".join(f"{x:.4f}" for x in r["values"])]
            for a, r in sorted(res["arms"].items(), key=lambda kv: kv[1]["mean"])]
    parts.append(_table(["arm", "BPB mean ± std", "per seed"], rows))
    rows = [[html.escape(p["a"]), html.escape(p["b"]), f"{p['diff']:+.4f}", f"{p['gap_over_std']:.1f}",
             f"{p.get('gap_over_paired_std', float('nan')):.1f}", f"{p['p_value']:.2g}",
             "yes" if p["significant"] else "no"] for p in res["pairs"]]
    parts.append(_table(["arm a", "arm b", "BPB a − b", "|gap| / seed std", "|gap| / std of per-seed gaps",
                         f"p ({res['significance']})", "significant"], rows))
    parts += [f"<p><b>Verdict.</b> {html.escape(verdict(p, res['arms'], res['alpha'], res['significance']))}"
              f"{html.escape(mix_caution(res, p))}</p>" for p in res["pairs"]]
    parts.append(mix_html(res))
    parts.append(per_source_html(res))
    parts.append(tasks_html(res))
    parts.append(router_html(res))
    dense = res.get("dense_check")
    if dense:
        parts.append(f"<p>Dense re-run (num_experts=1) of {html.escape(dense['a'])} vs "
                     f"{html.escape(dense['b'])}: {dense['mean_a']:.4f} vs {dense['mean_b']:.4f}; ranking "
                     f"{'agrees' if dense['agrees'] else 'DISAGREES'} with the MoE runs.</p>")
    parts.append(_expert_html(root))
    for png in ("bpb.png", "curves.png"):
        if (root / png).exists():
            import base64

            data = base64.b64encode((root / png).read_bytes()).decode()
            parts.append(f'<img alt="{png}" src="data:image/png;base64,{data}">')
    return "".join(parts)


def mix_caution(res: dict, pair: dict) -> str:
    """A sentence after a verdict whose two arms train on different source or domain mixes."""
    found = [d for d in (res.get("mix") or {}).get("differences", []) if {d["a"], d["b"]} == {pair["a"], pair["b"]}]
    if not found:
        return ""
    named = ", ".join(f"{d['kind']} {d['name']} {d['share_a']:.1%} vs {d['share_b']:.1%}" for d in found[:3])
    return (f" Caution: the two arms train on different mixes ({named}{', ...' if len(found) > 3 else ''}), so part "
            "of this gap is the mix, not the data's quality; see the mix check and the per-source BPB below.")


def mix_html(res: dict) -> str:
    """Each arm's training tokens by source and by domain, and a warning per share that differs
    between two arms beyond the spec's tolerance (mixcheck.mix_differences)."""
    mix = res.get("mix")
    if not mix:
        return ""
    arms, tol = mix["arms"], mix["tolerance"]
    parts = ["<h4>Mix check</h4>"]
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for d in mix["differences"]:
        by_pair.setdefault((d["a"], d["b"]), []).append(d)
    for (a, b), found in by_pair.items():  # one box a pair, the largest change (by ratio) first
        found = sorted(found, key=lambda d: -max(d["share_a"], d["share_b"]) / max(min(d["share_a"], d["share_b"]), 1e-9))
        items = "".join(f"<li>{html.escape(d['message'])}</li>" for d in found)
        parts.append(f"<div class='warn' style='margin:.6em 0'><b>Mix differs between {html.escape(a)} and {html.escape(b)}:</b>"
                     f"<ul>{items}</ul></div>")
    if mix["differences"] and not mix.get("matched"):  # a matched arm already answers it
        a, b = mix["differences"][0]["a"], mix["differences"][0]["b"]
        parts.append(f"<p>To compare quality alone, train an arm on the other's source shares: "
                     f"<code>match_mix: {{{html.escape(b)}: {html.escape(a)}}}</code> in the spec resamples "
                     f"{html.escape(b)}'s rows to {html.escape(a)}'s shares (README, ablation fields).</p>")
    if not mix["differences"]:
        parts.append(f"<p>No source or domain share differs between arms by more than {tol['points']:.0%} points "
                     f"or {tol['ratio']:g}× (shares of at least {tol['min_share']:.0%}).</p>")
    for arm, m in (mix.get("matched") or {}).items():
        parts.append(f"<p>{html.escape(arm)} holds {html.escape(m['to'])}'s source shares: a resample of its data "
                     f"({m['tokens']:,} of its {m['tokens_before']:,} tokens kept).</p>")
    for key, label in (("sources", "source"), ("domains", "domain")):
        if key == "domains" and all(m["domains"] == m["sources"] for m in arms.values()):
            continue  # one source per domain: the source table says it all
        names = sorted({n for m in arms.values() for n in m[key]})
        totals = {arm: sum(m[key].values()) or 1 for arm, m in arms.items()}
        rows = [[html.escape(n)] + [f"{arms[arm][key].get(n, 0) / totals[arm]:.1%}" for arm in arms] for n in names]
        parts.append(_table([label] + [f"{arm}: share of tokens" for arm in arms], rows))
    return "".join(parts)


def per_source_html(res: dict) -> str:
    """Held-out BPB per source per arm (mean ± std over seeds), beside the source's share of each
    arm's training tokens, and which arm is ahead on it (and whether that is significant)."""
    arms = res["arms"]
    pairs = res.get("source_pairs") or {}
    if not pairs:
        return ""
    mixes = (res.get("mix") or {}).get("arms") or {}
    head = ["source"] + [h for arm in arms for h in (f"{arm} BPB", f"{arm} share of tokens")] + \
        ["ahead", "gap", f"p ({res['significance']})", "significant"]
    rows = []
    for src, ps in pairs.items():
        cells = [html.escape(src)]
        for arm, r in arms.items():
            stat = r["per_source"][src]
            share = ""
            if arm in mixes:
                total = sum(mixes[arm]["sources"].values()) or 1
                share = f"{mixes[arm]['sources'].get(src, 0) / total:.1%}"
            cells += [f"{stat['mean']:.4f} ± {stat['std']:.4f}", share]
        best = ps[0] if ps else None
        cells += [html.escape(best["a"]), f"{abs(best['diff']):.4f}", f"{best['p_value']:.2g}",
                  "yes" if best["significant"] else "no"] if best else ["", "", "", ""]
        rows.append(cells)
    return (f"<h4>Held-out BPB per source</h4><p>BPB on each source's part of {html.escape(res['metric_set'])} "
            "(lower is better), mean ± std over seeds, beside the share of each arm's training tokens that "
            "source holds: an arm that trains on less of a source is expected to score worse on it.</p>"
            + _table(head, rows))


TASK_COLUMNS = ("acc", "p_correct", "bpb")  # per arm in the per-task table; every metric is in ablation.json


def _fmt(stat: dict | None) -> str:
    return f"{stat['mean']:.3f} ± {stat['std']:.3f}" if stat else ""


def tasks_html(res: dict) -> str:
    """The task suite per arm: a per-task table (mean ± std over seeds), the macro averages with their
    95% interval over items and seeds, and each macro metric's comparison in words."""
    t = res.get("tasks")
    if not t:
        return ""
    arms = list(t["arms"])
    ahead = ("p_correct", "bpb")  # the metrics that move at this scale: which arm is ahead per task
    head = ["task", "kind", "items", "chance"] + [f"{arm} {m}" for arm in arms for m in TASK_COLUMNS] + \
        [f"ahead on {m} (p)" for m in ahead]
    rows = []
    for task, n in t["items"].items():
        chance = t["chance"].get(task)
        pairs = (t.get("task_pairs") or {}).get(task, {})
        rows.append([html.escape(task), html.escape(t["kinds"][task]), n, f"{chance:.3f}" if chance else ""] +
                    [_fmt(t["arms"][arm]["per_task"][task].get(m)) for arm in arms for m in TASK_COLUMNS] +
                    [f"{html.escape(pairs[m]['a'])} ({pairs[m]['p_value']:.2g}{', significant' if pairs[m]['significant'] else ''})"
                     if m in pairs else "" for m in ahead])
    for m in TASK_COLUMNS:
        cells = []
        for arm in arms:
            mac = t["arms"][arm]["macro"].get(m)
            cells.append(f"<b>{_fmt(mac)}</b> [{mac['ci95'][0]:.3f}, {mac['ci95'][1]:.3f}]" if mac else "")
        rows.append([f"<b>macro {m}</b>", "", "", ""] + [c if col == m else "" for c in cells for col in TASK_COLUMNS]
                    + [""] * len(ahead))
    parts = [f"<h4>Downstream tasks</h4><p>Suite {html.escape(str(t['suite']))} ({html.escape(t['format'])} prompts, "
             f"at most {t['items_cap'] or 'every'} items a task), scored at the end of every run; mean ± std over "
             "seeds; macro rows add the 95% interval over items and seeds. acc and p_correct: higher is "
             "better; bpb (of the gold continuation): lower is better. Near-chance accuracy is expected of a "
             "tiny proxy: p_correct and bpb are the figures that move.</p>", _table(head, rows)]
    rows = [[html.escape(m), html.escape(p["a"]), html.escape(p["b"]), f"{p['diff']:+.4f}", f"{p['gap_over_std']:.1f}",
             f"{p['p_value']:.2g}", "yes" if p["significant"] else "no"]
            for m, pairs in t["pairs"].items() for p in pairs]
    parts.append(_table(["macro metric", "arm a (better)", "arm b", "a − b", "|gap| / seed std",
                         f"p ({res['significance']})", "significant"], rows))
    parts += [f"<p><b>Verdict, macro {html.escape(m)}.</b> {html.escape(p['verdict'])}</p>"
              for m, pairs in t["pairs"].items() if m in TASK_COLUMNS for p in pairs]
    return "".join(parts)


def suite_html(result: dict) -> str:
    """One model's suite scores (downstream.score_suite): per task and macro, mean [95% interval over items]."""
    def cell(stat):
        return f"{stat['mean']:.3f} [{stat['ci95'][0]:.3f}, {stat['ci95'][1]:.3f}]" if stat and stat.get("mean") is not None else ""

    rows = [[html.escape(name), html.escape(t["kind"]), t["items"], f"{t['chance']:.3f}" if t.get("chance") else ""] +
            [cell(t["metrics"].get(m)) for m in TASK_COLUMNS] for name, t in result["tasks"].items()]
    rows.append([f"<b>macro ({html.escape(str(result['suite']))})</b>", "", "", ""] +
                [cell(result["macro"].get(m)) for m in TASK_COLUMNS])
    return (f"<h4>Downstream tasks</h4><p>{html.escape(result['format'])} prompts, context {result['context']}, "
            f"{result['cpu_seconds']} CPU s.</p>" + _table(["task", "kind", "items", "chance", *TASK_COLUMNS], rows))


def contamination_html(res: dict) -> str:
    """A warning per arm whose training data holds task-suite items (ablate._contamination)."""
    found = res.get("contamination") or {}
    parts = []
    for arm, r in found.items():
        if r.get("flagged"):
            items = ", ".join(f"{html.escape(t)} {n}" for t, n in r["items"].items())
            ex = "; ".join(f"{html.escape(e['task'])} {html.escape(e['item'])} in {html.escape(str(e['doc_id']))}"
                           for e in r["examples"][:3])
            parts.append(f"<p style='color:#b00'><b>Contamination: {html.escape(arm)}</b>'s training data holds "
                         f"task-suite items in {r['contaminated_documents']} of {r['documents']} documents "
                         f"(items per task: {items}; e.g. {ex}). Its task scores are not clean.</p>")
        elif r.get("skipped"):
            parts.append(f"<p>Contamination check of {html.escape(arm)} skipped: {html.escape(r['skipped'])}</p>")
    if found and not parts:
        parts.append(f"<p>Contamination: no arm's training data holds task-suite items ({len(found)} arms checked, "
                     f"{found[next(iter(found))].get('ngram')}-token windows).</p>")
    return "".join(parts)


def report_summary(run_dir) -> list[str]:
    """The summary's lines for each ablation under `run_dir`: the arms ranked, which arm won on the
    decision metric and by how much (the verdict in words, with the mix caution where the arms' mixes
    differ), the task suite's verdicts, and contaminated arms."""
    lines = []
    for root in _ablations(storage.as_path(run_dir)):
        res = json.loads((root / ABLATION).read_text())
        ranked = sorted(res["arms"].items(), key=lambda kv: kv[1]["mean"])
        head = (f"<b>Ablation {html.escape(res['name'])}</b> ({len(res['arms'])} arms × {len(res['seeds'])} seeds, "
                f"{res['tokens']:,} tokens a run), held-out BPB on {html.escape(res['metric_set'])}, lower is "
                "better: " + " < ".join(f"{html.escape(a)} {r['mean']:.3f}" for a, r in ranked) + ".")
        if res["pairs"]:
            best = res["pairs"][0]
            head += (f" <b>Verdict:</b> {html.escape(verdict(best, res['arms'], res['alpha'], res['significance']))}"
                     f"{html.escape(mix_caution(res, best))}")
        lines.append(head)
        if res.get("verdicts"):
            lines.append("<b>In short:</b> " + html.escape("; ".join(v["words"] for v in res["verdicts"])) + ".")
        if res.get("router"):
            from .routing import describe

            lines.append("Router: " + html.escape(" ".join(describe(a, h) for a, h in res["router"].items())))
        tasks = res.get("tasks") or {}
        for metric in ("p_correct", "bpb"):
            for pair in (tasks.get("pairs") or {}).get(metric, [])[:1]:
                lines.append(f"Task suite, macro {html.escape(metric)}: {html.escape(pair['verdict'])}")
        dirty = [arm for arm, r in (res.get("contamination") or {}).items() if r.get("flagged")]
        if dirty:
            lines.append(f"<b>Contamination:</b> {html.escape(', '.join(dirty))} train on "
                         "text holding task-suite items; their task scores are not clean.")
    return lines


def report_section(run_dir) -> str | None:
    root = storage.as_path(run_dir)  # a folder or a URL (pipeline/storage.py)
    runs, abls = _runs(root), _ablations(root)
    if not runs and not abls:
        return None
    return "<h2>Training and ablations</h2>" + "".join(ablation_html(a) for a in abls) + "".join(
        _run_html(r) for r in runs)


def write_run_report(run_dir: Path) -> Path:
    """A standalone page for one training run or ablation directory (`assay report` needs stages)."""
    from assay.pipeline.report import plain_text_figures

    run_dir = storage.as_path(run_dir)
    plain_text_figures()
    summary = report_summary(run_dir)
    body = ("<section id='summary'><h2>Summary</h2><ul class='summary'>" + "".join(f"<li>{x}</li>" for x in summary)
            + "</ul></section>" if summary else "") + (report_section(run_dir) or "<p>No training runs found.</p>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Assay training: {html.escape(run_dir.name)}"
            f"</title><style>{CSS}</style></head><body><h1>Assay training: {html.escape(run_dir.name)}</h1>"
            f"{body}</body></html>")
    target = run_dir / "report.html"
    atomic_write_text(target, page)
    return target
