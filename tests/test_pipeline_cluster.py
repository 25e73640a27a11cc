"""The demo recipe against real clusters on 127.0.0.1, reached by address: a Spark standalone
master + worker started from the pyspark install, and a Ray head started with `ray start --head`.
Each run happens in its own `assay run` process, as a user would do it, and must match local output."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.pipeline.recipe import load_recipe
from assay.pipeline.runner import run_recipe

from conftest import DEMO_RECIPE, LOCAL_OPTIONS
from snapshots import snapshot

pytestmark = pytest.mark.cluster
# Every source and map stage of the demo, on the cluster. The shuffle-bound stages are left to the
# engine tests (Spark and Ray on this machine, the whole demo): on a standalone cluster the first
# two dedup stages alone took 40 s of make test's 15 minutes.
CLUSTER_UNTIL = "script"
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def start(cmd: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, **(env or {})))


def stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=20)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def assay_run(workdir: Path, *args: str) -> None:
    result = subprocess.run([str(BIN / "assay"), "run", str(DEMO_RECIPE), "--workdir", str(workdir), "--no-report",
                             "--until", CLUSTER_UNTIL, *args],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    recipe = load_recipe(DEMO_RECIPE)
    workdir = tmp_path_factory.mktemp("cluster-ref")
    run_recipe(recipe, workdir=workdir, engine="local", options=LOCAL_OPTIONS, until=CLUSTER_UNTIL, log=lambda *_: None)
    return [s for s in recipe.order() if (workdir / s).exists()], workdir


def test_spark_standalone_cluster_by_address(tmp_path, local_reference):
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    env = {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(tmp_path / "worker"), "SPARK_LOG_DIR": str(tmp_path)}
    port = free_port()
    master = start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(free_port())], tmp_path / "master.log", env)
    worker = None
    try:
        wait_for_port(port)
        worker = start([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                        "--host", "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", str(free_port())],
                       tmp_path / "worker.log", env)
        order, ref = local_reference
        assay_run(tmp_path / "run", "--engine", "spark", "--spark-master", f"spark://127.0.0.1:{port}")
        manifest = (tmp_path / "run" / order[-1] / "_manifest.json").read_text()
        assert f"spark://127.0.0.1:{port}" in manifest
        assert snapshot(tmp_path / "run", order) == snapshot(ref, order)
        # a `cpus: 2` stage asks Spark for two cores a task (task resources): one task at a time on 2 cores
        assert occupancy_on(f"spark://127.0.0.1:{port}", tmp_path) == [2, 1]
    finally:
        if worker:
            stop(worker)
        stop(master)


OCCUPANCY = """
import json, sys
from assay.pipeline.dataset import write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from stages_for_tests import Occupancy
from test_pipeline_resources import occupancy
docs = write_table(make_docs({"text": f"doc {i}", "source": "t"} for i in range(6)), sys.argv[2] + "/docs", shards=6)
most = []
for cpus in (1, 2):
    out = f"{sys.argv[2]}/cpus{cpus}"
    run_stage(Occupancy({"seconds_per_batch": 1.0}, resources={"cpus": cpus}), [docs], out, engine="spark",
              options={"spark_master": sys.argv[1]})
    most.append(occupancy(out)[0])
print(json.dumps(most))
"""


def occupancy_on(master: str, tmp_path: Path) -> list[int]:
    """Most tasks at once of a `cpus: 1` and a `cpus: 2` stage on a Spark master (own driver process)."""
    result = subprocess.run([sys.executable, "-c", OCCUPANCY, master, str(tmp_path)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_ray_head_by_address(tmp_path, local_reference):
    port = free_port()
    head = start([str(BIN / "ray"), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                  "--num-cpus", "2", "--include-dashboard", "false", "--object-store-memory", str(300 * 2**20),
                  "--disable-usage-stats", "--block"], tmp_path / "ray.log", {"RAY_AUTH_MODE": "disabled"})
    try:
        wait_for_port(port)
        order, ref = local_reference
        assay_run(tmp_path / "run", "--engine", "ray", "--ray-address", f"127.0.0.1:{port}")
        manifest = (tmp_path / "run" / order[-1] / "_manifest.json").read_text()
        assert f"ray[127.0.0.1:{port}]" in manifest
        assert snapshot(tmp_path / "run", order) == snapshot(ref, order)
    finally:
        stop(head)
