"""GHArchive events joined into pull-request records.

GHArchive stores the public GitHub event stream as JSON lines, one event per line:
`{"id", "type", "actor", "repo": {"name": "owner/repo"}, "payload", "created_at"}`. Four types
describe a pull request's life:

* PullRequestEvent: `payload.pull_request` (title, body, state, merged, base/head shas, the base
  repository with its star count), `payload.action`;
* PullRequestReviewCommentEvent: `payload.comment` (path, diff_hunk, body) and `payload.pull_request`;
* IssueCommentEvent: `payload.issue` (a PR when it has a `pull_request` key) and `payload.comment`;
* IssuesEvent: `payload.issue`, kept when a PR's description says it fixes that issue.

Events are joined by (repository, number). The latest snapshot of a PR wins (events sorted by
created_at, then id), comments are de-duplicated by comment id, and an issue named by "fixes #N"
(closes/resolves too) in the PR's title or description becomes the record's problem statement.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

RELEVANT = ("PullRequestEvent", "PullRequestReviewCommentEvent", "IssueCommentEvent", "IssuesEvent")
FIXES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+(?:([\w.-]+/[\w.-]+))?#(\d+)", re.I)


class EventError(ValueError):
    """An event of a relevant type that lacks what the join needs."""


def field(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]... or None where a level is missing or not an object (events come in many shapes)."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def text(value: Any) -> str:
    """A text field as a string: None and non-strings (a malformed event) become ""."""
    return value.strip() if isinstance(value, str) else ""


def _order(event: dict) -> tuple[str, int]:
    eid = str(event.get("id") or "")
    return str(event.get("created_at") or ""), int(eid) if eid.isdigit() else 0


@dataclass
class Thread:
    """What the events say about one PR or issue."""

    repo: str
    number: int
    snapshot: dict | None = None  # the latest pull_request (or issue) object
    when: tuple[str, int] = ("", 0)
    comments: dict[Any, dict] = dc_field(default_factory=dict)
    review_comments: dict[Any, dict] = dc_field(default_factory=dict)
    actions: list[str] = dc_field(default_factory=list)
    merged: bool = False
    stars: int | None = None
    events: int = 0

    def take(self, snapshot: dict | None, event: dict) -> None:
        if isinstance(snapshot, dict) and _order(event) >= self.when:
            self.snapshot, self.when = snapshot, _order(event)


class EventJoin:
    def __init__(self) -> None:
        self.pulls: dict[tuple[str, int], Thread] = {}
        self.issues: dict[tuple[str, int], Thread] = {}

    def add(self, event: Any) -> bool:
        """Fold one event in. False for an event of another type; raises EventError when malformed."""
        if not isinstance(event, dict):
            raise EventError(f"an event is an object, not {type(event).__name__}")
        kind = event.get("type")
        if kind not in RELEVANT:
            return False
        repo = (event.get("repo") or {}).get("name") if isinstance(event.get("repo"), dict) else None
        payload = event.get("payload")
        if not isinstance(repo, str) or "/" not in repo or not isinstance(payload, dict):
            raise EventError(f"{kind} without repo.name or payload")
        if kind in ("PullRequestEvent", "PullRequestReviewCommentEvent"):
            pr = payload.get("pull_request") if isinstance(payload.get("pull_request"), dict) else {}
            thread = self._thread(self.pulls, repo, payload.get("number") or pr.get("number"), kind)
            thread.take(pr or None, event)
            stars = field(pr, "base", "repo", "stargazers_count")
            if isinstance(stars, int) and not isinstance(stars, bool):
                thread.stars = max(stars, thread.stars or 0)
            if kind == "PullRequestEvent":
                thread.actions.append(str(payload.get("action")))
                thread.merged = thread.merged or bool(pr.get("merged")) or bool(pr.get("merged_at"))
            else:
                comment = _comment(payload, kind)
                thread.review_comments[comment.get("id") or len(thread.review_comments)] = comment
        else:
            issue = payload.get("issue")
            if not isinstance(issue, dict):
                raise EventError(f"{kind} without payload.issue")
            table = self.pulls if "pull_request" in issue else self.issues
            thread = self._thread(table, repo, issue.get("number"), kind)
            if table is self.issues:
                thread.take(issue, event)
            elif thread.snapshot is None and kind == "IssuesEvent":
                thread.take(issue, event)
            if kind == "IssueCommentEvent":
                comment = _comment(payload, kind)
                thread.comments[comment.get("id") or len(thread.comments)] = comment
        thread.events += 1
        return True

    @staticmethod
    def _thread(table: dict, repo: str, number: Any, kind: str) -> Thread:
        if not isinstance(number, int) or isinstance(number, bool):
            raise EventError(f"{kind} without a PR or issue number")
        key = (repo, number)
        if key not in table:
            table[key] = Thread(repo, number)
        return table[key]

    def linked_issues(self, thread: Thread) -> list[Thread]:
        """Issues of the same repository that the PR says it fixes, found in the events."""
        snap = thread.snapshot or {}
        text = f"{snap.get('title') or ''}\n{snap.get('body') or ''}"
        found = []
        for repo, num in FIXES.findall(text):
            key = (repo or thread.repo, int(num))
            if key[0] == thread.repo and key in self.issues and self.issues[key] not in found:
                found.append(self.issues[key])
        return found


def _comment(payload: dict, kind: str) -> dict:
    comment = payload.get("comment")
    if not isinstance(comment, dict):
        raise EventError(f"{kind} without payload.comment")
    out = {k: comment.get(k) for k in ("body", "created_at", "path", "diff_hunk")}
    cid = comment.get("id")
    out["id"] = cid if isinstance(cid, (int, str)) else None
    return out


def _sorted_comments(comments: dict) -> list[dict]:
    return sorted(comments.values(), key=lambda c: (str(c.get("created_at") or ""), str(c.get("id"))))


def pr_text(thread: Thread, issues: list[Thread], diff: str) -> tuple[str, str]:
    """(problem statement, document text) of a PR: its linked issues or its own description first,
    then the discussion, the review comments on code and the diff when known."""
    own = problem_of(thread)
    problem = "\n\n".join(problem_of(i) for i in issues) or own
    parts = [own]
    for issue in issues:
        parts.append(f"Fixes #{issue.number}: " + problem_of(issue))
        parts += [text(c.get("body")) for c in _sorted_comments(issue.comments)]
    parts += [text(c.get("body")) for c in _sorted_comments(thread.comments)]
    for c in _sorted_comments(thread.review_comments):
        parts.append(f"{text(c.get('path'))}\n{text(c.get('diff_hunk'))}\n{text(c.get('body'))}".strip())
    if diff:
        parts.append(diff)
    return problem, "\n\n".join(p for p in parts if p)


def problem_of(thread: Thread) -> str:
    snap = thread.snapshot or {}
    return "\n\n".join(x for x in (text(snap.get("title")), text(snap.get("body"))) if x)
