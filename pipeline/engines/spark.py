"""Spark engine: a SparkSession (local[*] by default, any master by config).

Map stages run inside `mapInArrow`: the DataFrame holds one row per task (an input shard), each Spark
task runs the stage over its shard and writes the output shard itself, so data never funnels through
the driver and a killed job resumes shard by shard. Global stages get the session (`engine.spark`)
and build their own DataFrame plans.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from ..stage import Stage, Task
from ..logs import spark_log_level
from .base import Engine, EngineOptions, execute_task, stage_workers, teardown_worker_stages

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
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("assay")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        # Our log4j2 profile instead of Spark's default one, whose start-up banner and WARN lines
        # reach the terminal before setLogLevel can act.
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J2_PROFILE.as_uri()} "
                f"-Dassay.spark.level={spark_log_level().lower()}")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    _SESSION = builder.getOrCreate()
    _SESSION.sparkContext.setLogLevel(spark_log_level())
    return _SESSION


def stop_spark() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, options: EngineOptions):
        super().__init__(options)
        self.spark = get_spark(options.spark_master, options.spark_conf)

    def run_tasks(self, stage: Stage, tasks: Sequence[Task], out_root: Path, schema: pa.Schema,
                  on_done: Callable[[int, dict], Any] | None = None) -> None:
        if not tasks:
            return
        by_index = {t.index: t for t in tasks}
        root = str(out_root)

        def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            # Spark reuses Python workers across stages: tear the stage down when the partition ends.
            try:
                for batch in batches:
                    for index in batch.column("index").to_pylist():
                        counts = execute_task(stage, by_index[index], root, schema)
                        yield pa.RecordBatch.from_arrays([pa.array([index], pa.int64()), pa.array([json.dumps(counts)])],
                                                         names=["index", "counts"])
            finally:
                teardown_worker_stages()

        # One partition per task keeps shards independent; a stage's `workers` caps concurrency by
        # grouping tasks into that many partitions.
        slices = len(tasks) if not stage.workers else stage_workers(stage, self.options, len(tasks))
        rdd = self.spark.sparkContext.parallelize([(t.index,) for t in tasks], numSlices=slices)
        frame = self.spark.createDataFrame(rdd, "index int")
        # toLocalIterator hands results back as partitions finish, so progress advances per shard.
        for row in frame.mapInArrow(run_partition, "index long, counts string").toLocalIterator(prefetchPartitions=True):
            if on_done:
                on_done(row["index"], json.loads(row["counts"]))

    def describe(self) -> str:
        return f"spark[{self.spark.sparkContext.master}]"
