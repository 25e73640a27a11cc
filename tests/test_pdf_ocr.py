"""OCR of image-only PDF pages (RapidOCR) and the per-page router, on PDFs generated here."""
import pytest

from assay.extractors.pdf import extract_pdf
from assay.extractors.pdf_ocr import EMPTY, OCR, TEXT, garbage_share, route_page

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")

LINES = ["Invoice number 4521 was paid", "on the third of March by bank", "transfer from Oslo to Bergen"]


def _scan_page(doc, lines=LINES):
    """A page of text rendered to a picture and placed as the only content of a new page."""
    src = pymupdf.open()
    page = src.new_page(width=420, height=200)
    for i, line in enumerate(lines):
        page.insert_text((30, 50 + 40 * i), line, fontsize=20)
    png = page.get_pixmap(dpi=150, colorspace=pymupdf.csGRAY).tobytes("png")
    out = doc.new_page(width=420, height=200)
    out.insert_image(out.rect, stream=png)


def test_image_only_pdf_is_read_by_ocr_and_rejected_without_it(tmp_path):
    doc = pymupdf.open()
    _scan_page(doc)
    path = tmp_path / "scan.pdf"
    doc.save(str(path))
    out = extract_pdf({"path": str(path), "backend": "pymupdf"})
    assert "reject" not in out, out
    words = set(out["text"].lower().split())
    want = set(" ".join(LINES).lower().split())
    assert len(words & want) >= 0.8 * len(want), out["text"]
    assert out["text"].lower().index("invoice") < out["text"].lower().index("bergen")
    assert out["meta"]["ocr_pages"] == 1 and out["meta"]["ocr_engine"].startswith("rapidocr-")
    off = extract_pdf({"path": str(path), "backend": "pymupdf", "ocr": "off"})
    assert off["reject"] == "image_only_pdf"


def test_router_sends_only_the_scanned_page_to_ocr(tmp_path):
    doc = pymupdf.open()
    page = doc.new_page(width=420, height=200)
    page.insert_text((30, 50), "This page has a text layer that reads well enough.", fontsize=11)
    _scan_page(doc)
    path = tmp_path / "mixed.pdf"
    doc.save(str(path))
    out = extract_pdf({"path": str(path), "backend": "pdfium"})
    meta = out["meta"]
    assert (meta["text_pages"], meta["ocr_pages"], meta["empty_pages"]) == (1, 1, 0)
    assert out["text"].index("text layer") < out["text"].lower().index("invoice")


def test_route_signals():
    assert route_page("A real sentence with plenty of letters in it.", image_cover=0.9) == TEXT
    assert route_page("", image_cover=0.9) == OCR
    assert route_page("\ufffd\ufffd\ufffd\ufffd\ue001\ue002\ue003 x" * 5, image_cover=0.8) == OCR  # garbage layer
    assert route_page("", image_cover=0.0) == EMPTY
    assert garbage_share("ab\ufffd\ufffd") == 0.5
