"""Readers do not follow symbolic links out of the folder they were given: a link to /etc/passwd (or
to a folder elsewhere) inside an input folder becomes a `symlink_outside` reject naming its target,
not a document; links that stay inside are read; `--follow-symlinks` reads them all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assay.pipeline.dataset import Dataset

ASSAY = [sys.executable, "-m", "assay.pipeline.cli"]
SECRET = "the caller's private key material"


@pytest.fixture
def tree(tmp_path):
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "folder" / "also.txt").write_text(SECRET + " again")
    (outside / "secret.jsonl").write_text(json.dumps({"text": SECRET}) + "\n")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("a document that belongs here")
    (docs / "sub" / "b.txt").write_text("another document of the folder")
    (docs / "passwd.txt").symlink_to("/etc/passwd")
    (docs / "key.txt").symlink_to(outside / "secret.txt")
    (docs / "elsewhere").symlink_to(outside / "folder", target_is_directory=True)
    (docs / "same.txt").symlink_to(docs / "a.txt")  # inside the folder: fine
    (docs / "rows.jsonl").write_text(json.dumps({"text": "a row of the folder"}) + "\n")
    (docs / "more.jsonl").symlink_to(outside / "secret.jsonl")
    return tmp_path


def run(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(ASSAY + list(args), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("pattern", ["docs", "docs/**/*.txt"])
def test_read_text_keeps_links_inside_the_folder(tree, pattern):
    run("read", "text", str(tree / pattern), str(tree / "out"), "--workers", "1")
    ds = Dataset(tree / "out")
    texts = "\n".join(ds.read().column("text").to_pylist())
    assert "a document that belongs here" in texts and "another document of the folder" in texts
    assert SECRET not in texts and "root:" not in texts
    rejects = ds.read_rejects().to_pylist()
    outside = {Path(r["reject_detail"].split(" links to ")[0]).name for r in rejects if r["reject_reason"] == "symlink_outside"}
    assert {"passwd.txt", "key.txt"} <= outside
    assert all(SECRET not in (r["text"] or "") for r in rejects)
    assert any("/etc/passwd" in r["reject_detail"] for r in rejects)


def test_read_jsonl_refuses_a_linked_file_and_follow_symlinks_reads_it(tree):
    run("read", "jsonl", str(tree / "docs" / "*.jsonl"), str(tree / "j"), "--workers", "1")
    ds = Dataset(tree / "j")
    assert ds.read().column("text").to_pylist() == ["a row of the folder"]
    assert [r["reject_reason"] for r in ds.read_rejects().to_pylist()] == ["symlink_outside"]
    run("read", "jsonl", str(tree / "docs" / "*.jsonl"), str(tree / "k"), "--workers", "1", "--follow-symlinks")
    assert sorted(Dataset(tree / "k").read().column("text").to_pylist()) == sorted(["a row of the folder", SECRET])


def test_a_file_named_on_the_command_line_is_read_even_as_a_link(tree):
    """The user named it: that is asking for it."""
    link = tree / "named.jsonl"
    os.symlink(tree / "outside" / "secret.jsonl", link)
    run("read", "jsonl", str(link), str(tree / "n"), "--workers", "1")
    assert Dataset(tree / "n").read().column("text").to_pylist() == [SECRET]
