"""Recipe validation errors are one line naming file, key and expectation; the CLI works end to end."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_RECIPE

ASSAY = [sys.executable, "-m", "assay.pipeline.cli"]


def assay(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ASSAY + list(args), capture_output=True, text=True, cwd=cwd, timeout=300)


GOOD = """
name: t
inputs:
  raw: {uses: read.jsonl, params: {paths: [in.jsonl]}}
stages:
  - {id: len, uses: filter.length, inputs: [raw], params: {min_chars: 3}}
"""

BAD_RECIPES = {
    "top-level typo": (GOOD.replace("stages:", "stgaes:"), "stgaes: unknown key; did you mean 'stages'?"),
    "stage typo": (GOOD.replace("filter.length", "filter.lenght"), "stages[0] (id 'len').uses: unknown stage 'filter.lenght'; did you mean 'filter.length'?"),
    "param typo": (GOOD.replace("min_chars", "min_char"), "stages[0] (id 'len').params.min_char: unknown param for filter.length; did you mean 'min_chars'?"),
    "param type": (GOOD.replace("min_chars: 3", "min_chars: lots"), "stages[0] (id 'len').params.min_chars: Input should be a valid integer"),
    "unknown input": (GOOD.replace("inputs: [raw]", "inputs: [rwa]"), "stages[0] (id 'len').inputs: unknown input 'rwa'; did you mean 'raw'?"),
    "bad engine": (GOOD + "engine: flink\n", "engine: Input should be 'local', 'spark' or 'ray'"),
    "yaml syntax": (GOOD + "  - {id: x\n", "invalid YAML"),
    "cycle": (GOOD + "  - {id: a, uses: filter.length, inputs: [b]}\n  - {id: b, uses: filter.length, inputs: [a]}\n", "stages form a cycle"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECIPES))
def test_recipe_errors_are_one_line_without_traceback(tmp_path, case):
    text, expected = BAD_RECIPES[case]
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    result = assay("run", str(path), "--workdir", str(tmp_path / "w"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith(f"error: {path}: ")
    assert expected in lines[0]


def test_missing_recipe_and_missing_inputs_are_user_errors(tmp_path):
    result = assay("run", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "cannot read recipe" in result.stderr and "Traceback" not in result.stderr
    (tmp_path / "r.yaml").write_text(GOOD)
    result = assay("run", str(tmp_path / "r.yaml"), "--workdir", str(tmp_path / "w"))
    assert result.returncode == 2 and "no input files match" in result.stderr and "Traceback" not in result.stderr


def test_every_command_help_has_an_example():
    from assay.pipeline.cli import build_cli, populate

    cli = build_cli()
    populate(cli)  # every family: the lazy groups are filled
    commands = []
    for name, cmd in cli.commands.items():
        subs = getattr(cmd, "commands", None)
        commands += [[name, sub] for sub in subs] if subs else [[name]]
    assert len(commands) >= 8
    from click.testing import CliRunner

    for words in commands:
        result = CliRunner().invoke(cli, words + ["--help"], standalone_mode=False)
        assert result.exit_code == 0 or getattr(result.exception, "exit_code", 1) == 0, words
        assert "Example" in result.output, f"`assay {' '.join(words)} --help` has no example"


def test_stage_subcommand_inspect_and_report(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["a long enough text", "no", "another fine text"]) + "{oops\n")
    run = tmp_path / "run"
    r1 = assay("read", "jsonl", str(src), str(run / "raw"), "--source", "cli")
    assert r1.returncode == 0, r1.stderr
    assert "4 in, 3 out, 1 rejected" in r1.stdout
    r2 = assay("filter", "length", str(run / "raw"), str(run / "len"), "--min-chars", "5")
    assert r2.returncode == 0 and "3 in, 2 out, 1 rejected" in r2.stdout and "too_short: 1" in r2.stdout
    r3 = assay("filter", "length", str(run / "raw"), str(run / "len"), "--min-chars", "5")
    assert "skipped" in r3.stdout
    bad = assay("filter", "length", str(run / "raw"), str(run / "x"), "--min-chars", "-1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--min-chars" in bad.stderr
    shown = assay("inspect", str(run / "len"), "--rejects")
    assert shown.returncode == 0 and "too_short" in shown.stdout and "rows: 3 in, 2 out, 1 rejected" in shown.stdout
    listed = assay("stages")
    assert "filter.length" in listed.stdout and "read.jsonl" in listed.stdout
    rep = assay("report", str(run))
    assert rep.returncode == 0
    page = (run / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 2
    assert "bad_json" in page and "too_short" in page and "✔ balanced" in page and "UNBALANCED" not in page


def test_quiet_by_default_and_v_logs_each_shard(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"document {i} " * 20}) + "\n" for i in range(50)))
    quiet = assay("read", "jsonl", str(src), str(tmp_path / "a"))
    assert quiet.returncode == 0 and quiet.stderr.strip() == "", quiet.stderr  # results on stdout, nothing else
    loud = assay("-v", "read", "jsonl", str(src), str(tmp_path / "b"))
    assert loud.returncode == 0, loud.stderr
    assert "assay INFO: read.jsonl: shard 0 done (1/1), 50 docs," in loud.stderr and "docs/s, eta 0s" in loud.stderr


def test_validate_the_demo_recipe():
    result = assay("validate", str(DEMO_RECIPE))
    assert result.returncode == 0 and "ok" in result.stdout


def test_from_and_until_select_the_right_stages(tmp_path):
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import StageFailed, run_recipe

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"text number {i} " * 3}) + "\n" for i in range(20)))
    recipe_path = tmp_path / "r.yaml"
    recipe_path.write_text(GOOD + "  - {id: norm, uses: filter.unicode, inputs: [len]}\n"
                                  "  - {id: side, uses: filter.length, inputs: [raw]}\n")
    recipe = load_recipe(recipe_path)
    quiet = dict(log=lambda *_: None, options={"workers": 1})
    with pytest.raises(StageFailed, match="has not run yet"):
        run_recipe(recipe, workdir=tmp_path / "w", start="norm", **quiet)
    ran = [r.stage_id for r in run_recipe(recipe, workdir=tmp_path / "w", until="len", **quiet)]
    assert ran == ["raw", "len"]  # `side` and `norm` are not needed for `len`
    ran = {r.stage_id: r.skipped for r in run_recipe(recipe, workdir=tmp_path / "w", start="len", **quiet)}
    assert ran == {"len": False, "norm": False}  # --from forces the stage and its descendants
    with pytest.raises(StageFailed, match="no such stage"):
        run_recipe(recipe, workdir=tmp_path / "w", until="nope", **quiet)


def test_relative_paths_follow_one_rule(tmp_path, monkeypatch):
    """Written in the recipe: relative to the recipe file; the default workdir: relative to the CWD."""
    from assay.pipeline.recipe import load_recipe

    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "a.yaml").write_text(GOOD + "workdir: out/here\n")
    (folder / "b.yaml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    assert Path(load_recipe(folder / "a.yaml").workdir) == folder / "out" / "here"
    assert Path(load_recipe("recipes/b.yaml").workdir) == Path("runs") / load_recipe(folder / "b.yaml").name


_BLAS_THREADS = """
import atexit, sys, threadpoolctl
atexit.register(lambda: print("blas", threadpoolctl.threadpool_info()[0]["num_threads"], file=sys.stderr))
sys.argv = ["assay", *sys.argv[1:]]
from assay.pipeline.cli import main
main()
"""


def test_extract_commands_load_one_blas_thread_and_others_the_default(tmp_path):
    """OpenBLAS's idle threads spin ~0.1 CPU-s at load: `assay extract` does no linear algebra and
    starts one; other commands, and a user's OPENBLAS_NUM_THREADS, are left as they were."""
    pytest.importorskip("threadpoolctl")
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "a.html").write_text("<html><body><p>" + "Some running text of a page. " * 20 + "</p></body></html>")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}

    def blas(*args, **extra):
        run = subprocess.run([sys.executable, "-c", _BLAS_THREADS, *args], capture_output=True, text=True,
                             env={**env, **extra}, timeout=300)
        assert run.returncode == 0, run.stderr
        return int(run.stderr.rsplit("blas ", 1)[1].split()[0])

    default = int(subprocess.run([sys.executable, "-c", "import numpy, threadpoolctl; "
                                  "print(threadpoolctl.threadpool_info()[0]['num_threads'])"],
                                 capture_output=True, text=True, env=env, check=True).stdout)
    assert blas("-v", "extract", "html", str(pages), str(tmp_path / "out"), "--workers", "1") == 1
    assert blas("stages") == default
    assert blas("extract", "html", str(pages), str(tmp_path / "out2"), "--workers", "1", OPENBLAS_NUM_THREADS="2") == 2
