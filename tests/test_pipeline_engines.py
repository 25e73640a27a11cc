"""The demo recipe on the local engine: every stage's ledger balances, reruns skip, fusion changes nothing,
the report. (The same recipe on Spark and on Ray: test_demo_on_spark.py, test_demo_on_ray.py.)"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from assay.pipeline.dataset import Dataset
from assay.pipeline.runner import run_recipe

from conftest import DEMO_CORE_UNTIL, LOCAL_OPTIONS, RAY_OPTIONS
from snapshots import snapshot


def test_demo_ledger_balances_for_every_stage(local_demo):
    recipe, workdir, results = local_demo
    assert [r.stage_id for r in results] == recipe.order()
    for result in results:
        counts = result.manifest["counts"]
        # one-to-many stages (PR templates: a record gives up to two documents) balance by parents
        assert counts["rows_in"] == counts.get("rows_parent", counts["rows_out"]) + counts["rows_rejected"], result.stage_id
        assert Dataset(result.out).count() == counts["rows_out"]
        assert Dataset(result.out).read_rejects().num_rows == counts["rows_rejected"]
    # the sample holds real rejects (empty __init__.py files, short texts), so the ledger is exercised
    assert sum(r.manifest["counts"]["rows_rejected"] for r in results) > 0


def test_rerun_does_no_work_and_param_change_reruns_only_downstream(local_demo, tmp_path):
    recipe, local_dir, _ = local_demo
    workdir = tmp_path / "copy"
    shutil.copytree(local_dir, workdir)  # a finished run, moved: outputs are keyed by content, not by path
    again = run_recipe(recipe, workdir=workdir, engine="local", options=LOCAL_OPTIONS, log=lambda *_: None)
    assert all(r.skipped for r in again)
    changed = recipe.model_copy(deep=True)
    spec = next(s for s in changed.stages if s.id == "clusters")
    spec.params = dict(spec.params, clusters=8)
    changed._base_dir = recipe._base_dir
    third = {r.stage_id: r for r in run_recipe(changed, workdir=workdir, engine="local", options=LOCAL_OPTIONS, log=lambda *_: None)}
    downstream = recipe.descendants("clusters") | {"clusters"}
    assert downstream == {"clusters", "curated"}
    for sid, result in third.items():
        assert result.skipped == (sid not in downstream), sid


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_models_load_once_per_worker(engine, tmp_path, request):
    """setup() (where a stage loads its model) runs once per worker process, not once per shard."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from stages_for_tests import CountSetups

    from assay.pipeline.engines import get_engine
    from assay.pipeline.readers import ReadJsonl
    from assay.pipeline.runner import run_stage

    if engine == "ray":
        request.getfixturevalue("ray_engine")
    src = tmp_path / "in"
    src.mkdir()
    for f in range(6):
        (src / f"{f}.jsonl").write_text("".join(f'{{"text": "file {f} row {i}"}}\n' for i in range(5)))
    raw = run_stage(ReadJsonl({"paths": [str(src)]}), [], tmp_path / "raw", engine="local", options={"workers": 1})
    options = RAY_OPTIONS if engine == "ray" else LOCAL_OPTIONS
    out = run_stage(CountSetups(), [raw.out], tmp_path / "out", engine=get_engine(engine, options))
    rows = Dataset(out.out).read().select(["worker_pid", "setup_calls"]).to_pylist()
    assert len(rows) == 30
    assert {r["setup_calls"] for r in rows} == {1}  # every worker ran setup exactly once
    assert len({r["worker_pid"] for r in rows}) <= 2  # six shards, at most two workers
    # what a stage shares (an index) is built once, on the driver, and loaded by the workers
    from stages_for_tests import SharedBuild

    import os

    out = run_stage(SharedBuild(), [raw.out], tmp_path / "shared", engine=get_engine(engine, options))
    rows = Dataset(out.out).read().select(["built_by", "worker_pid"]).to_pylist()
    assert {r["built_by"] for r in rows} == {os.getpid()} and os.getpid() not in {r["worker_pid"] for r in rows}
    assert not (tmp_path / "shared" / "_scratch").exists()


def test_fused_chain_equals_unfused_run(local_demo, tmp_path):
    """`fuse: true` runs normalized -> lang -> length -> script as one read and one write per shard;
    every stage keeps its rejects and ledger, and everything downstream is identical."""
    recipe, local_dir, _ = local_demo
    fused = recipe.model_copy(deep=True)
    fused.fuse = True
    fused._base_dir = recipe._base_dir
    from assay.pipeline.runner import fusion_chains

    assert fusion_chains(fused, fused.order(), "local")[0] == ["normalized", "lang", "length", "script"]
    results = {r.stage_id: r for r in run_recipe(fused, workdir=tmp_path, engine="local", options=LOCAL_OPTIONS,
                                                 until=DEMO_CORE_UNTIL, log=lambda *_: None)}
    ran = [sid for sid in recipe.order() if sid in results]
    for sid in ("normalized", "lang", "length"):
        assert results[sid].manifest["fused_into"].endswith("script") and not Dataset(tmp_path / sid).shards()
    for sid in ran:
        assert results[sid].manifest["counts"] == Dataset(local_dir / sid).manifest["counts"], sid
    middles = {sid for chain in fusion_chains(fused, fused.order(), "local") for sid in chain[:-1] if sid in results}
    later = [s for s in ran if s not in middles]
    assert snapshot(tmp_path, later) == snapshot(local_dir, later)
    for sid in middles:  # the rejects of the middle stages are still there
        assert snapshot(tmp_path, [sid])[sid][1] == snapshot(local_dir, [sid])[sid][1]
    again = run_recipe(fused, workdir=tmp_path, engine="local", options=LOCAL_OPTIONS, until=DEMO_CORE_UNTIL,
                       log=lambda *_: None)
    assert all(r.skipped for r in again)


def test_report_shows_sources_examples_params_and_order(local_demo, tmp_path):
    from assay.pipeline.report import write_report

    recipe, workdir, results = local_demo
    page = write_report(workdir, tmp_path / "r.html").read_text()
    # per-source funnel: read = rejected + kept in the final output, for every source
    finals = [r.stage_id for r in results if r.stage_id == recipe.order()[-1]]
    final = Dataset(workdir / finals[0]).read()
    kept = final.group_by("source").aggregate([([], "count_all")]).to_pylist()
    for row in kept:
        assert f"<td>{row['source']}</td>" in page
    listed = page.split("Final outputs: ", 1)[1].split("</p>", 1)[0].split(". ", 1)[0].split(", ")
    assert finals[0] in listed and "rephrased" in listed  # every unread output: cleaning's and synthesis's
    example = Dataset(workdir / "pdfs").read_rejects().column("id").to_pylist()[0]
    assert example in page  # a rejected document shown under its reason
    assert "&quot;min_chars&quot;: 200" in page  # every stage's params
    assert str(workdir.resolve()) in page
    # language and script distributions, from the manifests' statistics
    lang = Dataset(workdir / "lang").manifest["statistics"]["counters"]
    assert lang["language.en"] == max(v for k, v in lang.items() if k.startswith("language."))
    assert "<h2>Languages and scripts</h2>" in page and "<h3>language (stage lang" in page
    assert "<h3>script (stage script" in page and "<td>Latin</td>" in page
    # length histograms per source: the writers' bins hold every kept document, in its own bin
    import numpy as np

    from assay.pipeline.dataset import LENGTH_EDGES

    sources = Dataset(workdir / finals[0]).manifest["sources"]
    for row in kept:
        assert sum(sources[row["source"]]["lengths"]) == row["count_all"]
    lengths = [len((t or "").encode()) for t in final.column("text").to_pylist()]
    assert [sum(b) for b in zip(*(s["lengths"] for s in sources.values()))] == \
        np.histogram(lengths, bins=LENGTH_EDGES)[0].tolist()
    assert "<h2>Document lengths</h2><img" in page


# The demo's report renders in a real browser: headless Chromium takes a screenshot and the picture
# holds content. Runs where Chromium is installed (`make chromium`); elsewhere pytest says it skipped.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make chromium installs it)")
def test_the_demo_report_renders_in_headless_chromium(local_demo, tmp_path):
    from PIL import Image

    from assay.pipeline.report import write_report

    _, workdir, _ = local_demo
    page = write_report(workdir, tmp_path / "report.html")
    shot = tmp_path / "report.png"
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1280,2400", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), result.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.shape == (2400, 1280)
    dark = (pixels < 128).mean()  # text, table rules and plot lines
    assert 0.005 < dark < 0.6, dark  # neither blank nor a solid block
    assert pixels[:200].std() > 10  # the title and the first section are drawn at the top
    # the first section is the summary (what ran, what was removed, who won): tests/test_report_summary.py
    # measures it in the browser on a run with an ablation
    text = page.read_text()
    assert text.index("<section id='summary'><h2>Summary</h2>") < text.index("<section>")


def test_report_warns_about_crash_rejects(local_demo, tmp_path):
    """A reject reason that means a program failed (extract_crash, *_error) is a warning at the top."""
    import json

    from assay.pipeline.report import write_report

    _, workdir, _ = local_demo
    copy = tmp_path / "run"
    shutil.copytree(workdir, copy)
    assert "Crashes:" not in write_report(copy, tmp_path / "before.html").read_text()
    manifest = copy / "pdfs" / "_manifest.json"
    data = json.loads(manifest.read_text())
    data["counts"]["rejected"]["extract_crash"] = {"rows": 2, "bytes": 10}
    manifest.write_text(json.dumps(data))
    page = write_report(copy, tmp_path / "after.html").read_text()
    assert "Crashes: stage pdfs rejected 2 row(s) as extract_crash" in page


def test_touch_changes_nothing_and_one_byte_of_the_quality_model_reruns_tiers_and_below(local_demo, tmp_path,
                                                                                      monkeypatch):
    """Identity by content (issue #27): `touch` on an input runs nothing; one byte changed in the bundled
    quality model re-runs the tiering stage and everything downstream of it, and nothing upstream."""
    import os

    from assay.pipeline.runner import dry_run
    from assay.quality import scorers

    recipe, workdir, _ = local_demo
    assert not [sid for sid, runs, _ in dry_run(recipe, workdir) if runs]
    sample = next((Path(recipe._base_dir) / "../sample/pdf").glob("*.pdf"))
    before = sample.stat()
    try:
        os.utime(sample, (before.st_atime + 100, before.st_mtime + 100))
        assert not [sid for sid, runs, _ in dry_run(recipe, workdir) if runs]
    finally:
        os.utime(sample, (before.st_atime, before.st_mtime))
    model = tmp_path / "web.bin"
    data = bytearray(scorers.SHIPPED["web"].read_bytes())
    data[-5] ^= 1
    model.write_bytes(bytes(data))
    monkeypatch.setitem(scorers.SHIPPED, "web", model)
    plan = {sid: (runs, why) for sid, runs, why in dry_run(recipe, workdir)}
    assert {sid for sid, (runs, _) in plan.items() if runs} == recipe.descendants("tiers") | {"tiers"}
    assert plan["tiers"][1] == "input file 'fasttext.model' changed"
    assert all(plan[sid][1] == "upstream changed" for sid in recipe.descendants("tiers"))
