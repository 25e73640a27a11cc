"""`assay mix plan` and `mix build` leave nothing behind that nothing reads and say a thing once:
plan keeps its tokenized sources only where a build will read them (--out), and a build of a plan
already made repeats none of its notes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer

from mixer_corpus import documents, mixture_data, write_corpus

ASSAY = [sys.executable, "-m", "assay.pipeline.cli"]


def assay(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(ASSAY + list(args), capture_output=True, text=True, cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def mixture(tmp_path_factory) -> Path:
    from assay.mixer.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("mixcli")
    docs = documents()
    write_corpus(root / "docs", docs)
    tok: Tokenizer = train_bpe([d["text"] for d in docs], 600)
    tok.save(str(root / "tokenizer.json"))
    # A small chat stage: its longest document is over 1% of the budget, which the plan notes.
    data = mixture_data(root / "docs", root / "tokenizer.json", chat={"tokens": 4096})
    (root / "mix.yaml").write_text(yaml.safe_dump(data))
    return root


def test_plan_leaves_no_stray_folder_build_reuses_it_and_notes_are_said_once(mixture, tmp_path):
    planned = assay("mix", "plan", str(mixture / "mix.yaml"), cwd=tmp_path)
    assert "not kept" in planned.stdout and "note: " in planned.stdout
    assert list(tmp_path.iterdir()) == []  # was runs/mix/test-mix, which no build reads
    kept = assay("mix", "plan", str(mixture / "mix.yaml"), "--out", str(tmp_path / "mix"), cwd=tmp_path)
    assert "note: " in kept.stdout
    built = assay("mix", "build", str(mixture / "mix.yaml"), str(tmp_path / "mix"), "--no-report", cwd=tmp_path)
    tokenized = [line for line in built.stdout.splitlines() if "tokenized-" in line]
    assert tokenized and all("skipped (unchanged)" in line for line in tokenized)
    assert "note: " not in built.stdout + built.stderr  # the plan it reuses was already explained
