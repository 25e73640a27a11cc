"""File-system helpers shared by readers: glob expansion and bounded, checked decompression.

Readers never trust a file: `open_binary` refuses what is not a regular file (a FIFO would block a
worker forever), stops a compressed stream that expands past `max_expansion` times its size (a
decompression bomb), and reports a zstd stream that ends inside a frame (zstandard's stream reader
returns the data it has and says nothing). `iter_lines` reads lines of at most `max_bytes`, so one
huge record is skipped in bounded chunks instead of being held in memory whole.
"""
from __future__ import annotations

import glob
import gzip
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

from .storage import real_path, within

# A compressed stream is checked for runaway expansion only past this many output bytes: small files
# may compress extremely well (a file of one repeated line) without harm.
EXPANSION_FLOOR = 1 << 20
_CHUNK = 1 << 20


class ExpansionLimit(ValueError):
    """A compressed stream expanded more than allowed: treated as too large, not as corrupt."""


class NotAFile(OSError):
    """A path that is not a regular file (FIFO, device, socket): reading it could block or never end."""


def expand_paths(patterns: Iterable[str] | str) -> list[str]:
    """Expand globs (with `**`) and directories into a sorted, de-duplicated list of files."""
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = [str(p)[len("file://"):] if str(p).startswith("file://") else p for p in patterns]
    found: set[str] = set()
    remote = [str(p) for p in patterns if "://" in str(p) and not str(p).startswith("file://")]
    if remote:
        from .storage import expand_urls

        found.update(expand_urls(remote))
    for pattern in patterns:
        if str(pattern) in remote:
            continue
        pattern = os.path.expanduser(str(pattern))
        matches = glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]
        for match in matches:
            path = Path(match)
            if path.is_dir():
                found.update(str(p) for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            elif path.exists():
                found.add(str(path))
    return sorted(f if "://" in f else os.path.abspath(f) for f in found)


def link_outside(path: str, patterns: Iterable[str], memo: dict | None = None) -> str | None:
    """Where `path` really is, when a symbolic link takes it out of the folder that the pattern which
    found it walks (a directory, or a glob's part before its first wildcard); None when it stays
    inside, or when a pattern names the file itself (the user asked for exactly that file). `memo`
    (one per run) keeps each pattern's folder and its real path, found once rather than per file,
    and under the key None the real paths of the files' folders (`storage.real_path`)."""
    path = os.path.abspath(path)
    real = None
    escaped = False
    for pattern in patterns:
        spec = memo.get(pattern) if memo is not None else None
        if spec is None:
            spec = _pattern_folder(pattern)
            if memo is not None:
                memo[pattern] = spec
        full, base, real_base = spec
        if base is None:
            if full == path:
                return None
            continue
        if within(path, base):
            real = real or (real_path(path, memo.setdefault(None, {})) if memo is not None else os.path.realpath(path))
            if within(real, real_base):
                return None
            escaped = True
    return real if escaped else None


def _pattern_folder(pattern: str) -> tuple[str, str | None, str | None]:
    """(the pattern made absolute, the folder it walks or None for a file, that folder's real path)."""
    full = os.path.abspath(os.path.expanduser(str(pattern)))
    if glob.has_magic(full):
        parts = full.split(os.sep)
        base = os.sep.join(parts[:next(i for i, part in enumerate(parts) if glob.has_magic(part))]) or os.sep
    elif os.path.isdir(full):
        base = full
    else:
        return full, None, None
    return full, base, os.path.realpath(base)


def resolve_path_params(params: dict, names: Iterable[str], base: Path) -> dict:
    """Make the path-valued params absolute against `base` (lists of paths included)."""
    out = dict(params)
    for name in names:
        value = out.get(name)
        if value is None:
            continue
        fix = lambda p: p if "://" in p or os.path.isabs(os.path.expanduser(p)) else str(base / p)  # noqa: E731
        if isinstance(value, (list, tuple)):
            out[name] = [fix(v) for v in value]
        else:
            out[name] = [fix(value)] if name == "paths" else fix(value)
    return out


def check_regular_file(path: str | os.PathLike) -> int:
    """Return the size of a regular file; raise NotAFile for anything else (FIFOs, devices)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotAFile("not a regular file" + (" (a directory)" if stat.S_ISDIR(st.st_mode) else ""))
    return st.st_size


def open_binary(path: str | os.PathLike, max_expansion: float | None = None) -> BinaryIO:
    """Open a file for reading, decompressing .gz and .zst transparently (by suffix).

    With `max_expansion`, reading a compressed file raises ExpansionLimit once its output passes
    EXPANSION_FLOOR bytes and `max_expansion` times the compressed bytes read so far. Damaged
    streams raise EOFError / OSError / zlib.error / zstandard.ZstdError while reading.
    """
    path = str(path)
    check_regular_file(path)
    if not path.endswith((".gz", ".zst", ".zstd")):
        return open(path, "rb")
    raw = open(path, "rb")
    try:
        if path.endswith(".gz"):
            inner, at_eof = gzip.GzipFile(fileobj=raw, mode="rb"), None
        else:
            import zstandard

            inner = zstandard.ZstdDecompressor().stream_reader(raw, read_size=1 << 13, read_across_frames=True, closefd=False)
            at_eof = lambda: check_zstd_frames(path)  # noqa: E731
        return io.BufferedReader(_Checked(inner, raw, max_expansion, at_eof), buffer_size=1 << 16)
    except BaseException:
        raw.close()
        raise


class _Checked(io.RawIOBase):
    """A decompressed stream that counts its output against the compressed bytes read."""

    def __init__(self, inner, raw: BinaryIO, max_expansion: float | None, at_eof: Callable[[], None] | None):
        self._inner, self._raw, self._limit, self._at_eof = inner, raw, max_expansion, at_eof
        self._out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._inner.readinto1(buffer)  # what one step decompresses: data before a damaged spot still comes out
        if not n and self._at_eof is not None:
            check, self._at_eof = self._at_eof, None
            check()
        self._out += n
        if self._limit and self._out > EXPANSION_FLOOR and self._out > self._limit * max(self._raw.tell(), 1):
            raise ExpansionLimit(f"decompressed {self._out} bytes from {self._raw.tell()}: more than "
                                 f"{self._limit:g} times its compressed size (a decompression bomb?)")
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                self._raw.close()
        super().close()


def check_zstd_frames(path: str) -> None:
    """Raise EOFError unless the file is a sequence of whole zstd frames (RFC 8878 framing only:
    headers and block sizes are walked, nothing is decompressed)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        pos = 0

        def need(n: int) -> bytes:
            data = fh.read(n)
            if len(data) < n:
                raise EOFError(f"zstd stream ends inside a frame at byte {size} (frame at byte {pos})")
            return data

        while pos < size:
            fh.seek(pos)
            magic = int.from_bytes(need(4), "little")
            if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
                end = pos + 8 + int.from_bytes(need(4), "little")
            elif magic == 0xFD2FB528:
                fhd = need(1)[0]
                fcs = (0, 2, 4, 8)[fhd >> 6] or (1 if fhd & 0x20 else 0)
                header = (0 if fhd & 0x20 else 1) + (0, 1, 2, 4)[fhd & 3] + fcs
                fh.seek(header, io.SEEK_CUR)
                while True:
                    block = int.from_bytes(need(3), "little")
                    kind, length = (block >> 1) & 3, block >> 3
                    if kind == 3:
                        raise EOFError(f"zstd block with reserved type in the frame at byte {pos}")
                    fh.seek(1 if kind == 1 else length, io.SEEK_CUR)
                    if block & 1:
                        break
                end = fh.tell() + (4 if fhd & 4 else 0)
            else:
                raise EOFError(f"no zstd frame at byte {pos}")
            if end > size:
                raise EOFError(f"zstd stream ends inside a frame at byte {size} (frame at byte {pos})")
            pos = end


def iter_lines(fh: BinaryIO, max_bytes: int, *, first_lineno: int = 0,
               until: int | None = None) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield (line number, line, size) for every line that is not blank; a line longer than
    `max_bytes` comes as (number, None, size) after it was skipped chunk by chunk, never held whole.

    `until` (a byte offset, with `fh` positioned where reading starts) stops before the first line
    that starts at or after it: a byte range owns exactly the lines that start inside it.
    `first_lineno` is the number of lines before the current position."""
    lineno = first_lineno
    readline = fh.readline
    pos = fh.tell() if until is not None else 0
    while until is None or pos < until:
        line = readline(max_bytes + 1)
        if not line:
            return
        lineno += 1
        pos += len(line)
        if len(line) <= max_bytes:
            if not line.isspace():  # blank lines are no records: skipped here, where it is cheapest
                yield lineno, line, len(line)
            continue
        size = len(line)
        while not line.endswith(b"\n"):
            line = fh.readline(_CHUNK)
            if not line:
                break
            size += len(line)
        pos += size - (max_bytes + 1)
        yield lineno, None, size


def seek_line_start(fh: BinaryIO, offset: int) -> int:
    """Position `fh` at the first line that starts at or after `offset` and return how many lines
    came before it (so line numbers in rejects match a whole-file read). Counting newlines in the
    prefix costs one sequential read of it: cheap next to parsing the range."""
    lines = 0
    fh.seek(0)
    remaining = offset
    while remaining > 0:
        chunk = fh.read(min(_CHUNK, remaining))
        if not chunk:
            return lines
        lines += chunk.count(b"\n")
        remaining -= len(chunk)
    if offset == 0:
        return 0
    fh.seek(offset - 1)
    if fh.read(1) == b"\n":  # the line starting at `offset` is ours
        return lines
    while True:  # skip the rest of a line that started before `offset`: it belongs to the range before
        part = fh.readline(_CHUNK)
        if not part or part.endswith(b"\n"):
            return lines + (1 if part else 0)


def strip_compression_suffix(name: str) -> str:
    for suffix in (".gz", ".zst", ".zstd"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
