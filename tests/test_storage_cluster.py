"""Clusters with no shared disk: a Spark standalone master with two workers, and a Ray head with a
second node, each worker with its own scratch folder (TMPDIR and ASSAY_STAGING of its own) and its
own S3 credentials in its environment; the demo's inputs and outputs on the S3 server
(tests/s3server.py), so no local path is common to the driver and the workers for data. Every stage
of the demo (sources, map, the global dedup plans, fit-then-apply, side datasets, synthesis) must give
the same bytes as the local engine's run on local disk, and each worker's scratch folder must have
been used (so both workers wrote shards). Where the tests may make mount namespaces (root), each node
and the driver run in one of their own in which the others' scratch folders are empty: a file one
of them leaves on its local disk for another is not there, as on separate machines. Each node offers
2 cores: the demo's embed stage asks for `cpus: 2`, which a 1-core node could never host."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE
from test_pipeline_cluster import free_port, start, stop, wait_for_port
from test_storage_s3 import INPUT_FOLDERS, data_files, local_files, objects, s3_recipe, upload

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # the whole demo on a cluster: make test-all
BIN = Path(sys.executable).parent
NODE_CORES = "2"
RUN_TIMEOUT = 3600  # seconds; the whole demo on 2 shared cores


@pytest.fixture(scope="module")
def local_reference(local_demo):
    _, workdir, _ = local_demo
    return data_files(local_files(workdir))


def worker_env(s3, scratch: Path, tmpdir: bool = True) -> dict[str, str]:
    """A worker's own environment: its credentials and scratch folders, nothing shared. (A Ray node
    keeps the system temp folder: its sockets' paths must stay under 108 bytes.)"""
    return {**s3.env, **({"TMPDIR": str(scratch / "tmp")} if tmpdir else {}), "ASSAY_STAGING": str(scratch / "staging")}


def _can_hide() -> bool:
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


HIDE = _can_hide()


def own_disk(cmd: list[str], own: Path, scratches: list[Path]) -> list[str]:
    """`cmd` in a mount namespace where every scratch folder but its own is an empty tmpfs (as is
    when mount namespaces are unavailable)."""
    hidden = [str(s) for s in scratches if s != own]
    if not HIDE or not hidden:
        return cmd
    mounts = " && ".join(f"mount -t tmpfs -o size=1m assay-hidden {shlex.quote(h)}" for h in hidden)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh", *cmd]


def prepare(s3, tmp_path):
    """The sample on S3 and the scratch folders: node1, node2, then the driver's."""
    fs = s3.filesystem()
    sample = f"s3://{s3.current_bucket}/sample"
    for folder in INPUT_FOLDERS:
        upload(fs, SAMPLE / folder, f"{sample}/{folder}")
    scratches = [tmp_path / name for name in ("node1", "node2", "driver")]
    for scratch in scratches:
        (scratch / "tmp").mkdir(parents=True)
    return fs, s3_recipe(tmp_path, sample), scratches


def run_driver(s3, scratches: list[Path], *args: str, tmpdir: bool = True) -> subprocess.CompletedProcess:
    """`assay run ...` as a driver with its own scratch folders, seeing neither node's."""
    cmd = own_disk([str(BIN / "assay"), "run", *args, "--no-report"], scratches[-1], scratches)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          env=dict(os.environ, **worker_env(s3, scratches[-1], tmpdir)))


def check_run(s3, fs, prefix: str, reference: dict, scratches: list[Path], said: str) -> None:
    stored = objects(fs, prefix)
    ours = data_files(stored)
    assert sorted(ours) == sorted(reference)
    assert [k for k in reference if ours[k] != reference[k]] == []  # the files whose bytes differ
    for scratch in scratches[:2]:  # each node staged shards in its own folder (created on first use)
        assert (scratch / "staging").is_dir(), f"{scratch} was never used: that node wrote nothing"
    for data in (said.encode(), *stored.values()):
        assert s3.secret_key.encode() not in data


def test_spark_standalone_two_workers_no_shared_disk(s3, tmp_path, local_reference):
    import pyspark

    fs, recipe, scratches = prepare(s3, tmp_path)
    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    base = {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOG_DIR": str(tmp_path)}
    port = free_port()
    master = start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(free_port())], tmp_path / "master.log", base)
    workers = []
    try:
        wait_for_port(port)
        for i, scratch in enumerate(scratches[:2]):
            env = dict(base, SPARK_WORKER_DIR=str(scratch / "work"), **worker_env(s3, scratch))
            workers.append(start(own_disk([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                           "--host", "127.0.0.1", "--cores", NODE_CORES, "--memory", "1g",
                                           "--webui-port", str(free_port())], scratch, scratches),
                                 tmp_path / f"worker{i}.log", env))
        prefix = f"{s3.current_bucket}/runs/spark"
        result = run_driver(s3, scratches, str(recipe), "--workdir", f"s3://{prefix}",
                            "--engine", "spark", "--spark-master", f"spark://127.0.0.1:{port}")
        assert result.returncode == 0, result.stdout + result.stderr
        manifest = json.loads(fs.cat_file(f"{prefix}/near_dups/_manifest.json"))
        assert manifest["engine"] == f"spark[spark://127.0.0.1:{port}]" and manifest["plan"] == "spark"
        check_run(s3, fs, prefix, local_reference, scratches, result.stdout + result.stderr)
    finally:
        for worker in workers:
            stop(worker)
        stop(master)


def test_ray_head_and_second_node_no_shared_disk(s3, tmp_path, local_reference):
    fs, recipe, scratches = prepare(s3, tmp_path)
    port = free_port()
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", NODE_CORES, "--object-store-memory", str(200 * 2**20),
              "--disable-usage-stats", "--block"]
    head = start(own_disk([str(BIN / "ray"), "start", "--head", "--port", str(port), "--include-dashboard", "false",
                           *common], scratches[0], scratches),
                 tmp_path / "ray-head.log", dict(worker_env(s3, scratches[0], tmpdir=False), RAY_AUTH_MODE="disabled"))
    node = None
    try:
        wait_for_port(port)
        node = start(own_disk([str(BIN / "ray"), "start", "--address", f"127.0.0.1:{port}", *common], scratches[1], scratches),
                     tmp_path / "ray-node.log", dict(worker_env(s3, scratches[1], tmpdir=False), RAY_AUTH_MODE="disabled"))
        _wait_for_nodes(port, 2)
        prefix = f"{s3.current_bucket}/runs/ray"
        result = run_driver(s3, scratches, str(recipe), "--workdir", f"s3://{prefix}",
                            "--engine", "ray", "--ray-address", f"127.0.0.1:{port}", tmpdir=False)
        assert result.returncode == 0, result.stdout + result.stderr
        manifest = json.loads(fs.cat_file(f"{prefix}/near_dups/_manifest.json"))
        assert manifest["engine"] == f"ray[127.0.0.1:{port}]" and manifest["plan"] == "ray"
        check_run(s3, fs, prefix, local_reference, scratches, result.stdout + result.stderr)
    finally:
        if node:
            stop(node)
        stop(head)


def _wait_for_nodes(port: int, count: int, timeout: float = 90) -> None:
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run([str(BIN / "ray"), "status", "--address", f"127.0.0.1:{port}"], capture_output=True,
                             text=True, env={"RAY_AUTH_MODE": "disabled", "PATH": str(BIN)}).stdout
        if out.count("node_") >= count:
            return
        time.sleep(1)
    raise TimeoutError(f"the Ray cluster did not reach {count} nodes")
