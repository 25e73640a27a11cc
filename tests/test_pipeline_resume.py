"""A run killed with SIGKILL mid-stage resumes at shard granularity and ends identical to an
uninterrupted run; a further rerun does no work."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from assay.pipeline.dataset import Dataset

TESTS = Path(__file__).resolve().parent
ASSAY = [sys.executable, "-m", "assay.pipeline.cli"]


def _write_inputs(root: Path, files: int = 12, rows: int = 20) -> None:
    root.mkdir(parents=True)
    for f in range(files):
        with open(root / f"part{f:02d}.jsonl", "w") as fh:
            for i in range(rows):
                word = "reject" if i % 7 == 0 else "keep"
                fh.write(json.dumps({"text": f"file {f} row {i} {word}"}) + "\n")


def _recipe(tmp: Path, seconds: float) -> Path:
    recipe = tmp / "recipe.yaml"
    recipe.write_text(f"""
name: resume
engine_options: {{workers: 1}}
inputs:
  raw: {{uses: read.jsonl, params: {{paths: ["{tmp / 'in'}"], source: t}}}}
stages:
  - id: slow
    uses: stages_for_tests:SlowUpper
    inputs: [raw]
    params: {{seconds_per_batch: {seconds}}}
""")
    return recipe


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _run(recipe: Path, workdir: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(ASSAY + ["run", str(recipe), "--workdir", str(workdir), "--no-report"],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _files(ds_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ds_dir)): p.read_bytes() for p in sorted(ds_dir.rglob("*.parquet"))}


def test_sigkill_mid_stage_then_resume_is_identical(tmp_path):
    _write_inputs(tmp_path / "in")
    recipe = _recipe(tmp_path, seconds=0.4)
    # Reference: an uninterrupted run.
    ref = _run(recipe, tmp_path / "ref")
    assert ref.wait(timeout=120) == 0, ref.stdout.read()

    work = tmp_path / "work"
    proc = _run(recipe, work)
    shards = work / "slow" / "_shards"
    deadline = time.time() + 90
    while time.time() < deadline and len(list(shards.glob("*.json"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done_before = len(list(shards.glob("*.json")))
    assert 3 <= done_before < 12, "the kill must land mid-stage"
    assert not (work / "slow" / "_manifest.json").exists()

    resumed = _run(recipe, work)
    out, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, out
    manifest = Dataset(work / "slow").manifest
    assert manifest["resumed_shards"] >= done_before  # committed shards were not recomputed
    assert f"{manifest['resumed_shards']}/12 shards resumed" in out  # the stage's summary line says so
    assert _files(work / "slow") == _files(tmp_path / "ref" / "slow")
    assert Dataset(work / "slow").manifest["counts"] == Dataset(tmp_path / "ref" / "slow").manifest["counts"]

    mtimes = {p: p.stat().st_mtime_ns for p in (work / "slow").rglob("*")}
    again = _run(recipe, work)
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0
    assert out.count("skipped (unchanged)") == 2
    assert {p: p.stat().st_mtime_ns for p in (work / "slow").rglob("*")} == mtimes
