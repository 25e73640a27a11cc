"""Build examples/sample/history/assay-extractors.git, the commit history the demo's PR templates read.

It is the history of this project's own `extractors/` folder up to a fixed commit, split out with
`git subtree split` (which keeps each commit's author, dates and message, so the same commit gives the
same hashes) and repacked as a small bare repository. Run from a full clone (not a shallow one):

    .venv/bin/python examples/build_history.py
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "examples" / "sample" / "history" / "assay-extractors.git"
UPTO = "fa5584d8d5b62dd92cd2f68de50603796cdef6cd"  # the last main commit that touched extractors/ when built


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work, bare = Path(tmp) / "work", Path(tmp) / "bare.git"
        git("clone", "--quiet", "--no-local", str(REPO), str(work))
        head = git("subtree", "split", "--prefix=extractors", UPTO, cwd=work).splitlines()[-1]
        git("branch", "split", head, cwd=work)
        # --no-local copies only the split's objects; a local clone would hard-link the whole store.
        git("clone", "--quiet", "--bare", "--no-local", "--single-branch", "-b", "split", str(work), str(bare))
        git("gc", "--quiet", "--aggressive", "--prune=now", cwd=bare)
        if OUT.exists():
            shutil.rmtree(OUT)
        # The smallest bare repository git and libgit2 open: HEAD, config, a loose ref and one pack
        # (git keeps no empty folders, so the ref must be a file rather than packed-refs).
        (OUT / "refs" / "heads").mkdir(parents=True)
        (OUT / "objects" / "info").mkdir(parents=True)
        shutil.copytree(bare / "objects" / "pack", OUT / "objects" / "pack",
                        ignore=shutil.ignore_patterns("*.bitmap", "*.rev"))
        pack = next((OUT / "objects" / "pack").glob("*.pack")).name
        (OUT / "objects" / "info" / "packs").write_text(f"P {pack}\n\n")
        (OUT / "refs" / "heads" / "main").write_text(head + "\n")
        (OUT / "HEAD").write_text("ref: refs/heads/main\n")
        (OUT / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n")
    git("--git-dir", str(OUT), "fsck", "--no-progress")
    print(f"wrote {OUT}: {git('--git-dir', str(OUT), 'rev-list', '--count', 'HEAD')} commits, head {head}")


if __name__ == "__main__":
    main()
