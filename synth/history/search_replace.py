"""SEARCH/REPLACE edits (the block format Agentless published) made from a real change, and applied back.

A block names a file and quotes a run of its lines (SEARCH) with what they become (REPLACE):

    ### path/to/file.py
    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

Blocks are built from the diff's hunks, widened until their SEARCH text occurs exactly once in the
file (so a reader can tell where the edit goes) and merged where they touch. The repair template
keeps a document only when parsing its rendered blocks and applying them to the before-state gives
the after-state exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

from .patches import Hunk, PatchError, split_lines

HEADER = "### "
SEARCH = "<<<<<<< SEARCH\n"
DIVIDER = "=======\n"
REPLACE = ">>>>>>> REPLACE\n"
MARKERS = (SEARCH, DIVIDER, REPLACE)


@dataclass(frozen=True)
class Edit:
    path: str
    search: str
    replace: str


def _occurrences(text: str, needle: str, limit: int = 2) -> int:
    """How many times `needle` starts at a line start in `text` (counting stops at `limit`)."""
    count, start = 0, 0
    while count < limit:
        i = text.find(needle, start)
        if i < 0:
            break
        if i == 0 or text[i - 1] == "\n":
            count += 1
        start = i + 1
    return count


def edits_from_hunks(path: str, before: str, hunks: list[Hunk]) -> list[Edit]:
    """Blocks that turn `before` into the file `hunks` describe. Raises PatchError when no faithful
    block can be written (a marker line inside the file, a changed last line without a newline)."""
    lines = split_lines(before)
    spans: list[list] = []  # [start, end, hunks] in before-line indices, end exclusive
    for h in hunks:
        start = h.old_start if h.old_len == 0 else h.old_start - 1
        spans.append([start, start + h.old_len, [h]])
    for span in spans:
        _widen(span, lines, before)
    merged: list[list] = []
    for span in spans:
        if merged and span[0] <= merged[-1][1]:  # touching or overlapping: one block
            merged[-1][1] = max(merged[-1][1], span[1])
            merged[-1][2] += span[2]
            _widen(merged[-1], lines, before)
        else:
            merged.append(span)
    edits = []
    for start, end, block_hunks in merged:
        out, cur = [], start
        for h in block_hunks:
            h_start = h.old_start if h.old_len == 0 else h.old_start - 1
            out += lines[cur:h_start] + h.new
            cur = h_start + h.old_len
        out += lines[cur:end]
        search, replace = "".join(lines[start:end]), "".join(out)
        for text in (search, replace):
            if text and not text.endswith("\n"):
                raise PatchError("no_final_newline", f"{path}: an edited last line has no newline")
            if any(line in MARKERS for line in split_lines(text)):
                raise PatchError("marker_collision", f"{path}: the file has a line equal to a block marker")
        edits.append(Edit(path, search, replace))
    return edits


def _widen(span: list, lines: list[str], before: str) -> None:
    """Grow a span one line at a time (above first) until its text is non-empty and unique."""
    grow_up = True
    while True:
        start, end = span[0], span[1]
        text = "".join(lines[start:end])
        if (text or not lines) and (not text or _occurrences(before, text) == 1):
            return
        if start == 0 and end >= len(lines):
            return  # the whole file: unique by definition
        if (grow_up and start > 0) or end >= len(lines):
            span[0] -= 1
        else:
            span[1] += 1
        grow_up = not grow_up


def render(edits: list[Edit]) -> str:
    return "\n".join(f"{HEADER}{e.path}\n{SEARCH}{e.search}{DIVIDER}{e.replace}{REPLACE}" for e in edits)


def parse(text: str) -> list[Edit]:
    """The blocks in `text`. Raises PatchError("bad_blocks", ...) when a block is incomplete."""
    edits: list[Edit] = []
    lines = split_lines(text)
    i, n = 0, len(lines)
    while i < n:
        if not (lines[i].startswith(HEADER) and i + 1 < n and lines[i + 1] == SEARCH):
            i += 1
            continue
        path = lines[i][len(HEADER):].rstrip("\n")
        i += 2
        search: list[str] = []
        while i < n and lines[i] != DIVIDER:
            search.append(lines[i])
            i += 1
        replace: list[str] = []
        i += 1
        while i < n and lines[i] != REPLACE:
            replace.append(lines[i])
            i += 1
        if i >= n:
            raise PatchError("bad_blocks", f"block for {path} has no {REPLACE.strip()} line")
        edits.append(Edit(path, "".join(search), "".join(replace)))
        i += 1
    return edits


def apply_edits(files: dict[str, str], edits: list[Edit]) -> dict[str, str]:
    """Apply blocks in order to a {path: content} map (a missing path is an empty file). Each SEARCH
    is looked for at a line start after the previous edit of the same file."""
    out = dict(files)
    cursor: dict[str, int] = {}
    for e in edits:
        content = out.get(e.path, "")
        if not e.search:
            if content:
                raise PatchError("search_not_found", f"{e.path}: an empty SEARCH edits only an empty file")
            out[e.path] = e.replace
            cursor[e.path] = len(e.replace)
            continue
        at = cursor.get(e.path, 0)
        while True:
            i = content.find(e.search, at)
            if i < 0:
                raise PatchError("search_not_found", f"{e.path}: SEARCH text not found after offset {cursor.get(e.path, 0)}")
            if i == 0 or content[i - 1] == "\n":
                break
            at = i + 1
        out[e.path] = content[:i] + e.replace + content[i + len(e.search):]
        cursor[e.path] = i + len(e.replace)
    return out
