"""Report section for built mixtures: target vs realized shares per stage, epochs, masks, waste.

Reads only manifests (`mix.pack` stages directly in the run directory, or in a mixture directory
one level down, e.g. runs/demo/mix-step35/), never the shards.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from assay.pipeline.dataset import MANIFEST


def _packed(run_dir: Path) -> list[tuple[str, dict]]:
    found = []
    for pattern in (f"*/{MANIFEST}", f"*/*/{MANIFEST}"):
        for path in sorted(Path(run_dir).glob(pattern)):
            manifest = json.loads(path.read_text())
            if manifest.get("stage") == "mix.pack":
                found.append((str(path.parent.relative_to(run_dir)), manifest))
    return sorted(found, key=lambda item: item[1].get("started_at", ""))


def _plot(stages: list[tuple[str, dict]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from assay.pipeline.report import img

    fig, axes = plt.subplots(1, len(stages), figsize=(min(4 * len(stages), 14), 3.4), squeeze=False)
    for ax, (name, manifest) in zip(axes[0], stages):
        slots = manifest["mix"]["slots"]
        labels = [s["source"] + ("\n(replay)" if s["replay"] else "") for s in slots]
        x = np.arange(len(slots))
        ax.bar(x - 0.2, [s["share"] for s in slots], 0.4, label="target", color="#9ab")
        ax.bar(x + 0.2, [s["realized_share"] for s in slots], 0.4, label="realized", color="#4c72b0")
        ax.set_xticks(x, labels, fontsize=7, rotation=30)
        ax.set_title(name, fontsize=9)
    axes[0][0].set_ylabel("share of tokens")
    axes[0][0].legend(fontsize=7)
    return img(fig, "target and realized token shares per mixture stage")


def report_section(run_dir: Path) -> str | None:
    stages = _packed(Path(run_dir))
    if not stages:
        return None
    rows = []
    for name, manifest in stages:
        mix = manifest["mix"]
        fit, greedy, masks = mix["packing"]["best_fit"], mix["packing"]["greedy"], mix["masks"]
        for slot in mix["slots"]:
            label = slot["source"] + (f" (replay of {slot['origin']})" if slot["replay"] else "")
            rows.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(label)}</td><td>{slot['share']:.2%}</td>"
                        f"<td>{slot['realized_share']:.2%}</td><td>{slot['tokens']:,}</td>"
                        f"<td>{slot['realized_epochs']:.2f}</td><td>{slot['max_epochs']:g}</td></tr>")
        rows.append(f"<tr><td>{html.escape(name)}</td><td colspan=6>seq_len {mix['seq_len']}, {mix['tokens']:,} tokens "
                    f"(target {mix['target_tokens']:,}); loss on {masks['loss_fraction']:.1%}, meta prefix "
                    f"{masks['meta_fraction']:.1%}, role-masked {masks['role_masked_fraction']:.1%}; packing waste "
                    f"best fit {fit['waste_fraction']:.2%} vs greedy {greedy['waste_fraction']:.2%}</td></tr>")
    table = ("<table><tr><th>stage</th><th>source</th><th>target</th><th>realized</th><th>tokens</th>"
             "<th>epochs</th><th>max</th></tr>" + "".join(rows) + "</table>")
    return "<h2>Mixture</h2>" + _plot(stages) + table
