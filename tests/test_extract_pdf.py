"""PDF extraction on the sample PDFs (examples/sample/pdf) and on a generated one, with every backend."""
import json

import pyarrow as pa
import pytest

from assay.extractors.pdf import ExtractPdf, clean_pages, extract_pdf, is_mathish
from assay.pipeline.dataset import Counts

from conftest import SAMPLE

DATA = SAMPLE / "pdf"
BACKENDS = ["pymupdf", "pdfium", "pypdf"]

EXPECTED_REJECTS = {
    "password-example.pdf": "encrypted_pdf",
    "empty.pdf": "empty_pdf",
    "malformed-from-issue-932.pdf": "image_only_pdf",
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_sample_pdfs_give_text_or_reason(backend):
    paths = sorted(DATA.glob("*.pdf"))
    assert len(paths) >= 7, f"sample PDFs missing from {DATA}"
    for path in paths:
        out = extract_pdf({"path": str(path), "backend": backend, "ocr": "off"})  # OCR: tests/test_pdf_ocr.py
        want = EXPECTED_REJECTS.get(path.name)
        if want:
            assert out.get("reject") == want, (path.name, out)
        elif path.name == "simple1.pdf" and backend == "pypdf":
            assert out["reject"] == "corrupt_pdf"  # no startxref: pypdf refuses what pdfium repairs
        else:
            assert "reject" not in out, (path.name, out)
            assert out["meta"]["pages"] >= 1 and out["meta"]["pdf_backend"] == backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_paper_text(backend):
    text = extract_pdf({"path": str(DATA / "tracemonkey.pdf"), "backend": backend})["text"]
    assert "Trace-based Just-in-Time Type Specialization" in text
    assert "difficult to compile than statically typed ones" in text  # ligature ﬁ undone, lines joined
    assert len(text) > 60_000


@pytest.mark.parametrize("backend", ["pymupdf", "pdfium"])
def test_rotated_table(backend):
    text = extract_pdf({"path": str(DATA / "nics-background-checks-2015-11-rotated.pdf"), "backend": backend})["text"]
    assert "Alabama" in text and "Wyoming" in text


def _make_pdf(path, pages=4):
    import pymupdf

    doc = pymupdf.open()
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    for i in range(pages):
        body = (f"The {words[i]} extraction of text from docu-\nments needs care with hyphens and with the\n"
                "lines that wrap at the right margin of the page.\n")
        page = doc.new_page()
        page.insert_text((72, 40), "Journal of Careful Parsing, Vol. 3")
        page.insert_text((72, 100), body + f"Section {i} continues here with more words.")
        page.insert_text((72, 200), f"{words[i]}(x) = a + b^2 - (y_1 + z_2) / 4")
        page.insert_text((72, 260), f"A closing {words[i]} sentence follows the formula on this page.")
        page.insert_text((300, 800), str(i + 1))
    doc.save(path)


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_headers_page_numbers_hyphens(tmp_path, backend):
    path = tmp_path / "gen.pdf"
    _make_pdf(path)
    out = extract_pdf({"path": str(path), "backend": backend})
    text = out["text"]
    assert "Journal of Careful Parsing" not in text
    assert "documents needs care" in text and "docu-" not in text
    assert "Section 3 continues" in text
    assert not any(line.strip() in {"1", "2", "3", "4"} for line in text.splitlines())
    assert "\ngamma(x) = a + b^2 - (y_1 + z_2) / 4\n" in text  # math-ish lines kept as they are


def test_cleaning_rules():
    assert is_mathish("E = mc^2 + ∑ x_i") and not is_mathish("An ordinary sentence, with words.")
    words = ["alpha", "beta", "gamma", "delta"]
    pages = [[["Header", f"Body line {w} is here", f"{w} and more", "%d" % i]] for i, w in enumerate(words, 1)]
    text, dropped = clean_pages(pages)
    assert "Header" not in text and dropped == 8


def test_pdf_stage_ledger(tmp_path):
    stage = ExtractPdf({"paths": [str(DATA / "*.pdf")], "backend": "pdfium", "ocr": "off"})
    counts = Counts()
    table = pa.concat_tables([t for task in stage.tasks() for t in stage.run_task(task, counts)])
    assert counts.rows_in == table.num_rows == len(list(DATA.glob("*.pdf")))
    rows = {json.loads(r["meta"])["location"].rsplit("/", 1)[-1] if r["reject_reason"] else
            json.loads(r["meta"])["path"].rsplit("/", 1)[-1]: r for r in table.to_pylist()}
    for name, reason in EXPECTED_REJECTS.items():
        assert rows[name]["reject_reason"] == reason and rows[name]["reject_detail"]
    assert rows["tracemonkey.pdf"]["content_type"] == "paper" and rows["tracemonkey.pdf"]["reject_reason"] is None


@pytest.mark.parametrize("backend", ["pymupdf", "pdfium"])
def test_tex_spacing_accents_and_doubled_quotes_composed(tmp_path, backend):
    pymupdf = pytest.importorskip("pymupdf")
    doc = pymupdf.open()
    doc.new_page().insert_htmlbox(pymupdf.Rect(72, 72, 500, 200), "<p>We thank J\u00b4an Min\u00b4a\u02c7c and the na\u00a8\u0131ve "
                                  "reader; the term \u2018\u2018corporate social responsibility\u2019\u2019 is vague.</p>")
    doc.save(str(tmp_path / "tex.pdf"))
    text = extract_pdf({"path": str(tmp_path / "tex.pdf"), "backend": backend, "min_chars": 5})["text"]
    assert "Ján Mináč" in text and "naïve" in text, text
    assert "“corporate social responsibility”" in text
