"""The history stages give the same output on Spark as on the local engine: a git repository read
in two tasks (commit ranges), then the one-to-many templates stage."""
from __future__ import annotations

import os
import subprocess

import pytest

pytest.importorskip("pygit2")

from assay.pipeline.dataset import Dataset  # noqa: E402
from assay.pipeline.runner import run_stage  # noqa: E402
from assay.synth.history.sources import Commits  # noqa: E402
from assay.synth.history.stages import Templates  # noqa: E402

pytestmark = pytest.mark.spark
ENV = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_COMMITTER_NAME": "Ada",
       "GIT_COMMITTER_EMAIL": "ada@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
       "GIT_AUTHOR_DATE": "2024-03-01T12:00:00Z", "GIT_COMMITTER_DATE": "2024-03-01T12:00:00Z"}


def git(cwd, *args):
    subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def test_local_and_spark_agree(spark_engine, tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q")
    for name in ("a", "b", "c", "d"):
        (root / "pkg" / f"{name}.py").write_text(f"def {name}():\n    return 0\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    for i in range(7):
        path = root / "pkg" / f"{'abcd'[i % 4]}.py"
        path.write_text(path.read_text().replace(f"return {i // 4}", f"return {i // 4 + 1}") + f"# step {i}\n")
        git(root, "commit", "-qam", f"step {i}")
    params = {"paths": [str(root)], "commits_per_task": 4}
    out = {}
    for name, engine in (("local", "local"), ("spark", spark_engine)):
        commits = run_stage(Commits(params), [], tmp_path / name / "commits", engine=engine)
        assert commits.manifest["counts"]["rows_out"] == 8 and len(list((tmp_path / name / "commits").glob("part-*"))) == 2
        run_stage(Templates(), [tmp_path / name / "commits"], tmp_path / name / "docs", engine=engine)
        ds = Dataset(tmp_path / name / "docs")
        out[name] = sorted((r["id"], r["parent_id"], r["template"], r["text"]) for r in ds.read().to_pylist())
    assert out["local"] == out["spark"] and len(out["local"]) >= 8
