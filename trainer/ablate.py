"""`assay ablate SPEC`: the same train config on several token datasets (arms) x seeds at one budget.

Reports mean ± std held-out BPB per arm (final evaluation, overall BPB of `metric_set`), every pairwise
difference with a p-value (Welch t-test by default; a paired t-test, since run i of every arm starts from
seed i's weights; or a seed bootstrap) and the gap in units of the seed standard deviation (unpaired,
and of the per-seed differences), plots, and a dense re-run (num_experts=1) of the two best arms: if their order flips without
routing, the MoE result is about routing, not data. Per held-out source, the arms are compared the
same way, and each arm's source and domain mix is checked against the others' (mixcheck.py): a gap
between arms that train on different mixes is flagged, and `match_mix` trains an arm on another's.

An ablation is a small DAG: each arm x seed is a training-run stage of the one runner (OUT/runs/NAME),
so a rerun skips the runs whose data and config are unchanged, resumes a killed one, and retrains
exactly the runs whose arm's data changed; the comparison is then computed again from the runs'
summaries (OUT/ablation.json, plots and report). OUT's `_run.json` is the same run log a pipeline
workdir has.
"""
from __future__ import annotations

import copy
import itertools
import json
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

import numpy as np

from assay.pipeline import storage
from assay.pipeline.dataset import atomic_write_bytes, atomic_write_text

from .config import AblationSpec, ConfigError, parse_train_config
from .mixcheck import arm_mix, match_mix, mix_differences
from .report import ABLATION, write_run_report
from .train import read_metrics


def welch_p(a: list[float], b: list[float]) -> float:
    """Two-sided Welch t-test p-value (unequal variances)."""
    from scipy import stats

    if np.std(a, ddof=1) == 0 and np.std(b, ddof=1) == 0:
        return 0.0 if np.mean(a) != np.mean(b) else 1.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def bootstrap_p(a: list[float], b: list[float], n: int = 10_000, seed: int = 0) -> float:
    """Two-sided bootstrap p-value of mean(a) - mean(b) != 0, resampling seeds within each arm."""
    rng = np.random.default_rng(seed)
    da = rng.choice(a, (n, len(a))).mean(1) - rng.choice(b, (n, len(b))).mean(1)
    tail = min((da <= 0).mean(), (da >= 0).mean())
    return float(min(1.0, 2 * tail))


def paired_p(a: list[float], b: list[float]) -> float:
    """Two-sided paired t-test over seeds: run i of every arm shares seed i (the same initial weights)."""
    from scipy import stats

    d = np.subtract(a, b)
    if np.std(d, ddof=1) == 0:
        return 0.0 if d.mean() != 0 else 1.0
    return float(stats.ttest_rel(a, b).pvalue)


def ci95(a: list[float], b: list[float], method: str) -> tuple[float, float] | None:
    """95% confidence interval of mean(a) - mean(b): over the per-seed differences (paired), with
    Welch's degrees of freedom, or the seed bootstrap's percentiles; None with one seed."""
    from scipy import stats

    if min(len(a), len(b)) < 2:
        return None
    if method == "bootstrap":
        rng = np.random.default_rng(0)
        d = rng.choice(a, (10_000, len(a))).mean(1) - rng.choice(b, (10_000, len(b))).mean(1)
        return float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))
    if method == "paired":
        d = np.subtract(a, b)
        se, dof = np.std(d, ddof=1) / math.sqrt(len(d)), len(d) - 1
    else:
        va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
        se = math.sqrt(va + vb)
        dof = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) or 1e-300)
    half = float(stats.t.ppf(0.975, dof) * se)
    diff = float(np.mean(a) - np.mean(b))
    return diff - half, diff + half


def compare(values: dict[str, list[float]], method: str, alpha: float, higher_is_better: bool = False) -> list[dict]:
    """Every pair of arms, best first: the gap, seed noise measured two ways, p-values, the call. Arm
    `a` is the better of the two (the lower mean, or the higher with `higher_is_better`); `diff` and
    `ci95` are of mean(a) - mean(b)."""
    pairs = []
    order = sorted(values, key=lambda k: np.mean(values[k]), reverse=higher_is_better)
    for a, b in itertools.combinations(order, 2):
        va, vb = values[a], values[b]
        diff = float(np.mean(va) - np.mean(vb))
        n = min(len(va), len(vb))
        pooled = math.sqrt((np.var(va, ddof=1) + np.var(vb, ddof=1)) / 2) if n > 1 else 0.0
        diff_std = float(np.std(np.subtract(va, vb), ddof=1)) if n > 1 else 0.0
        p = {"welch": welch_p, "paired": paired_p, "bootstrap": bootstrap_p}[method](va, vb)
        pairs.append({"a": a, "b": b, "diff": round(diff, 5), "seed_std": round(pooled, 5),
                      "gap_over_std": round(abs(diff) / pooled, 2) if pooled else float("inf"),
                      "paired_diff_std": round(diff_std, 5),
                      "gap_over_paired_std": round(abs(diff) / diff_std, 2) if diff_std else float("inf"),
                      "p_value": p, "welch_p": welch_p(va, vb) if n > 1 else None,
                      "ci95": ci95(va, vb, method), "n": n, "significant": bool(p < alpha)})
    return pairs


def _metric(summary: dict, set_name: str) -> float:
    return summary["eval"][set_name]["bpb"]


def _train_one(raw: dict, config_path: str, run_dir: str, owner: str, replace: bool) -> dict:
    """One arm x seed run (in a worker process when the spec asks for workers)."""
    from .stage import run_training

    cfg = parse_train_config(raw, config_path, Path(config_path).parent)
    return run_training(cfg, storage.as_path(run_dir), log=lambda m: None, report=False, owner=owner, replace=replace)


def run_ablation(spec: AblationSpec, raw_config: dict, out: str | Path, log: Callable[[str], None] = print,
                 force: bool = False) -> dict:
    from assay.pipeline.runner import RUN_LOG, check_workdir

    out = storage.as_path(out)  # a folder or a URL: runs, plots and results go through pipeline/storage
    owner = f"ablation {spec.name}"
    check_workdir(out, [], owner=owner, replace=force)
    storage.makedirs(out)
    run_log = {"recipe": owner, "kind": "ablation", "order": [], "stages": {}}
    atomic_write_text(out / RUN_LOG, json.dumps(run_log, indent=2))  # first: marks OUT as Assay's

    arms, mixes, matched = _mixes(spec, out, log)

    def raw_for(arm: str, seed: int, dense: bool) -> dict:
        raw = copy.deepcopy(raw_config)
        raw["name"] = f"{arm}-s{seed}" + ("-dense" if dense else "")
        raw["seed"] = seed
        raw.setdefault("data", {})["train"] = arms[arm]
        if spec.tokens:
            raw["tokens"] = spec.tokens
        ev = spec.eval
        if ev is not None and ev.sets is not None:
            raw.setdefault("eval", {})["sets"] = dict(ev.sets)
        if ev is not None and ev.tasks is not None:
            raw.setdefault("eval", {})["tasks"] = ev.tasks
        for key in ("task_items", "task_format"):
            if ev is not None and getattr(ev, key) is not None:
                raw.setdefault("eval", {})[key] = getattr(ev, key)
        if dense:
            raw.setdefault("moe", {})["num_experts"] = 1
            raw.get("eval", {}).pop("tasks", None)  # a routing check on held-out BPB; the suite is compared on the arms
        if spec.workers > 1:
            raw["threads"] = 1  # one core per run: parallel runs instead of contended threads
        return raw

    first = parse_train_config(raw_for(next(iter(spec.arms)), spec.seeds[0], False), spec.config,
                               Path(spec.config).parent)
    metric_set = spec.metric_set or next(iter(first.eval.sets), None)
    if metric_set is None:
        raise_no_eval()
    if metric_set not in first.eval.sets:
        raise ConfigError(f"metric_set {metric_set!r}: not one of the eval sets ({', '.join(first.eval.sets)})")
    contamination = _contamination(spec, arms, first, log)

    def run_all(jobs: list[tuple[str, int, bool]]) -> dict[tuple[str, int, bool], dict]:
        args = {job: (raw_for(*job), spec.config, str(out / "runs" / raw_for(*job)["name"]), owner, force)
                for job in jobs}
        run_log["order"] += [f"runs/{raw_for(*job)['name']}" for job in jobs]
        done: dict[tuple[str, int, bool], dict] = {}
        if spec.workers > 1:
            ctx = multiprocessing.get_context("spawn")  # torch and fork do not mix
            with ProcessPoolExecutor(spec.workers, mp_context=ctx) as pool:
                futures = {pool.submit(_train_one, *a): job for job, a in args.items()}
                for fut in as_completed(futures):
                    done[futures[fut]] = fut.result()
                    _log_run(log, done[futures[fut]], metric_set)
        else:
            for job, a in args.items():
                done[job] = _train_one(*a)
                _log_run(log, done[job], metric_set)
        return done

    log(f"{len(spec.arms)} arms x {len(spec.seeds)} seeds, {spec.workers} worker(s)")
    runs = run_all([(arm, s, False) for arm in spec.arms for s in spec.seeds])
    summaries = {arm: [runs[(arm, s, False)] for s in spec.seeds] for arm in spec.arms}
    values = {arm: [_metric(s, metric_set) for s in arm_runs] for arm, arm_runs in summaries.items()}
    result = {
        "name": spec.name, "tokens": summaries[next(iter(spec.arms))][0]["tokens"], "seeds": spec.seeds,
        "metric_set": metric_set, "significance": spec.significance, "alpha": spec.alpha,
        "arms": {arm: {"mean": round(float(np.mean(v)), 5),
                       "std": round(float(np.std(v, ddof=1)), 5) if len(v) > 1 else 0.0,
                       "values": v, "per_source": _per_source(summaries[arm], metric_set),
                       "tokens_per_s": round(float(np.mean([s["tokens_per_s"] for s in summaries[arm]])), 1)}
                 for arm, v in values.items()},
        "pairs": compare(values, spec.significance, spec.alpha),
    }
    result["source_pairs"] = _source_pairs(result["arms"], spec.significance, spec.alpha)
    result["mix"] = {"arms": mixes, "tolerance": spec.mix_tolerance.model_dump(), "matched": matched,
                     "differences": mix_differences(mixes, spec.mix_tolerance)}
    for d in result["mix"]["differences"]:
        log(f"WARNING mix: {d['message']}")
    if first.eval.tasks is not None:
        result["tasks"] = task_comparison(summaries, spec.significance, spec.alpha)
    if contamination is not None:
        result["contamination"] = contamination
    router = _router(out, spec, raw_for)
    if router:
        result["router"] = router
    result["verdicts"] = verdicts(result)
    if spec.dense_check:
        best, second = sorted(values, key=lambda k: np.mean(values[k]))[:2]
        seeds = spec.dense_seeds or spec.seeds
        log(f"dense check: {best} vs {second}, {len(seeds)} seed(s)")
        dense_runs = run_all([(arm, s, True) for arm in (best, second) for s in seeds])
        dense = {arm: [_metric(dense_runs[(arm, s, True)], metric_set) for s in seeds] for arm in (best, second)}
        result["dense_check"] = {"a": best, "b": second, "seeds": seeds, "values_a": dense[best],
                                 "values_b": dense[second], "mean_a": round(float(np.mean(dense[best])), 5),
                                 "mean_b": round(float(np.mean(dense[second])), 5),
                                 "agrees": bool(np.mean(dense[best]) < np.mean(dense[second]))}
    _plots(out, result, summaries)
    atomic_write_text(out / ABLATION, json.dumps(result, indent=1))
    atomic_write_text(out / RUN_LOG, json.dumps(run_log, indent=2))
    write_run_report(out)
    return result


def task_comparison(summaries: dict[str, list[dict]], method: str, alpha: float) -> dict:
    """Per arm, the task suite's figures over seeds (downstream.across_seeds), and for every macro
    metric the pairs of arms compared as BPB is (`compare`: p-value, CI, gap over seed std) with the
    call in words."""
    from .downstream import LOWER_IS_BETTER, across_seeds
    from .report import verdict

    arms = {arm: across_seeds([s["tasks"] for s in runs]) for arm, runs in summaries.items()}
    first = next(iter(summaries.values()))[0]["tasks"]
    pairs = {}
    for metric in first["macro"]:
        values = {arm: r["macro"][metric]["values"] for arm, r in arms.items()}
        lower = metric in LOWER_IS_BETTER
        stats = {arm: r["macro"][metric] for arm, r in arms.items()}
        pairs[metric] = [dict(p, verdict=verdict(p, stats, alpha, method, f"in macro {metric}", "over the task suite",
                                                  "", lower_is_better=lower))
                         for p in compare(values, method, alpha, higher_is_better=not lower)]
    per_task = {}  # per task, which arm is ahead on the two continuous metrics, over seeds
    for task in first["tasks"]:
        for metric in ("p_correct", "bpb"):
            values = {arm: r["per_task"][task][metric]["values"] for arm, r in arms.items()
                      if metric in r["per_task"].get(task, {})}
            if len(values) == len(arms):
                best = compare(values, method, alpha, higher_is_better=metric not in LOWER_IS_BETTER)[0]
                per_task.setdefault(task, {})[metric] = {k: best[k] for k in ("a", "b", "diff", "p_value", "significant")}
    return {"suite": first["suite"], "format": first["format"], "items_cap": first["items_cap"],
            "task_pairs": per_task,
            "items": {t: e["items"] for t, e in first["tasks"].items()},
            "chance": {t: e["chance"] for t, e in first["tasks"].items()},
            "kinds": {t: e["kind"] for t, e in first["tasks"].items()},
            "arms": arms, "pairs": pairs}


def verdicts(result: dict) -> list[dict]:
    """The call on every decision metric in a few words (report.short_verdict): held-out BPB, then the
    task suite's continuous macro metrics, each its best pair."""
    from .report import short_verdict

    held = "held-out BPB" + ("" if result["metric_set"] == "held_out" else f" ({result['metric_set']})")
    out = [{"metric": held, "pair": result["pairs"][0]}] if result["pairs"] else []
    for metric in ("p_correct", "bpb", "acc"):
        pairs = ((result.get("tasks") or {}).get("pairs") or {}).get(metric)
        if pairs:
            out.append({"metric": f"tasks macro {metric}", "pair": pairs[0]})
    return [{"metric": v["metric"], "a": v["pair"]["a"], "b": v["pair"]["b"], "p_value": v["pair"]["p_value"],
             "significant": v["pair"]["significant"], "words": short_verdict(v["pair"], v["metric"])} for v in out]


def _router(out: Path, spec: AblationSpec, raw_for: Callable) -> dict:
    """Per arm, the router health of its MoE runs (routing.py) from their telemetry; {} for a dense config."""
    from .routing import arm_health, run_health

    found = {}
    for arm in spec.arms:
        per_seed = {s: run_health(read_metrics(out / "runs" / raw_for(arm, s, False)["name"])) for s in spec.seeds}
        if all(h for h in per_seed.values()):
            found[arm] = arm_health(per_seed)
    return found


def _contamination(spec: AblationSpec, arms: dict[str, str], cfg, log: Callable[[str], None]) -> dict | None:
    """Check every arm's training data for the suite's items (contamination.py); refuse when the spec
    says so."""
    if cfg.eval.tasks is None or spec.contamination == "off":
        return None
    from assay.pipeline.errors import UserError

    from .contamination import check
    from .tasks import load_suite

    suite = load_suite(cfg.eval.tasks, cfg.eval.task_items)
    out = {}
    for arm, path in arms.items():
        try:
            out[arm] = check(path, suite)
        except UserError as exc:
            out[arm] = {"flagged": None, "skipped": str(exc)}
            log(f"contamination check of {arm} skipped: {exc}")
            continue
        r = out[arm]
        if r["flagged"]:
            found = ", ".join(f"{t} {n}" for t, n in r["items"].items())
            log(f"WARNING {arm}: {r['contaminated_documents']} training documents hold task-suite items ({found})")
    bad = {arm: r for arm, r in out.items() if r.get("flagged")}
    if bad and spec.contamination == "refuse":
        arm, r = next(iter(bad.items()))
        ex = r["examples"][0]
        raise ConfigError(f"arm {arm}: {r['contaminated_documents']} training documents hold task-suite items "
                          f"(e.g. {ex['task']} {ex['item']} in {ex['doc_id']}); decontaminate the data "
                          "(`assay decontam`) or set contamination: flag")
    return out


def _log_run(log: Callable[[str], None], summary: dict, metric_set: str) -> None:
    log(f"  {summary['name']}: BPB {_metric(summary, metric_set):.4f} ({summary['tokens_per_s']:.0f} tokens/s)")


def raise_no_eval():
    raise ConfigError("an ablation needs held-out eval sets (spec `eval` or the config's eval.sets)")


def _per_source(summaries: list[dict], set_name: str) -> dict:
    out: dict[str, dict] = {}
    for src in summaries[0]["eval"][set_name]["per_source"]:
        v = [s["eval"][set_name]["per_source"][src]["bpb"] for s in summaries]
        if all(x is not None for x in v):
            out[src] = {"mean": round(float(np.mean(v)), 5),
                        "std": round(float(np.std(v, ddof=1)), 5) if len(v) > 1 else 0.0, "values": v}
    return out


def _source_pairs(arms: dict[str, dict], method: str, alpha: float) -> dict[str, list[dict]]:
    """Per held-out source every arm scored, the arms compared on that source's BPB as on the whole set."""
    common = set.intersection(*(set(r["per_source"]) for r in arms.values()))
    return {src: compare({arm: r["per_source"][src]["values"] for arm, r in arms.items()}, method, alpha)
            for src in sorted(common)}


def _mixes(spec: AblationSpec, out: Path, log: Callable[[str], None]) -> tuple[dict[str, str], dict, dict]:
    """Each arm's training data (a `match_mix` arm: its resample, written under OUT/matched/), what it
    trains on by source and domain, and what each matched arm was matched to."""
    arms = dict(spec.arms)
    mixes = {arm: arm_mix(path) for arm, path in arms.items()}
    matched = {}
    for arm, ref in spec.match_mix.items():
        log(f"match_mix: resampling {arm} to {ref}'s source shares")
        arms[arm] = str(match_mix(spec.arms[arm], mixes[ref], out / "matched" / arm))
        before, mixes[arm] = mixes[arm]["tokens"], arm_mix(arms[arm])
        matched[arm] = {"to": ref, "path": arms[arm], "tokens_before": before, "tokens": mixes[arm]["tokens"]}
    return arms, mixes, matched


def _plots(out: Path, result: dict, summaries: dict[str, list[dict]]) -> None:
    from assay.pipeline.report import plain_text_figures

    plain_text_figures()
    import matplotlib.pyplot as plt

    arms = sorted(result["arms"], key=lambda a: result["arms"][a]["mean"])
    fig, ax = plt.subplots(figsize=(max(4, 1.4 * len(arms)), 3.4))
    means = [result["arms"][a]["mean"] for a in arms]
    ax.bar(arms, means, yerr=[result["arms"][a]["std"] for a in arms], color="#4c78a8", capsize=4, alpha=0.8)
    for i, a in enumerate(arms):
        ax.scatter([i] * len(result["arms"][a]["values"]), result["arms"][a]["values"], color="k", s=10, zorder=3)
    lo, hi = min(min(result["arms"][a]["values"]) for a in arms), max(max(result["arms"][a]["values"]) for a in arms)
    ax.set_ylim(lo - 0.5 * (hi - lo + 1e-3), hi + 0.5 * (hi - lo + 1e-3))
    ax.set(ylabel=f"BPB on {result['metric_set']}", title="held-out BPB per arm (mean ± std, seeds as dots)")
    fig.tight_layout()
    _save_figure(fig, out / "bpb.png")
    from .report import curves_figure

    streams = {}
    for arm, runs in summaries.items():
        recs = read_metrics(out / "runs" / f"{arm}-s{result['seeds'][0]}")
        streams[f"{arm} (seed {result['seeds'][0]})"] = recs
    _save_figure(curves_figure(streams), out / "curves.png")


def _save_figure(fig, path) -> None:
    """A PNG written whole (one PUT on a store, a rename on disk), tidied as the report's figures are."""
    from assay.pipeline import report

    if fig is not None:
        atomic_write_bytes(path, report.png_bytes(fig))
