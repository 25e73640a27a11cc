"""Commit records from a git repository, read in-process with pygit2 (libgit2).

Why pygit2: one process reads commits, trees and blobs and computes diffs in C (rename detection
included), with no subprocess per commit and no text protocol to parse; the git CLI stays the
ground truth in the tests, which build their repositories with it. libgit2 is GPLv2 with a linking
exception, which lets any program link it.

What becomes of each kind of change (a file left out is listed in the record's meta.skipped; with
skip_files off the whole commit is rejected instead):

* edits, additions, deletions, renames (detected by similarity, as `git log -M`): kept;
* binary files, files that are not UTF-8, symlinks, submodule pointers, type changes, files over
  max_file_bytes, mode-only changes: left out with that reason;
* merge commits: rejected (`merge_commit`: their first-parent diff repeats the merged branch's
  commits); empty commits: rejected (`empty_commit`).
"""
from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .records import Limits, Reject, check_sizes, code_languages, document_text, file_entry, round_trip

SUBMODULE, SYMLINK = 0o160000, 0o120000
STATUS = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed"}
MAX_SKIPPED_LISTED = 20


class RepoError(Exception):
    pass


def open_repo(path: str):
    """A pygit2 Repository for a working tree, its .git directory or a bare repository. One on a store
    (s3://...) is read from a local copy of it, made once per content (libgit2 reads local files)."""
    import pygit2

    from assay.pipeline import storage

    where = path
    if storage.is_url(path):
        try:
            where = str(storage.cached_tree(path))
        except (FileNotFoundError, OSError) as exc:
            raise RepoError(f"{path}: not a git repository ({exc})") from None
    try:
        return pygit2.Repository(where)
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise RepoError(f"{path}: not a git repository ({exc})") from None


def git_dir(path: str) -> str:
    """The repository's object store directory (the .git folder, or the bare repository itself); on a
    store, its URL (a working tree's `.git` prefix, or the bare repository's own)."""
    from assay.pipeline import storage

    if storage.is_url(path):
        url = path.rstrip("/")
        for candidate in (f"{url}/.git", url):
            if storage.is_file(f"{candidate}/HEAD") and storage.is_dir(f"{candidate}/objects"):
                return candidate
        raise RepoError(f"{path}: not a git repository (no HEAD and objects/ below it)")
    return os.path.abspath(open_repo(path).path.rstrip("/"))


_REMOTE = re.compile(r"(?:github\.com|gitlab\.com|bitbucket\.org)[:/]+([^/]+/[^/]+?)(?:\.git)?/?$")


def repo_name(repo, path: str) -> str:
    """owner/name from the `origin` remote when it is a known forge, else the directory's name."""
    try:
        url = repo.remotes["origin"].url or ""
    except (KeyError, ValueError):
        url = ""
    m = _REMOTE.search(url)
    if m:
        return m.group(1)
    where = path.rstrip("/") if "://" in path else os.path.abspath(path).rstrip("/")  # a URL names it too
    base = posixpath.basename(where)
    if base == ".git":
        base = posixpath.basename(posixpath.dirname(where))
    return base[:-4] if base.endswith(".git") else base


def list_commits(repo, rev: str = "HEAD", max_commits: int = 0) -> list[str]:
    """Commit ids reachable from `rev`, oldest first (topological), the newest `max_commits` if set."""
    import pygit2
    from pygit2.enums import SortMode

    try:
        start = repo.revparse_single(rev).peel(pygit2.Commit).id
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise RepoError(f"revision {rev!r} not found ({exc})") from None
    ids = [str(c.id) for c in repo.walk(start, SortMode.TOPOLOGICAL | SortMode.TIME)]
    if max_commits:
        ids = ids[:max_commits]
    ids.reverse()
    return ids


def iso_time(sig) -> str:
    return datetime.fromtimestamp(sig.time, timezone(timedelta(minutes=sig.offset))).isoformat()


def tree_listing(tree, changed: list[str], max_entries: int = 300) -> list[str]:
    """The paths a reader would look through to find `changed`: the top level and every directory on
    the way to a changed file (directories end in "/"), sorted, at most `max_entries`."""
    if tree is None:
        return []
    dirs = {""}
    for path in changed:
        parts = path.split("/")[:-1]
        for k in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:k]))
    entries: set[str] = set()
    for d in sorted(dirs, key=lambda x: (x.count("/"), x)):
        try:
            sub = tree if d == "" else tree[d]
        except KeyError:  # a directory the change creates
            continue
        if sub.type_str != "tree":
            continue
        prefix = f"{d}/" if d else ""
        for entry in sub:
            entries.add(prefix + entry.name + ("/" if entry.type_str == "tree" else ""))
        if len(entries) >= max_entries:
            break
    return sorted(entries)[:max_entries]


@dataclass
class Change:
    """The text part of a diff between two trees, plus what was left out and why."""

    files: list[dict]
    diff: str
    skipped: list[tuple[str, str]]


def diff_trees(repo, old_tree, new_tree, limits: Limits, context_lines: int = 3) -> Change:
    """Text files changed between two trees (old_tree None = the empty tree), with their contents."""
    if old_tree is None:
        diff = new_tree.diff_to_tree(swap=True, context_lines=context_lines)
    else:
        diff = repo.diff(old_tree, new_tree, context_lines=context_lines)
    # Rename detection pairs deletions with additions, so it can only halve the count: a change far
    # over the limit is rejected before any patch text is made.
    if len(diff) > 2 * limits.max_files:
        raise Reject("too_many_files", f"{len(diff)} changed paths > max_files={limits.max_files}")
    diff.find_similar()
    if len(diff) > limits.max_files:
        raise Reject("too_many_files", f"{len(diff)} files > max_files={limits.max_files}")
    odb = repo.odb
    files, parts, skipped = [], [], []
    for patch in diff:
        delta = patch.delta
        status = STATUS.get(delta.status_char())
        old, new = delta.old_file, delta.new_file
        path = new.path if status != "deleted" else old.path
        why = _skip_reason(status, old, new, delta)
        if why is None:
            # The object store directly: about twice as fast as Repository[...] for blobs.
            raw_before = odb.read(old.id)[1] if status != "added" else None
            raw_after = odb.read(new.id)[1] if status != "deleted" else None
            if max(len(raw_before or b""), len(raw_after or b"")) > limits.max_file_bytes:
                why = "too_large"
            else:
                try:
                    before = raw_before.decode("utf-8") if raw_before is not None else None
                    after = raw_after.decode("utf-8") if raw_after is not None else None
                    text = patch.data.decode("utf-8")
                except UnicodeDecodeError:
                    why = "non_utf8"
                else:
                    if status in ("modified", "renamed") and before == after and old.path == new.path:
                        why = "mode_change"
        if why is not None:
            skipped.append((path, why))
            continue
        files.append(file_entry(path, old.path if status != "added" else None, status, before, after))
        parts.append(text)
    return Change(files, "".join(parts), skipped)


def _skip_reason(status, old, new, delta) -> str | None:
    if status is None:
        return "type_change" if delta.status_char() == "T" else f"status_{delta.status_char()}"
    if SUBMODULE in (old.mode, new.mode):
        return "submodule"
    if SYMLINK in (old.mode, new.mode):
        return "symlink"
    if delta.is_binary:
        return "binary"
    return None


def shallow_boundary(repo) -> frozenset[str]:
    """The commits of a shallow clone whose parents were not fetched (git's `shallow` file): they
    look like root commits, but their diff against the empty tree would add the whole repository."""
    try:
        with open(os.path.join(repo.path, "shallow")) as handle:
            return frozenset(line.strip() for line in handle if line.strip())
    except OSError:
        return frozenset()


def commit_record(repo, commit, name: str, limits: Limits, skip_files: bool = True,
                  tree_entries: int = 300, shallow: frozenset[str] = frozenset()) -> dict:
    """One commit as a record (columns of records.RECORD_COLUMNS plus text and meta). Raises Reject,
    also for a commit whose objects the repository lacks (a partial or LFS-less clone)."""
    import pygit2

    try:
        return _commit_record(repo, commit, name, limits, skip_files, tree_entries, shallow)
    except (KeyError, pygit2.GitError) as exc:  # an object read (NotFoundError) or looked up (KeyError)
        text = str(exc).strip("'")[:200]
        raise Reject("missing_object" if isinstance(exc, KeyError) or "not found" in text else "unreadable_object",
                     text) from None


def _commit_record(repo, commit, name: str, limits: Limits, skip_files: bool, tree_entries: int,
                   shallow: frozenset[str]) -> dict:
    if len(commit.parents) > 1:
        raise Reject("merge_commit", f"{len(commit.parents)} parents")
    if not commit.parents and str(commit.id) in shallow:
        raise Reject("shallow_boundary", "its parent is not in this shallow clone (fetch more history to keep it)")
    parent = commit.parents[0] if commit.parents else None
    change = diff_trees(repo, parent.tree if parent else None, commit.tree, limits)
    if not change.files and not change.skipped:
        raise Reject("empty_commit", "no file changes")
    if change.skipped and (not skip_files or not change.files):
        reasons = sorted({why for _, why in change.skipped})
        detail = "; ".join(f"{p}: {why}" for p, why in change.skipped[:MAX_SKIPPED_LISTED])
        if change.files:
            raise Reject(f"has_{reasons[0]}", detail)
        raise Reject(f"only_{reasons[0]}" if len(reasons) == 1 else "no_text_files", detail)
    check_sizes(change.files, change.diff, limits)
    languages = code_languages(change.files, limits)
    round_trip(change.diff, change.files)
    message = commit.message
    changed = [f["old_path"] or f["path"] for f in change.files] + [p for p, _ in change.skipped]
    return {
        "text": document_text(message, change.diff),
        "repo": name, "record_kind": "commit", "commit": str(commit.id),
        "base_commit": str(parent.id) if parent else None, "pr_number": _pr_number(message),
        "problem": message.strip(), "created_at": iso_time(commit.author), "stars": None,
        "languages": languages, "files": change.files, "diff": change.diff,
        "tree": tree_listing(parent.tree if parent else None, changed, tree_entries),
        "meta": {"skipped": [{"path": p, "reason": why} for p, why in change.skipped[:MAX_SKIPPED_LISTED]],
                 "n_skipped": len(change.skipped)} if change.skipped else {},
    }


_PR_REF = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)", re.M)


def _pr_number(message: str) -> int | None:
    """The PR a commit subject names: GitHub's squash "title (#123)" or "Merge pull request #123"."""
    subject = message.split("\n", 1)[0]
    m = _PR_REF.search(subject)
    return int(m.group(1) or m.group(2)) if m else None
