"""Every command line in the README and in every command's --help runs as written, on the bundled
sample: exit 0, something printed, and whatever it writes exists and is not empty. A documented
example cannot rot without this failing.

The demo on Spark and Ray, cluster addresses, proxy training, rebuilding the quality models and LLM
generation on CPU take minutes each: those lines run in `test_slow_examples` (`make test-all`), as
does the whole demo on every engine (test_demo_on_spark.py, test_demo_on_ray.py,
test_pipeline_cluster.py); the served model runs in test_synth_client.py."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from documented import DOCUMENTED_PORT, REPO, Example, Workspace, build_store, help_examples, readme_examples

ALL = readme_examples() + help_examples()
# Lines that need minutes or a cluster; the reason is the value.
SLOW = {
    "assay run examples/recipes/demo.yaml --engine spark --workdir runs/demo-spark": "the whole demo on Spark",
    "assay run examples/recipes/demo.yaml --engine ray   --workdir runs/demo-ray": "the whole demo on Ray",
    "assay run recipe.yaml --engine spark --spark-master spark://10.0.0.5:7077": "a Spark cluster",
    "assay run recipe.yaml --engine ray   --ray-address 10.0.0.6:6379": "a Ray cluster",
    "assay run recipe.yaml --engine spark --spark-master spark://10.0.0.5:7077 --workdir s3://bucket/runs/x":
        "a Spark cluster writing to an S3 store",
    "assay mix build examples/mixtures/step35-mini.yaml runs/demo/mix-step35 --engine spark":
        "a JVM start and the mixture on Spark (the local build of it runs here; engines agree in test_mixer_engines)",
    "assay train examples/train/tiny.yaml --out runs/tiny": "proxy training",
    "assay eval runs/tiny --data held_out=runs/train-data/eval": "a trained proxy",
    "assay ablate examples/train/ablation.yaml --out runs/ablation": "6 proxy trainings",
    "assay eval runs/tiny --tasks default": "a trained proxy",
    "assay eval runs/tiny --tasks arc_easy,piqa --items 200 --json scores.json": "a trained proxy",
    "assay eval runs/tiny --tasks examples/train/suite.yaml": "a trained proxy",
    "assay eval runs/tiny --tasks default --json scores.json": "a trained proxy",
    "assay ablate examples/train/tasks-ablation.yaml --out runs/tasks-ablation": "6 proxy trainings",
    "assay quality build-models --out models/": "trains the shipped quality models (70 s of CPU)",
    # LLM generation through the served SmolLM2 on CPU: minutes each (2-8 candidates of up to 512 tokens).
    "assay quality annotate runs/x/deduped grades.jsonl --backend openai --base-url http://127.0.0.1:8000/v1 --model M":
        "LLM generation",
    "assay quality annotate runs/x/deduped grades.jsonl --backend openai --base-url http://127.0.0.1:8000/v1 --model smollm2":
        "LLM generation",
    "assay synth solve runs/s/arith runs/s/solved --candidates 8 --max-pass-rate 0.9 --url http://127.0.0.1:8000/v1":
        "LLM generation",
    "assay synth solve runs/x/arith runs/x/solved --candidates 8 --max-pass-rate 0.9": "LLM generation",
    "assay synth rewrite runs/x/prs runs/x/reasoning --template reasoning --url http://127.0.0.1:8000/v1": "LLM generation",
}
FAST = [e for e in ALL if e.line not in SLOW and not e.background]
SERVE = [e for e in ALL if e.background]


def test_the_lists_are_whole():
    """The extraction finds the examples (one per command at least), and SLOW names only real ones."""
    lines = {e.line for e in ALL}
    assert not set(SLOW) - lines, f"SLOW names lines the docs no longer hold: {set(SLOW) - lines}"
    assert len({e.origin for e in ALL if e.origin.endswith("--help")}) >= 60
    assert any(e.line.startswith("assay synth arith ") for e in ALL) and len(SERVE) >= 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, local_demo):
    _, demo, _ = local_demo
    ws = Workspace(tmp_path_factory.mktemp("documented"), Path(demo))
    build_store(ws)
    return ws


@pytest.fixture(scope="module")
def served(workspace):
    """The documented `assay serve --port 8000 &`, on a free port; every line that names the
    documented address talks to it."""
    port = str(_free_port())
    workspace.substitutions.update({f"--port {DOCUMENTED_PORT}": f"--port {port}",
                                    f"127.0.0.1:{DOCUMENTED_PORT}": f"127.0.0.1:{port}"})
    proc, where = workspace.start(SERVE[0])
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, (where / "output.log").read_text()
            time.sleep(0.5)
    else:
        pytest.fail("assay serve did not start")
    yield proc
    proc.terminate()
    proc.wait(timeout=60)


def check(workspace: Workspace, example: Example, timeout: float = 600) -> None:
    result, where, outputs = workspace.run(example, timeout)
    shown = f"{example.origin}: {example.line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, shown
    assert result.stdout.strip(), shown
    for out in outputs:
        path = Path(out) if Path(out).is_absolute() else where / out
        assert path.exists(), f"{shown}\n{out} was not written"
        assert any(path.iterdir()) if path.is_dir() else path.stat().st_size > 0, shown


@pytest.mark.parametrize("example", FAST, ids=[e.id for e in FAST])
def test_documented_example_runs(workspace, example):
    check(workspace, example)


def test_serve_example_starts_and_answers(served):
    assert served.poll() is None  # started as documented and still serving


RECIPE = """
name: clusters
inputs:
  crawl: {uses: read.jsonl, params: {paths: ["data/*.jsonl.gz"], text_field: content}}
stages:
  - {id: long, uses: filter.length, inputs: [crawl], params: {min_chars: 200}}
  - {id: dedup, uses: dedup.exact, inputs: [long]}
"""


@pytest.fixture(scope="module")
def slow_inputs(workspace):
    """What only the slow lines read: a recipe (`recipe.yaml`) and the example training data."""
    workspace.add("recipe.yaml", text=RECIPE)
    subprocess.run([sys.executable, str(REPO / "examples" / "train" / "build_data.py"),
                    str(workspace.store / "runs" / "train-data")], check=True, capture_output=True)
    workspace.entries.append("runs/train-data")
    workspace.substitutions.update({"spark://10.0.0.5:7077": "local[2]", "10.0.0.6:6379": "local"})
    return workspace


@pytest.mark.slow
@pytest.mark.parametrize("example", [e for e in ALL if e.line in SLOW], ids=lambda e: e.id)
def test_slow_examples(slow_inputs, served, example, request):
    workspace = slow_inputs
    if "s3://bucket/" in example.line:  # the documented store: a real one (SeaweedFS), its bucket and credentials
        store = request.getfixturevalue("s3")
        workspace.substitutions["s3://bucket/"] = f"s3://{store.current_bucket}/"
        workspace.env.update(store.env)
    if example.line.startswith("assay eval ") and "runs/tiny" not in workspace.entries:
        train = next(e for e in ALL if e.line.startswith("assay train "))  # the proxy it evaluates, as documented
        result, where, _ = workspace.run(train, 1800)
        assert result.returncode == 0, result.stderr
        workspace.add("runs/tiny", where / "runs" / "tiny")
    check(workspace, example, 1800)  # the whole demo on Spark takes minutes on two cores
