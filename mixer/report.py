"""Report section for built mixtures: target vs realized shares per stage, epochs, masks, waste.

Reads only manifests: the `mix.pack` stages of a mixture directory that is the run directory or one
level down (e.g. runs/demo/mix-step35/), in the mixture's order; never the shards.
"""
from __future__ import annotations

import html
from pathlib import Path

from assay.pipeline.dataset import MANIFEST, read_json


def _mixtures(run_dir: Path) -> list[tuple[str, list[tuple[str, dict]]]]:
    """(label, [(stage, manifest)]) per mixture directory: the run directory itself or a child of
    it, stages in the order the mixture lists them."""
    found = []
    for root in [run_dir, *sorted(p for p in run_dir.iterdir() if p.is_dir())]:
        run = read_json(root / "_run.json") or {}
        stages = []
        for name in run.get("order", []):
            manifest = read_json(root / name / MANIFEST)
            if manifest and manifest.get("stage") == "mix.pack":
                stages.append((name, manifest))
        if stages:
            found.append((run.get("recipe") or root.name, stages))
    return found


def _shares(mix: dict) -> tuple[list[str], list[float], list[float]]:
    """Per source of the stage's own mix, plus one bar for all replay: target and realized shares."""
    labels, target, realized = [], [], []
    for slot in mix["slots"]:
        key = "replay" if slot["replay"] else slot["source"]
        if key not in labels:
            labels.append(key)
            target.append(0.0)
            realized.append(0.0)
        k = labels.index(key)
        target[k] += slot["share"]
        realized[k] += slot["realized_share"]
    return labels, target, realized


def _plot(name: str, stages: list[tuple[str, dict]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from assay.pipeline.report import img

    fig, axes = plt.subplots(1, len(stages), figsize=(min(2.6 * len(stages) + 1, 14), 3.2), squeeze=False, sharey=True)
    for ax, (stage, manifest) in zip(axes[0], stages):
        labels, target, realized = _shares(manifest["mix"])
        x = np.arange(len(labels))
        ax.bar(x - 0.2, target, 0.4, label="target", color="#9ab")
        ax.bar(x + 0.2, realized, 0.4, label="realized", color="#4c72b0")
        ax.set_xticks(x, labels, fontsize=7, rotation=30)
        ax.set_title(f"{stage} ({manifest['mix']['seq_len']})", fontsize=9)
    axes[0][0].set_ylabel("share of tokens")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(name, fontsize=10)
    fig.tight_layout()
    return img(fig, f"{name}: target and realized token shares per stage")


def report_section(run_dir: Path) -> str | None:
    mixtures = _mixtures(Path(run_dir))
    if not mixtures:
        return None
    parts = ["<h2>Mixtures</h2>"]
    for name, stages in mixtures:
        rows = []
        for stage, manifest in stages:
            mix = manifest["mix"]
            fit, greedy, masks = mix["packing"]["best_fit"], mix["packing"]["greedy"], mix["masks"]
            for slot in mix["slots"]:
                label = slot["source"] + (f" (replay of {slot['origin']})" if slot["replay"] else "")
                rows.append(f"<tr><td>{html.escape(stage)}</td><td>{html.escape(label)}</td><td>{slot['share']:.2%}</td>"
                            f"<td>{slot['realized_share']:.2%}</td><td>{slot['tokens']:,}</td>"
                            f"<td>{slot['realized_epochs']:.2f}</td><td>{slot['max_epochs']:g}</td></tr>")
            rows.append(f"<tr><td>{html.escape(stage)}</td><td colspan=6>seq_len {mix['seq_len']}, {mix['tokens']:,} tokens "
                        f"(target {mix['target_tokens']:,}); loss on {masks['loss_fraction']:.1%}, meta prefix "
                        f"{masks['meta_fraction']:.1%}, role-masked {masks['role_masked_fraction']:.1%}; packing waste "
                        f"best fit {fit['waste_fraction']:.2%} vs greedy {greedy['waste_fraction']:.2%}"
                        + (f"; {fit['cut_tokens']:,} tokens of long documents cut where a share ended "
                           f"({fit['cut_fraction']:.1%})" if fit.get("cut_tokens") else "") + "</td></tr>")
        parts.append(f"<h3>{html.escape(name)}</h3>" + _plot(name, stages)
                     + "<table><tr><th>stage</th><th>source</th><th>target</th><th>realized</th><th>tokens</th>"
                     "<th>epochs</th><th>max</th></tr>" + "".join(rows) + "</table>")
    return "".join(parts)
