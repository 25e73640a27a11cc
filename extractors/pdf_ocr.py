"""OCR for PDF pages without a usable text layer, and the per-page router that decides which pages pay
for it.

Engine: RapidOCR (Apache-2.0) on onnxruntime, with the PP-OCRv6 small detection and recognition models
shipped inside the `rapidocr` wheel (Chinese + English + Latin scripts; nothing is downloaded). Pages
are rendered with pypdfium2. OCR costs seconds of CPU per page against milliseconds for the text
layer, so the router sends a page to OCR only when its text layer is missing or garbage and an image
covers a good part of it. The engine's name and version are part of extract.pdf's identity.
"""
from __future__ import annotations

import statistics
from functools import lru_cache
from importlib import metadata

from .pdf_layout import Word

try:
    ENGINE = f"rapidocr-{metadata.version('rapidocr')}"
except metadata.PackageNotFoundError:
    ENGINE = None

# route of one page: the text layer, OCR, or nothing to read (blank, or a picture without an engine)
TEXT, OCR, EMPTY = "text", "ocr", "empty"


def garbage_share(text: str) -> float:
    """Share of characters that no reader can use: U+FFFD, private use, C0 controls."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0
    bad = sum(c == "\ufffd" or "\ue000" <= c <= "\uf8ff" or ord(c) < 32 for c in chars)
    return bad / len(chars)


def route_page(text: str, image_cover: float, min_chars: int = 20) -> str:
    """Cheap signals → route. image_cover: share of the page under raster images (0..1)."""
    chars = sum(not c.isspace() for c in text)
    usable = chars >= min_chars and garbage_share(text) < 0.3
    if usable:
        return TEXT
    if image_cover >= 0.2:
        return OCR
    return TEXT if chars else EMPTY


@lru_cache(maxsize=1)
def engine():
    from rapidocr import RapidOCR

    # the orientation classifier is for rotated lines of photos; scanned pages do not need it
    return RapidOCR(params={"Global.log_level": "critical", "Global.use_cls": False,
                            "EngineConfig.onnxruntime.intra_op_num_threads": 1,
                            "EngineConfig.onnxruntime.inter_op_num_threads": 1})


def ocr_page(pdf_path: str, index: int, dpi: int = 150) -> tuple[list[Word], float, float]:
    """One page rendered and read → (words, width, height): boxes in PDF points, lines grouped into
    blocks by proximity."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf_path)
    try:
        scale = dpi / 72
        width, height = doc[index].get_size()
        image = doc[index].render(scale=scale).to_numpy()
    finally:
        doc.close()
    out = engine()(image)
    if out is None or out.boxes is None:
        return [], width, height
    lines = []
    for box, text in zip(out.boxes, out.txts):
        xs, ys = [p[0] / scale for p in box], [p[1] / scale for p in box]
        if text.strip():
            lines.append([min(xs), min(ys), max(xs), max(ys), text.strip()])
    return _as_words(lines), width, height


def _as_words(lines: list[list]) -> list[Word]:
    """OCR lines → words keyed (block, line): a line joins the block of a line just above it that it
    overlaps horizontally, so paragraphs and columns come out as text-layer blocks do."""
    if not lines:
        return []
    h = statistics.median(l[3] - l[1] for l in lines)
    order = sorted(range(len(lines)), key=lambda i: (lines[i][1], lines[i][0]))
    block_of: dict[int, int] = {}
    for n, i in enumerate(order):
        x0, y0, x1, _, _ = lines[i]
        for j in reversed(order[:n]):
            a0, _, a1, b1, _ = lines[j]
            if 0 <= y0 - b1 <= 0.8 * h and min(x1, a1) - max(x0, a0) > 0:
                block_of[i] = block_of[j]
                break
        else:
            block_of[i] = len(set(block_of.values()))
    return [Word(l[0], l[1], l[2], l[3], l[4], (block_of[i], i)) for i, l in enumerate(lines)]
