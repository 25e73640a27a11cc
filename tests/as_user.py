"""Run a command as an unprivileged user, for root test runs that must also check a non-root caller.

`nobody` must be able to reach this interpreter, its packages and the checkout, which often live
under a home that only root may enter (pyenv in /root, a clone in /root/src). Nothing on the machine
is changed for that: the command runs in a private mount namespace in which every such directory is
covered by a tmpfs holding binds of only the subtrees the command needs (so the paths stay the same);
the namespace, and with it every cover, goes when the command ends.

    command(argv, needed, uid=65534) -> the argv that runs `argv` that way (a root caller only)

Run as a script (what `command` builds): as_user.py UID NEEDED_PATH... -- ARGV...
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

NOBODY = 65534


def command(argv: list[str], needed: list[str], uid: int = NOBODY) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", sys.executable, "-I", os.path.abspath(__file__),
            str(uid), *needed, "--", *argv]


def interpreter_paths() -> list[str]:
    """What this interpreter needs to start and import its packages."""
    paths = {sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), sys.executable}
    paths.update(p for p in sys.path if p and os.path.exists(p))
    return sorted(paths)


def _blocked(path: str) -> str | None:
    """The first directory on the way to `path` that others may not enter."""
    here = "/"
    for part in [p for p in path.split("/") if p][:-1] or []:
        here = os.path.join(here, part)
        if os.path.isdir(here) and not os.stat(here).st_mode & 0o001:
            return here
    return None


def _cover(blocked: str, needed: list[str]) -> None:
    """Put a tmpfs over `blocked`, holding binds of its children that lead to a needed path."""
    stage = tempfile.mkdtemp(prefix="as-user-")  # 0700: only root sees the original through it
    subprocess.run(["mount", "--bind", blocked, stage], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "tmpfs", blocked], check=True)
    children = {os.path.relpath(p, blocked).split("/")[0] for p in needed if p.startswith(blocked + "/")}
    for child in sorted(children):
        source, target = os.path.join(stage, child), os.path.join(blocked, child)
        if os.path.isdir(source):
            os.mkdir(target)
        else:
            open(target, "w").close()
        subprocess.run(["mount", "--bind", source, target], check=True)
    subprocess.run(["umount", "-l", stage], check=True)
    os.rmdir(stage)


def main() -> None:
    split = sys.argv.index("--")
    uid, needed, argv = int(sys.argv[1]), [os.path.realpath(p) for p in sys.argv[2:split]], sys.argv[split + 1:]
    needed += [p for p in sys.argv[2:split] if os.path.islink(p)]  # a venv's python is a link: its own path too
    for _ in range(16):  # a cover can reveal a child that is itself closed (/root/src/.venv 0700): repeat
        blocked = sorted({b for b in map(_blocked, needed) if b}, key=len)
        if not blocked:
            break
        _cover(blocked[0], needed)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
