"""File-system helpers shared by readers: glob expansion and transparent decompression."""
from __future__ import annotations

import glob
import gzip
import io
import os
from pathlib import Path
from typing import BinaryIO, Iterable


def expand_paths(patterns: Iterable[str] | str) -> list[str]:
    """Expand globs (with `**`) and directories into a sorted, de-duplicated list of files."""
    if isinstance(patterns, str):
        patterns = [patterns]
    found: set[str] = set()
    for pattern in patterns:
        pattern = os.path.expanduser(str(pattern))
        matches = glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]
        for match in matches:
            path = Path(match)
            if path.is_dir():
                found.update(str(p) for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            elif path.exists():
                found.add(str(path))
    return sorted(os.path.abspath(f) for f in found)


def resolve_path_params(params: dict, names: Iterable[str], base: Path) -> dict:
    """Make the path-valued params absolute against `base` (lists of paths included)."""
    out = dict(params)
    for name in names:
        value = out.get(name)
        if value is None:
            continue
        fix = lambda p: p if os.path.isabs(os.path.expanduser(p)) else str(base / p)  # noqa: E731
        out[name] = [fix(v) for v in ([value] if isinstance(value, str) else value)] if name == "paths" else fix(value)
    return out


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """Open a file for reading, decompressing .gz and .zst transparently (by suffix)."""
    path = str(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".zst") or path.endswith(".zstd"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")


def strip_compression_suffix(name: str) -> str:
    for suffix in (".gz", ".zst", ".zstd"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
