"""extract.pdf (layout path and OCR) and extract.epub give the same rows on the local engine, Spark and
Ray. Slow: it starts Spark and Ray (`make test-all` runs it)."""
import json

import pytest

from conftest import LOCAL_OPTIONS, RAY_OPTIONS, SPARK_OPTIONS

pymupdf = pytest.importorskip("pymupdf")


def _inputs(src):
    from epubs import sample_book
    from test_pdf_layout import _two_columns
    from test_pdf_ocr import _scan_page

    src.mkdir(exist_ok=True)
    _two_columns(str(src / "cols.pdf"))
    doc = pymupdf.open()
    _scan_page(doc)
    doc.save(str(src / "scan.pdf"))
    sample_book(src / "book.epub")


def _rows(engine_name, options, tmp_path):
    from assay.extractors.pdf import ExtractEpub, ExtractPdf
    from assay.pipeline.dataset import Dataset
    from assay.pipeline.engines import get_engine
    from assay.pipeline.runner import run_stage

    src = tmp_path / "in"
    _inputs(src)
    rows = []
    for name, stage in (("pdf", ExtractPdf({"paths": [str(src)], "backend": "pymupdf"})),
                        ("epub", ExtractEpub({"paths": [str(src)]}))):
        out = run_stage(stage, [], tmp_path / engine_name / name, engine=get_engine(engine_name, options))
        rows += Dataset(out.out).read().select(["id", "text", "meta"]).to_pylist()
    return sorted((r["id"], r["text"], r["meta"]) for r in rows)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.ray
def test_pdf_and_epub_rows_are_the_same_on_local_spark_and_ray(tmp_path, spark_engine, ray_engine):
    local = _rows("local", LOCAL_OPTIONS, tmp_path)
    assert len(local) == 3 and all(text for _, text, _ in local)
    assert any(json.loads(meta).get("ocr_pages") == 1 for *_, meta in local)
    assert _rows("spark", SPARK_OPTIONS, tmp_path) == local
    assert _rows("ray", RAY_OPTIONS, tmp_path) == local
