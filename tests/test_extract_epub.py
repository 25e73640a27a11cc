"""extract.epub on ePub files generated here: chapters in spine order, structure, rejects, the stage."""
import json

import pyarrow as pa

from assay.extractors.epub import extract_epub
from assay.extractors.pdf import ExtractEpub
from assay.pipeline.dataset import Counts

from epubs import chapter, sample_book, write_epub


def test_chapters_in_spine_order_with_structure(tmp_path):
    path = tmp_path / "book.epub"
    sample_book(path)
    out = extract_epub({"path": str(path)})
    text = out["text"]
    assert out["title"] == "Harbour Stories" and out["meta"]["language"] == "en"
    assert text.index("# The First Chapter") < text.index("quiet morning") < text.index("# The Second Chapter")
    assert "- nets" in text and "| Maria | 40 kg |" in text
    assert "Contents" not in text  # the nav document is not linear: not part of the reading order
    assert out["meta"]["chapters"] == 2


def test_spine_not_file_order(tmp_path):
    path = tmp_path / "order.epub"
    chapters = [("a.xhtml", chapter("Epilogue", "<p>The end of the whole story, told last.</p>")),
                ("b.xhtml", chapter("Prologue", "<p>The beginning of the whole story, told first.</p>"))]
    write_epub(path, chapters, spine_order=["b.xhtml", "a.xhtml"])
    text = extract_epub({"path": str(path)})["text"]
    assert text.index("Prologue") < text.index("Epilogue")


def test_rejects(tmp_path):
    bad = tmp_path / "bad.epub"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert extract_epub({"path": str(bad)})["reject"] == "corrupt_epub"
    drm = tmp_path / "drm.epub"
    write_epub(drm, [("one.xhtml", chapter("One", "<p>secret</p>"))], encrypted=True)
    assert extract_epub({"path": str(drm)})["reject"] == "encrypted_epub"
    empty = tmp_path / "empty.epub"
    write_epub(empty, [("one.xhtml", chapter("", ""))])
    assert extract_epub({"path": str(empty)})["reject"] == "no_text"


def test_epub_stage_ledger(tmp_path):
    sample_book(tmp_path / "good.epub")
    (tmp_path / "broken.epub").write_bytes(b"garbage")
    stage = ExtractEpub({"paths": [str(tmp_path / "*.epub")]})
    counts = Counts()
    table = pa.concat_tables([t for task in stage.tasks() for t in stage.run_task(task, counts)])
    assert counts.rows_in == table.num_rows == 2
    rows = sorted(table.to_pylist(), key=lambda r: r["reject_reason"] or "")
    assert rows[0]["reject_reason"] is None and rows[0]["content_type"] == "book"
    assert json.loads(rows[0]["meta"])["title"] == "Harbour Stories"
    assert rows[1]["reject_reason"] == "corrupt_epub"
