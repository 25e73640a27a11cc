"""The README's "Writing a stage" example is real code: it runs and does what the text says."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

README = Path(__file__).resolve().parents[1] / "README.md"


def test_writing_a_stage_example_runs(tmp_path):
    section = README.read_text().split("## Writing a stage", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    stage = namespace["NoShouting"]({"max_upper_share": 0.5})
    docs = write_table(make_docs([{"text": "QUIET PLEASE", "source": "s"}, {"text": "a calm sentence", "source": "s"}]),
                       tmp_path / "in")
    result = run_stage(stage, [docs], tmp_path / "out", options={"workers": 1})
    assert result.manifest["counts"]["rejected"]["shouting"]["rows"] == 1
    assert Dataset(tmp_path / "out").read().column("upper_share").to_pylist() == [0.0]
    assert sum(result.manifest["statistics"]["histograms"]["upper_share"]["counts"]) == 2
    # the file it reads is part of its identity: editing it re-runs the stage, as the text says
    acronyms = tmp_path / "acronyms.txt"
    acronyms.write_text("NASA\n")
    docs2 = write_table(make_docs([{"text": "NASA launched it", "source": "s"}]), tmp_path / "in2")
    params = {"max_upper_share": 0.2, "acronyms": str(acronyms)}
    first = run_stage(namespace["NoShouting"](params), [docs2], tmp_path / "out2", options={"workers": 1})
    assert first.manifest["counts"]["rows_rejected"] == 0
    acronyms.write_text("ESA\n")
    again = run_stage(namespace["NoShouting"](params), [docs2], tmp_path / "out2", options={"workers": 1})
    assert not again.skipped and again.manifest["counts"]["rejected"]["shouting"]["rows"] == 1


def _demo_results():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_results", README.parent / "examples" / "demo_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_states_the_recorded_demo_figures():
    """The demo paragraph is the rendering of examples/demo-results.json (what `make demo` measured),
    not typed: editing either alone fails here."""
    import json

    demo_results = _demo_results()
    recorded = json.loads(demo_results.RESULTS.read_text())
    block = demo_results.readme_block(README.read_text())
    assert block == demo_results.render(recorded)
    arms = recorded["arms"]
    for arm, r in arms.items():  # the sentence carries every arm's figures as the file has them
        assert f"{arm} {r['mean']:.3f} ± {r['std']:.3f}" in block
    assert f"p = {recorded['p_value']:.2g}" in block
    assert ("beat" in block.split("\n\n")[0]) == recorded["significant"]
    tasks = recorded["tasks"]  # the task suite beside held-out BPB, each metric with its call
    assert set(tasks["metrics"]) == {"p_correct", "bpb"} and all(t in block for t in tasks["tasks"])
    for metric, m in tasks["metrics"].items():
        assert m["verdict"] in block
        for arm, r in m["arms"].items():
            assert f"{arm} {r['mean']:.3f} ± {r['std']:.3f}" in m["verdict"]
    assert f"In short: {recorded['in_short']}." in block
    assert recorded["in_short"].count(" (p ") == 1 + len(tasks["metrics"]) + 1  # BPB, the two, and acc


def test_make_demos_check_takes_a_run_equal_to_the_printed_digits_for_the_same():
    """A fresh machine's run that matches the README to its three decimals may round one figure the
    other way (3.3325 vs 3.3324): `make demo` calls that agreement; a figure moved further, another
    winner or another seed count is a difference."""
    import json

    demo_results = _demo_results()
    recorded = json.loads(demo_results.RESULTS.read_text())
    assert demo_results.agrees(recorded, recorded)
    text = recorded["verdict"]
    raw, curated = (f"{recorded['arms'][a]['mean']:.3f}" for a in ("raw", "curated"))
    nudged = f"{float(raw) + 0.001:.3f}"  # one unit in the last printed digit
    rounded_apart = dict(recorded, verdict=text.replace(f"raw {raw}", f"raw {nudged}"))
    assert demo_results.agrees(recorded, rounded_apart)
    moved = dict(recorded, verdict=text.replace(f"raw {raw}", f"raw {float(raw) + 0.004:.3f}"))
    assert not demo_results.agrees(recorded, moved)
    other_words = text.replace(" beat ", " trailed ") if " beat " in text else text.replace("could not be told apart", "differ")
    assert other_words != text
    assert not demo_results.agrees(recorded, dict(recorded, verdict=other_words))
    assert not demo_results.agrees(recorded, dict(recorded, seeds=recorded["seeds"] + 1))
    assert curated in text
    # the suite's figures count too: its call on a metric flipped, or its tasks changed, is a difference
    for metric in recorded["tasks"]["metrics"]:
        flipped = json.loads(json.dumps(recorded))
        flipped["tasks"]["metrics"][metric]["significant"] = not flipped["tasks"]["metrics"][metric]["significant"]
        assert not demo_results.agrees(recorded, flipped)
    fewer = json.loads(json.dumps(recorded))
    fewer["tasks"]["tasks"] = fewer["tasks"]["tasks"][1:]
    assert not demo_results.agrees(recorded, fewer)
    words = recorded["tasks"]["metrics"]["p_correct"]["verdict"]
    arm = next(iter(recorded["tasks"]["metrics"]["p_correct"]["arms"]))
    mean = f"{recorded['tasks']['metrics']['p_correct']['arms'][arm]['mean']:.3f}"
    moved = json.loads(json.dumps(recorded))
    moved["tasks"]["metrics"]["p_correct"]["verdict"] = words.replace(f"{arm} {mean}", f"{arm} {float(mean) + 0.004:.3f}")
    assert not demo_results.agrees(recorded, moved)

@pytest.mark.slow
def test_the_demo_ablation_gives_the_recorded_figures(local_demo, tmp_path):
    """The demo's mixtures and ablation, rerun from the demo pipeline's outputs in a fresh folder laid
    out as `make demo` leaves it, give the figures the README states (within what another CPU's float
    rounding moves them) and the same verdict."""
    import json
    import shutil
    import subprocess
    import sys

    _, workdir, _ = local_demo
    shutil.copytree(README.parent / "examples", tmp_path / "examples")
    demo = tmp_path / "runs" / "demo"
    demo.mkdir(parents=True)
    for stage_dir in workdir.iterdir():
        if (stage_dir / "_manifest.json").exists():
            (demo / stage_dir.name).symlink_to(stage_dir)
    assay = [sys.executable, "-m", "assay.pipeline.cli"]
    for argv in (["mix", "build", "examples/mixtures/step35-mini.yaml", "runs/demo/mix-step35", "--no-report"],
                 ["mix", "build", "examples/mixtures/raw-arm.yaml", "runs/demo/mix-raw", "--no-report"],
                 ["read", "jsonl", "examples/sample/heldout/heldout.jsonl.gz", "runs/demo-heldout"],
                 ["mix", "build", "examples/mixtures/heldout.yaml", "runs/demo/mix-heldout", "--no-report"],
                 ["ablate", "examples/train/demo-ablation.yaml", "--out", "runs/demo/ablation"]):
        done = subprocess.run(assay + argv, cwd=tmp_path, capture_output=True, text=True, timeout=3600)
        assert done.returncode == 0, done.stderr[-3000:]
    demo_results = _demo_results()
    measured = demo_results.figures(demo)
    recorded = json.loads((README.parent / "examples" / "demo-results.json").read_text())
    assert measured["significant"] == recorded["significant"]
    for arm, r in recorded["arms"].items():
        assert abs(measured["arms"][arm]["mean"] - r["mean"]) < 0.01, (measured, recorded)
    assert demo_results._task_calls(measured) == demo_results._task_calls(recorded)
