"""Shared fixtures: one SparkSession and one local Ray for the whole test session."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

REPO = Path(__file__).resolve().parents[1]
# Workers (forkserver, Spark executors, Ray workers) import test-only stages from here.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")]))
SHARED_DATA = REPO.parent / "shared" / "data"
DEMO_RECIPE = REPO / "examples" / "recipes" / "demo.yaml"

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


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
