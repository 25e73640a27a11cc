"""Readers turn bad outside data into rejects with reasons, never crashes or silent drops."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from assay.pipeline.dataset import Dataset
from assay.pipeline.readers import ReadJsonl, ReadParquet, ReadTextFiles
from assay.pipeline.runner import run_stage


def _lines(n: int, prefix: str = "doc") -> bytes:
    return b"".join(json.dumps({"text": f"{prefix} {i}", "url": f"http://x/{i}", "extra": i}).encode() + b"\n" for i in range(n))


def _run(stage, tmp_path):
    result = run_stage(stage, [], tmp_path / "out", engine="local", options={"workers": 1})
    ds = Dataset(result.out)
    return result.manifest["counts"], ds.read(), ds.read_rejects()


def test_jsonl_plain_gzip_and_zstd_read_the_same_documents(tmp_path):
    raw = _lines(50)
    (tmp_path / "a.jsonl").write_bytes(raw)
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    counts, kept, _ = _run(ReadJsonl({"paths": [str(tmp_path / "*.jsonl*")], "source": "web"}), tmp_path)
    assert counts["rows_out"] == 150 and counts["rows_rejected"] == 0
    texts = kept.column("text").to_pylist()
    assert texts[:50] == texts[50:100] == texts[100:]
    row = kept.to_pylist()[3]
    assert row["url"] == "http://x/3" and json.loads(row["meta"]) == {"extra": 3} and row["source"] == "web"


def test_jsonl_bad_inputs_become_rejects_with_reasons(tmp_path):
    good = _lines(3)
    src = tmp_path / "in"
    src.mkdir()
    (src / "broken-line.jsonl").write_bytes(good + b'{"text": "unterminated\n' + b'[1, 2]\n' + b'{"title": "no text"}\n')
    (src / "bad-utf8.jsonl").write_bytes(b'{"text": "caf\xe9"}\n' + good)
    (src / "empty.jsonl").write_bytes(b"")
    whole = gzip.compress(_lines(2000))
    (src / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (src / "garbage.jsonl.gz").write_bytes(b"this is not gzip at all")
    counts, kept, rejects = _run(ReadJsonl({"paths": [str(src)]}), tmp_path)
    reasons = counts["rejected"]
    assert reasons["bad_json"]["rows"] == 2  # the unterminated line and the non-object line
    assert reasons["missing_text"]["rows"] == 1
    assert reasons["invalid_utf8"]["rows"] == 1
    assert reasons["empty_file"]["rows"] == 1
    assert reasons["corrupt_file"]["rows"] == 2  # truncated gzip and not-gzip
    # lines before the damage in the truncated archive are kept, not thrown away
    truncated = [r for r in kept.to_pylist() if r["source"] == "truncated"]
    assert 0 < len(truncated) < 2000
    assert counts["rows_in"] == counts["rows_out"] + counts["rows_rejected"]
    detail = {r["reject_reason"]: r for r in rejects.to_pylist()}
    bad_lines = [json.loads(r["meta"])["location"].rsplit("/", 1)[-1] for r in rejects.to_pylist() if r["reject_reason"] == "bad_json"]
    assert bad_lines == ["broken-line.jsonl:4", "broken-line.jsonl:5"]
    assert "byte" in detail["invalid_utf8"]["reject_detail"]


def test_jsonl_too_large_record_is_rejected(tmp_path):
    (tmp_path / "big.jsonl").write_bytes(json.dumps({"text": "x" * 5000}).encode() + b"\n" + _lines(2))
    counts, kept, rejects = _run(ReadJsonl({"paths": [str(tmp_path / "big.jsonl")], "max_doc_bytes": 1000}), tmp_path)
    assert counts["rejected"]["too_large"]["rows"] == 1 and kept.num_rows == 2
    assert len(rejects.column("text")[0].as_py()) == 0  # a huge record is not copied into rejects


def test_text_files_one_document_each_with_rejects(tmp_path):
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (src / "pkg" / "__init__.py").write_text("")
    (src / "notes.txt").write_text("plain notes")
    (src / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    counts, kept, rejects = _run(ReadTextFiles({"paths": [str(src)], "root": str(src), "source": "repo"}), tmp_path)
    rows = {json.loads(r["meta"])["path"]: r for r in kept.to_pylist()}
    assert set(rows) == {"pkg/mod.py", "notes.txt"}
    assert rows["pkg/mod.py"]["content_type"] == "code" and rows["notes.txt"]["content_type"] == "web"
    assert rows["pkg/mod.py"]["text"] == "def f():\n    return 1\n"  # indentation kept byte for byte
    assert sorted(r["reject_reason"] for r in rejects.to_pylist()) == ["empty_file", "invalid_utf8"]
    counts2, kept2, _ = _run(ReadTextFiles({"paths": [str(src / "latin1.txt")], "encoding_errors": "replace"}), tmp_path / "again")
    assert kept2.column("text").to_pylist() == ["caf\ufffd"]


def test_parquet_reader_maps_columns_and_keeps_the_rest_in_meta(tmp_path):
    table = pa.table({"content": ["alpha", None, "gamma"], "url": ["u1", "u2", "u3"], "score": [0.5, 0.1, 0.9]})
    pq.write_table(table, tmp_path / "in.parquet")
    counts, kept, rejects = _run(ReadParquet({"paths": [str(tmp_path / "in.parquet")], "text_field": "content", "source": "hf"}), tmp_path)
    assert kept.column("text").to_pylist() == ["alpha", "gamma"]
    assert [json.loads(m)["score"] for m in kept.column("meta").to_pylist()] == [0.5, 0.9]
    assert rejects.column("reject_reason").to_pylist() == ["missing_text"]
