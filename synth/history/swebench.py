"""SWE-bench instances as change records, and the registry the leakage guard checks records against.

An instance (SWE-bench's JSON: instance_id, repo, base_commit, problem_statement, patch — or
`golden_patch` in the evaluation dumps) becomes a record whose files are excerpts around the
golden patch's hunks, or whole files when a local clone holds the base commit.

The registry (data/swebench_registry.json.gz, built by `python -m assay.synth.history.swebench`)
lists every benchmark instance by repository, PR number, base commit, a hash of its whole patch and
a signature of each file's edit (patches.change_signature). A record leaks when it comes from the
same repository and PR or base commit, or when any of its file edits has a registry signature.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from .patches import PatchError, change_signature, parse_patch

DEFAULT_REGISTRY = Path(__file__).resolve().parent / "data" / "swebench_registry.json.gz"
_INSTANCE = re.compile(r"^(?P<owner>.+?)__(?P<name>.+)-(?P<number>\d+)$")


def pr_number(instance_id: str) -> int | None:
    """SWE-bench ids end in the PR number: `django__django-11099` is PR 11099 of django/django."""
    m = _INSTANCE.match(instance_id or "")
    return int(m.group("number")) if m else None


def patch_of(instance: dict) -> str | None:
    patch = instance.get("patch") or instance.get("golden_patch")
    return patch if isinstance(patch, str) else None


def patch_hash(patch: str) -> str:
    """The patch with git's `index` lines and hunk line numbers dropped, whitespace collapsed, hashed."""
    keep = []
    for line in patch.split("\n"):
        if line.startswith("index ") or line.startswith("diff --git"):
            continue
        if line.startswith("@@"):
            line = "@@"
        keep.append(" ".join(line.split()))
    return hashlib.sha1("\n".join(keep).strip().encode("utf-8", "surrogatepass")).hexdigest()[:20]


def signatures(patch: str) -> list[str]:
    """The change signature of each file edit in a patch (small edits have none)."""
    try:
        files = parse_patch(patch)
    except PatchError:
        return []
    return sorted({s for s in (change_signature(f.hunks) for f in files) if s})


# ---- the registry ----------------------------------------------------------------------------------

def dataset_name(path: str) -> str:
    """swe-bench-verified / -multilingual / -lite from a file name; else the file's stem."""
    low = os.path.basename(path).lower()
    for name in ("verified", "multilingual", "lite"):
        if name in low:
            return f"swe-bench-{name}"
    return Path(path).stem


def read_instances(path: str):
    """(where, instance or the error that stopped it) for each instance of a JSON list or JSON Lines
    file (plain or gzip); a broken line spoils only itself."""
    raw = Path(path).read_bytes()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    if text.lstrip().startswith("["):
        for k, item in enumerate(json.loads(text)):
            yield f"{path}#{k}", item
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield f"{path}:{lineno}", json.loads(line)
            except ValueError as exc:
                yield f"{path}:{lineno}", exc


def load_instances(path: str) -> list[dict]:
    return [x for _, x in read_instances(path) if isinstance(x, dict)]


def build_registry(sources: list[tuple[str, str]]) -> dict:
    """Registry entries from (dataset, file) pairs; an instance in several datasets keeps each name."""
    entries: dict[str, dict] = {}
    counts: dict[str, int] = {}
    for dataset, path in sources:
        for inst in load_instances(path):
            iid, patch = inst.get("instance_id"), patch_of(inst)
            if not isinstance(iid, str) or not isinstance(inst.get("repo"), str):
                continue
            counts[dataset] = counts.get(dataset, 0) + 1
            entry = entries.setdefault(iid, {
                "instance_id": iid, "repo": inst["repo"], "pr": pr_number(iid), "base_commit": inst.get("base_commit"),
                "patch_hash": patch_hash(patch) if patch else None, "signatures": signatures(patch) if patch else [],
                "datasets": []})
            if dataset not in entry["datasets"]:
                entry["datasets"].append(dataset)
    return {"format": 1, "datasets": counts, "instances": sorted(entries.values(), key=lambda e: e["instance_id"])}


class Registry:
    """Lookups over registry entries: by (repo, PR), (repo, base commit) and edit signature."""

    def __init__(self, data: dict, datasets: list[str] | None = None):
        wanted = set(datasets) if datasets else None
        self.entries = [e for e in data.get("instances", []) if wanted is None or wanted & set(e["datasets"])]
        self.by_pr = {(e["repo"].lower(), e["pr"]): e for e in self.entries if e.get("pr") is not None}
        self.by_commit = {(e["repo"].lower(), e["base_commit"]): e for e in self.entries if e.get("base_commit")}
        self.by_patch = {e["patch_hash"]: e for e in self.entries if e.get("patch_hash")}
        self.by_signature = {s: e for e in self.entries for s in e.get("signatures", [])}
        self.repos = {e["repo"].lower() for e in self.entries}

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, datasets: list[str] | None = None) -> "Registry":
        from assay.pipeline import storage

        path = storage.as_path(path or DEFAULT_REGISTRY)  # a file or a URL
        raw = storage.read_bytes(path)
        data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        return cls(data, datasets)

    def match(self, repo: str | None, pr: int | None, commits: list[str], diff: str | None,
              match: tuple[str, ...] = ("pr", "commit", "patch"), scope: str = "instance") -> tuple[dict, str] | None:
        """(registry entry, how) for the first way a record matches, else None."""
        repo_key = (repo or "").lower()
        if scope == "repository" and repo_key in self.repos:
            return next(e for e in self.entries if e["repo"].lower() == repo_key), "repository"
        if "pr" in match and pr is not None and (repo_key, pr) in self.by_pr:
            return self.by_pr[(repo_key, pr)], "pr"
        if "commit" in match:
            for sha in commits:
                if sha and (repo_key, sha) in self.by_commit:
                    return self.by_commit[(repo_key, sha)], "commit"
        if "patch" in match and diff:
            entry = self.by_patch.get(patch_hash(diff))
            if entry:
                return entry, "patch"
            for sig in signatures(diff):
                if sig in self.by_signature:
                    return self.by_signature[sig], "patch"
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m assay.synth.history.swebench",
        description="Build the SWE-bench leakage registry from instance files (JSON list or JSON Lines). "
                    "The dataset name comes from the file name (verified, multilingual, lite) or NAME=FILE.")
    parser.add_argument("files", nargs="+", help="FILE or NAME=FILE")
    parser.add_argument("-o", "--out", default=str(DEFAULT_REGISTRY), help="registry to write (.json or .json.gz)")
    args = parser.parse_args(argv)
    sources = [tuple(f.split("=", 1)) if "=" in f else (dataset_name(f), f) for f in args.files]
    data = build_registry(sources)
    raw = json.dumps(data, indent=0, sort_keys=True).encode()
    out = Path(args.out)
    out.write_bytes(gzip.compress(raw, mtime=0) if out.suffix == ".gz" else raw)
    print(f"{out}: {len(data['instances'])} instances {data['datasets']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
