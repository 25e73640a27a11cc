"""The change record every history source writes (commit, PR, SWE-bench instance) and its checks.

A record is a document (`text` = the problem or message followed by the unified diff) with typed
columns that later stages read: the changed files with their full before/after contents, the diff,
a listing of the repository around the change, and where it came from. `round_trip` is the check
that makes a record trustworthy: the diff, parsed and re-applied to every before-state, must give
every after-state exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from .languages import is_code, language_of
from .patches import FilePatch, Hunk, PatchError, apply_hunks, parse_patch

FILE_TYPE = pa.struct([
    pa.field("path", pa.string()),       # the path after the change (the old path for a deletion)
    pa.field("old_path", pa.string()),   # the path before it (null for an added file)
    pa.field("status", pa.string()),     # added | modified | deleted | renamed
    pa.field("language", pa.string()),
    pa.field("before", pa.string()),     # null for an added file
    pa.field("after", pa.string()),      # null for a deleted file
    pa.field("partial", pa.bool_()),     # true: before/after are excerpts around the hunks, not whole files
])

RECORD_COLUMNS: dict[str, pa.DataType] = {
    "repo": pa.string(),                 # owner/name when known, else the directory name
    "record_kind": pa.string(),          # commit | pr | swebench
    "commit": pa.string(),               # the commit holding the change (null when unknown)
    "base_commit": pa.string(),          # the commit of the before-state
    "pr_number": pa.int64(),
    "problem": pa.string(),              # what the change addresses: issue, PR description or message
    "created_at": pa.string(),           # ISO 8601
    "stars": pa.int64(),                 # repository stars when the source knows them
    "languages": pa.list_(pa.string()),  # programming languages of the changed files
    "files": pa.list_(FILE_TYPE),
    "diff": pa.string(),
    "tree": pa.list_(pa.string()),       # paths around the change in the before-state (dirs end in /)
}

GAP = "\u22ee\n"  # separates the excerpts of a partial file (a line no source code is made of)


class Reject(Exception):
    """A record that cannot be kept: `reason` is the reject code, `detail` says why."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    max_files: int = 50
    max_file_bytes: int = 256_000
    max_diff_bytes: int = 200_000
    languages: frozenset[str] | None = None  # None: every known programming language
    require_code: bool = True


def file_entry(path: str, old_path: str | None, status: str, before: str | None, after: str | None,
               partial: bool = False) -> dict:
    return {"path": path, "old_path": old_path, "status": status, "language": language_of(path),
            "before": before, "after": after, "partial": partial}


def code_languages(files: list[dict], limits: Limits) -> list[str]:
    """The record's programming languages; rejects it when none is allowed and code is required."""
    langs = sorted({f["language"] for f in files if is_code(f["language"], limits.languages)})
    if limits.require_code and not langs:
        found = sorted({f["language"] or "unknown" for f in files})
        raise Reject("no_code_files", f"changed files are {', '.join(found)}")
    return langs


def check_sizes(files: list[dict], diff: str, limits: Limits) -> None:
    if len(files) > limits.max_files:
        raise Reject("too_many_files", f"{len(files)} files > max_files={limits.max_files}")
    size = len(diff.encode("utf-8", "surrogatepass"))
    if size > limits.max_diff_bytes:
        raise Reject("diff_too_large", f"{size} bytes > max_diff_bytes={limits.max_diff_bytes}")


def match_files(diff: str, files: list[dict]) -> list[tuple[dict, FilePatch]]:
    """Pair each file of a record with its part of the diff (by path). Raises Reject."""
    try:
        patches = parse_patch(diff)
    except PatchError as exc:
        raise Reject(exc.reason, exc.detail) from None
    by_path = {p.path: p for p in patches}
    if len(by_path) != len(files):
        raise Reject("diff_mismatch", f"the diff names {len(by_path)} files, the record {len(files)}")
    pairs = []
    for f in files:
        fp = by_path.get(f["path"])
        if fp is None:
            raise Reject("diff_mismatch", f"{f['path']} is not in the diff")
        if fp.status != f["status"] or (fp.old_path or None) != (f["old_path"] if f["status"] != "added" else None):
            raise Reject("diff_mismatch", f"{f['path']}: the diff says {fp.status}, the record {f['status']}")
        pairs.append((f, fp))
    return pairs


def round_trip(diff: str, files: list[dict]) -> None:
    """Re-apply the diff to every before-state and compare with the after-state (for excerpt files:
    rebuild the excerpts from the hunks and compare both sides). Raises Reject."""
    for f, fp in match_files(diff, files):
        try:
            if f.get("partial"):  # excerpts: they must be the ones the hunks give
                before, got, _ = excerpt(fp.hunks)
                if before != (f["before"] or ""):
                    raise Reject("diff_mismatch", f"{f['path']}: the excerpt differs from the diff's old lines")
            else:
                got = apply_hunks(f["before"] or "", fp.hunks)
        except PatchError as exc:
            raise Reject(exc.reason, f"{f['path']}: {exc.detail}") from None
        if got != (f["after"] or ""):
            raise Reject("diff_mismatch", f"{f['path']}: the re-applied diff differs from the after-state")


def excerpt(hunks: list[Hunk]) -> tuple[str, str, list[Hunk]]:
    """Before/after excerpts of a file known only through its hunks, with the hunks re-based onto the
    before-excerpt (gaps between hunks are one GAP line)."""
    before: list[str] = []
    rebased: list[Hunk] = []
    for h in hunks:
        if before:
            before.append(GAP)
        start = len(before)
        before += h.old
        rebased.append(Hunk(start + 1 if h.old_len else start, h.old_len, 0, h.new_len, h.old, h.new, h.removed, h.added))
    text = "".join(before)
    return text, apply_hunks(text, rebased), rebased


def document_text(problem: str | None, diff: str) -> str:
    head = (problem or "").strip()
    return f"{head}\n\n{diff}" if head else diff
