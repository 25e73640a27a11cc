"""The extraction benchmark's newspaper4k fixtures loader (benchmarks/_newspaper_pages.py): it pairs
each page with its own expected text, drops what cannot be scored, and never trusts an sdist whose
SHA-256 is not the pinned one. No network: a tiny synthetic tarball stands in for the sdist."""
from __future__ import annotations

import importlib.util
import io
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _loader():
    spec = importlib.util.spec_from_file_location("newspaper_pages_bench", ROOT / "benchmarks" / "_newspaper_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_pages_pair_with_their_own_text_and_the_rest_is_dropped_with_a_reason(tmp_path):
    top = "newspaper4k-0.9.6/tests/data"
    sdist = _tarball(tmp_path / "s.tar.gz", {
        f"{top}/html/b_news.html": b"<p>page b</p>",
        f"{top}/txt/b_news.txt": b"text b",
        f"{top}/html/a_news.html": "<p>page a \u00e9</p>".encode(),
        f"{top}/txt/a_news.txt": b"text a",
        f"{top}/html/z_again.html": "<p>page a \u00e9</p>".encode(),  # the same page under a second name
        f"{top}/txt/z_again.txt": b"text a with its title",
        f"{top}/html/only_page.html": b"<p>no text</p>",
        f"{top}/txt/only_text.txt": b"no page",
        f"{top}/html/blank.html": b"<p>blank</p>",
        f"{top}/txt/blank.txt": b" \n\n",
        f"{top}/json/b_news.json": b"{}",  # other fixtures and deeper folders are not pages
        f"{top}/html/sub/c.html": b"<p>c</p>",
        f"{top}/txt/sub/c.txt": b"c",
        "newspaper4k-0.9.6/docs/html/d.html": b"<p>d</p>",
        "newspaper4k-0.9.6/docs/txt/d.txt": b"d",
    })
    pages, dropped = _loader().pairs_from_sdist(sdist)
    assert pages == {"a_news": ("<p>page a \u00e9</p>", "text a"), "b_news": ("<p>page b</p>", "text b")}
    assert dropped == {"z_again": "same page as a_news", "only_page": "page without expected text",
                       "only_text": "expected text without a page", "blank": "empty expected text"}


def test_a_cached_sdist_with_another_hash_is_refused_without_downloading(tmp_path, monkeypatch):
    loader = _loader()
    _tarball(tmp_path / loader.SDIST, {"x/tests/data/html/a.html": b"<p>a</p>", "x/tests/data/txt/a.txt": b"a"})
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("downloaded although a copy is cached"))
    with pytest.raises(loader.Unavailable, match="not the pinned"):
        loader.load(tmp_path)


def test_a_failed_download_is_unavailable_with_pips_last_line(tmp_path, monkeypatch):
    loader = _loader()
    failed = subprocess.CompletedProcess([], 1, "", "Looking in indexes: x\nERROR: No matching distribution\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(loader.Unavailable, match="failed: ERROR: No matching distribution$"):
        loader.load(tmp_path / "cache")
