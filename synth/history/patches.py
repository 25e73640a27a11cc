"""Unified diffs (git's dialect): parse them into files and hunks, apply them exactly, fingerprint them.

Applying is strict on purpose: every hunk must sit at the line its header names and its context and
removed lines must equal the file there. A record is only trusted when its diff, re-applied to the
before-state, gives the after-state byte for byte, so fuzzy matching would hide exactly the errors the
round trip is meant to catch.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_NEWLINE = "\\"  # "\ No newline at end of file" marks the line before it


class PatchError(ValueError):
    """A diff that does not parse or does not apply; `reason` is a short reject code."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    old: list[str] = field(default_factory=list)  # context + removed lines, with their line endings
    new: list[str] = field(default_factory=list)  # context + added lines
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    old_path: str | None  # None for an added file
    new_path: str | None  # None for a deleted file
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False
    rename: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def status(self) -> str:
        if self.old_path is None:
            return "added"
        if self.new_path is None:
            return "deleted"
        return "renamed" if self.rename or self.old_path != self.new_path else "modified"


def _strip_prefix(path: str) -> str | None:
    path = path.split("\t", 1)[0].rstrip("\n")
    if path == "/dev/null":
        return None
    if path.startswith('"') and path.endswith('"'):  # git quotes unusual names
        path = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a (multi-file) unified diff. Raises PatchError("bad_patch", ...) on malformed input."""
    lines = split_lines(text)
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            current = FilePatch(None, None)
            files.append(current)
            names = line[len("diff --git "):].rstrip("\n")
            half = names.split(" b/", 1)  # both names, for mode-only changes and binary files
            if len(half) == 2:
                current.old_path, current.new_path = _strip_prefix(half[0]), half[1]
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            if current is None or current.hunks:  # a plain (non-git) diff: one file per ---/+++ pair
                current = FilePatch(None, None)
                files.append(current)
            current.old_path = _strip_prefix(line[4:])
            current.new_path = _strip_prefix(lines[i + 1][4:])
            i += 2
            continue
        if current is None:
            i += 1  # preamble (a commit message, "index" lines of nothing)
            continue
        if line.startswith("new file mode"):
            current.old_path = None
        elif line.startswith("deleted file mode"):
            current.new_path = None
        elif line.startswith("rename from "):
            current.old_path, current.rename = line[len("rename from "):].rstrip("\n"), True
        elif line.startswith("rename to "):
            current.new_path, current.rename = line[len("rename to "):].rstrip("\n"), True
        elif line.startswith("Binary files ") or line.startswith("GIT binary patch"):
            current.binary = True
        elif line.startswith("@@"):
            i = _parse_hunk(lines, i, current)
            continue
        i += 1
    return files


def _parse_hunk(lines: list[str], i: int, fp: FilePatch) -> int:
    m = HUNK_HEADER.match(lines[i])
    if not m:
        raise PatchError("bad_patch", f"malformed hunk header {lines[i][:80]!r}")
    old_len = int(m.group(2)) if m.group(2) is not None else 1
    new_len = int(m.group(4)) if m.group(4) is not None else 1
    hunk = Hunk(int(m.group(1)), old_len, int(m.group(3)), new_len)
    # Find the hunk's extent by counting, then split it by tag with comprehensions (the hot loop of
    # every round trip, kept to one comparison per line).
    start = j = i + 1
    n = len(lines)
    left_old, left_new = old_len, new_len
    marks = []  # positions of "\ No newline" lines
    while j < n and (left_old > 0 or left_new > 0):
        tag = lines[j][:1]
        if tag == " " or lines[j] == "\n":  # some tools drop the space of an empty context line
            left_old -= 1
            left_new -= 1
        elif tag == "-":
            left_old -= 1
        elif tag == "+":
            left_new -= 1
        else:
            raise PatchError("bad_patch", f"hunk at -{hunk.old_start} ends early: {lines[j][:60]!r}")
        j += 1
        if j < n and lines[j][:1] == NO_NEWLINE:
            marks.append(j)
            j += 1
    if left_old != 0 or left_new != 0:
        raise PatchError("bad_patch", f"hunk at -{hunk.old_start} is truncated ({left_old} old, {left_new} new lines missing)")
    body = lines[start:j]
    if "\n" in body:
        body = [" \n" if x == "\n" else x for x in body]
    if marks:  # the line before each marker loses its newline
        for k in reversed([m - start for m in marks]):
            body[k - 1] = body[k - 1][:-1] if body[k - 1].endswith("\n") else body[k - 1]
            del body[k]
    hunk.old = [x[1:] for x in body if x[0] != "+"]
    hunk.new = [x[1:] for x in body if x[0] != "-"]
    hunk.removed = [x[1:] for x in body if x[0] == "-"]
    hunk.added = [x[1:] for x in body if x[0] == "+"]
    fp.hunks.append(hunk)
    return j


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (a diff's line unit; "\\r" stays inside a line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def apply_hunks(before: str, hunks: list[Hunk]) -> str:
    """The file after applying `hunks` in order, exactly where their headers say. Raises PatchError."""
    lines = split_lines(before)
    out: list[str] = []
    cur = 0
    for h in hunks:
        # A hunk that removes nothing is anchored after line old_start (0 = the top of the file).
        start = h.old_start if h.old_len == 0 else h.old_start - 1
        if start < cur or start + h.old_len > len(lines):
            raise PatchError("diff_mismatch", f"hunk -{h.old_start},{h.old_len} lies outside the file ({len(lines)} lines)")
        if lines[start:start + h.old_len] != h.old:
            bad = next(k for k, (a, b) in enumerate(zip(lines[start:], h.old)) if a != b) if h.old else 0
            raise PatchError("diff_mismatch", f"hunk -{h.old_start},{h.old_len}: line {start + bad + 1} differs from the diff")
        out.extend(lines[cur:start])
        out.extend(h.new)
        cur = start + h.old_len
    out.extend(lines[cur:])
    return "".join(out)


def normalized_change(hunks: list[Hunk]) -> str:
    """The file's removed and added lines, whitespace-collapsed, in order: the same edit gives the
    same string wherever it sits and whatever context git chose."""
    parts = []
    for h in hunks:
        parts += ["-" + " ".join(x.split()) for x in h.removed]
        parts += ["+" + " ".join(x.split()) for x in h.added]
    return "\n".join(p for p in parts if len(p) > 1)


def change_signature(hunks: list[Hunk]) -> str | None:
    """A short hash of `normalized_change`, or None for an edit too small to identify anything."""
    text = normalized_change(hunks)
    if text.count("\n") + 1 < 3 or len(text) < 40:
        return None
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]
