"""The report's own arithmetic, on a run whose counts are known: rule hit rates over the documents a
rule applies to, "kept" shares that are shares (never above 100%), reject shares of what the stage
decided on; and its charts' text does not overlap (tick labels, titles)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt."
PROSE = ("The river rose slowly through the night and by morning the lower fields were under water. "
         "Farmers moved their animals to the ridge and waited for the rain to stop. ")


def _jsonl(path: Path, texts: list[str]) -> None:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))


@pytest.fixture(scope="module")
def known_run(tmp_path_factory):
    """web: 8 documents, 2 too short, 3 of the 6 others holding lorem ipsum; code: 2 documents holding
    it too (every rule bypasses code); plain: 4 documents, 1 too short, the rest cut into sentences."""
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.report import write_report
    from assay.pipeline.runner import run_recipe

    root = tmp_path_factory.mktemp("known")
    _jsonl(root / "web.jsonl", [PROSE * 2 + (LOREM if i < 3 else "") + f" Entry {i}." for i in range(6)] + ["tiny", "small"])
    _jsonl(root / "code.jsonl", [f"# {LOREM}\ndef f{i}(x):\n    return x + {i}\n" * 3 for i in range(2)])
    _jsonl(root / "plain.jsonl", ["One sentence here. Another one there. A third at last."] * 1
           + ["First of two. Second of two.", "Alone and long enough to stay in.", "no"])
    (root / "r.yaml").write_text("""
name: known
inputs:
  web: {uses: read.jsonl, params: {paths: [web.jsonl], source: web}}
  code: {uses: read.jsonl, params: {paths: [code.jsonl], source: code, content_type: code}}
  plain: {uses: read.jsonl, params: {paths: [plain.jsonl], source: plain}}
stages:
  - {id: len, uses: filter.length, inputs: [web, code], params: {min_chars: 50, min_words: 1}}
  - {id: sig, uses: filter.signals, inputs: [len]}
  - {id: rules, uses: filter.rules, inputs: [sig]}
  - {id: plen, uses: filter.length, inputs: [plain], params: {min_chars: 10, min_words: 1}}
  - {id: split, uses: "stages_for_tests:Sentences", inputs: [plen]}
""")
    results = run_recipe(load_recipe(root / "r.yaml"), workdir=root / "w", options={"workers": 1}, log=lambda *_: None)
    return write_report(root / "w").read_text(), {r.stage_id: r.manifest for r in results}


def tables(page: str) -> list[tuple[list[str], list[list[str]]]]:
    """(headers, rows of cell texts) of every table on the page."""
    import lxml.html

    out = []
    for table in lxml.html.fromstring(page).iter("table"):
        headers = [th.text_content().strip() for th in table.iter("th")]
        rows = [[td.text_content().strip() for td in tr.findall("td")] for tr in table.iter("tr")]
        out.append((headers, [r for r in rows if r]))
    return out


def table_with(page: str, header: str) -> dict[str, list[str]]:
    for headers, rows in tables(page):
        if header in headers:
            return {row[0]: dict(zip(headers, row)) for row in rows}
    raise AssertionError(f"no table with a {header!r} column")


def test_rule_rate_is_over_the_documents_the_rule_applies_to(known_run):
    page, _ = known_run
    rule = table_with(page, "applied to")["c4_lorem_ipsum"]
    # 3 hits among the 6 web documents the rule applies to (not 3 of all 8 documents: 37.5%).
    assert (rule["hits"], rule["applied to"], rule["rate"]) == ("3", "6", "50.0%")


def test_sources_kept_is_a_share_of_what_was_read(known_run):
    page, manifests = known_run
    sources = table_with(page, "kept")
    assert [sources["web"][k] for k in ("read", "rejected (all stages)", "in final outputs", "kept")] == ["8", "2", "6", "75.0%"]
    assert [sources["code"][k] for k in ("read", "in final outputs", "kept")] == ["2", "2", "100.0%"]
    # One document became several sentences: 6 rows out of 4 read is not "kept 150%".
    assert int(sources["plain"]["in final outputs"]) == manifests["split"]["counts"]["rows_out"] == 6
    assert sources["plain"]["kept"] == "–"


def test_reject_shares_and_every_percentage(known_run):
    page, _ = known_run
    rejects = [row for headers, rows in tables(page) if "reason" in headers for row in rows]
    shares = {(r[0], r[1]): r[3] for r in rejects}
    assert shares[("len", "too_short")] == "20.0%"  # 2 of the 10 documents the stage decided on
    assert shares[("plen", "too_short")] == "25.0%"
    text = re.sub(r"<[^>]+>", " ", page)
    percentages = [float(p) for p in re.findall(r"(\d+(?:\.\d+)?)%", text)]
    assert percentages and max(percentages) <= 100.0


def overlapping_text(fig) -> list[str]:
    """Pairs of text on a drawn figure that overlap: neighbouring tick labels of one axis, or a title
    with another title or with any axis text."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()

    def box(text):  # a pixel of space around each: labels that touch read as one ("200KB400KB")
        return text.get_window_extent(renderer).padded(1)

    problems = []
    axis_text = []
    for ax in fig.axes:
        for axis, key in ((ax.xaxis, lambda b: b.x0), (ax.yaxis, lambda b: b.y0)):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
            boxes = sorted(((box(t), t.get_text()) for t in labels), key=lambda bt: key(bt[0]))
            for (a, ta), (b, tb) in zip(boxes, boxes[1:]):
                if a.overlaps(b):
                    problems.append(f"tick labels {ta!r} and {tb!r}")
            axis_text += boxes
        axis_text += [(box(t), t.get_text()) for t in (ax.xaxis.label, ax.yaxis.label) if t.get_text()]
    titles = [(box(ax.title), ax.title.get_text()) for ax in fig.axes if ax.title.get_text()]
    if fig._suptitle is not None and fig._suptitle.get_text():
        titles.append((box(fig._suptitle), fig._suptitle.get_text()))
    for i, (a, ta) in enumerate(titles):
        for b, tb in titles[i + 1:] + axis_text:
            if a.overlaps(b):
                problems.append(f"title {ta!r} and {tb!r}")
    return problems


def test_charts_have_no_overlapping_labels_or_titles(local_demo, tmp_path, monkeypatch):
    """Every chart of the demo's report (30 stages, long source names, dedup and quality sections)."""
    import assay.pipeline.report as report

    _, workdir, _ = local_demo
    seen: list[tuple[str, list[str]]] = []
    original = report.png_data_uri

    def checked(fig):
        seen.append(("; ".join(ax.get_title() for ax in fig.axes), overlapping_text(fig)))
        return original(fig)

    monkeypatch.setattr(report, "png_data_uri", checked)
    report.write_report(workdir, tmp_path / "report.html")
    assert len(seen) >= 6
    assert [(label, found) for label, found in seen if found] == []
