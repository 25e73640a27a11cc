"""The report a user reads first (issue #46): it opens with a summary (what ran, what was removed and
why, which ablation arm won and by how much, in words), and its figures are readable: no one-point
"curves", no clipped titles, no tick labels that run into each other; in headless Chromium the summary
is the first thing on the page and no figure is shrunk or cut off."""
from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

PROSE = ("The river rose slowly through the night and by morning the lower fields were under water. "
         "Farmers moved their animals to the ridge and waited for the rain to stop. ")
WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()
ARMS = ("curated-top-three-quality-tiers", "raw-extraction-output-as-it-comes")  # long names: the charts' test


def _docs(n: int, source: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"doc_id": f"{source}-{seed}-{i}", "source": source, "content_type": "web",
             "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "."} for i in range(n)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A pipeline run (12 documents read, 3 too short, 2 exact duplicates) with an ablation in it."""
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe
    from assay.trainer.ablate import run_ablation
    from assay.trainer.bytes import write_byte_dataset
    from assay.trainer.config import load_ablation_spec

    root = tmp_path_factory.mktemp("summary")
    texts = [PROSE * 2 + f"Entry {i}." for i in range(7)] + [PROSE * 2 + "Entry 0.", PROSE * 2 + "Entry 1."]
    texts += ["tiny", "small", "short one"]
    (root / "web.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (root / "r.yaml").write_text("""
name: summary
inputs:
  web: {uses: read.jsonl, params: {paths: [web.jsonl], source: web}}
stages:
  - {id: length-filter-with-a-long-stage-name, uses: filter.length, inputs: [web], params: {min_chars: 50, min_words: 1}}
  - {id: exact, uses: dedup.exact, inputs: [length-filter-with-a-long-stage-name], params: {remove: true}}
""")
    work = root / "w"
    run_recipe(load_recipe(root / "r.yaml"), workdir=work, options={"workers": 1}, log=lambda *_: None)
    data = {ARMS[0]: write_byte_dataset(_docs(40, "web", 0), root / "a", seq_len=65),
            ARMS[1]: write_byte_dataset(_docs(40, "web", 1), root / "b", seq_len=65)}
    held = write_byte_dataset(_docs(8, "web", 2), root / "held", seq_len=65)
    cfg = {"name": "m", "seed": 0, "tokens": 4 * 4 * 64, "threads": 1,
           "model": {"d_model": 32, "n_layers": 1, "n_heads": 4}, "moe": {"num_experts": 1, "expert_hidden": 32},
           "data": {"train": str(data[ARMS[0]]), "batch_size": 4}, "log": {"every": 1}}
    (root / "cfg.json").write_text(json.dumps(cfg))
    (root / "spec.yaml").write_text("name: s\nconfig: cfg.json\narms: {" + ", ".join(f"{k}: {v}" for k, v in data.items())
                                    + f"}}\nseeds: [0, 1]\ndense_check: false\neval: {{held: {held}}}\n")
    spec, raw = load_ablation_spec(root / "spec.yaml")
    res = run_ablation(spec, raw, work / "ablation", log=lambda m: None)
    return work, res


def test_the_report_opens_with_what_ran_what_was_removed_and_who_won(run, tmp_path):
    import lxml.html

    from assay.pipeline.report import write_report
    from assay.trainer.report import verdict

    work, res = run
    page = write_report(work, tmp_path / "report.html").read_text()
    body = lxml.html.fromstring(page).body
    first = body.find(".//section")
    assert first.get("id") == "summary" and first.find("h2").text_content() == "Summary"
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Funnel</h2>")
    text = " ".join(first.text_content().split())
    assert "3 stages: read 12 documents" in text and "from 1 source;" in text
    assert "the final outputs (exact) hold 7 rows" in text
    assert "Removed 5 rows" in text and "too_short 3 (" in text and "in length-filter-with-a-long-stage-name)" in text
    assert text.index("too_short 3") < text.index("exact-duplicate 2")  # the largest reason first
    best = res["pairs"][0]
    assert "Ablation s (2 arms × 2 seeds" in text
    assert " ".join(verdict(best, res["arms"], res["alpha"], res["significance"]).split()) in text
    # the ablation's own page opens with the same verdict
    own = lxml.html.fromstring((work / "ablation" / "report.html").read_text()).body.find(".//section")
    assert own.get("id") == "summary" and "Verdict:" in own.text_content()


def text_problems(fig) -> list[str]:
    """What makes a drawn figure hard to read: overlapping text (tick labels, titles:
    test_report_arithmetic.overlapping_text), text cut off at the figure's edge, and lines of one point
    drawn without a marker (invisible, or a "curve" of one point)."""
    import math

    from test_report_arithmetic import overlapping_text

    # titles against titles and axis text as that test checks them; tick labels below, slant included
    problems = [p for p in overlapping_text(fig) if not p.startswith("tick labels")]
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox

    def shown(labels, lim, coord):  # matplotlib also lays out labels for ticks beyond the limits, never drawn
        lo, hi = sorted(lim)
        return [t for t in labels if t.get_visible() and t.get_text() and lo - 1e-9 <= t.get_position()[coord] <= hi + 1e-9]

    for ax in fig.axes:
        for coord, labels in ((0, shown(ax.get_xticklabels(), ax.get_xlim(), 0)),
                              (1, shown(ax.get_yticklabels(), ax.get_ylim(), 1))):
            boxes = sorted(((t.get_window_extent(renderer), t) for t in labels),
                           key=lambda bt, coord=coord: bt[0].y0 if coord else bt[0].x0)
            for (a, ta), (b, tb) in zip(boxes, boxes[1:]):
                angle = math.radians(ta.get_rotation())
                if angle == 0:
                    apart = not a.padded(1).overlaps(b.padded(1))
                else:  # slanted labels are parallel lines: their distance is the spacing times sin(angle)
                    spacing = abs((b.x0 + b.x1) / 2 - (a.x0 + a.x1) / 2)
                    apart = spacing * math.sin(angle) >= ta.get_fontsize() * fig.dpi / 72
                if not apart:
                    problems.append(f"tick labels {ta.get_text()!r} and {tb.get_text()!r}")

        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *shown(ax.get_xticklabels(), ax.get_xlim(), 0),
                 *shown(ax.get_yticklabels(), ax.get_ylim(), 1)]
        plot = ax.get_window_extent(renderer)
        for t in shown(ax.get_xticklabels(), ax.get_xlim(), 0):  # tick labels lie below the plot, not in it
            if t.get_window_extent(renderer).y1 > plot.y0 + 1:
                problems.append(f"tick label {t.get_text()!r} inside the plot")
        for t in texts:
            if t.get_visible() and t.get_text():
                b = t.get_window_extent(renderer)
                if b.x0 < frame.x0 - 1 or b.x1 > frame.x1 + 1 or b.y0 < frame.y0 - 1 or b.y1 > frame.y1 + 1:
                    problems.append(f"clipped {t.get_text()!r}")
        for line in ax.get_lines():
            if len(line.get_xdata()) == 1 and line.get_marker() in (None, "None", "", " ", "none"):
                problems.append(f"one-point line {line.get_label()!r}")
    return problems


def test_tidy_fixes_what_made_the_figures_unreadable():
    """Each fault as the issue met it, before and after `tidy`: a long title on a narrow chart (the
    ablation's BPB bars), long category names on one axis, a line of one point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from assay.pipeline.report import tidy

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(7, 3.4))
    ax.bar(list(ARMS) + ["a-third-arm-with-a-long-name"], [3.1, 3.2, 3.3])
    ax.set(title="held-out BPB per arm (mean ± std, seeds as dots), a title longer than the chart", ylabel="BPB")
    ax2.plot([1000], [2.5], label="held")
    ax2.set(title="held-out BPB", xlabel="tokens")
    fig.canvas.draw()
    before = text_problems(fig)
    assert any(p.startswith("clipped 'held-out") for p in before), before
    assert any(p.startswith("tick labels") for p in before) and "one-point line 'held'" in before
    tidy(fig)
    assert text_problems(fig) == []
    drawn = [(t.get_text(), t.get_rotation(), t.get_visible()) for t in ax.get_xticklabels()]
    assert [d[1:] for d in drawn] == [(30.0, True)] * 3  # slanted, every name kept
    tidy(fig)  # tidying twice (a section that tidies its own figure) changes nothing
    assert [(t.get_text(), t.get_rotation(), t.get_visible()) for t in ax.get_xticklabels()] == drawn
    plt.close(fig)


def test_every_figure_of_the_report_and_the_ablation_is_readable(run, tmp_path, monkeypatch):
    import assay.pipeline.report as report
    from assay.trainer.ablate import run_ablation
    from assay.trainer.config import load_ablation_spec
    from assay.trainer.report import curves_figure

    work, res = run
    seen: list[tuple[str, list[str]]] = []
    original = report.png_bytes

    def checked(fig):
        report.tidy(fig)
        seen.append(("; ".join(ax.get_title() for ax in fig.axes), text_problems(fig)))
        ticks.append({t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if t.get_visible()})
        return original(fig)

    ticks: list[set[str]] = []

    monkeypatch.setattr(report, "png_bytes", checked)
    report.write_report(work, tmp_path / "report.html")
    shutil.copytree(work / "ablation", tmp_path / "again", ignore=shutil.ignore_patterns("*.png", "report.html"))
    spec, raw = load_ablation_spec(work.parent / "spec.yaml")
    run_ablation(spec, raw, tmp_path / "again", log=lambda m: None)  # every run done: only the plots and page
    titles = " | ".join(label for label, _ in seen)
    assert "held-out BPB per arm" in titles and "training loss" in titles and "rows per stage" in titles
    assert [(label, found) for label, found in seen if found] == []
    bars = [names for (label, _), names in zip(seen, ticks) if "held-out BPB per arm" in label]
    assert bars and set(ARMS) <= bars[0]  # every arm named under its bar
    # each run was evaluated once, at its end: no one-point "BPB curve" panel, the loss curve alone
    recs = [json.loads(x) for x in (work / "ablation" / "runs" / f"{ARMS[0]}-s0" / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "eval" for r in recs) == 1
    fig = curves_figure({"a": recs})
    assert [ax.get_title() for ax in fig.axes] == ["training loss"]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
MEASURE = """<script>window.addEventListener('load', () => {
  const box = e => e.getBoundingClientRect();
  const sections = [...document.querySelectorAll('section')];
  document.body.setAttribute('data-measured', JSON.stringify({
    first: sections[0].id, first_top: box(sections[0]).top, first_h2: sections[0].querySelector('h2').textContent,
    width: document.documentElement.clientWidth, scroll_width: document.documentElement.scrollWidth,
    images: [...document.images].map(i => ({alt: i.alt, natural: i.naturalWidth, shown: box(i).width,
                                             right: box(i).right}))}));
});</script></body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make chromium installs it)")
def test_in_chromium_the_summary_comes_first_and_no_figure_is_shrunk_or_cut(run, tmp_path):
    import lxml.html

    from assay.pipeline.report import write_report

    work, _ = run
    page = write_report(work, tmp_path / "report.html")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", MEASURE))
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1280,900", "--dump-dom", probe.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    measured = json.loads(lxml.html.fromstring(done.stdout).body.get("data-measured"))
    assert measured["first"] == "summary" and measured["first_h2"] == "Summary"
    assert measured["first_top"] < 200  # right under the title, on the first screen
    assert measured["scroll_width"] <= measured["width"]  # nothing runs off to the right
    assert len(measured["images"]) >= 5
    for im in measured["images"]:
        # shown at 75% of its pixels or more: 10 pt text at 110 dpi stays above 11 px on screen
        assert im["natural"] > 0 and im["shown"] >= 0.75 * im["natural"] and im["right"] <= measured["width"], im
