"""`assay train`, `assay eval`, `assay ablate` (click commands; heavy imports happen inside)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from assay.pipeline import storage


@click.command("train")
@click.argument("config")
@click.option("--out", "-o", default=None,  # a folder or a URL: a click.Path would fold s3:// to s3:/
              help="Run directory, or a URL such as s3://bucket/runs/tiny (default runs/train/<config name>); "
                   "an existing run of the same config resumes")
@click.option("--force", is_flag=True, help="Train again even if nothing the run reads changed (or replace another run)")
def train_command(config: str, out: str | None, force: bool) -> None:
    """Train a proxy model from a train config (YAML); resumes from the last checkpoint.

    \b
    Example:
      assay train examples/train/tiny.yaml --out runs/tiny
    """
    from .config import load_train_config
    from .train import train

    cfg = load_train_config(storage.config_file(config, "CONFIG"))
    out = storage.as_path(out) if out else Path("runs") / "train" / cfg.name
    summary = train(cfg, out, log=click.echo, force=force)
    for name, ev in (summary.get("eval") or {}).items():
        click.echo(f"eval {name}: BPB {ev['bpb']} ({ev['tokens']:,} tokens, {ev['bytes']:,} bytes)")
    click.echo(f"run: {out} ({summary['tokens_per_s']:.0f} tokens/s; report {out / 'report.html'})")


@click.command("eval")
@click.argument("checkpoint")  # a .pt file or a run directory; either may be a URL
@click.option("--data", "-d", "data", multiple=True,
              help="Held-out token dataset, as NAME=PATH or PATH (repeatable)")
@click.option("--tasks", "-t", default=None,
              help="Downstream task suite: a name (default, olmes, mc, continuation), a comma list of tasks or "
                   "NAME=PATH entries, or a .yaml/.json suite file")
@click.option("--items", type=int, default=None, help="Items per task at most (0 = every item; default the suite's, else 500)")
@click.option("--format", "fmt", type=click.Choice(["cf", "mcf"]), default="cf",
              help="Task prompts: cloze (cf) or lettered multiple choice (mcf)")
@click.option("--tokenizer", default=None, help="The model's tokenizer file, when the checkpoint carries none")
@click.option("--batch-size", type=int, default=16)
@click.option("--max-rows", type=int, default=None, help="Only the first rows of each set")
@click.option("--no-prefix/--prefix-only", default=True, help="Also score with META prefixes removed")
@click.option("--json", "json_out", default=None, help="Write results here (a file or a URL; - for stdout)")
def eval_command(checkpoint: str, data: tuple[str, ...], tasks: str | None, items: int | None, fmt: str,
                 tokenizer: str | None, batch_size: int, max_rows: int | None, no_prefix: bool,
                 json_out: str | None) -> None:
    """Held-out bits-per-byte (overall and per source) and downstream task scores of a checkpoint (a .pt
    file or a run directory).

    \b
    Examples:
      assay eval runs/tiny --data held_out=runs/train-data/eval
      assay eval runs/tiny --tasks default --json scores.json
    """
    from assay.pipeline.errors import UserError

    from .checkpoint import evaluate_checkpoint

    if not data and tasks is None:
        raise UserError("assay eval: give held-out sets (--data) or a task suite (--tasks), or both")
    results: dict = {}
    sets = {}
    for item in data:
        name, sep, path = item.partition("=")
        sets[name if sep else item.rstrip("/").rsplit("/", 1)[-1]] = path if sep else item
    quiet = json_out == "-"
    say = (lambda m: click.echo(m, err=True)) if quiet else click.echo
    if sets:
        results = evaluate_checkpoint(checkpoint, sets, batch_size=batch_size, max_rows=max_rows, no_prefix=no_prefix)
        for name, ev in results.items():
            per = ", ".join(f"{s} {r['bpb']}" for s, r in ev["per_source"].items())
            extra = f"; prefix removed {ev['no_prefix']['bpb']}" if "no_prefix" in ev else ""
            say(f"{name}: BPB {ev['bpb']} ({per}){extra}")
    if tasks is not None:
        from .downstream import score_checkpoint

        scored = score_checkpoint(checkpoint, tasks, items=items, fmt=fmt, tokenizer=tokenizer)
        for line in suite_lines(scored):
            say(line)
        results = dict(results, tasks=scored) if sets else scored
    if json_out == "-":
        click.echo(json.dumps(results, indent=1))
    elif json_out:
        from assay.pipeline.dataset import atomic_write_text

        atomic_write_text(storage.as_path(json_out), json.dumps(results, indent=1))


def _stat(name: str, stat: dict | None) -> str:
    if not stat or stat.get("mean") is None:
        return ""
    half = (stat["ci95"][1] - stat["ci95"][0]) / 2
    return f"{name} {stat['mean']:.3f} ±{half:.3f}"


def suite_lines(result: dict) -> list[str]:
    """One line per task and one for the macro average: mean ± the half-width of the 95% interval."""
    lines = []
    shown = ("acc", "acc_per_char", "p_correct", "greedy", "bpb")
    for name, t in result["tasks"].items():
        chance = f", chance {t['chance']:.2f}" if t.get("chance") else ""
        cells = "  ".join(x for x in (_stat(m, t["metrics"].get(m)) for m in shown) if x)
        lines.append(f"{name}: {cells}  ({t['items']} items{chance})")
    mac = result["macro"]
    cells = "  ".join(x for x in (_stat(m, mac.get(m)) for m in shown) if x)
    lines.append(f"macro ({result['suite']}, {len(result['tasks'])} tasks): {cells}  "
                 f"[{result['format']}, {result['cpu_seconds']} CPU s]")
    return lines


@click.command("ablate")
@click.argument("spec")
@click.option("--out", "-o", default=None,
              help="Ablation directory, or a URL such as s3://bucket/ablate/x (default runs/ablate/<spec name>); "
                   "reruns resume run by run")
@click.option("--force", is_flag=True, help="Take over an ablation directory that holds another spec's runs")
@click.option("--workers", type=int, default=None, help="Runs trained at once (one thread each); overrides the spec")
def ablate_command(spec: str, out: str | None, force: bool, workers: int | None) -> None:
    """Train one config on several datasets x seeds at one token budget; compare held-out BPB.

    \b
    Example:
      assay ablate examples/train/ablation.yaml --out runs/ablation
    """
    from .ablate import run_ablation
    from .config import load_ablation_spec

    parsed, raw = load_ablation_spec(storage.config_file(spec, "SPEC"))
    if workers:
        parsed.workers = workers
    out = storage.as_path(out) if out else Path("runs") / "ablate" / parsed.name
    res = run_ablation(parsed, raw, out, log=click.echo, force=force)
    for arm, r in sorted(res["arms"].items(), key=lambda kv: kv[1]["mean"]):
        click.echo(f"{arm}: BPB {r['mean']:.4f} ± {r['std']:.4f}")
    for p in res["pairs"]:
        click.echo(f"{p['a']} - {p['b']}: {p['diff']:+.4f} ({p['gap_over_std']}x seed std, "
                   f"{res['significance']} p={p['p_value']:.2g}, {'significant' if p['significant'] else 'not significant'})")
    for metric, pairs in (res.get("tasks") or {}).get("pairs", {}).items():
        if metric in ("p_correct", "bpb", "acc"):
            for p in pairs:
                click.echo(f"tasks, macro {metric}: {p['verdict']}")
    from .routing import describe

    for arm, h in (res.get("router") or {}).items():
        click.echo(f"router, {describe(arm, h)}")
    if res.get("verdicts"):
        click.echo("in short: " + "; ".join(v["words"] for v in res["verdicts"]))
    for arm, r in (res.get("contamination") or {}).items():
        if r.get("flagged"):
            click.echo(f"WARNING contamination: {arm}'s training data holds task-suite items "
                       f"({', '.join(f'{t} {n}' for t, n in r['items'].items())})")
    if "dense_check" in res:
        d = res["dense_check"]
        click.echo(f"dense check {d['a']} vs {d['b']}: {d['mean_a']:.4f} vs {d['mean_b']:.4f} "
                   f"({'agrees' if d['agrees'] else 'DISAGREES'})")
    click.echo(f"results: {out / 'ablation.json'}; report {out / 'report.html'}")
