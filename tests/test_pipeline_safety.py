"""Assay never deletes or writes over what it did not create; validation finds what would stop a run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ASSAY = [sys.executable, "-m", "assay.pipeline.cli"]


def assay(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ASSAY + list(args), capture_output=True, text=True, cwd=cwd, timeout=300)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("safety")
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"a text number {i}"}) + "\n" for i in range(5)))
    result = assay("read", "jsonl", str(src), str(tmp / "ds"))
    assert result.returncode == 0, result.stderr
    return tmp / "ds"


def _user_folder(root: Path) -> Path:
    (root / "photos").mkdir(parents=True)
    (root / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (root / "notes.txt").write_text("my notes")
    return root


def _refused(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_a_folder_that_is_not_a_dataset_is_refused_untouched(dataset, tmp_path, force):
    out = _user_folder(tmp_path / "mine")
    before = _tree(out)
    args = ["filter", "length", str(dataset), str(out)] + (["--force"] if force else [])
    _refused(assay(*args))
    assert _tree(out) == before


def test_current_directory_as_output_is_refused(dataset, tmp_path):
    project = _user_folder(tmp_path / "project")
    before = _tree(project)
    _refused(assay("filter", "length", str(dataset), ".", cwd=project))
    assert _tree(project) == before


def test_a_user_folder_inside_a_dataset_is_not_deleted(dataset, tmp_path):
    out = tmp_path / "out"
    assert assay("filter", "length", str(dataset), str(out)).returncode == 0
    (out / "photos").mkdir()
    (out / "photos" / "cat.jpg").write_bytes(b"cat")
    _refused(assay("filter", "length", str(dataset), str(out), "--min-chars", "3", "--force"))
    assert (out / "photos" / "cat.jpg").read_bytes() == b"cat"


def test_input_equal_to_output_or_nested_is_refused(dataset, tmp_path):
    before = _tree(dataset)
    _refused(assay("filter", "length", str(dataset), str(dataset)))
    _refused(assay("filter", "length", str(dataset), str(dataset / "inner")))
    _refused(assay("filter", "length", str(dataset), str(dataset.parent)))
    assert _tree(dataset) == before
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "a.jsonl").write_text(json.dumps({"text": "hello there"}) + "\n")
    _refused(assay("read", "jsonl", str(pages), str(pages / "out")))
    assert sorted(p.name for p in pages.iterdir()) == ["a.jsonl"]


def test_an_assay_dataset_is_replaced_with_force(dataset, tmp_path):
    out = tmp_path / "replace"
    assert assay("filter", "length", str(dataset), str(out), "--min-chars", "1").returncode == 0
    again = assay("filter", "length", str(dataset), str(out), "--min-chars", "1000", "--force")
    assert again.returncode == 0 and "5 rejected" in again.stdout


RECIPE = """
name: safe
inputs:
  raw: {{uses: read.jsonl, params: {{paths: ["{src}"]}}}}
stages:
  - {{id: clean, uses: filter.length, inputs: [raw], params: {{min_chars: 3}}}}
"""


def test_workdir_rules(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": "some text here"}) + "\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(src=src))
    # a workdir holding the user's files is refused whole, before anything runs
    user = _user_folder(tmp_path / "w")
    before = _tree(user)
    _refused(assay("run", str(recipe), "--workdir", str(user), "--no-report"))
    assert _tree(user) == before
    # an Assay run directory with a user's folder named like a stage: refused, folder intact
    run_dir = tmp_path / "run"
    assert assay("run", str(recipe), "--workdir", str(run_dir), "--no-report").returncode == 0
    import shutil

    shutil.rmtree(run_dir / "clean")
    (run_dir / "clean").mkdir()
    (run_dir / "clean" / "thesis.tex").write_text("years of work")
    _refused(assay("run", str(recipe), "--workdir", str(run_dir), "--no-report"))
    assert (run_dir / "clean" / "thesis.tex").read_text() == "years of work"


def test_validate_checks_every_input_glob(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(src=tmp_path / "nothing-*.jsonl"))
    result = assay("validate", str(recipe))
    _refused(result)
    assert "no input files match" in result.stderr


def test_a_bug_raising_file_not_found_keeps_its_traceback(tmp_path):
    """Only user errors are one line; a FileNotFoundError from inside a stage is a bug to report."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": "some text here"}) + "\n")
    stages = tmp_path / "buggy_stage.py"
    stages.write_text(
        "from assay.pipeline.stage import MapStage\n"
        "class Buggy(MapStage):\n"
        "    def process(self, table):\n"
        "        open('/nonexistent/model.bin')\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(src=src).replace("filter.length", "buggy_stage:Buggy").replace(
        ", params: {min_chars: 3}", ""))
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(ASSAY + ["run", str(recipe), "--workdir", str(tmp_path / "w"), "--no-report",
                                     "--workers", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode not in (0, 2) and "Traceback" in result.stderr and "FileNotFoundError" in result.stderr


def test_export_jsonl_round_trips_and_never_overwrites_a_user_file(dataset, tmp_path):
    out = tmp_path / "docs.jsonl.gz"
    assert assay("export", str(dataset), str(out)).returncode == 0
    import gzip

    rows = [json.loads(line) for line in gzip.open(out, "rt")]
    assert len(rows) == 5 and rows[0]["text"] == "a text number 0" and isinstance(rows[0]["meta"], dict)
    mine = tmp_path / "mine.jsonl"
    mine.write_text("my own data\n")
    _refused(assay("export", str(dataset), str(mine), "--force"))
    assert mine.read_text() == "my own data\n"
    assert assay("export", str(dataset), str(out), "--force").returncode == 0  # an earlier export: replaced


def test_export_parquet_is_one_file_with_every_row_and_never_overwrites_a_user_file(dataset, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assay.pipeline.dataset import Dataset

    out = tmp_path / "docs.parquet"
    assert assay("export", str(dataset), str(out)).returncode == 0
    table = pq.read_table(out)
    assert table.sort_by("id").equals(Dataset(dataset).read().sort_by("id"))
    mine = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), mine)
    _refused(assay("export", str(dataset), str(mine), "--force"))
    assert pq.read_table(mine).column("x").to_pylist() == [1, 2]
    assert assay("export", str(dataset), str(out), "--force").returncode == 0


def test_a_fused_run_never_touches_a_user_folder_or_its_scratch(dataset, tmp_path):
    """run_fused removes `<last output>/_scratch` when it ends: the outputs are checked before anything
    runs, so a user's folder (with its own `_scratch`) given as an output is refused untouched."""
    from assay.filters.basic import LengthFilter, NormalizeUnicode
    from assay.pipeline.dataset import OutputRefused
    from assay.pipeline.runner import run_fused

    user = tmp_path / "mine"
    (user / "_scratch").mkdir(parents=True)
    (user / "_scratch" / "notes.txt").write_text("keep")
    stages = [NormalizeUnicode({}), LengthFilter({"min_chars": 3})]
    with pytest.raises(OutputRefused):
        run_fused(stages, [dataset], [tmp_path / "first", user], engine="local", options={"workers": 1})
    assert (user / "_scratch" / "notes.txt").read_text() == "keep"
    done = run_fused(stages, [dataset], [tmp_path / "a", tmp_path / "b"], engine="local", options={"workers": 1})
    assert [r.stage_id for r in done] and not (tmp_path / "b" / "_scratch").exists()
