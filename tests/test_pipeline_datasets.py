"""Document schema, dataset shards, the ledger, and atomic writes."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from assay.pipeline.dataset import Dataset, ShardWriter, done_shards, finalize, prepare_output
from assay.pipeline.schema import DOC_SCHEMA, doc_id, make_docs
from assay.pipeline.stage import with_rejects


def test_doc_id_is_stable_and_content_derived():
    a = doc_id("hello", "src", "http://x")
    assert a == doc_id("hello", "src", "http://x")
    assert len(a) == 24
    assert a != doc_id("hello!", "src", "http://x")
    assert a != doc_id("hello", "other", "http://x")


def test_make_docs_fills_ids_and_meta_and_refuses_unknown_fields():
    table = make_docs([{"text": "a b c", "source": "s", "meta": {"k": 1}}])
    assert table.schema == DOC_SCHEMA
    row = table.to_pylist()[0]
    assert row["id"] == doc_id("a b c", "s", None)
    assert json.loads(row["meta"]) == {"k": 1}
    with pytest.raises(KeyError, match="meta"):
        make_docs([{"text": "x", "colour": "red"}])


def test_shard_writer_splits_rejects_counts_and_commits_atomically(tmp_path):
    docs = make_docs([{"text": "keep me", "source": "s"}, {"text": "drop", "source": "s"}, {"text": "drop too", "source": "s"}])
    marked = with_rejects(docs, [None, "too_short", "too_short"], [None, "1 word", "2 words"])
    writer = ShardWriter(tmp_path, 0, DOC_SCHEMA, "len")
    writer.add_input(3, 19)
    writer.write(marked)
    assert not (tmp_path / "part-00000.parquet").exists()  # nothing visible before commit
    counts = writer.commit()
    assert (counts.rows_in, counts.rows_out, counts.rows_rejected) == (3, 1, 2)
    assert counts.rejected["too_short"] == {"rows": 2, "bytes": len("drop") + len("drop too")}
    kept = pq.read_table(tmp_path / "part-00000.parquet")
    assert kept.column("text").to_pylist() == ["keep me"] and kept.schema == DOC_SCHEMA
    rejects = pq.read_table(tmp_path / "_rejects" / "part-00000.parquet").to_pylist()
    assert {r["reject_stage"] for r in rejects} == {"len"}
    assert [r["reject_detail"] for r in rejects] == ["1 word", "2 words"]
    assert not list(tmp_path.glob(".*tmp*"))


def test_finalize_refuses_an_unbalanced_ledger(tmp_path):
    writer = ShardWriter(tmp_path, 0, DOC_SCHEMA, "x")
    writer.add_input(5, 0)  # 5 in, but nothing written: 5 rows vanished
    with pytest.raises(RuntimeError, match="does not balance"):
        writer.commit()  # checked per shard, before anything is renamed into place
    assert not list(tmp_path.glob("part-*")) and done_shards(tmp_path) == {}


def test_finalize_requires_every_shard(tmp_path):
    ShardWriter(tmp_path, 0, DOC_SCHEMA, "x").commit()
    with pytest.raises(RuntimeError, match=r"shards \[1\]"):
        finalize(tmp_path, {"stage": "x"}, 2)


def _killed(lease):
    """What a killed writer leaves: its lease, naming a process that no longer exists."""
    def release(finished=True):
        lease._stop.set()
        record = json.loads(lease.path.read_text())
        lease.path.write_text(json.dumps(dict(record, pid=2 ** 22 + 5)))
    return release


def test_prepare_output_keeps_same_run_and_wipes_a_different_one(tmp_path):
    from assay.pipeline.dataset import Lease

    out = tmp_path / "ds"
    with Lease(out, "fp1") as lease:
        prepare_output(out, "fp1", lease.previous_fingerprint())
        ShardWriter(out, 0, DOC_SCHEMA, "x").commit()
        (out / ".part-00001.parquet.tmp-123").write_text("half-written")
        lease.release = _killed(lease)  # killed: the lease stays behind
    with Lease(out, "fp1") as lease:
        prepare_output(out, "fp1", lease.previous_fingerprint())  # resume: committed shard kept, stale temp removed
        assert set(done_shards(out)) == {0}
        assert not (out / ".part-00001.parquet.tmp-123").exists()
        lease.release = _killed(lease)
    with Lease(out, "fp2") as lease:
        prepare_output(out, "fp2", lease.previous_fingerprint())  # different params or inputs: start over
        assert done_shards(out) == {}


def test_dataset_is_readable_by_plain_pyarrow_and_pandas(tmp_path):
    writer = ShardWriter(tmp_path, 0, DOC_SCHEMA, "x")
    docs = make_docs([{"text": f"doc {i}", "source": "s"} for i in range(10)])
    writer.add_input(10, 0)
    writer.write(docs)
    writer.commit()
    finalize(tmp_path, {"stage": "x"}, 1)
    assert Dataset(tmp_path).complete
    assert pq.read_table(tmp_path / "part-00000.parquet").num_rows == 10
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "part-00000.parquet")) == 10
    assert pq.ParquetFile(tmp_path / "part-00000.parquet").metadata.row_group(0).column(1).compression == "ZSTD"


@pytest.mark.spark
def test_spark_reads_a_dataset_as_is(tmp_path, spark):
    writer = ShardWriter(tmp_path, 0, DOC_SCHEMA, "x")
    docs = make_docs([{"text": f"doc {i}", "source": "s"} for i in range(7)])
    writer.add_input(7, 0)
    writer.write(docs)
    writer.commit()
    frame = spark.read.parquet(str(tmp_path / "part-*.parquet"))
    assert frame.count() == 7 and set(frame.columns) == set(DOC_SCHEMA.names)
