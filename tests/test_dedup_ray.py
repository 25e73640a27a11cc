"""Dedup on Ray runs the Ray plan (not the local fallback) and writes the same shards as the local plan."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from assay.dedup.exact import ExactDedup
from assay.dedup.near import MinHashDedup
from assay.pipeline.dataset import write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

pytestmark = pytest.mark.ray
SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample" / "code"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts = [p.read_text() for p in sorted(SAMPLE.rglob("*.py")) if p.stat().st_size > 400]
    rows = [{"text": t, "source": "real"} for t in texts]
    rows += [{"text": texts[i], "source": "copy"} for i in range(0, len(texts), 4)]  # exact copies
    rows += [{"text": texts[i].replace("return", "return ", 1), "source": "edit"} for i in range(1, len(texts), 3)]
    root = tmp_path_factory.mktemp("dedup-ray") / "in"
    write_table(make_docs(rows), root, shards=3)
    return root


@pytest.mark.parametrize("stage", [
    MinHashDedup({"keep": "longest", "verify_threshold": 0.7, "ngram": 3}),
    MinHashDedup({"keep": "first", "remove": True}),
    ExactDedup({"remove": True}),
], ids=["minhash-verified", "minhash-remove", "exact-remove"])
def test_local_and_ray_plans_agree(ray_engine, corpus, tmp_path, stage):
    loc = run_stage(stage, [corpus], tmp_path / "local", engine="local")
    ray = run_stage(stage, [corpus], tmp_path / "ray", engine=ray_engine)
    assert ray.manifest["plan"] == "ray" and "fallback_warning" not in ray.manifest
    assert loc.manifest["counts"] == ray.manifest["counts"]
    for i in range(3):
        assert pq.read_table(tmp_path / "local" / f"part-{i:05d}.parquet").equals(
            pq.read_table(tmp_path / "ray" / f"part-{i:05d}.parquet")), f"shard {i} differs"
    removed = ray.manifest["stats"]["dedup"]["removed"]
    assert removed > 0  # the corpus has planted duplicates
