"""Spark engine: a SparkSession (local[*] by default, any master by config).

Map stages run inside `mapInArrow`: the DataFrame holds one row per task (an input shard), each Spark
task runs the stage over its shard and writes the output shard itself, so data never funnels through
the driver and a killed job resumes shard by shard. On a cluster a stage's tasks ask for its `cpus` and
`gpus` as Spark task resources (a stage-level resource profile); in local mode, which has none, the
tasks are grouped into as many partitions as the cores (and GPU slots) fit. Global stages get the
session (`engine.spark`) and build their own DataFrame plans.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from ..stage import Stage, Task
from ..logs import spark_log_level
from .base import (Engine, EngineOptions, execute_task, gpu_slots, stage_workers, teardown_worker_stages,
                   visible_devices, with_fences)

_SESSION = None


LOG4J2_PROFILE = Path(__file__).with_name("spark-log4j2.properties")


def _prepare_environment() -> None:
    # Executors must run this interpreter (the venv that has assay installed), and bind to loopback.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def check_java() -> None:
    """Fail with one clear line when Java 17+ is missing, instead of a py4j stack trace."""
    import re
    import shutil
    import subprocess

    java = shutil.which("java", path=os.path.join(os.environ.get("JAVA_HOME", ""), "bin") + os.pathsep + os.environ.get("PATH", ""))
    if not java:
        raise RuntimeError("Spark needs Java 17 or newer, and no `java` was found (install openjdk-17-jre-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    if not match or int(match.group(1)) < 17:
        raise RuntimeError(f"Spark needs Java 17 or newer; found: {out.splitlines()[0] if out else 'unknown'}")


def get_spark(master: str = "local[*]", conf: dict[str, str] | None = None):
    """The process-wide SparkSession (created once; later calls with the same settings reuse it).

    Spark allows one SparkContext per process, and its master and static settings are fixed when it
    starts: a later call asking for another master or other settings is refused with one line
    instead of silently running on the first session's."""
    global _SESSION
    if _SESSION is not None:
        running = _SESSION.sparkContext.getConf()
        differs = [] if _SESSION.sparkContext.master == master else [
            f"master {_SESSION.sparkContext.master!r} (asked for {master!r})"]
        differs += [f"{key}={running.get(key)!r} (asked for {str(value)!r})" for key, value in (conf or {}).items()
                    if running.get(key) != str(value)]
        if differs:
            from ..errors import UserError

            raise UserError("this process already runs a SparkSession with " + ", ".join(differs)
                            + "; Spark cannot change them in a running process: use one setting per run")
        return _SESSION
    _prepare_environment()
    check_java()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": master,
        "spark.app.name": "assay",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        # Our log4j2 profile instead of Spark's default one, whose start-up banner and WARN lines
        # reach the terminal before setLogLevel can act.
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_PROFILE.as_uri()} "
                                         f"-Dassay.spark.level={spark_log_level().lower()}",
    }
    conf = SparkConf().setAll([(key, str(value)) for key, value in {**settings, **(conf or {})}.items()])
    SparkContext(conf=conf, gateway=_gateway(conf))
    _SESSION = SparkSession.builder.getOrCreate()
    _SESSION.sparkContext.setLogLevel(spark_log_level())
    return _SESSION


_GATEWAY = None
# The JVM's module system prints this itself whenever Spark's launcher adds jdk.incubator.vector (it
# always does); no log4j level or JVM option silences it.
JVM_NOISE = (b"WARNING: Using incubator modules:",)


def _gateway(conf):
    """The py4j gateway JVM (launched once per process), its stderr passed through a filter that
    drops the JVM's own start-up notice in a quiet run and forwards every other byte to ours."""
    global _GATEWAY
    if _GATEWAY is None:
        import subprocess
        import threading

        from pyspark.java_gateway import launch_gateway

        _GATEWAY = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        quiet = spark_log_level() == "ERROR"
        threading.Thread(target=_forward_stderr, args=(_GATEWAY.proc.stderr, quiet), daemon=True,
                         name="spark-stderr").start()
    return _GATEWAY


def _forward_stderr(stream, quiet: bool) -> None:
    for line in iter(stream.readline, b""):
        if not (quiet and line.startswith(JVM_NOISE)):
            os.write(2, line)


def stop_spark() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None


def task_profile(res):
    """A Spark resource profile whose tasks ask for the stage's cores (whole ones) and GPUs (a
    fraction shares a device): the executors' scheduler then runs no more of them than fit."""
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    requests = TaskResourceRequests().cpus(max(1, math.ceil(res.cpus - 1e-9)))
    if res.gpus:
        requests = requests.resource("gpu", res.gpus)
    return ResourceProfileBuilder().require(requests).build


def spark_devices(addresses: Sequence[str], visible: list[str]) -> str:
    """CUDA_VISIBLE_DEVICES for the GPU addresses Spark assigned a task: CUDA ordinals of the
    executor's visible devices, so address 0 under CUDA_VISIBLE_DEVICES=5,7 is device 5."""
    return ",".join(visible[int(a)] if a.isdigit() and int(a) < len(visible) else a for a in addresses)


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, options: EngineOptions):
        super().__init__(options)
        self.spark = get_spark(options.spark_master, options.spark_conf)

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        if not tasks:
            return
        from ..dataset import held_fences

        by_index = {t.index: t for t in tasks}
        fences = held_fences()
        root = str(out_root)
        sc = self.spark.sparkContext
        res = stage.resources
        local = sc.master.startswith("local")
        # local mode has no task resources: a stage's cores and GPU slots are honoured by running that
        # many partitions at once, each pinned to its slot's devices as the driver sees them
        pins = gpu_slots(res.gpus, visible_devices()) if res.gpus and local else []

        def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            # Spark reuses Python workers across stages: tear the stage down and restore the
            # environment when the partition ends.
            saved = os.environ.get("CUDA_VISIBLE_DEVICES")
            context = TaskContext.get()
            gpus = context.resources().get("gpu") if context else None
            if gpus is not None:  # ordinals among the executor's own devices
                os.environ["CUDA_VISIBLE_DEVICES"] = spark_devices(gpus.addresses, visible_devices())
            elif pins and context:
                os.environ["CUDA_VISIBLE_DEVICES"] = pins[context.partitionId() % len(pins)]
            try:
                for batch in batches:
                    for index in batch.column("index").to_pylist():
                        counts = execute_task(stage, by_index[index], root, schema, fences)
                        yield pa.RecordBatch.from_arrays([pa.array([index], pa.int64()), pa.array([json.dumps(counts)])],
                                                         names=["index", "counts"])
            finally:
                teardown_worker_stages()
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved

        # One partition per task keeps shards independent; a stage's `workers`, and in local mode
        # its cores and GPU slots, cap concurrency by grouping tasks into that many partitions.
        slices = len(tasks)
        if stage.workers or (local and (res.cpus > 1 or res.gpus)):
            slices = stage_workers(stage, self.options, len(tasks), cores=sc.defaultParallelism if local else None)
        rdd = sc.parallelize([(t.index,) for t in tasks], numSlices=slices)
        if not local and (res.cpus != 1 or res.gpus):
            rdd = rdd.withResources(task_profile(res))
        frame = self.spark.createDataFrame(rdd, "index int")
        # toLocalIterator hands results back as partitions finish, so progress advances per shard.
        for row in frame.mapInArrow(run_partition, "index long, counts string").toLocalIterator(prefetchPartitions=True):
            if on_done:
                on_done(row["index"], json.loads(row["counts"]))

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if not items:
            return []
        fn = with_fences(fn)
        rdd = self.spark.sparkContext.parallelize(list(enumerate(items)), numSlices=len(items))
        return [result for _, result in sorted(rdd.map(lambda pair: (pair[0], fn(pair[1]))).collect(), key=lambda r: r[0])]

    def describe(self) -> str:
        return f"spark[{self.spark.sparkContext.master}]"
