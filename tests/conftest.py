"""Shared fixtures: one SparkSession and one local Ray for the whole test session, and the data files
the tests read, all committed in the repository (tests/fixtures/, examples/sample/): no test needs
../shared, and a missing file is a failure, never a skip."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# A suite started in the background of a script (`make test &`, nohup) inherits SIGINT ignored, and so
# would every command the tests start: the Ctrl-C tests would see a command rightly ignoring Ctrl-C.
# They test what a terminal's foreground job does, so the suite gives its children the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
# Workers (forkserver, Spark executors, Ray workers) import test-only stages from here.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")]))
FIXTURES = REPO / "tests" / "fixtures"
SAMPLE = REPO / "examples" / "sample"
DEMO_RECIPE = REPO / "examples" / "recipes" / "demo.yaml"
# The demo up to exact dedup (sources, map stages, two shuffle-bound global stages): what the
# kill tests run, so their cost does not grow with every family added to the demo.
DEMO_CORE_UNTIL = "exact_dedup"

SPARK_OPTIONS = {"spark_master": "local[2]", "workers": 2}
RAY_OPTIONS = {"workers": 2, "ray_object_store_mb": 256}
LOCAL_OPTIONS = {"workers": 2}


@pytest.fixture(scope="session")
def spark_engine():
    from assay.pipeline.engines import get_engine

    return get_engine("spark", SPARK_OPTIONS)


@pytest.fixture(scope="session")
def spark(spark_engine):
    return spark_engine.spark


@pytest.fixture(scope="session")
def ray_engine():
    from assay.pipeline.engines import get_engine

    return get_engine("ray", RAY_OPTIONS)


@pytest.fixture(scope="session")
def local_engine():
    from assay.pipeline.engines import get_engine

    return get_engine("local", LOCAL_OPTIONS)


@pytest.fixture(scope="session", autouse=True)
def _shutdown_engines():
    yield
    from assay.pipeline.engines import close_all
    from assay.pipeline.engines.spark import stop_spark

    close_all()
    stop_spark()
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            ray.shutdown()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible store (SeaweedFS, tests/s3server.py) for this pytest process."""
    from s3server import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The store's credentials and endpoint in the environment, where fsspec finds them (never in
    Assay's own options); a fresh bucket per test."""
    import uuid

    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    s3_server.current_bucket = s3_server.bucket("t-" + uuid.uuid4().hex[:12])
    return s3_server


def load_real_texts() -> list[tuple[str, str]]:
    """(source, text) of 1,585 real documents: every 5th of `dedup.evaluate.real_texts` over the
    project's shared data (news/blog/forum articles, Python files, MATH, GSM8K; see fixtures/NOTICE)."""
    import gzip
    import json

    with gzip.open(FIXTURES / "texts" / "real_texts.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [(rec["source"], rec["text"]) for rec in map(json.loads, fh)]


@pytest.fixture(scope="session")
def local_demo(tmp_path_factory):
    """The whole demo on the local engine, run once per `make test`: the first pytest process to need
    it runs it under a file lock; another (pytest-xdist) finds every stage done and only reads it."""
    from filelock import FileLock

    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the folder the xdist workers' own temp folders share
    workdir = root / "demo-local"
    recipe = load_recipe(DEMO_RECIPE)
    with FileLock(str(workdir) + ".lock"):
        results = run_recipe(recipe, workdir=workdir, engine="local", options=LOCAL_OPTIONS, log=lambda *_: None)
    return recipe, workdir, results


# The longest test files first, so that with `-n 2 --dist loadfile` neither process is left with a
# long file at the end while the other is idle.
LONGEST_FIRST = ("test_demo_on_ray.py", "test_pipeline_engines.py", "test_documented_examples.py", "test_demo_on_spark.py",
                 "test_pipeline_cluster.py", "test_storage_s3.py", "test_storage_paths.py", "test_dedup_spark.py", "test_pipeline_kill.py",
                 "test_pipeline_contract.py", "test_semantic_cluster.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
