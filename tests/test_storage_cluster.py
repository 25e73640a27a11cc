"""Clusters with no shared disk: a Spark standalone master with two workers, and a Ray head with a
second node, each worker with its own scratch folder (TMPDIR and ASSAY_STAGING of its own) and its
own S3 credentials in its environment; the demo's inputs and outputs on the S3 server
(tests/s3server.py), so no local path is common to the driver and the workers for data. Every source
and map stage of the demo must give the same bytes as a local run on local disk, and each worker's
scratch folder must have been used (so both workers wrote shards)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from assay.pipeline.recipe import load_recipe
from assay.pipeline.runner import run_recipe

from conftest import DEMO_RECIPE, LOCAL_OPTIONS, SAMPLE
from test_pipeline_cluster import CLUSTER_UNTIL, free_port, start, stop, wait_for_port
from test_storage_s3 import INPUT_FOLDERS, assay, data_files, local_files, objects, s3_recipe, upload

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # 2.5 min each on 2 cores: make test-all
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cluster-s3-ref")
    run_recipe(load_recipe(DEMO_RECIPE), workdir=workdir, engine="local", options=LOCAL_OPTIONS,
               until=CLUSTER_UNTIL, log=lambda *_: None)
    return data_files(local_files(workdir))


def worker_env(s3, scratch: Path, tmpdir: bool = True) -> dict[str, str]:
    """A worker's own environment: its credentials and scratch folders, nothing shared. (A Ray node
    keeps the system temp folder: its sockets' paths must stay under 108 bytes.)"""
    return {**s3.env, **({"TMPDIR": str(scratch / "tmp")} if tmpdir else {}), "ASSAY_STAGING": str(scratch / "staging")}


def prepare(s3, tmp_path):
    fs = s3.filesystem()
    sample = f"s3://{s3.current_bucket}/sample"
    for folder in INPUT_FOLDERS:
        upload(fs, SAMPLE / folder, f"{sample}/{folder}")
    scratches = [tmp_path / f"node{i}" for i in (1, 2)]
    for scratch in scratches:
        (scratch / "tmp").mkdir(parents=True)
    return fs, s3_recipe(tmp_path, sample), scratches


def check_run(s3, fs, prefix: str, reference: dict, scratches: list[Path], said: str) -> None:
    stored = objects(fs, prefix)
    assert data_files(stored) == reference
    for scratch in scratches:  # each node staged shards in its own folder (created on first use)
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
        for i, scratch in enumerate(scratches):
            env = dict(base, SPARK_WORKER_DIR=str(scratch / "work"), **worker_env(s3, scratch))
            workers.append(start([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                  "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                  "--webui-port", str(free_port())], tmp_path / f"worker{i}.log", env))
        prefix = f"{s3.current_bucket}/runs/spark"
        result = assay("run", str(recipe), "--workdir", f"s3://{prefix}", "--no-report", "--until", CLUSTER_UNTIL,
                       "--engine", "spark", "--spark-master", f"spark://127.0.0.1:{port}")
        assert result.returncode == 0, result.stdout + result.stderr
        manifest = fs.cat_file(f"{prefix}/{CLUSTER_UNTIL}/_manifest.json").decode()
        assert f"spark://127.0.0.1:{port}" in manifest
        check_run(s3, fs, prefix, local_reference, scratches, result.stdout + result.stderr)
    finally:
        for worker in workers:
            stop(worker)
        stop(master)


def test_ray_head_and_second_node_no_shared_disk(s3, tmp_path, local_reference):
    fs, recipe, scratches = prepare(s3, tmp_path)
    port = free_port()
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(200 * 2**20),
              "--disable-usage-stats", "--block"]
    head = start([str(BIN / "ray"), "start", "--head", "--port", str(port), "--include-dashboard", "false", *common],
                 tmp_path / "ray-head.log", dict(worker_env(s3, scratches[0], tmpdir=False), RAY_AUTH_MODE="disabled"))
    node = None
    try:
        wait_for_port(port)
        node = start([str(BIN / "ray"), "start", "--address", f"127.0.0.1:{port}", *common],
                     tmp_path / "ray-node.log", dict(worker_env(s3, scratches[1], tmpdir=False), RAY_AUTH_MODE="disabled"))
        _wait_for_nodes(port, 2)
        prefix = f"{s3.current_bucket}/runs/ray"
        result = assay("run", str(recipe), "--workdir", f"s3://{prefix}", "--no-report", "--until", CLUSTER_UNTIL,
                       "--engine", "ray", "--ray-address", f"127.0.0.1:{port}")
        assert result.returncode == 0, result.stdout + result.stderr
        check_run(s3, fs, prefix, local_reference, scratches, result.stdout + result.stderr)
    finally:
        if node:
            stop(node)
        stop(head)


def _wait_for_nodes(port: int, count: int, timeout: float = 90) -> None:
    import subprocess
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run([str(BIN / "ray"), "status", "--address", f"127.0.0.1:{port}"], capture_output=True,
                             text=True, env={"RAY_AUTH_MODE": "disabled", "PATH": str(BIN)}).stdout
        if out.count("node_") >= count:
            return
        time.sleep(1)
    raise TimeoutError(f"the Ray cluster did not reach {count} nodes")
