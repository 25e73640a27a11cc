"""Commit records from a real git repository built here with the git CLI: every commit is a record or
a reject with a reason, records round-trip and agree with `git show`, corrupted diffs are caught, and
the templates' SEARCH/REPLACE blocks reproduce the change."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pygit2")

from assay.pipeline.dataset import Dataset  # noqa: E402
from assay.pipeline.runner import run_stage  # noqa: E402
from assay.synth.history import search_replace  # noqa: E402
from assay.synth.history.records import Reject, round_trip  # noqa: E402
from assay.synth.history.sources import Commits  # noqa: E402
from assay.synth.history.stages import Templates, Verify  # noqa: E402
from assay.synth.history.templates import localization, repair  # noqa: E402

ONE = {"workers": 1}
ENV = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_COMMITTER_NAME": "Ada",
       "GIT_COMMITTER_EMAIL": "ada@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
       "GIT_AUTHOR_DATE": "2024-03-01T12:00:00+01:00", "GIT_COMMITTER_DATE": "2024-03-01T12:00:00+01:00"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args], cwd=cwd,
                          env=ENV, check=True, capture_output=True, text=True).stdout.strip()


def write(root: Path, rel: str, data: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def commit(root: Path, message: str, *extra: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message, *extra)
    return git(root, "rev-parse", "HEAD")


APP = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(30))


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A repository whose commits cover every case; returns (path, {label: sha})."""
    base = tmp_path_factory.mktemp("history")
    sub = base / "vendored"
    sub.mkdir()
    git(sub, "init", "-q")
    write(sub, "lib.c", "int lib(void) { return 1; }\n")
    commit(sub, "vendored lib")
    root = base / "project"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "remote", "add", "origin", "https://github.com/example/project.git")
    shas: dict[str, str] = {}
    write(root, "src/app.py", APP)
    write(root, "src/util.py", "def helper(a, b):\n    return a * b\n")
    write(root, "src/old_module.py", "LEGACY = True\n")
    write(root, "src/crlf.py", "a = 1\r\nb = 2\r\nc = 3\r\n")
    write(root, "src/tail.py", "x = 1\ny = 2")  # no newline at the end
    write(root, "README.md", "# Project\n\nA demo.\n")
    write(root, "docs/guide.md", "Guide.\n")
    write(root, "setup.cfg", "[metadata]\nname = project\n")
    shas["initial"] = commit(root, "Initial import")
    write(root, "src/app.py", APP.replace("return x + 3\n", "return x + 3  # three\n").replace("return x + 27\n", "return x - 27\n"))
    write(root, "README.md", "# Project\n\nA small demo.\n")
    shas["edit"] = commit(root, "Fix f27 sign and document f3 (#42)\n\nf27 subtracted the wrong way round.")
    git(root, "mv", "src/util.py", "src/helpers.py")
    write(root, "src/helpers.py", "def helper(a, b):\n    return a * b\n\n\ndef other():\n    return 0\n")
    shas["rename"] = commit(root, "Rename util to helpers and add other()")
    git(root, "rm", "-q", "src/old_module.py")
    shas["delete"] = commit(root, "Remove the legacy module")
    write(root, "assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    write(root, "src/app.py", (root / "src/app.py").read_text().replace("return x + 10\n", "return x + 10.0\n"))
    shas["binary_and_code"] = commit(root, "Float f10 and add a logo")
    write(root, "assets/icon.png", bytes(range(255, -1, -1)) * 4)
    shas["binary_only"] = commit(root, "Add an icon")
    write(root, "src/legacy_latin1.py", "NAME = 'caf\xe9'\n".encode("latin-1"))
    shas["non_utf8"] = commit(root, "Add a Latin-1 module")
    write(root, "src/crlf.py", "a = 1\r\nb = 20\r\nc = 3\r\n")
    write(root, "src/tail.py", "x = 1\ny = 3")
    shas["crlf_tail"] = commit(root, "Change b and y")
    write(root, "docs/guide.md", "Guide, longer.\n")
    shas["docs_only"] = commit(root, "Docs only")
    shas["empty"] = commit(root, "Nothing at all", "--allow-empty")
    git(root, "checkout", "-q", "-b", "feature")
    write(root, "src/feature.py", "def feature():\n    return 'on'\n")
    shas["feature"] = commit(root, "Add feature")
    git(root, "checkout", "-q", "main")
    write(root, "src/app.py", (root / "src/app.py").read_text().replace("return x + 1\n", "return x + 1  # one\n"))
    shas["main_side"] = commit(root, "Note f1")
    git(root, "merge", "-q", "--no-ff", "-m", "Merge branch feature", "feature")
    shas["merge"] = git(root, "rev-parse", "HEAD")
    git(root, "submodule", "add", "-q", str(sub), "vendored")
    shas["submodule_add"] = commit(root, "Vendor lib as a submodule")
    write(sub, "lib.c", "int lib(void) { return 2; }\n")
    commit(sub, "lib returns 2")
    git(root / "vendored", "pull", "-q", "origin", "HEAD")
    shas["submodule_bump"] = commit(root, "Bump vendored lib")
    return root, shas


@pytest.fixture(scope="module")
def records(history, tmp_path_factory):
    root, _ = history
    out = tmp_path_factory.mktemp("out") / "commits"
    result = run_stage(Commits({"paths": [str(root)]}), [], out, options=ONE)
    return result, Dataset(out)


def by_commit(table: pa.Table) -> dict[str, dict]:
    return {r["commit"]: r for r in table.to_pylist()}


def test_every_commit_is_a_record_or_a_reject(history, records):
    root, shas = history
    result, ds = records
    kept, rejected = by_commit(ds.read()), by_commit(ds.read_rejects())
    all_commits = git(root, "rev-list", "HEAD").split()
    counts = result.manifest["counts"]
    assert counts["rows_in"] == len(all_commits) == counts["rows_out"] + counts["rows_rejected"]
    assert set(kept) | set(rejected) == set(all_commits) and not set(kept) & set(rejected)
    reason = {label: rejected[sha]["reject_reason"] for label, sha in shas.items() if sha in rejected}
    assert reason == {"binary_only": "only_binary", "non_utf8": "only_non_utf8", "docs_only": "no_code_files",
                      "empty": "empty_commit", "merge": "merge_commit", "submodule_add": "no_code_files",
                      "submodule_bump": "only_submodule"}
    assert all(rejected[sha]["reject_detail"] for sha in rejected)
    for label in ("initial", "edit", "rename", "delete", "binary_and_code", "crlf_tail", "feature", "main_side"):
        assert shas[label] in kept, label


def test_records_round_trip_and_agree_with_git(history, records):
    root, shas = history
    kept = by_commit(records[1].read())
    for sha, rec in kept.items():
        round_trip(rec["diff"], rec["files"])  # raises on any mismatch
        for f in rec["files"]:  # the ground truth: git's own view of both trees
            if f["after"] is not None:
                assert f["after"].encode() == subprocess.run(["git", "show", f"{sha}:{f['path']}"], cwd=root,
                                                             capture_output=True, check=True).stdout
            if f["before"] is not None:
                assert f["before"].encode() == subprocess.run(["git", "show", f"{sha}~1:{f['old_path']}"], cwd=root,
                                                              capture_output=True, check=True).stdout
    edit = kept[shas["edit"]]
    assert edit["pr_number"] == 42 and edit["repo"] == "example/project" and edit["created_at"] == "2024-03-01T12:00:00+01:00"
    assert edit["url"] == f"https://github.com/example/project/commit/{shas['edit']}"
    assert edit["text"].startswith("Fix f27 sign") and edit["diff"] in edit["text"]
    assert {f["path"]: f["language"] for f in edit["files"]} == {"src/app.py": "Python", "README.md": "Markdown"}
    assert "src/util.py" in edit["tree"] and "docs/" in edit["tree"]
    renamed = {f["status"]: f for f in kept[shas["rename"]]["files"]}["renamed"]
    assert (renamed["old_path"], renamed["path"]) == ("src/util.py", "src/helpers.py")
    deleted = kept[shas["delete"]]["files"][0]
    assert (deleted["status"], deleted["after"], deleted["before"]) == ("deleted", None, "LEGACY = True\n")
    mixed = kept[shas["binary_and_code"]]
    assert [f["path"] for f in mixed["files"]] == ["src/app.py"]
    assert json.loads(mixed["meta"])["skipped"] == [{"path": "assets/logo.png", "reason": "binary"}]
    tails = {f["path"]: f for f in kept[shas["crlf_tail"]]["files"]}
    assert tails["src/crlf.py"]["after"] == "a = 1\r\nb = 20\r\nc = 3\r\n" and tails["src/tail.py"]["after"] == "x = 1\ny = 3"


def test_a_corrupted_diff_is_caught(history, records, tmp_path):
    _, shas = history
    ds = records[1]
    rec = by_commit(ds.read())[shas["edit"]]
    bad = rec["diff"].replace("-    return x + 27\n", "-    return x + 28\n")
    assert bad != rec["diff"]
    with pytest.raises(Reject) as err:
        round_trip(bad, rec["files"])
    assert err.value.reason == "diff_mismatch"
    shifted = rec["diff"].replace("@@ -", "@@ -1", 1)  # a hunk moved far away
    with pytest.raises(Reject):
        round_trip(shifted, rec["files"])
    truncated = rec["diff"][: rec["diff"].rindex("\n", 0, len(rec["diff"]) - 2)]
    with pytest.raises(Reject) as err:
        round_trip(truncated, rec["files"])
    assert err.value.reason == "bad_patch"
    # The verify stage over a dataset holding the corrupted record rejects it and keeps the rest.
    table = ds.read()
    diffs = [bad if c == shas["edit"] else d for c, d in zip(table.column("commit").to_pylist(), table.column("diff").to_pylist())]
    table = table.set_column(table.column_names.index("diff"), "diff", pa.array(diffs, pa.string()))
    src = tmp_path / "in"
    run_stage(Commits({"paths": [str(history[0])]}), [], src, options=ONE)
    pq.write_table(table, next(src.glob("part-*.parquet")))
    result = run_stage(Verify(), [src], tmp_path / "verified", options=ONE)
    rejects = Dataset(tmp_path / "verified").read_rejects()
    assert rejects.column("commit").to_pylist() == [shas["edit"]]
    assert rejects.column("reject_reason").to_pylist() == ["diff_mismatch"]
    assert result.manifest["counts"]["rows_out"] == table.num_rows - 1


def test_search_replace_blocks_reproduce_every_change(records):
    kept = records[1].read().to_pylist()
    made = 0
    for rec in kept:
        try:
            doc = repair(rec)
        except Reject as exc:
            assert exc.reason in ("repair_unsupported", "no_final_newline"), exc
            continue
        made += 1
        assert "".join(s["text"] for s in doc.parts) == doc.text
        answer = "".join(s["text"] for s in doc.parts if s["role"] == "assistant")
        edits = search_replace.parse(answer)
        before = {f["path"]: f["before"] for f in rec["files"] if f["before"]}
        after = search_replace.apply_edits(before, edits)
        for f in rec["files"]:
            assert after.get(f["path"], "") == (f["after"] or "")
    assert made >= 4


def test_search_blocks_are_unique_and_merged():
    from assay.synth.history.patches import parse_patch

    before = "x = 1\n" * 5 + "y = 2\n" + "x = 1\n" * 5
    after = before.replace("y = 2", "y = 3")
    diff = "--- a/m.py\n+++ b/m.py\n@@ -5,3 +5,3 @@\n x = 1\n-y = 2\n+y = 3\n x = 1\n"
    edits = search_replace.edits_from_hunks("m.py", before, parse_patch(diff)[0].hunks)
    assert len(edits) == 1 and search_replace._occurrences(before, edits[0].search) == 1
    assert search_replace.apply_edits({"m.py": before}, search_replace.parse(search_replace.render(edits)))["m.py"] == after
    # Without context the repeated line would be ambiguous: the block widens until it is unique.
    bare = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 0\n"
    (edit,) = search_replace.edits_from_hunks("m.py", before, parse_patch(bare)[0].hunks)
    assert edit.search.count("\n") > 1 and search_replace._occurrences(before, edit.search) == 1
    assert search_replace.apply_edits({"m.py": before}, [edit])["m.py"] == before.replace("x = 1\n", "x = 0\n", 1)


def test_templates_stage_writes_documents_with_segments(records, tmp_path):
    src = records[1]
    result = run_stage(Templates(), [src], tmp_path / "dialogue", options=ONE)
    ds = Dataset(tmp_path / "dialogue")
    docs = ds.read().to_pylist()
    parents = {r["id"]: r for r in src.read().to_pylist()}
    assert docs and {d["template"] for d in docs} == {"localization", "repair"}
    for d in docs:
        assert "".join(s["text"] for s in d["segments"]) == d["text"]
        assert {s["role"] for s in d["segments"]} <= {"scaffold", "user", "assistant"}
        assert d["segments"][-1]["role"] == "assistant" and d["parent_id"] in parents
        assert d["files"] is None and d["repo"] == "example/project"
    loc = next(d for d in docs if d["template"] == "localization" and "f27" in d["text"])
    answer = loc["segments"][-1]["text"].split("\n")
    assert answer[:2] == ["src/app.py", "README.md"]
    counts = result.manifest["counts"]
    assert counts["rows_in"] == counts.get("rows_parent", 0) + counts["rows_rejected"]
    stats = result.manifest["statistics"]["counters"]
    assert stats["templates.made.repair"] >= 4 and stats["templates.made.localization"] >= 4


def test_cli_and_bad_repositories(history, tmp_path):
    from click.testing import CliRunner

    from assay.pipeline.cli import build_cli

    root, shas = history
    (tmp_path / "plain").mkdir()
    out = tmp_path / "cli"
    res = CliRunner().invoke(build_cli(), ["synth", "commits", str(root), str(tmp_path / "plain"), str(out),
                                           "--max-commits", "3", "--workers", "1"], standalone_mode=False)
    assert res.exit_code == 0, res.output
    ds = Dataset(out)
    rejects = ds.read_rejects()
    assert "not_a_repository" in rejects.column("reject_reason").to_pylist()
    assert ds.manifest["counts"]["rows_in"] == 3 + 1
    # skip_files off: a commit with a binary file beside code is rejected instead of trimmed.
    strict = run_stage(Commits({"paths": [str(root)], "skip_files": False}), [], tmp_path / "strict", options=ONE)
    assert strict.manifest["counts"]["rejected"]["has_binary"]["rows"] == 1


def _small_history(root: Path) -> list[str]:
    root.mkdir()
    git(root, "init", "-q")
    shas = []
    for i in range(4):
        write(root, f"mod{i}.py", APP.replace("return x", f"return {i} * x"))
        write(root, "app.py", APP + f"\nVERSION = {i}\n")
        shas.append(commit(root, f"step {i}"))
    return shas


def test_a_repository_missing_a_blob_gives_a_reject_not_a_crash(tmp_path):
    """A partial (or LFS-less) clone lacks some blobs: those commits are rejected with the reason, the
    others are still records."""
    root = tmp_path / "partial"
    shas = _small_history(root)
    blob = git(root, "rev-parse", f"{shas[2]}:mod2.py")  # the blob only commit 2 adds
    (root / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    result = run_stage(Commits({"paths": [str(root)]}, stage_id="commits"), [], tmp_path / "out", options=ONE)
    counts = result.manifest["counts"]
    assert counts["rows_in"] == 4 and counts["rows_out"] + counts["rows_rejected"] == 4
    rejects = Dataset(tmp_path / "out").read_rejects().to_pylist()
    missing = [r for r in rejects if r["reject_reason"] == "missing_object"]
    assert missing and blob[:12] in missing[0]["reject_detail"]
    assert counts["rows_out"] >= 1


def test_a_shallow_clones_boundary_commit_is_not_diffed_against_an_empty_tree(tmp_path):
    shas = _small_history(tmp_path / "full")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "2", f"file://{tmp_path / 'full'}", str(shallow))
    result = run_stage(Commits({"paths": [str(shallow)]}, stage_id="commits"), [], tmp_path / "out", options=ONE)
    table = Dataset(tmp_path / "out").read()
    kept = table.column("commit").to_pylist()
    assert kept == [shas[3]]  # the boundary commit's parent is not here: no "add the whole repository"
    rejects = Dataset(tmp_path / "out").read_rejects().to_pylist()
    assert [r["reject_reason"] for r in rejects] == ["shallow_boundary"]
    assert result.manifest["counts"]["rows_in"] == 2
