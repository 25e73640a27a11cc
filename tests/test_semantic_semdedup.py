"""Semantic dedup runs per cluster on the engine's workers: the same verdicts on local, Spark and Ray,
and a verdict per row, so two identical documents (the same id) keep one of them.

Vectors are written by hand (unit vectors, a few planted near-copies): what is tested is the plan,
not the embedding model, which tests/test_semantic_cluster.py covers on real text."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.semantic.semdedup import SemDedup
from assay.semantic.side import vector_column

SHARDS = 3


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    """240 documents in 4 clusters with random 16-d vectors; 10 near-copies (cosine > 0.99) of earlier
    documents in their cluster; and one document repeated word for word, so both rows share an id."""
    root = tmp_path_factory.mktemp("semdedup")
    rng = np.random.default_rng(7)
    n = 240
    vec = rng.normal(size=(n, 16))
    texts = [f"document number {i}" for i in range(n)]
    cluster = rng.integers(0, 4, n)
    copies = rng.choice(np.arange(n // 2, n), 10, replace=False)
    for c in copies:
        src = int(rng.integers(0, n // 2))
        vec[c] = vec[src] + 0.02 * rng.normal(size=16)
        cluster[c] = cluster[src]
    texts[n - 1], vec[n - 1], cluster[n - 1] = texts[5], vec[5], cluster[5]  # the same document twice
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    table = make_docs([{"text": t, "source": "s"} for t in texts])
    table = table.append_column("cluster", pa.array(cluster, pa.int32()))
    docs = write_table(table, root / "docs", shards=SHARDS)
    emb = write_table(pa.table({"id": table.column("id"), "embedding": vector_column(vec)}), root / "emb", shards=SHARDS)
    return root, docs, emb, table


def test_identical_documents_keep_one_row(clustered, tmp_path):
    root, docs, emb, table = clustered
    result = run_stage(SemDedup({"eps": 0.02}), [docs, emb], tmp_path / "out", engine="local", options={"workers": 1})
    ids = table.column("id").to_pylist()
    twin = ids[5]
    assert ids.count(twin) == 2
    kept = Dataset(tmp_path / "out").read(columns=["id"]).column("id").to_pylist()
    rejects = Dataset(tmp_path / "out").read_rejects().to_pylist()
    assert kept.count(twin) == 1  # the first row stays, the repeat is its duplicate
    assert [(r["id"], r["reject_detail"]) for r in rejects if r["id"] == twin] == [(twin, twin)]
    assert len(rejects) == 11 and result.manifest["counts"]["rows_out"] == len(ids) - 11
    assert result.manifest["plan"] == "local"


@pytest.mark.parametrize("name", [pytest.param("spark", marks=pytest.mark.spark),
                                  pytest.param("ray", marks=pytest.mark.ray)])
def test_spark_and_ray_dedup_on_their_workers_with_the_local_verdicts(clustered, tmp_path, name, request):
    root, docs, emb, _ = clustered
    engine = request.getfixturevalue(f"{name}_engine")
    local = run_stage(SemDedup({"eps": 0.02}), [docs, emb], tmp_path / "local", engine="local", options={"workers": 2})
    other = run_stage(SemDedup({"eps": 0.02}), [docs, emb], tmp_path / name, engine=engine)
    assert other.manifest["plan"] == name and "fallback_warning" not in other.manifest
    assert other.manifest["counts"] == local.manifest["counts"]
    for i in range(SHARDS):
        for part in (f"part-{i:05d}.parquet", f"_rejects/part-{i:05d}.parquet"):
            assert pq.read_table(tmp_path / "local" / part).equals(pq.read_table(tmp_path / name / part)), part


def test_inputs_and_output_on_s3_give_the_local_disk_bytes(clustered, tmp_path, s3, monkeypatch):
    """The waves hand their bucket and verdict files over in the output's scratch prefix on the store
    (a cluster's workers share no local disk), and read their inputs from it: the local-disk bytes."""
    from test_storage_s3 import data_files, local_files, objects, upload

    root, _, _, _ = clustered
    monkeypatch.setenv("ASSAY_MP_START", "spawn")  # workers with the store's credentials (a forkserver
    fs = s3.filesystem()                             # another test started holds the environment before)
    prefix = f"{s3.current_bucket}/semdedup"
    for name in ("docs", "emb"):
        upload(fs, root / name, f"s3://{prefix}/{name}")
    local = run_stage(SemDedup({"eps": 0.02}), [root / "docs", root / "emb"], tmp_path / "local", engine="local",
                      options={"workers": 2})
    remote = run_stage(SemDedup({"eps": 0.02}), [f"s3://{prefix}/docs", f"s3://{prefix}/emb"], f"s3://{prefix}/out",
                       engine="local", options={"workers": 2})
    assert remote.manifest["counts"] == local.manifest["counts"] and local.manifest["counts"]["rows_out"] < 240
    stored = objects(fs, f"{prefix}/out")
    assert data_files(stored) == data_files(local_files(tmp_path / "local"))
    assert not [k for k in stored if k.startswith("_scratch/")]  # the waves' files went with the run
