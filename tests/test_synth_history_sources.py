"""GHArchive events joined into PR records, SWE-bench instances as records, the leakage guard and the
templates on both. Inputs are the fixtures in tests/fixtures/history/ (see NOTICE there) and git
repositories built here with the git CLI."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("pygit2")

from assay.pipeline.dataset import Dataset  # noqa: E402
from assay.pipeline.runner import run_stage  # noqa: E402
from assay.synth.history import search_replace  # noqa: E402
from assay.synth.history.patches import parse_patch  # noqa: E402
from assay.synth.history.records import excerpt  # noqa: E402
from assay.synth.history.sources import Commits, PullRequests, SwebenchInstances  # noqa: E402
from assay.synth.history.stages import Leakage, Templates  # noqa: E402
from assay.synth.history.swebench import Registry, signatures  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "history"
EVENTS = FIXTURES / "gharchive-events.json"
SWEBENCH = FIXTURES / "swebench-sample.jsonl"
ONE = {"workers": 1}
ENV = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_COMMITTER_NAME": "Ada",
       "GIT_COMMITTER_EMAIL": "ada@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=ENV, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def rows(ds: Dataset, rejects: bool = False) -> list[dict]:
    return (ds.read_rejects() if rejects else ds.read()).to_pylist()


def test_gharchive_events_join_into_pull_requests(tmp_path):
    result = run_stage(PullRequests({"paths": [str(EVENTS)], "min_stars": 10}), [], tmp_path / "prs", options=ONE)
    ds = Dataset(tmp_path / "prs")
    (pr,) = rows(ds)
    assert (pr["repo"], pr["pr_number"], pr["record_kind"], pr["stars"]) == ("octo-org/widgets", 11, "pr", 58)
    meta = json.loads(pr["meta"])
    # The closing event's snapshot wins; the duplicated comment is kept once; the issue it fixes is the problem.
    assert meta["title"] == "Guard against zero width in area()" and meta["merged"] is True
    assert meta["comments"] == 1 and meta["review_comments"] == 1 and meta["linked_issues"] == [10]
    assert pr["problem"].startswith("area() crashes when width is zero")
    assert pr["text"].count("Could you add a test") == 1 and "Maybe compare with <= 0?" in pr["text"]
    assert "Thanks, works now." in pr["text"] and pr["files"] is None and meta["patch"] == "none"
    reasons = sorted(r["reject_reason"] for r in rows(ds, rejects=True))
    assert reasons == ["bad_json", "low_stars", "malformed_event", "no_pull_request"]
    counters = result.manifest["statistics"]["counters"]
    assert counters["events.other_type"] == 2 and counters["issues.unlinked"] == 1 and counters["issues.linked"] == 1
    # Partitioned by repository, the join gives the same records.
    run_stage(PullRequests({"paths": [str(EVENTS)], "min_stars": 10, "partitions": 3}), [], tmp_path / "p3", options=ONE)
    again = rows(Dataset(tmp_path / "p3"))
    assert [r["id"] for r in again] == [pr["id"]]
    assert sorted(r["reject_reason"] for r in rows(Dataset(tmp_path / "p3"), rejects=True)) == reasons


def widgets_clone(tmp_path: Path) -> tuple[str, str, str]:
    """A clone (tmp_path/clones/octo-org/widgets) whose pull request #11 the events name, merged:
    (base, head, merge) commit ids; the events with those ids are tmp_path/events.json."""
    clone = tmp_path / "clones" / "octo-org" / "widgets"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    (clone / "widgets").mkdir()
    (clone / "widgets" / "__init__.py").write_text("")
    (clone / "widgets" / "text.py").write_text("def label(x):\n    return str(x)\n")
    (clone / "README.md").write_text("# widgets\n")
    (clone / "setup.py").write_text("from setuptools import setup\nsetup(name='widgets')\n")
    geometry = "def area(width, height):\n    ratio = height / width\n    return width * width * ratio\n"
    (clone / "widgets" / "geometry.py").write_text(geometry)
    base = commit_all(clone, "geometry")
    git(clone, "checkout", "-q", "-b", "fix")
    (clone / "widgets" / "geometry.py").write_text(geometry.replace("    ratio", "    if width == 0:\n        return 0\n    ratio"))
    head = commit_all(clone, "Guard against zero width")
    git(clone, "checkout", "-q", "main")
    git(clone, "merge", "-q", "--no-ff", "-m", "Merge pull request #11 from dev1/fix", "fix")
    merge = git(clone, "rev-parse", "HEAD")
    events = EVENTS.read_text().replace("1" * 40, base).replace("2" * 40, head).replace("3" * 40, merge)
    (tmp_path / "events.json").write_text(events)
    return base, head, merge


def test_pull_request_with_a_clone_gets_a_verified_change(tmp_path):
    base, head, merge = widgets_clone(tmp_path)
    run_stage(PullRequests({"paths": [str(tmp_path / "events.json")], "clones": str(tmp_path / "clones")}), [],
              tmp_path / "prs", options=ONE)
    pr = next(r for r in rows(Dataset(tmp_path / "prs")) if r["pr_number"] == 11)
    assert (pr["commit"], pr["base_commit"], pr["languages"]) == (merge, base, ["Python"])
    (f,) = pr["files"]
    assert f["path"] == "widgets/geometry.py" and "return 0" in f["after"] and "return 0" not in f["before"]
    assert "widgets/text.py" in pr["tree"] and pr["diff"] in pr["text"]
    run_stage(Templates(), [tmp_path / "prs"], tmp_path / "dialogue", options=ONE)
    docs = {d["template"]: d for d in rows(Dataset(tmp_path / "dialogue")) if d["parent_id"] == pr["id"]}
    assert set(docs) == {"localization", "repair"}
    assert docs["localization"]["segments"][-1]["text"] == "widgets/geometry.py\n"
    assert "area() crashes when width is zero" in docs["repair"]["text"]
    edits = search_replace.parse(docs["repair"]["segments"][-1]["text"])
    assert search_replace.apply_edits({f["path"]: f["before"]}, edits)[f["path"]] == f["after"]


def test_swebench_instances_templates_and_leakage(tmp_path):
    result = run_stage(SwebenchInstances({"paths": [str(SWEBENCH)]}), [], tmp_path / "swe", options=ONE)
    ds = Dataset(tmp_path / "swe")
    records = rows(ds)
    assert result.manifest["counts"]["rows_in"] == 7
    assert sorted(r["reject_reason"] for r in rows(ds, rejects=True)) == ["bad_json", "malformed_instance"]
    assert {r["repo"] for r in records} == {"scikit-learn/scikit-learn", "pallets/flask", "django/django", "sqlfluff/sqlfluff"}
    for r in records:
        assert all(f["partial"] for f in r["files"]) and r["tree"] is None
    # Repair documents from the golden patches: their blocks reproduce the patched excerpts.
    run_stage(Templates(), [tmp_path / "swe"], tmp_path / "dialogue", options=ONE)
    docs = rows(Dataset(tmp_path / "dialogue"))
    assert len(docs) == len(records) and {d["template"] for d in docs} == {"repair"}
    by_id = {r["id"]: r for r in records}
    for d in docs:
        assert "".join(s["text"] for s in d["segments"]) == d["text"]
        rec = by_id[d["parent_id"]]
        patches = {fp.path: fp for fp in parse_patch(rec["diff"])}
        edits = search_replace.parse(d["segments"][-1]["text"])
        before = {p: excerpt(fp.hunks)[0] for p, fp in patches.items()}
        after = search_replace.apply_edits(before, edits)
        assert all(after[p] == excerpt(fp.hunks)[1] for p, fp in patches.items())
    # The guard drops the three SWE-bench Verified instances (by repository and PR) and, restricted
    # to Verified, keeps the Lite dev ones; over all shipped benchmarks it drops them too.
    run_stage(Leakage({"datasets": ["swe-bench-verified"]}), [tmp_path / "swe"], tmp_path / "clean", options=ONE)
    clean = Dataset(tmp_path / "clean")
    assert {r["repo"] for r in rows(clean)} == {"sqlfluff/sqlfluff"}
    leaks = rows(clean, rejects=True)
    assert len(leaks) == 3 and all(r["reject_reason"] == "swebench_leak" and "(matched by pr)" in r["reject_detail"] for r in leaks)
    assert any("django__django-14315" in r["reject_detail"] for r in leaks)
    run_stage(Leakage(), [tmp_path / "swe"], tmp_path / "clean_all", options=ONE)
    assert rows(Dataset(tmp_path / "clean_all")) == []
    # The template documents carry repo and PR number, so the guard works on them as well.
    run_stage(Leakage({"datasets": ["swe-bench-verified"]}), [tmp_path / "dialogue"], tmp_path / "clean_docs", options=ONE)
    assert {r["repo"] for r in rows(Dataset(tmp_path / "clean_docs"))} == {"sqlfluff/sqlfluff"}


def test_leakage_by_commit_content_in_another_repository(tmp_path):
    """A fork that re-commits a Verified golden patch under another name is caught by the patch's
    edit signatures; the same repository without that change passes."""
    inst = next(json.loads(line) for line in SWEBENCH.read_text().splitlines()
                if line.startswith("{\"") and "django__django-14315" in line)
    assert signatures(inst["golden_patch"])
    root = tmp_path / "fork"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "remote", "add", "origin", "git@github.com:someone/renamed-fork.git")
    patches = parse_patch(inst["golden_patch"])
    for fp in patches:
        path = root / fp.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(excerpt(fp.hunks)[0])
    commit_all(root, "Import the client code")
    for fp in patches:
        (root / fp.path).write_text(excerpt(fp.hunks)[1])
    leaked = commit_all(root, "Use the default environment for the client")
    run_stage(Commits({"paths": [str(root)]}), [], tmp_path / "commits", options=ONE)
    run_stage(Leakage({"match": ["patch"]}), [tmp_path / "commits"], tmp_path / "clean", options=ONE)
    clean = Dataset(tmp_path / "clean")
    (leak,) = rows(clean, rejects=True)
    assert leak["commit"] == leaked and "django__django-14315 (matched by patch)" in leak["reject_detail"]
    assert [r["problem"] for r in rows(clean)] == ["Import the client code"]


def test_registry_lookups():
    reg = Registry.load()
    assert len(reg.entries) == 730  # 500 Verified + 323 Lite, 93 in both
    verified = Registry.load(datasets=["swe-bench-verified"])
    assert len(verified.entries) == 500
    assert verified.match("Django/Django", 11099, [], None) is not None  # case-insensitive repository
    assert verified.match("django/django", 1, [], None) is None
    entry, how = verified.match("astropy/astropy", None, ["d16bfe05a744909de4b27f5875fe0d4ed41ce607"], None)
    assert (entry["instance_id"], how) == ("astropy__astropy-12907", "commit")
    assert verified.match("django/django", 1, [], None, scope="repository")[1] == "repository"


def test_report_section_reads_the_manifests(tmp_path):
    from assay.synth.history.report import report_section

    run_stage(SwebenchInstances({"paths": [str(SWEBENCH)]}), [], tmp_path / "swe", options=ONE)
    run_stage(Templates(), [tmp_path / "swe"], tmp_path / "dialogue", options=ONE)
    html = report_section(tmp_path)
    assert "Code history" in html and "Template yields" in html and "sqlfluff/sqlfluff" in html
    assert "malformed_instance" in html and "no_tree: 5" in html and "<img" in html
    assert report_section(tmp_path / "nothing") is None


def test_malformed_inputs_are_rejects_not_crashes(tmp_path):
    odd = [
        [], "a string", {"type": "PullRequestEvent"}, {"type": "ForkEvent", "repo": {"name": "a/b"}, "payload": {}}, {"type": "PullRequestEvent", "repo": "a/b", "payload": {}},
        {"type": "PullRequestEvent", "repo": {"name": "a/b"}, "payload": {"number": "7"}},
        {"type": "IssueCommentEvent", "repo": {"name": "a/b"}, "payload": {"issue": {"number": 1}, "comment": "hi"}},
        {"type": "IssuesEvent", "repo": {"name": "a/b"}, "payload": {"issue": [1]}},
        {"type": "PullRequestEvent", "repo": {"name": "a/b"}, "payload": {"number": 5, "pull_request": {
            "title": 12, "body": ["x"], "head": "not-an-object", "base": {"sha": 3, "repo": {"stargazers_count": True}},
            "created_at": 1700000000, "merged": "yes"}}},
    ]
    (tmp_path / "odd.json").write_text("\n".join(json.dumps(e) for e in odd) + "\n\x00\xff garbage\n")
    (tmp_path / "broken.json.gz").write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    result = run_stage(PullRequests({"paths": [str(tmp_path / "odd.json"), str(tmp_path / "broken.json.gz")],
                                     "clones": str(tmp_path)}), [], tmp_path / "prs", options=ONE)
    ds = Dataset(tmp_path / "prs")
    (pr,) = rows(ds)
    assert (pr["repo"], pr["pr_number"], pr["created_at"], pr["commit"], pr["stars"]) == ("a/b", 5, None, None, None)
    reasons = result.manifest["counts"]["rejected"]
    assert reasons["malformed_event"]["rows"] == 7 and reasons["bad_json"]["rows"] == 1 and reasons["corrupt_file"]["rows"] == 1
    assert result.manifest["statistics"]["counters"]["events.other_type"] == 1
    bad_swe = tmp_path / "swe.jsonl"
    bad_swe.write_text("\n".join(json.dumps(x) for x in [
        {"instance_id": "a__b-1", "repo": "a/b", "problem_statement": "p", "patch": "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-x\n"},
        {"instance_id": "a__b-2", "repo": "a/b", "problem_statement": "p", "patch": "not a diff at all"},
        {"instance_id": "a__b-3", "repo": "a/b", "problem_statement": "p", "patch": "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n",
         "base_commit": ["not", "a", "sha"], "created_at": 5},
        [1, 2]]) + "\n")
    result = run_stage(SwebenchInstances({"paths": [str(bad_swe)]}), [], tmp_path / "swe", options=ONE)
    assert {k: v["rows"] for k, v in result.manifest["counts"]["rejected"].items()} == {"bad_patch": 2, "malformed_instance": 1}
    (kept,) = rows(Dataset(tmp_path / "swe"))
    assert kept["pr_number"] == 3 and kept["base_commit"] is None and kept["created_at"] is None
