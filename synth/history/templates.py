"""The two Agentless-style templates that turn a change record into PR-Dialogue documents.

* localization: the problem and a listing of the repository around the change -> the files to edit;
* repair: the problem and the contents of the files involved -> SEARCH/REPLACE blocks that make the
  real change (kept only when the blocks, parsed back and applied, reproduce every after-state).

Each document is a list of segments `{role, text}` whose texts concatenate to the document's text:
`scaffold` is the template's own wording, `user` what the record supplies as the question (problem,
listing, file contents), `assistant` the answer. The mixer masks `scaffold` in annealing and
`user` (with the scaffold) in chat-form mid-training. The wording below is Assay's own.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from . import search_replace
from .patches import PatchError, parse_patch
from .records import Reject, excerpt

SEGMENT_TYPE = pa.struct([pa.field("role", pa.string()), pa.field("text", pa.string())])
SEGMENTS_TYPE = pa.list_(SEGMENT_TYPE)
TEMPLATES = ("localization", "repair")


class Segments:
    """Builds a document part by part; neighbouring parts of one role are merged, empty ones dropped."""

    def __init__(self) -> None:
        self.parts: list[dict] = []

    def add(self, role: str, text: str) -> "Segments":
        if text:
            if self.parts and self.parts[-1]["role"] == role:
                self.parts[-1]["text"] += text
            else:
                self.parts.append({"role": role, "text": text})
        return self

    @property
    def text(self) -> str:
        return "".join(p["text"] for p in self.parts)


@dataclass(frozen=True)
class TemplateLimits:
    max_chars: int = 120_000      # a longer document is not written
    min_distractors: int = 3      # listing entries besides the answer, or localization is trivial


def _problem(record: dict) -> str:
    problem = (record.get("problem") or "").strip()
    if not problem:
        raise Reject("no_problem", "the record has no problem statement or message")
    return problem


def _intro(record: dict) -> tuple[str, str]:
    """(opening sentence, heading of the problem) for the record's kind: a commit has only its message."""
    repo = record.get("repo") or "a"
    if record.get("record_kind") == "commit":
        return f"A change to the {repo} repository is described below.", "Change description"
    return f"An issue was reported in the {repo} repository.", "Issue"


def localization(record: dict, limits: TemplateLimits = TemplateLimits()) -> Segments:
    """Problem + repository listing -> the paths to edit (new files marked), most lines changed first."""
    problem = _problem(record)
    files = record.get("files") or []
    tree = record.get("tree") or []
    if not files:
        raise Reject("no_patch", "the record has no changed files")
    if not tree:
        raise Reject("no_tree", "the record has no repository listing")
    weight = {f["path"]: len(f.get("after") or "") + len(f.get("before") or "") for f in files}
    ordered = sorted(files, key=lambda f: (-weight[f["path"]], f["path"]))
    answer = [f"{f['path']} (new file)" if f["status"] == "added" else (f["old_path"] or f["path"]) for f in ordered]
    others = set(tree) - {f["old_path"] or f["path"] for f in files}
    if len(others) < limits.min_distractors:
        raise Reject("trivial_tree", f"{len(others)} listing entries besides the answer")
    opening, heading = _intro(record)
    doc = Segments()
    doc.add("scaffold", f"{opening} Read it and the listing of the repository below, then name the files that "
                        "have to be edited, one path per line, the most important first. Mark a file that does "
                        f"not exist yet with \"(new file)\".\n\n{heading}:\n")
    doc.add("user", problem + "\n")
    doc.add("scaffold", "\nRepository listing (directories end with /):\n")
    doc.add("user", "".join(p + "\n" for p in tree))
    doc.add("scaffold", "\nFiles to edit:\n")
    doc.add("assistant", "".join(p + "\n" for p in answer))
    return _bounded(doc, limits)


def repair(record: dict, limits: TemplateLimits = TemplateLimits()) -> Segments:
    """Problem + the involved files -> SEARCH/REPLACE blocks reproducing the change (verified)."""
    problem = _problem(record)
    files = record.get("files") or []
    if not files:
        raise Reject("no_patch", "the record has no changed files")
    unsupported = sorted({f["status"] for f in files} - {"modified", "added"})
    if unsupported:
        raise Reject("repair_unsupported", f"SEARCH/REPLACE blocks do not express {', '.join(unsupported)} files")
    hunks_by_path = {fp.path: fp.hunks for fp in _parse(record.get("diff") or "")}
    edits, shown = [], []
    for f in files:
        hunks = hunks_by_path.get(f["path"])
        if hunks is None:
            raise Reject("diff_mismatch", f"{f['path']} is not in the diff")
        before = f["before"] or ""
        if f.get("partial"):  # excerpts: the hunks must be re-based onto them
            before, _, hunks = excerpt(hunks)
        try:
            edits += search_replace.edits_from_hunks(f["path"], before, hunks)
        except PatchError as exc:
            raise Reject(exc.reason, exc.detail) from None
        if f["status"] != "added":
            shown.append((f["path"], before, bool(f.get("partial"))))
    blocks = search_replace.render(edits)
    _verify(record, blocks)
    opening, heading = _intro(record)
    doc = Segments()
    doc.add("scaffold", f"{opening} Below it are the current contents of the files involved. Make the change "
                        "with SEARCH/REPLACE edits: "
                        "a line \"### <path>\", a line \"<<<<<<< SEARCH\", the exact lines to find, a line "
                        "\"=======\", the lines that replace them and a line \">>>>>>> REPLACE\". An edit with "
                        f"an empty SEARCH part creates a new file.\n\n{heading}:\n")
    doc.add("user", problem + "\n")
    for path, content, partial in shown:
        note = " (excerpts; \u22ee marks skipped lines)" if partial else ""
        doc.add("scaffold", f"\n--- {path}{note}\n")
        doc.add("user", content if content.endswith("\n") or not content else content + "\n")
    doc.add("scaffold", "\nEdits:\n")
    doc.add("assistant", blocks)
    return _bounded(doc, limits)


def _parse(diff: str):
    try:
        return parse_patch(diff)
    except PatchError as exc:
        raise Reject(exc.reason, exc.detail) from None


def _verify(record: dict, blocks: str) -> None:
    """Parse the rendered blocks back and apply them: they must give every after-state exactly."""
    files = record.get("files") or []
    before, after = {}, {}
    hunks_by_path = {fp.path: fp.hunks for fp in _parse(record.get("diff") or "")}
    for f in files:
        if f.get("partial"):
            before[f["path"]], after[f["path"]], _ = excerpt(hunks_by_path[f["path"]])
        else:
            before[f["path"]], after[f["path"]] = f["before"] or "", f["after"] or ""
    try:
        got = search_replace.apply_edits({p: t for p, t in before.items() if t}, search_replace.parse(blocks))
    except PatchError as exc:
        raise Reject("repair_mismatch", exc.detail) from None
    for path, want in after.items():
        if got.get(path, "") != want:
            raise Reject("repair_mismatch", f"{path}: the edits do not reproduce the after-state")


def _bounded(doc: Segments, limits: TemplateLimits) -> Segments:
    if len(doc.text) > limits.max_chars:
        raise Reject("too_long", f"{len(doc.text)} characters > max_chars={limits.max_chars}")
    return doc


RENDERERS = {"localization": localization, "repair": repair}
