"""Bounded shards: one big JSON Lines file becomes several tasks (byte ranges split at line starts),
and a map stage re-shards an oversized input shard by row groups; the output is the same rows, in
the same order, with the same rejects, as one whole-file task."""
from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.pipeline.dataset import Dataset
from assay.pipeline.readers import ReadJsonl
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

from conftest import LOCAL_OPTIONS
from stages_for_tests import Sentences, SmallTaskSentences


@pytest.fixture(scope="module")
def big_jsonl(tmp_path_factory):
    """~1 MB of JSON Lines with bad lines, blank lines, an oversized record and no final newline."""
    path = tmp_path_factory.mktemp("jsonl") / "big.jsonl"
    rng = random.Random(7)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(4000):
            r = rng.random()
            if r < 0.02:
                fh.write("{not json\n")
            elif r < 0.04:
                fh.write("\n")
            elif r < 0.05:
                fh.write(json.dumps({"text": "z" * 3000}) + "\n")
            else:
                fh.write(json.dumps({"text": f"Doc {i}. " + "word " * rng.randint(1, 80), "url": f"http://x/{i}"}) + "\n")
        fh.write(json.dumps({"text": "the last record has no newline"}))
    return path


def _read(path, out, task_mb):
    stage = ReadJsonl({"paths": [str(path)], "task_mb": task_mb, "max_doc_bytes": 2000})
    result = run_stage(stage, [], out, options=LOCAL_OPTIONS)
    ds = Dataset(result.out)
    return ds, ds.read(), ds.read_rejects()


def test_a_big_jsonl_file_is_read_as_several_tasks_with_the_same_rows_and_rejects(big_jsonl, tmp_path):
    whole, rows, rejects = _read(big_jsonl, tmp_path / "whole", task_mb=64)
    split, split_rows, split_rejects = _read(big_jsonl, tmp_path / "split", task_mb=0.05)
    assert len(whole.shards()) == 1 and len(split.shards()) >= 15
    assert split_rows.equals(rows)
    key = lambda t: t.select(["id", "reject_reason", "reject_detail"]).to_pylist()  # noqa: E731
    assert key(split_rejects) == key(rejects)
    reasons = {r["reject_reason"] for r in rejects.to_pylist()}
    assert {"bad_json", "too_large"} <= reasons
    assert split.manifest["counts"]["rows_in"] == whole.manifest["counts"]["rows_in"] == rows.num_rows + rejects.num_rows
    ranges = [entry["range"] for entry in split.manifest["input_files"]]
    assert ranges[0][0] == 0 and ranges[-1][1] == big_jsonl.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_a_map_stage_splits_an_oversized_shard_by_row_groups(tmp_path):
    texts = [f"Doc {i} says hello. It has a second sentence. And a third {'reject' if i % 13 == 0 else 'one'}"
             for i in range(3000)]
    docs = make_docs([{"text": t, "source": "s", "content_type": "web"} for t in texts])
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(docs, src / "part-00000.parquet", row_group_size=250)
    (src / "_manifest.json").write_text(json.dumps({"schema_version": 1, "stage": "input", "fingerprint": "f",
                                                   "shards": 1, "output_kind": "documents"}))
    whole = Dataset(run_stage(Sentences({}), [src], tmp_path / "whole", options=LOCAL_OPTIONS).out)
    split = Dataset(run_stage(SmallTaskSentences({}), [src], tmp_path / "split", options=LOCAL_OPTIONS).out)
    assert len(whole.shards()) == 1 and len(split.shards()) > 4
    assert split.read().equals(whole.read())
    assert split.read_rejects().num_rows == whole.read_rejects().num_rows > 0
    assert split.manifest["counts"]["rows_in"] == 3000
