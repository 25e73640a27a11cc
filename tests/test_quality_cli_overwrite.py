"""`assay quality train` / `annotate` never overwrite a user's file without --force, and
`quality build-models --out` never writes into a folder holding other files: one error line each,
the file or folder untouched."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ASSAY = str(Path(sys.executable).parent / "assay")
TEXTS = [f"Document number {i} explains how plants turn light into sugar, step by step." for i in range(12)]


def assay(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([ASSAY, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=dict(os.environ))


def one_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and all(w in lines[0] for w in words), result.stderr


def test_train_and_annotate_refuse_to_overwrite_without_force(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t, "grade": i % 2}) + "\n" for i, t in enumerate(TEXTS)))
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes\n")
    one_error(assay("quality", "annotate", str(docs), str(mine), cwd=tmp_path), "exists", "--force")
    one_error(assay("quality", "train", str(mine), "--labelled", str(docs), cwd=tmp_path), "exists", "--force")
    assert mine.read_text() == "my notes\n"
    done = assay("quality", "annotate", str(docs), str(mine), "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(mine.read_text().splitlines()) == len(TEXTS)
    fresh = assay("quality", "annotate", str(docs), str(tmp_path / "new.jsonl"), cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr


def test_build_models_refuses_a_folder_holding_other_files(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")
    one_error(assay("quality", "build-models", "--out", str(folder), cwd=tmp_path), "thesis.tex")
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]
