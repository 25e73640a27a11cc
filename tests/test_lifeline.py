"""The Ray lifeline watcher ends only Ray's own processes, and only when its driver dies without a
normal exit: a user's process whose path merely contains `/ray/` is left alone, and a normal exit
ends nothing (ray.shutdown stops Ray's processes then)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from assay.pipeline.engines.ray import ray_process_marks

# The driver: starts the watcher with Ray's marks, then two children, prints their pids, then either
# waits to be killed or exits normally.
DRIVER = """
import subprocess, sys, time
from assay.pipeline.engines.lifeline import watch_descendants
from assay.pipeline.engines.ray import ray_process_marks
watch_descendants(ray_process_marks())
user = subprocess.Popen([sys.executable, sys.argv[1], "60"], start_new_session=True)  # a user's /ray/ tool
titled = subprocess.Popen(["bash", "-c", 'exec -a "ray::IDLE" sleep 60'], start_new_session=True)  # a Ray worker's title
print(user.pid, titled.pid, flush=True)
time.sleep(2.5)  # the watcher looks once a second
if sys.argv[2] == "exit":
    sys.exit(0)
time.sleep(60)
"""


def run_driver(tmp_path, how: str) -> tuple[subprocess.Popen, psutil.Process, psutil.Process]:
    tool = tmp_path / "data" / "ray" / "tool.py"
    tool.parent.mkdir(parents=True)
    tool.write_text("import sys, time\ntime.sleep(float(sys.argv[1]))\n")
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tool), how], stdout=subprocess.PIPE, text=True)
    user, titled = (psutil.Process(int(p)) for p in proc.stdout.readline().split())
    return proc, user, titled


def alive(p: psutil.Process) -> bool:
    return p.is_running() and p.status() != psutil.STATUS_ZOMBIE


def cleanup(*procs: psutil.Process) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def test_marks_are_the_ray_package_and_worker_titles_only():
    marks = ray_process_marks()
    assert "ray::" in marks and "/ray/" not in marks
    assert all(m == "ray::" or m.rstrip("/").endswith("/ray") and os.path.isabs(m) for m in marks)


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_the_watcher_ends_only_rays_processes_and_only_when_the_driver_is_killed(tmp_path, how):
    proc, user, titled = run_driver(tmp_path, how)
    try:
        if how == "kill":
            time.sleep(3)
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(5)  # the watcher's turn: EOF, then terminate, wait 3 s, kill
        assert alive(user)  # never Ray's, whatever its path says
        assert alive(titled) == (how == "exit")  # Ray's: ended after kill -9, left to ray.shutdown on exit
    finally:
        cleanup(user, titled)
