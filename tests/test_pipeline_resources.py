"""Every engine honours a stage's declared resources: a worker of a `cpus: 2` stage takes two of the
engine's cores (half the workers of a `cpus: 1` stage), and GPU workers are pinned to the devices
the parent process sees (a pre-narrowed CUDA_VISIBLE_DEVICES), sharing a device for fractional
`gpus` instead of inventing devices. No GPU is needed: the devices are simulated by the variable."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

from stages_for_tests import Occupancy

TASKS = 6


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    rows = [{"text": f"document {i}", "source": "t"} for i in range(TASKS)]
    return write_table(make_docs(rows), tmp_path_factory.mktemp("resources") / "in", shards=TASKS)


def occupancy(out: Path) -> tuple[int, dict[int, str | None]]:
    """(most batches running at one moment, the devices each worker pid ran with)."""
    rows = Dataset(out).read(columns=["worker_pid", "started", "ended", "devices"]).to_pylist()
    most = max(sum(1 for r in rows if r["started"] <= s["started"] < r["ended"]) for s in rows)
    devices: dict[int, set] = {}
    for r in rows:
        devices.setdefault(r["worker_pid"], set()).add(r["devices"])
    assert all(len(d) == 1 for d in devices.values()), devices  # a worker keeps its device
    return most, {pid: d.pop() for pid, d in devices.items()}


def run(engine, shards: Path, out: Path, seconds: float = 0.4, **resources):
    stage = Occupancy({"seconds_per_batch": seconds}, resources=resources)
    run_stage(stage, [shards], out, engine=engine, force=True)
    return occupancy(out)


@pytest.mark.parametrize("name", ["local", "spark", "ray"])
def test_a_two_core_stage_gets_half_the_workers(name, request, shards, tmp_path):
    engine = request.getfixturevalue(f"{name}_engine")  # 2 cores each (conftest)
    # 1 s batches: a second worker that starts a few seconds late (a loaded machine) still overlaps
    # the first one's remaining batches; with 0.4 s the first worker could finish all six alone.
    assert run(engine, shards, tmp_path / "one", seconds=1.0, cpus=1)[0] == 2
    assert run(engine, shards, tmp_path / "two", cpus=2)[0] == 1


def test_local_pool_is_bounded_by_free_memory(local_engine, shards, tmp_path):
    import psutil

    gib = psutil.virtual_memory().available / 2**30
    assert run(local_engine, shards, tmp_path / "mem", cpus=1, memory_gb=round(0.6 * gib, 2))[0] == 1


def test_gpu_slots_come_from_the_visible_devices():
    from assay.pipeline.engines.base import gpu_slots

    assert gpu_slots(1, ["5", "7"]) == ["5", "7"]
    assert gpu_slots(0.5, ["5", "7"]) == ["5", "7", "5", "7"]  # shared, spread over the devices
    assert gpu_slots(2, ["5", "7", "GPU-9"]) == ["5,7"]
    assert gpu_slots(0.3, ["3"]) == ["3", "3", "3"]
    assert gpu_slots(1, []) == []


@pytest.mark.parametrize("name", ["local", "spark"])
def test_gpu_workers_are_pinned_to_the_parents_devices(name, request, shards, tmp_path, monkeypatch):
    from assay.pipeline.engines import get_engine

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")  # what a scheduler narrowed this process to
    engine = request.getfixturevalue(f"{name}_engine")
    most, devices = run(engine, shards, tmp_path / "whole", gpus=1)
    assert most == 2 and sorted(devices.values()) == ["5", "7"]
    if name == "local":  # 4 cores, half a device each: two workers per device
        engine = get_engine("local", {"workers": 4})
    most, devices = run(engine, shards, tmp_path / "half", seconds=1.0, gpus=0.5)
    assert set(devices.values()) == {"5", "7"}
    assert max(list(devices.values()).count(d) for d in ("5", "7")) <= 2
    assert most == (4 if name == "local" else 2)


RAY_GPUS = """
import json, sys
sys.path.insert(0, sys.argv[3])
from assay.pipeline.runner import run_stage
from stages_for_tests import Occupancy
from test_pipeline_resources import occupancy
for gpus, out in ((1, "whole"), (0.5, "half")):
    run_stage(Occupancy({"seconds_per_batch": 1.0}, resources={"cpus": 1, "gpus": gpus}), [sys.argv[1]],
              f"{sys.argv[2]}/{out}", engine="ray", options={"workers": 4, "ray_object_store_mb": 128})
    print(json.dumps(occupancy(f"{sys.argv[2]}/{out}")))
"""


@pytest.mark.ray
def test_ray_actors_are_pinned_to_the_parents_devices(shards, tmp_path):
    """A fresh local Ray started under CUDA_VISIBLE_DEVICES=5,7 (the session's Ray has no GPUs)."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="5,7")
    out = subprocess.run([sys.executable, "-c", RAY_GPUS, str(shards), str(tmp_path), str(Path(__file__).parent)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    (whole_most, whole), (half_most, half) = [json.loads(line) for line in out.stdout.strip().splitlines()[-2:]]
    assert whole_most == 2 and sorted(whole.values()) == ["5", "7"]
    assert half_most == 4 and sorted(half.values()) == ["5", "5", "7", "7"]
