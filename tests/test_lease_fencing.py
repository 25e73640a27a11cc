"""Leases when a writer pauses: a writer in another pid namespace (a container on the same host name)
is judged by its heartbeat, not taken for dead at once; a writer stopped past its lease (SIGSTOP, as a
job scheduler's suspend does) and taken over commits no shard and no manifest when it resumes, on
local disk and on S3; the staging folders of a killed S3 run are swept by the next one."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.pipeline import storage
from assay.pipeline.dataset import Dataset, Lease, OutputBusy, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

TESTS = Path(__file__).resolve().parent
SHARDS = 6
TTL = 3.0

# Writer A: the slow stage over six one-batch shards, a second per shard, two local workers.
WRITER = """
import sys
from assay.pipeline.runner import run_stage
from stages_for_tests import SlowUpper
run_stage(SlowUpper({"seconds_per_batch": 1.0}, stage_id="slow"), [sys.argv[1]], sys.argv[2],
          options={"workers": 2})
"""


def _unshare_works() -> bool:
    try:
        probe = subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "true"],
                               capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


needs_unshare = pytest.mark.skipif(not _unshare_works(), reason="needs unshare (user + pid namespaces)")


def start_writer(inp, out) -> subprocess.Popen:
    """Writer A in a pid namespace of its own, as in a container sharing this host's name."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               ASSAY_LEASE_HEARTBEAT_S="0.3", ASSAY_LEASE_TTL_S=str(TTL))
    return subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
                             sys.executable, "-c", WRITER, str(inp), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.time() < deadline, "timed out"
        time.sleep(0.1)


def snapshot(out) -> dict[str, bytes]:
    root = storage.as_path(out)
    return {name: (root / name).read_bytes() for name in sorted(storage.files_under(root))}


def docs_input(tmp_path: Path) -> Path:
    texts = [f"document {i} of the paused writer's input" for i in range(SHARDS * 4)]
    table = make_docs([{"text": t, "source": "s"} for t in texts])
    return write_table(table, tmp_path / "input", shards=SHARDS)


def output(where: str, tmp_path: Path, request) -> str:
    if where == "local":
        return str(tmp_path / "out")
    s3 = request.getfixturevalue("s3")
    return f"s3://{s3.current_bucket}/out"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@needs_unshare
def test_a_live_writer_in_another_pid_namespace_is_not_taken_for_dead(tmp_path, monkeypatch):
    from stages_for_tests import SlowUpper

    monkeypatch.setattr(Lease, "TTL_S", TTL)
    inp, out = docs_input(tmp_path), tmp_path / "out"
    proc = start_writer(inp, out)
    try:
        wait_for(lambda: (out / "_lease.json").exists(), proc)
        # Its pid means nothing in this namespace: it is alive while its heartbeats are (on main the
        # lease was taken over at once and both wrote).
        with pytest.raises(OutputBusy, match=r"another Assay run is writing it \(host .*, since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)"):
            run_stage(SlowUpper({"seconds_per_batch": 0.0}, stage_id="slow"), [inp], out)
        assert proc.poll() is None
    finally:
        stop(proc)


@needs_unshare
@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_writer_paused_past_its_lease_commits_nothing_after_losing_it(where, tmp_path, monkeypatch, request):
    from stages_for_tests import SlowUpper

    monkeypatch.setattr(Lease, "TTL_S", TTL)
    inp = docs_input(tmp_path)
    out = output(where, tmp_path, request)
    root = storage.as_path(out)
    proc = start_writer(inp, out)
    try:
        wait_for(lambda: storage.exists(root / "_shards" / "part-00000.json"), proc)  # A is mid-way
        os.killpg(proc.pid, signal.SIGSTOP)  # the whole job suspended
        time.sleep(TTL + 1)
        # B takes the output over (its lease expired) and finishes it.
        # (in this process: a forkserver an earlier test started has no S3 credentials in its environment)
        result = run_stage(SlowUpper({"seconds_per_batch": 0.0}, stage_id="slow"), [inp], out, options={"workers": 1})
        assert Dataset(out).complete and result.manifest["counts"]["rows_in"] == SHARDS * 4
        assert Dataset(out).manifest["fingerprint"] == result.manifest["fingerprint"]
        before = snapshot(out)
        os.killpg(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    # A stops with one line, and B's dataset is exactly as B left it: no shard, marker or manifest of A's.
    assert proc.returncode != 0, err
    lines = err.strip().splitlines()
    assert "lost its lease" in lines[-1], err
    assert snapshot(out) == before
    assert json.loads((root / "_manifest.json").read_bytes())["wall_seconds"] == result.manifest["wall_seconds"]


def test_staging_folders_of_a_killed_run_are_swept(tmp_path, monkeypatch):
    """A run killed while uploading leaves its staging folder; the next process's first staging
    folder removes it, and never one of a process still running."""
    monkeypatch.setenv("ASSAY_STAGING", str(tmp_path / "staging"))
    # beside them, what Assay did not make: a user's folder, and one named like staging but not by it
    users = [tmp_path / "staging" / "my-notes", tmp_path / "staging" / "assay-out-mine"]
    for folder in users:
        folder.mkdir(parents=True)
        (folder / "keep.txt").write_text("mine")
    made = subprocess.run([sys.executable, "-c", "from assay.pipeline import storage; import os; "
                           "print(storage.staging_dir()); os._exit(9)"],  # dies without cleaning up
                          capture_output=True, text=True, env=dict(os.environ), timeout=60)
    killed = Path(made.stdout.strip())
    assert killed.is_dir()
    (killed / "part-00000.parquet").write_bytes(b"x" * 1000)
    monkeypatch.setattr(storage, "_SWEPT", set())
    mine = storage.staging_dir()
    assert not killed.exists() and mine.is_dir()
    storage.sweep_staging(str(tmp_path / "staging"))  # this process's own folder stays
    assert mine.is_dir()
    assert not [p for p in (tmp_path / "staging").iterdir() if p != mine and p not in users]
    assert all((folder / "keep.txt").read_text() == "mine" for folder in users)
