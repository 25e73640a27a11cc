"""The sources of change records: git repositories, GHArchive events and SWE-bench instances.

    synth.commits    git repositories -> one record per commit (`assay synth commits REPO... OUT`)
    synth.prs        GHArchive event files -> one record per pull request
    synth.swebench   SWE-bench instance files -> one record per instance

All three write the same record columns (records.RECORD_COLUMNS) and share the filters of
RecordParams, so the map stages in stages.py take records from any of them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
import zlib

from pydantic import Field
from zstandard import ZstdError

from assay.pipeline.io import open_binary
from assay.pipeline.schema import DOC_SCHEMA, REJECT_DETAIL, REJECT_REASON, doc_id, dumps_meta, text_bytes
from assay.pipeline.stage import Params, SourceStage, Task, add_columns, register

from . import gitrepo
from .records import RECORD_COLUMNS, Limits, Reject, check_sizes, code_languages, document_text, excerpt, file_entry, round_trip

# A damaged compressed stream raises any of these part-way through (the core readers' list + zstd's).
STREAM_ERRORS = (EOFError, zlib.error, OSError, ValueError, ZstdError)


class RecordParams(Params):
    """Filters every history source shares."""

    source: str | None = Field(None, description="Dataset name written to `source`; default: the stage's own")
    min_stars: int = Field(0, description="Reject repositories with fewer stars, when the source knows the count")
    languages: list[str] | None = Field(None, description="Programming languages that count as code "
                                        "(default: every language in synth/history/languages.py)")
    require_code: bool = Field(True, description="Reject changes that touch no file in those languages")
    max_files: int = Field(50, description="Reject changes of more files than this")
    max_file_bytes: int = Field(256_000, description="Leave out (or reject, see skip_files) files larger than this")
    max_diff_bytes: int = Field(200_000, description="Reject changes whose text diff is larger than this")
    skip_files: bool = Field(True, description="Leave binary, non-UTF-8, submodule, symlink and oversized files "
                                               "out of a record (listed in meta.skipped); off: reject the change")
    tree_entries: int = Field(300, description="Most entries of the repository listing kept for localization")
    clones: str | None = Field(None, description="Directory of local clones (owner/name, owner__name or name, "
                                                 "optionally .git) used to fetch whole files and diffs")

    def limits(self) -> Limits:
        return Limits(self.max_files, self.max_file_bytes, self.max_diff_bytes,
                      frozenset(self.languages) if self.languages else None, self.require_code)


def record_schema() -> pa.Schema:
    return add_columns(DOC_SCHEMA, RECORD_COLUMNS)


class Rows:
    """Record rows and reject rows of one source task, handed out as tables."""

    def __init__(self, source: str, schema: pa.Schema):
        self.source = source
        self.schema = schema.append(pa.field(REJECT_REASON, pa.string())).append(pa.field(REJECT_DETAIL, pa.string()))
        self.rows: list[dict] = []

    def add(self, record: dict, url: str, meta: dict | None = None) -> None:
        text = record.pop("text")
        extra = record.pop("meta", None) or {}
        self.rows.append(dict(record, id=doc_id(text, self.source, url), text=text, source=self.source,
                              content_type="pr", url=url, meta=dumps_meta({**(meta or {}), **extra})))

    def reject(self, reason: str, detail: str, url: str, fields: dict | None = None, text: str = "") -> None:
        self.rows.append(dict(fields or {}, id=doc_id(text, self.source, f"{url}#{reason}"), text=text[:2000],
                              source=self.source, url=url, meta="{}", **{REJECT_REASON: reason, REJECT_DETAIL: detail[:2000]}))

    def take(self) -> pa.Table:
        table = pa.Table.from_pylist(self.rows, schema=self.schema)
        self.rows = []
        return table


def _sha(value: Any) -> str | None:
    """A commit id from an event, or None when it is missing or not a hex string."""
    return value if isinstance(value, str) and 7 <= len(value) <= 64 and all(c in "0123456789abcdef" for c in value) else None


def commit_url(repo: str, sha: str) -> str:
    return f"https://github.com/{repo}/commit/{sha}" if repo.count("/") == 1 else f"git:{repo}@{sha}"


def find_clone(clones: str | None, repo: str) -> str | None:
    if not clones or not repo:
        return None
    from assay.pipeline import storage

    owner, _, name = repo.partition("/")
    for cand in (repo, f"{owner}__{name}", name):
        for suffix in ("", ".git"):
            if not storage.is_url(clones):
                path = os.path.join(clones, cand + suffix)
                if os.path.isdir(path):
                    return path
                continue
            try:  # on a store: its git directory alone (gitrepo.open_repo reads a local copy of it)
                return gitrepo.git_dir(f"{clones.rstrip('/')}/{cand}{suffix}")
            except gitrepo.RepoError:
                continue
    return None


def load_repo_meta(path: str | None) -> dict[str, dict]:
    """{repo: {"stars": n, ...}} from a JSON Lines file of {"repo": ..., "stars": ...} objects."""
    if not path:
        return {}
    from assay.pipeline import storage

    out = {}
    with storage.local_copy(path) as local, open_binary(local) as fh:
        for line in fh:
            if line.strip():
                item = json.loads(line)
                out[str(item.get("repo"))] = item
    return out


class RecordSource(SourceStage):
    """A source whose rows are change records (the documents schema plus RECORD_COLUMNS)."""

    columns = RECORD_COLUMNS

    def output_schema(self, input_schemas=()) -> pa.Schema:
        return record_schema()


def _count_record(stats, record: dict) -> None:
    stats.count(f"records.repo.{record['repo']}")
    for lang in record.get("languages") or ["none"]:
        stats.count(f"records.language.{lang}")


# ---- git repositories ----------------------------------------------------------------------------

class CommitsParams(RecordParams):
    paths: list[str] = Field(description="Git repositories: working trees, .git directories or bare repositories (globs ok)")
    rev: str = Field("HEAD", description="Commit (or ref) whose history is read")
    max_commits: int = Field(0, description="Read only the newest N commits (0 = all)")
    commits_per_task: int = Field(2_000, description="Commits per task (one output shard)")
    repo_meta: str | None = Field(None, description="JSON Lines of {repo, stars}: repository metadata for min_stars")


@register("synth.commits")
class Commits(RecordSource):
    """One change record per commit of each git repository; merges, empty commits, binary-only or
    oversized changes and changes without code are rejects with a reason. Every record's diff is
    re-applied to its before-state and must give the after-state (else `diff_mismatch`).

    Rejects: not_a_repository, low_stars, merge_commit, empty_commit, only_<kind> (binary, submodule,
    non_utf8, ...), has_<kind> (skip_files off), no_code_files, too_many_files, diff_too_large,
    diff_mismatch, bad_patch, missing_object (a partial or LFS-less clone lacks a blob),
    shallow_boundary (a shallow clone's oldest commit: its parent is not there to diff against).

    Example: assay synth commits ~/src/requests ~/src/flask runs/x/commits --max-commits 500
    """

    Params = CommitsParams
    version = "2"
    requires = ("pygit2",)
    reads = {"paths": "file", "repo_meta": "file", "clones": "place"}

    def input_files(self) -> list[str]:
        # A repository is a directory: expand globs only, never a directory's files.
        import glob

        from assay.pipeline import storage

        found = []
        for pattern in self.params.paths:
            url = storage.is_url(pattern)
            pattern = pattern if url else os.path.expanduser(pattern)
            if not glob.has_magic(pattern):
                matches = [pattern]
            elif url:  # folders on a store matching the glob (a repository there is a prefix)
                fs = storage.fs_of(storage.as_path(pattern))
                matches = sorted(fs.unstrip_protocol(m) for m, info in fs.glob(storage.key(storage.as_path(pattern)),
                                                                               detail=True).items()
                                 if info.get("type") == "directory")
            else:
                matches = sorted(glob.glob(pattern))
            for match in matches:
                try:
                    found.append(gitrepo.git_dir(match))
                except gitrepo.RepoError:
                    found.append(match if url else os.path.abspath(match))  # rejected (not_a_repository) when run
        return sorted(set(found))

    def input_identity(self) -> list:
        """The commit `rev` names in each repository: a new commit changes the fingerprint even when
        no directory's mtime does."""
        identity = []
        for path in self.matched_files():
            try:
                identity.append((path, str(gitrepo.open_repo(path).revparse_single(self.params.rev).id)))
            except Exception:  # noqa: BLE001 - not a repository or a bad rev: the task rejects it with the reason
                identity.append((path, None))
        return identity

    def tasks(self, inputs: Sequence = ()) -> list[Task]:
        from assay.pipeline.errors import UserError

        files = self.matched_files()
        if not files:
            raise UserError(f"stage {self.stage_id!r}: no repositories match {self.params.paths}")
        tasks: list[Task] = []
        for path in files:
            try:
                repo = gitrepo.open_repo(path)
                ids = gitrepo.list_commits(repo, self.params.rev, self.params.max_commits)
            except gitrepo.RepoError:
                tasks.append(Task(len(tasks), (path,), (("commits", (0, 0)), ("head", None))))
                continue
            head = ids[-1] if ids else None
            step = max(1, self.params.commits_per_task)
            for start in range(0, max(len(ids), 1), step):
                tasks.append(Task(len(tasks), (path,), (("commits", (start, min(start + step, len(ids)))), ("head", head))))
        return tasks

    def run_task(self, task: Task, writer) -> Iterator[pa.Table]:
        self.ensure_setup()
        counts = getattr(writer, "counts", writer)
        # ids stay the records' own: a commit's or a pull request's URL names it uniquely, however the
        # history is cut into tasks
        for table in self.read_repo(task.inputs[0], task.get("commits"), task.get("head")):
            counts.rows_in += table.num_rows
            counts.bytes_in += text_bytes(table)
            yield table

    def read_repo(self, path: str, span: tuple[int, int], head: str | None) -> Iterator[pa.Table]:
        p = self.params
        rows = Rows(p.source or "git-commits", record_schema())
        try:
            repo = gitrepo.open_repo(path)
            ids = gitrepo.list_commits(repo, head or p.rev, p.max_commits if head is None else 0)
        except gitrepo.RepoError as exc:
            rows.reject("not_a_repository", str(exc), f"file:{path}")
            yield rows.take()
            return
        if head is not None and p.max_commits:
            ids = ids[-p.max_commits:]
        name = gitrepo.repo_name(repo, path)
        stars = (load_repo_meta(p.repo_meta).get(name) or {}).get("stars")
        if isinstance(stars, int) and stars < p.min_stars:
            if span[0] == 0:  # one reject per repository, from its first task
                rows.reject("low_stars", f"{name}: {stars} stars < min_stars={p.min_stars}", f"repo:{name}", {"repo": name, "stars": stars})
            yield rows.take()
            return
        limits = p.limits()
        shallow = gitrepo.shallow_boundary(repo)
        for cid in ids[span[0]:span[1]]:
            commit = repo[cid]
            url = commit_url(name, cid)
            try:
                record = gitrepo.commit_record(repo, commit, name, limits, p.skip_files, p.tree_entries, shallow)
            except Reject as exc:
                rows.reject(exc.reason, exc.detail, url, {"repo": name, "record_kind": "commit", "commit": cid},
                            text=commit.message)
            else:
                record["stars"] = stars if isinstance(stars, int) else None
                _count_record(self.stats, record)
                rows.add(record, url)
            if len(rows.rows) >= 500:
                yield rows.take()
        yield rows.take()


# ---- GHArchive -------------------------------------------------------------------------------------

class PrsParams(RecordParams):
    paths: list[str] = Field(description="GHArchive event files (.json, .json.gz, one event per line; globs ok)")
    partitions: int = Field(1, description="Tasks; each reads every file and joins the repositories that hash to it")
    merged_only: bool = Field(False, description="Reject pull requests that the events never show merged")


@register("synth.prs")
class PullRequests(RecordSource):
    """One record per pull request found in GHArchive events (PullRequestEvent, IssuesEvent,
    IssueCommentEvent, PullRequestReviewCommentEvent), joined by repository and number. With
    `clones`, the PR's change (merge commit, else merge-base..head) is read from a local clone and
    round-trip checked like a commit. Events of other types are counted, not kept.

    Rejects: bad_json, malformed_event, corrupt_file, no_pull_request (only comments seen),
    low_stars, not_merged, and the change checks of synth.commits when a clone supplies the diff.

    Example: assay synth prs 'gharchive/2024-01-01-*.json.gz' runs/x/prs --partitions 4
    """

    Params = PrsParams
    reads = {"paths": "file", "clones": "place"}

    def tasks(self, inputs: Sequence = ()) -> list[Task]:
        from assay.pipeline.errors import UserError

        files = self.matched_files()
        if not files:
            raise UserError(f"stage {self.stage_id!r}: no input files match {self.params.paths}")
        n = max(1, self.params.partitions)
        return [Task(i, tuple(files), (("partition", (i, n)),)) for i in range(n)]

    def run_task(self, task: Task, writer) -> Iterator[pa.Table]:
        import xxhash

        from .gharchive import EventError, EventJoin

        self.ensure_setup()
        counts = getattr(writer, "counts", writer)
        part, nparts = task.get("partition")
        rows = Rows(self.params.source or "gharchive", record_schema())
        join = EventJoin()
        from assay.pipeline import storage

        for path in task.inputs:
            if part == 0:
                try:
                    counts.bytes_in += storage.size(path)
                except OSError:
                    pass
            lineno = 0
            name = self.name_of(path)  # below the inputs' folder: the same rows on local disk or a store
            try:
                with storage.local_copy(path) as local, open_binary(local) as fh:
                    for lineno, raw in enumerate(fh, start=1):
                        if not raw.strip():
                            continue
                        where = f"{name}:{lineno}"
                        try:
                            event = json.loads(raw)
                        except ValueError as exc:
                            if part == 0:  # file-level problems are reported once, by the first partition
                                rows.reject("bad_json", str(exc), where, text=raw.decode("utf-8", "replace"))
                            continue
                        repo = event.get("repo", {}).get("name") if isinstance(event, dict) and isinstance(event.get("repo"), dict) else None
                        mine = xxhash.xxh64_intdigest(str(repo).encode()) % nparts == part
                        if not mine:
                            continue
                        try:
                            joined = join.add(event)
                        except EventError as exc:
                            rows.reject("malformed_event", str(exc), where, text=raw.decode("utf-8", "replace"))
                            continue
                        self.stats.count("events.joined" if joined else "events.other_type")
            except STREAM_ERRORS as exc:
                if part == 0:
                    rows.reject("corrupt_file", f"{type(exc).__name__}: {exc} after line {lineno}", name)
        self._emit(join, rows)
        table = rows.take()
        counts.rows_in += table.num_rows
        yield table  # ids from each pull request's URL: the same however the events are partitioned

    def _emit(self, join, rows: Rows) -> None:
        from .gharchive import field, pr_text

        p = self.params
        limits = p.limits()
        linked: set = set()
        for key in sorted(join.pulls):
            thread = join.pulls[key]
            url = f"https://github.com/{thread.repo}/pull/{thread.number}"
            fields = {"repo": thread.repo, "record_kind": "pr", "pr_number": thread.number, "stars": thread.stars}
            if thread.snapshot is None:
                rows.reject("no_pull_request", f"{thread.events} comment event(s), no pull request object", url, fields)
                continue
            if thread.stars is not None and thread.stars < p.min_stars:
                rows.reject("low_stars", f"{thread.stars} stars < min_stars={p.min_stars}", url, fields)
                continue
            if p.merged_only and not thread.merged:
                rows.reject("not_merged", f"actions seen: {', '.join(thread.actions) or 'none'}", url, fields)
                continue
            issues = join.linked_issues(thread)
            linked.update((i.repo, i.number) for i in issues)
            snap = thread.snapshot
            head, base = _sha(field(snap, "head", "sha")), _sha(field(snap, "base", "sha"))
            merge_sha = _sha(snap.get("merge_commit_sha"))
            try:
                change, base_commit, commit, tree = self._change(thread, snap, limits)
                problem, text = pr_text(thread, issues, change.diff if change else "")
            except Reject as exc:
                rows.reject(exc.reason, exc.detail, url, fields)
                continue
            created = snap.get("created_at")
            record = dict(fields, text=text, problem=problem, created_at=created if isinstance(created, str) else None,
                          commit=commit or merge_sha or head, base_commit=base_commit or base,
                          files=change.files if change else None, diff=change.diff if change else None,
                          languages=code_languages(change.files, Limits(require_code=False)) if change else [],
                          tree=tree)
            meta = {"title": snap.get("title"), "state": snap.get("state"), "merged": thread.merged,
                    "linked_issues": [i.number for i in issues], "comments": len(thread.comments),
                    "review_comments": len(thread.review_comments), "events": thread.events,
                    "head_sha": head, "base_sha": base, "merge_commit_sha": merge_sha,
                    "patch": "clone" if change else "none"}
            self.stats.count("prs.with_patch" if change else "prs.without_patch")
            _count_record(self.stats, record)
            rows.add(record, url, meta)
        self.stats.count("issues.linked", len(linked))
        self.stats.count("issues.unlinked", len(join.issues) - len(linked & set(join.issues)))

    def _change(self, thread, snap: dict, limits: Limits):
        """(Change, base commit, commit, listing) from a local clone, or Nones without one."""
        from .gharchive import field

        path = find_clone(self.params.clones, thread.repo)
        if path is None:
            return None, None, None, None
        repo = gitrepo.open_repo(path)
        merge, head, base = (_sha(snap.get("merge_commit_sha")), _sha(field(snap, "head", "sha")),
                             _sha(field(snap, "base", "sha")))
        try:
            if thread.merged and merge and merge in repo and repo[merge].parents:
                commit = repo[merge]
                old = commit.parents[0]
            else:
                commit = repo[head]
                old = repo[repo.merge_base(base, commit.id)]
        except (KeyError, ValueError, TypeError):
            return None, None, None, None  # the clone lacks these commits: a record without a patch
        change = gitrepo.diff_trees(repo, old.tree, commit.tree, limits)
        if change.skipped and not self.params.skip_files:
            raise Reject(f"has_{change.skipped[0][1]}", "; ".join(f"{p}: {w}" for p, w in change.skipped[:20]))
        if not change.files:
            raise Reject("no_text_files" if change.skipped else "empty_commit", "the PR changes no text file")
        check_sizes(change.files, change.diff, limits)
        code_languages(change.files, limits)
        round_trip(change.diff, change.files)
        changed = [f["old_path"] or f["path"] for f in change.files]
        return change, str(old.id), str(commit.id), gitrepo.tree_listing(old.tree, changed, self.params.tree_entries)


# ---- SWE-bench instances ---------------------------------------------------------------------------

class SwebenchParams(RecordParams):
    paths: list[str] = Field(description="SWE-bench instance files: a JSON list or JSON Lines (globs ok)")


@register("synth.swebench")
class SwebenchInstances(RecordSource):
    """One record per SWE-bench-style instance (instance_id, repo, base_commit, problem_statement,
    patch or golden_patch). Files are excerpts around the patch's hunks, or whole files checked by
    applying the patch when `clones` holds the repository at base_commit.

    Rejects: bad_json, malformed_instance, bad_patch, diff_mismatch, no_code_files and the size limits.

    Example: assay synth swebench swe-bench-lite.json runs/x/swebench
    """

    Params = SwebenchParams
    reads = {"paths": "file", "clones": "place"}

    def read_file(self, path: str) -> Iterator[pa.Table]:
        from .swebench import read_instances

        rows = Rows(self.params.source or Path(path).name.split(".")[0], record_schema())
        try:
            for where, inst in read_instances(path):
                if isinstance(inst, Exception):
                    rows.reject("bad_json", str(inst), where)
                else:
                    self._one(inst, rows, where)
        except (ValueError, OSError, EOFError) as exc:  # an unreadable file, or a broken JSON list
            rows.reject("bad_json", f"{type(exc).__name__}: {exc}", path)
        yield rows.take()

    def _one(self, inst: Any, rows: Rows, where: str) -> None:
        from .patches import PatchError, apply_hunks, parse_patch
        from .swebench import patch_of, pr_number

        p = self.params
        if not isinstance(inst, dict):
            rows.reject("malformed_instance", f"an instance is an object, not {type(inst).__name__}", where)
            return
        iid, repo, patch = inst.get("instance_id"), inst.get("repo"), patch_of(inst)
        problem = inst.get("problem_statement") or inst.get("text")
        if not (isinstance(iid, str) and isinstance(repo, str) and patch and isinstance(problem, str)):
            rows.reject("malformed_instance", "needs instance_id, repo, problem_statement and patch", where)
            return
        url = f"https://github.com/{repo}/pull/{pr_number(iid)}"
        fields = {"repo": repo, "record_kind": "swebench", "pr_number": pr_number(iid),
                  "base_commit": _sha(inst.get("base_commit"))}
        try:
            patches = parse_patch(patch)
            if not patches:
                raise Reject("bad_patch", "no file diff in the patch")
            clone = find_clone(p.clones, repo)
            git = gitrepo.open_repo(clone) if clone else None
            sha = inst.get("base_commit")
            base = git[sha] if git is not None and isinstance(sha, str) and sha in git else None
            files, tree = [], None
            for fp in patches:
                if fp.binary:
                    raise Reject("has_binary", f"{fp.path}: binary patch")
                if base is not None:
                    before = git[base.tree[fp.old_path].id].data.decode("utf-8") if fp.old_path else None
                    after = apply_hunks(before or "", fp.hunks) if fp.new_path else None
                    files.append(file_entry(fp.path, fp.old_path, fp.status, before, after))
                else:
                    before, after, _ = excerpt(fp.hunks)
                    files.append(file_entry(fp.path, fp.old_path, fp.status, before or None, after or None, partial=True))
            if base is not None:
                tree = gitrepo.tree_listing(base.tree, [f["old_path"] or f["path"] for f in files], p.tree_entries)
            limits = p.limits()
            check_sizes(files, patch, limits)
            languages = code_languages(files, limits)
        except PatchError as exc:
            rows.reject(exc.reason, exc.detail, url, fields, text=problem)
            return
        except (KeyError, UnicodeDecodeError) as exc:
            rows.reject("diff_mismatch", f"the patch does not fit the clone at base_commit: {exc}", url, fields, text=problem)
            return
        except Reject as exc:
            rows.reject(exc.reason, exc.detail, url, fields, text=problem)
            return
        record = dict(fields, text=document_text(problem, patch), problem=problem.strip(), commit=None,
                      created_at=inst["created_at"] if isinstance(inst.get("created_at"), str) else None, stars=None, languages=languages, files=files,
                      diff=patch, tree=tree)
        _count_record(self.stats, record)
        rows.add(record, url, {"instance_id": iid, "files": "whole" if tree is not None else "excerpts"})
