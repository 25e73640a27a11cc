"""Processes that go when their parent goes, kill -9 included.

A local Ray instance is a tree of processes the driver starts (GCS, raylet, monitors, the dashboard
and runtime-env agents, workers). On a normal exit `ray.shutdown()` stops them; after kill -9 of the
driver the agents were left to notice on their own, which took them up to a minute. A watcher
process holds the read end of a pipe whose write end only this process has: the kernel closes it
however this process ends, and the watcher then ends every descendant of this process it has seen.
A normal exit tells the watcher first (one byte down the pipe), so it then ends nothing: what stops
then is the owner's to stop (ray.shutdown), and a process the user meant to outlive it stays.

    watch_descendants(marks) -> starts the watcher (once per process) for descendants one of whose
                                command-line words starts with one of `marks` (a package folder's
                                path, a process title such as "ray::"), nothing else
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys

_WATCHER = r"""
import os, select, sys
import psutil

parent, marks = int(sys.argv[1]), sys.argv[2:]
seen = {}

def look():
    try:
        for p in psutil.Process(parent).children(recursive=True):
            if p.pid not in seen and p.pid != os.getpid():
                try:
                    words = p.cmdline()
                    if any(word.startswith(mark) for word in words for mark in marks):
                        seen[p.pid] = p
                except psutil.Error:
                    pass
    except psutil.Error:
        pass

look()
while not select.select([0], [], [], 1.0)[0]:  # until the pipe closes (EOF is readable)
    look()
if os.read(0, 1):  # the owner said goodbye: a normal exit, nothing to end
    sys.exit(0)
alive = [p for p in seen.values() if p.is_running()]
for p in alive:
    try:
        p.terminate()
    except psutil.Error:
        pass
_, alive = psutil.wait_procs(alive, timeout=3)
for p in alive:
    try:
        p.kill()
    except psutil.Error:
        pass
"""

_started: dict[tuple, int] = {}


def watch_descendants(marks: tuple[str, ...]) -> None:
    if marks in _started:
        return
    read_end, write_end = os.pipe()  # both non-inheritable: no later child of ours holds the write end
    subprocess.Popen([sys.executable, "-c", _WATCHER, str(os.getpid()), *marks], stdin=read_end,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(read_end)
    _started[marks] = write_end  # kept open for this process's life
    atexit.register(_stand_down, write_end)


def _stand_down(write_end: int) -> None:
    """A normal exit: the watcher ends nothing."""
    try:
        os.write(write_end, b"x")
    except OSError:  # the watcher is gone already
        pass
