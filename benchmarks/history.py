"""Commit-record speed: Assay's synth.commits against `git log -p` piped through a plain Python parser.

On a real repository (default: this project's own history, every branch, read from the shared git
directory; `--repo PATH` for any other), one run measures side by side, each the median of
`--repeats` passes after a warm-up:

1. baseline `git log -p`: `git log -p -M --no-merges` of every commit, split into commits and files
   by a straightforward Python parser (message, author date, paths, status, per-file diff text);
2. baseline `git log -p` + `git cat-file --batch`: the same plus every changed file's before and
   after contents, i.e. the information a record holds, still without any validation;
3. Assay, the record function (gitrepo.commit_record: pygit2 diff, contents, filters, and the round
   trip that re-applies every diff to its before-state);
4. Assay, end to end: `run_stage(synth.commits)` on the local engine with one worker (Parquet
   shards, rejects and manifest written).

It also checks that every commit became a record or a reject (no diff_mismatch), and compares the
files Assay kept with the baseline's parse of the same commits (same paths, same per-file diffs).

Run:  python benchmarks/history.py [--repo PATH] [--repeats 5]   (writes benchmarks/results/history.json)
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "history.json"
FORMAT = "%x00%H%x01%P%x01%aI%x01%B%x02"


# ---- baseline: git log -p, parsed in Python --------------------------------------------------------

def log_patch(repo: str, revs: list[str]) -> bytes:
    return subprocess.run(["git", "-C", repo, "log", "-p", "-M", "--no-merges", "--no-color", "--no-ext-diff",
                           f"--format={FORMAT}", *revs], check=True, capture_output=True).stdout


def parse_log(raw: bytes) -> list[dict]:
    commits = []
    for chunk in raw.split(b"\x00")[1:]:
        head, _, patch = chunk.partition(b"\x02")
        sha, parents, date, message = head.decode("utf-8", "replace").split("\x01", 3)
        files = []
        text = patch.decode("utf-8", "replace").lstrip("\n")
        for part in text.split("\ndiff --git ")[0:]:
            if not part.strip():
                continue
            part = part if part.startswith("diff --git ") else "diff --git " + part
            lines = part.split("\n")
            old = new = None
            status = "modified"
            for line in lines[1:8]:
                if line.startswith("--- "):
                    old = None if line[4:] == "/dev/null" else line[6:]
                elif line.startswith("+++ "):
                    new = None if line[4:] == "/dev/null" else line[6:]
                elif line.startswith("new file mode"):
                    status = "added"
                elif line.startswith("deleted file mode"):
                    status = "deleted"
                elif line.startswith("rename from "):
                    old, status = line[12:], "renamed"
                elif line.startswith("rename to "):
                    new = line[10:]
                elif line.startswith("Binary files"):
                    status = "binary"
            if old is None and new is None:  # mode-only change or pure rename header
                a, _, b = lines[0][len("diff --git "):].partition(" b/")
                old, new = a[2:], b
            files.append({"old": old, "new": new, "status": status, "diff": part if part.endswith("\n") else part + "\n"})
        commits.append({"sha": sha, "parents": parents.split(), "date": date, "message": message, "files": files})
    return commits


class CatFile:
    """A persistent `git cat-file --batch`: contents of `<rev>:<path>` without a process each."""

    def __init__(self, repo: str):
        self.proc = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def get(self, spec: str) -> bytes | None:
        self.proc.stdin.write(spec.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline()
        if header.endswith(b"missing\n"):
            return None
        size = int(header.split()[2])
        data = self.proc.stdout.read(size + 1)[:-1]
        return data

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def baseline(repo: str, revs: list[str], contents: bool) -> int:
    commits = parse_log(log_patch(repo, revs))
    if contents:
        cat = CatFile(repo)
        for c in commits:
            for f in c["files"]:
                f["before"] = cat.get(f"{c['sha']}^:{f['old']}") if f["old"] and c["parents"] else None
                f["after"] = cat.get(f"{c['sha']}:{f['new']}") if f["new"] else None
        cat.close()
    return len(commits)


# ---- Assay -----------------------------------------------------------------------------------------

def assay_records(repo_path: str, ids: list[str]) -> tuple[int, Counter, dict]:
    from assay.synth.history import gitrepo
    from assay.synth.history.records import Limits, Reject

    repo = gitrepo.open_repo(repo_path)
    name = gitrepo.repo_name(repo, repo_path)
    reasons: Counter = Counter()
    kept = {}
    for cid in ids:
        try:
            kept[cid] = gitrepo.commit_record(repo, repo[cid], name, Limits())
        except Reject as exc:
            reasons[exc.reason] += 1
    return len(ids), reasons, kept


def assay_stage(repo_path: str, rev: str) -> dict:
    from assay.pipeline.runner import run_stage
    from assay.synth.history.sources import Commits

    with tempfile.TemporaryDirectory() as tmp:
        result = run_stage(Commits({"paths": [repo_path], "rev": rev}), [], Path(tmp) / "out", options={"workers": 1})
        return result.manifest["counts"]


def hunks_of(file_diff: str) -> str:
    """A file's hunks without the file header lines (git and libgit2 differ there for empty files)
    and without the function context after each hunk header (they cut it at different widths)."""
    at = file_diff.find("\n@@")
    return re.sub(r"(?m)^(@@ [^@]* @@).*$", r"\1", file_diff[at + 1:]) if at >= 0 else ""


def timed(fn, repeats: int) -> tuple[float, object]:
    fn()  # warm-up: page cache, imports
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=None, help="repository to read (default: this project's git directory)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from assay.synth.history import gitrepo
    from assay.synth.history.patches import parse_patch

    repo_path = args.repo or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute",
                                             "--git-common-dir"], check=True, capture_output=True, text=True).stdout.strip()
    repo = gitrepo.open_repo(repo_path)
    # Every branch: one walk per branch tip, de-duplicated, merges included (both sides see them).
    tips = sorted({str(repo.references[r].peel().id) for r in repo.references if r.startswith("refs/heads/")})
    seen: dict[str, None] = {}
    for tip in tips:
        for cid in gitrepo.list_commits(repo, tip):
            seen.setdefault(cid, None)
    ids = list(seen)
    merges = sum(1 for c in ids if len(repo[c].parents) > 1)
    diff_bytes = len(log_patch(repo_path, tips))

    t_log, n_log = timed(lambda: baseline(repo_path, tips, contents=False), args.repeats)
    t_cat, _ = timed(lambda: baseline(repo_path, tips, contents=True), args.repeats)
    t_rec, (n_rec, reasons, kept) = timed(lambda: assay_records(repo_path, ids), args.repeats)

    # End to end over one branch tip per run (the stage reads one revision); the largest branch.
    main_tip = max(tips, key=lambda t: len(gitrepo.list_commits(repo, t)))
    n_main = len(gitrepo.list_commits(repo, main_tip))
    t_stage, counts = timed(lambda: assay_stage(repo_path, main_tip), args.repeats)

    # Agreement with the baseline: the files Assay kept, and their per-file diffs, for the same commits.
    base = {c["sha"]: c for c in parse_log(log_patch(repo_path, tips))}
    same_paths = same_diffs = files = 0
    for cid, rec in kept.items():
        theirs = {(f["new"] or f["old"]): hunks_of(f["diff"]) for f in base[cid]["files"]}
        ours = {f["path"] for f in rec["files"]}
        same_paths += ours <= set(theirs)
        for part in re.split(r"(?m)^(?=diff --git )", rec["diff"]):
            if part:
                files += 1
                path = parse_patch(part)[0].path
                same_diffs += theirs.get(path) == hunks_of(part)
    non_merge = len(ids) - merges
    result = {
        "repository": repo_path if args.repo else "this project's own git history (all branches)",
        "commits": len(ids), "merge_commits": merges, "branches": len(tips),
        "git_log_patch_bytes": diff_bytes,
        "baseline git log -p + parse": {"seconds": round(t_log, 4), "commits_per_s": round(n_log / t_log, 1)},
        "baseline git log -p + parse + cat-file contents": {"seconds": round(t_cat, 4), "commits_per_s": round(n_log / t_cat, 1)},
        "assay commit_record (pygit2, contents, filters, round trip)": {
            "seconds": round(t_rec, 4), "commits_per_s": round(n_rec / t_rec, 1),
            "speed_vs_git_log_p": round((n_rec / t_rec) / (n_log / t_log), 2),
            "speed_vs_git_log_p_with_contents": round((n_rec / t_rec) / (n_log / t_cat), 2),
            "records": len(kept), "rejects": dict(reasons.most_common())},
        "assay synth.commits stage end to end (1 worker)": {
            "commits": n_main, "seconds": round(t_stage, 4), "commits_per_s": round(n_main / t_stage, 1),
            "rows_out": counts["rows_out"], "rows_rejected": counts["rows_rejected"]},
        "agreement": {"baseline_commits (no merges)": n_log, "assay_commits (merges rejected)": non_merge,
                      "records_whose_files_the_baseline_also_lists": f"{same_paths}/{len(kept)}",
                      "per_file_hunks_identical_to_git": f"{same_diffs}/{files}",
                      "diff_mismatch_rejects": reasons.get("diff_mismatch", 0)},
        "repeats": args.repeats, "machine": platform.machine(), "python": platform.python_version(),
        "git": subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
    }
    import pygit2

    result["libgit2"] = pygit2.LIBGIT2_VERSION
    if not args.repo:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
