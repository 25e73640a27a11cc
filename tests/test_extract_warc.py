"""WARC reading on the resiliparse test WARCs (tests/fixtures/warc) and on a WARC written here with warcio."""
import gzip
import io
import json

import pyarrow as pa
import pytest

from assay.extractors.stages import ExtractWarc
from assay.extractors.warc import WarcResponse, iter_warc, parse_http_response
from assay.pipeline.dataset import Counts

from conftest import FIXTURES

DATA = FIXTURES / "warc"


@pytest.mark.parametrize("name", ["warcfile.warc", "warcfile.warc.gz", "warcfile.warc.lz4"])
def test_counts_response_records_only(name, tmp_path):
    path = DATA / name
    if name == "warcfile.warc":  # the plain file is the gzip one decompressed: made here, not stored twice
        path = tmp_path / name
        path.write_bytes(gzip.decompress((DATA / "warcfile.warc.gz").read_bytes()))
    records = list(iter_warc(str(path)))
    # 50 records: 1 warcinfo, 17 request, 16 response, 16 metadata -> 16 documents
    assert len(records) == 16 and all(isinstance(r, WarcResponse) for r in records)
    assert all(r.url.startswith("http") and r.status == 200 for r in records)
    assert sum(1 for r in records if r.charset and r.charset.lower() == "gb2312") == 2


def test_non_response_records_are_skipped():
    assert list(iter_warc(str(DATA / "block-sized-records.warc"))) == []


def test_truncated_record_is_a_reject():
    (rec,) = list(iter_warc(str(DATA / "clipped.warc.gz")))
    assert rec.reason == "truncated_record" and rec.url.startswith("http://www.houstonpress.com/")


def _run(stage):
    counts = Counts()
    table = pa.concat_tables([t for task in stage.tasks() for t in stage.run_task(task, counts)])
    return table, counts


def test_warc_stage_extracts_and_rejects():
    stage = ExtractWarc({"paths": [str(DATA / "warcfile.warc.gz"), str(DATA / "clipped.warc.gz"),
                                   str(DATA / "clueweb-quirk.warc.gz")]})
    table, counts = _run(stage)
    assert counts.rows_in == table.num_rows == 16 + 1 + 29
    rows = table.to_pylist()
    reasons = [r["reject_reason"] for r in rows]
    assert reasons.count("truncated_record") == 1
    kept = [r for r in rows if r["reject_reason"] is None]
    assert len(kept) >= 30
    # Charset from the HTTP header: the EUC-JP ClueWeb pages decode to Japanese, not mojibake.
    jp = [r for r in kept if json.loads(r["meta"])["path"].endswith("clueweb-quirk.warc.gz")]
    assert jp and any(any("\u3040" <= ch <= "\u30ff" for ch in r["text"]) for r in jp)
    meta = json.loads(kept[0]["meta"])
    assert meta["warc_record_id"].startswith("<urn:uuid:") and meta["http_status"] == 200
    assert all(r["domain"] for r in kept)


def test_written_warc_with_chunked_gzip_and_broken_tail(tmp_path):
    import gzip

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    page = b"<html><body><article><h1>Hi</h1><p>" + b"Plenty of words in this article body. " * 20 + b"</p></article></body></html>"
    path = tmp_path / "t.warc.gz"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(page), page)
        for url, body, headers in [
            ("https://ex.com/a", gzip.compress(page), [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip")]),
            ("https://ex.com/b", chunked, [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]),
            ("https://ex.com/img.png", b"\x89PNG", [("Content-Type", "image/png")]),
        ]:
            http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))
    good = path.read_bytes()
    (tmp_path / "broken.warc.gz").write_bytes(good + b"\x1f\x8b\x08\x00garbage-not-gzip" * 3)
    table, counts = _run(ExtractWarc({"paths": [str(tmp_path / "t.warc.gz")]}))
    rows = {r["url"] or json.loads(r["meta"]).get("location"): r for r in table.to_pylist()}
    assert "Plenty of words" in rows["https://ex.com/a"]["text"] and "Plenty of words" in rows["https://ex.com/b"]["text"]
    assert rows["https://ex.com/img.png"]["reject_reason"] == "not_html"
    broken = list(iter_warc(str(tmp_path / "broken.warc.gz")))
    assert sum(isinstance(r, WarcResponse) for r in broken) == 3  # records before the damage survive


def test_parse_http_response():
    status, headers, body = parse_http_response(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\r\nnope")
    assert status == 404 and headers["content-type"] == "text/html" and body == b"nope"
    with pytest.raises(ValueError):
        parse_http_response(b"no header end")


def test_file_cut_mid_record_rejects_the_cut_record(tmp_path):
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes((DATA / "warcfile.warc.gz").read_bytes()[:60_000])
    records = list(iter_warc(str(cut)))
    assert [type(r).__name__ for r in records[:-1]] == ["WarcResponse"] * (len(records) - 1)
    assert records[-1].reason == "truncated_record" and len(records) >= 2
