"""Dedup on Spark: the same groups as the local plan, file by file, and large-star/small-star itself."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from assay.dedup.exact import ExactDedup
from assay.dedup.near import MinHashDedup
from assay.dedup.url import UrlDedup
from assay.pipeline.dataset import write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from conftest import load_real_texts

    texts = [t for _, t in load_real_texts()]
    rows = [{"text": t, "source": "real", "url": f"https://example.com/{i % 700}"} for i, t in enumerate(texts)]
    # planted copies: exact, lightly edited, and a chain of edits, spread over the shards
    rows += [{"text": texts[i], "source": "copy", "url": f"https://example.com/c{i}"} for i in range(0, 300, 7)]
    rows += [{"text": texts[i].replace(" the ", " a ", 2), "source": "edit", "url": None} for i in range(1, 300, 5)]
    root = tmp_path_factory.mktemp("dedup-spark") / "in"
    write_table(make_docs(rows), root, shards=3)
    return root


def assert_same_shards(a: Path, b: Path, shards: int = 3) -> None:
    for i in range(shards):
        ta, tb = pq.read_table(a / f"part-{i:05d}.parquet"), pq.read_table(b / f"part-{i:05d}.parquet")
        assert ta.equals(tb), f"shard {i} differs"


@pytest.mark.parametrize(
    "stage",
    [
        MinHashDedup({"keep": "longest"}),  # verified by exact Jaccard by default
        ExactDedup({"remove": True}),
        UrlDedup({"keep": "longest"}),
    ],
    ids=["minhash-default-verified", "exact-remove", "url"],
)
def test_local_and_spark_plans_agree(spark_engine, corpus, tmp_path, stage):
    loc = run_stage(stage, [corpus], tmp_path / "local", engine="local")
    spk = run_stage(stage, [corpus], tmp_path / "spark", engine=spark_engine)
    assert spk.manifest["plan"] == "spark"
    assert loc.manifest["counts"] == spk.manifest["counts"]
    assert_same_shards(tmp_path / "local", tmp_path / "spark")
    dropped = sum(pq.read_table(tmp_path / "spark" / f"part-{i:05d}.parquet").column("dup_keep").to_pylist().count(False) for i in range(3))
    assert dropped + spk.manifest["counts"]["rows_rejected"] > 0  # the corpus has duplicates to find


def test_large_star_small_star_on_chains_and_cycles(spark, tmp_path):
    from assay.dedup.spark_plan import connected_components

    spark.sparkContext.setCheckpointDir(str(tmp_path / "ckpt"))
    chain = [(i, i + 1) for i in range(100, 160)]  # a path: the worst case for label propagation
    cycle = [(5, 9), (9, 7), (7, 5)]
    star = [(1000, k) for k in range(1001, 1020)]
    edges = spark.createDataFrame(chain[::-1] + cycle + star + [(42, 42)], "a long, b long")
    labels, rounds = connected_components(edges, lambda df: df.checkpoint(eager=True))
    got = dict(labels.select("node", "root").collect())
    assert {got[i] for i in range(100, 161)} == {100}
    assert {got[i] for i in (5, 7, 9)} == {5}
    assert {got[k] for k in range(1000, 1020)} == {1000}
    assert 42 not in got  # a self-loop is no duplicate
    assert rounds < 20
