"""PDF → text: reading order, hyphen joins, running headers/footers and page numbers dropped.

Backends (param `backend`):
* `pymupdf` — the designed backend: fastest, text blocks with positions, image detection.
  **AGPL-3.0** (or Artifex commercial): optional extra `assay[pymupdf]`, never a core dependency.
* `pdfium` — pypdfium2 (Apache-2.0 / BSD-3), Chrome's PDF engine: the permissive default when
  pymupdf is not installed; text in content-stream order, one block per page.
* `pypdf` — pure Python (BSD-3): slowest, no native code; for platforms without wheels.
`auto` picks pymupdf when it is importable, else pdfium.

Every backend produces pages of blocks of lines; `clean_pages` does the rest the same way for all.
Bad input becomes a reject reason: empty_pdf, encrypted_pdf, corrupt_pdf, image_only_pdf, no_text.
"""
from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter
from typing import Any, Iterator, Literal

import pyarrow as pa
from pydantic import Field

from ..pipeline.readers import ContentType, DocBuffer, FileReader
from ..pipeline.stage import Params, register
from . import pdf_ocr as ocr
from .limits import Watchdog
from .pdf_layout import Word, is_rtl, layout_page

Page = list[list[str]]  # blocks of lines


class PdfReject(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


# ---- backends ----------------------------------------------------------------------------------

def _cover(boxes: list, width: float, height: float) -> float:
    """Share of the page under image boxes (x0, y0, x1, y1), overlaps counted once on a coarse grid."""
    if not boxes or width <= 0 or height <= 0:
        return 0.0
    n = 32
    cells = set()
    for x0, y0, x1, y1 in boxes:
        for i in range(max(0, int(x0 / width * n)), min(n, int(x1 / width * n + 0.999))):
            for j in range(max(0, int(y0 / height * n)), min(n, int(y1 / height * n + 0.999))):
                cells.add((i, j))
    return len(cells) / (n * n)


def _pymupdf_pages(path: str, layout: bool = False) -> tuple[list[Page], int, list[float]]:
    import pymupdf

    try:
        doc = pymupdf.open(path)
    except Exception as exc:
        raise PdfReject("corrupt_pdf", f"pymupdf: {exc}") from exc
    if doc.needs_pass:
        raise PdfReject("encrypted_pdf", "password required")
    pages, image_pages, covers = [], 0, []
    for page in doc:
        covers.append(_cover([info["bbox"] for info in page.get_image_info()], page.rect.width, page.rect.height))
        blocks = page.get_text("blocks")  # content-stream order: the author's reading order
        if any(b[6] == 1 for b in blocks) or page.get_images():
            image_pages += 1
        if layout:
            pages.append(layout_page(_pymupdf_spans(page), page.rect.width, page.rect.height))
        else:
            pages.append([b[4].split("\n") for b in blocks if b[6] == 0 and b[4].strip()])
    return pages, image_pages, covers


_LEADER = re.compile(r"(?:\s?[.·…]){4,}\s*")


def _pymupdf_spans(page) -> list[Word]:
    """Text spans with boxes, keyed by (block, line): MuPDF's spans keep the logical order and
    shaping of right-to-left and CJK text that its word split loses. Left-to-right lines are cut
    into MuPDF's words instead: one span can hold a whole table row ("2,753,438 2,799,250 ...")."""
    tp = page.get_textpage()
    lines = [(b, l, line) for b, block in enumerate(page.get_text("dict", textpage=tp)["blocks"])
             for l, line in enumerate(block.get("lines", ()))]
    words_of: dict[tuple, list] = {}
    for w in page.get_text("words", textpage=tp):
        words_of.setdefault((w[5], w[6]), []).append(w)
    vertical = sum(abs(line["dir"][0]) < 0.5 for *_, line in lines)
    width = page.rect.width
    spans = []
    for b, l, line in lines:
        x0, y0, x1, y1 = line["bbox"]
        if abs(line["dir"][0]) < 0.5 and vertical < 0.2 * len(lines) and (x1 < 0.12 * width or x0 > 0.88 * width):
            continue  # vertical text in a side margin of a horizontal page: a download stamp, an arXiv id
        texts = [_LEADER.sub(" ", s["text"]) for s in line["spans"]]  # dot leaders join a label to its value
        words = [w for w in words_of.get((b, l), ()) if not _LEADER.fullmatch(" " + w[4])]
        if (words and line["dir"][0] > 0.5 and not is_rtl("".join(texts))
                and "".join(w[4] for w in words) == re.sub(r"\s+", "", "".join(texts))):
            # a space stood before every word but the first: kept, however narrow the gap
            spans += [Word(*w[:4], (" " if k else "") + w[4], (b, l)) for k, w in enumerate(words)]
            continue
        for s, text in zip(line["spans"], texts):
            if text.strip():
                x0, y0, x1, y1 = s["bbox"]
                spans.append(Word(x0, y0, x1, y1, text, (b, l)))
    return spans


def _pdfium_pages(path: str) -> tuple[list[Page], int, list[float]]:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        doc = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        reason = "encrypted_pdf" if "password" in str(exc).lower() else "corrupt_pdf"
        raise PdfReject(reason, f"pdfium: {exc}") from exc
    pages, image_pages, covers = [], 0, []
    for i in range(len(doc)):
        page = doc[i]
        text = page.get_textpage().get_text_range()
        width, height = page.get_size()
        boxes = []
        for obj in page.get_objects():
            if obj.type == raw.FPDF_PAGEOBJ_IMAGE:
                left, bottom, right, top = obj.get_bounds()
                boxes.append((left, height - top, right, height - bottom))
        image_pages += bool(boxes)
        covers.append(_cover(boxes, width, height))
        pages.append(_split_blocks(text.replace("\r\n", "\n").replace("\r", "\n")))
    return pages, image_pages, covers


def _pypdf_pages(path: str) -> tuple[list[Page], int, list[float]]:
    import pypdf

    try:
        reader = pypdf.PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise PdfReject("encrypted_pdf", "password required")
        pages, image_pages, covers = [], 0, []
        for page in reader.pages:
            has_images = False
            try:
                has_images = bool(page.images)
            except Exception:  # image decoding needs optional libs; counting is best effort
                pass
            image_pages += has_images
            covers.append(1.0 if has_images else 0.0)  # pypdf gives no image positions: any image may cover
            pages.append(_split_blocks(page.extract_text() or ""))
        return pages, image_pages, covers
    except PdfReject:
        raise
    except Exception as exc:
        raise PdfReject("corrupt_pdf", f"pypdf: {type(exc).__name__}: {exc}") from exc


def _split_blocks(text: str) -> Page:
    blocks = [b.split("\n") for b in re.split(r"\n\s*\n", text)]
    return [[line for line in b if line.strip()] for b in blocks if any(line.strip() for line in b)]


BACKENDS = {"pymupdf": _pymupdf_pages, "pdfium": _pdfium_pages, "pypdf": _pypdf_pages}


def resolve_backend(name: str) -> str:
    if name != "auto":
        return name
    try:
        import pymupdf  # noqa: F401

        return "pymupdf"
    except ImportError:
        return "pdfium"


# ---- cleaning ----------------------------------------------------------------------------------

_PAGE_NUM = re.compile(r"^\s*(?:[-–—]\s*)?(?:page\s+)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?(?:\s*[-–—])?\s*$", re.I)
_MATH_CHARS = set("=+−×÷∑∏∫√∞≤≥≈≠±∂∇∈∉⊂⊆∪∩→←⇒⇔^_{}|αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΦΨΩ")
_HYPHEN_END = re.compile(r"[a-zà-ÿ]-$")


def is_mathish(line: str) -> bool:
    """Formula-like lines (symbols dense, few words) are kept as they are, never reflowed."""
    s = line.strip()
    if not s:
        return False
    symbols = sum(ch in _MATH_CHARS for ch in s)
    letters = sum(ch.isalpha() for ch in s)
    return symbols >= 2 and (symbols / len(s) > 0.08 or letters / len(s) < 0.5)


def _edge_key(line: str) -> str:
    return re.sub(r"\d+", "#", line.strip().lower())


def _strip_running(pages: list[Page], edge: int = 2) -> tuple[list[Page], int]:
    """Drop running headers/footers (edge lines repeated on many pages) and page numbers."""
    def edge_lines(page: Page) -> list[tuple[int, int]]:
        flat = [(b, l) for b, block in enumerate(page) for l in range(len(block))]
        return flat[:edge] + flat[-edge:] if len(flat) > 2 * edge else flat

    counts: Counter = Counter()
    for page in pages:
        counts.update({_edge_key(page[b][l]) for b, l in edge_lines(page)})
    threshold = max(3, len(pages) // 2) if len(pages) >= 3 else None
    dropped = 0
    out = []
    for page in pages:
        drop = set()
        for b, l in edge_lines(page):
            line = page[b][l]
            if _PAGE_NUM.match(line) or (threshold and counts[_edge_key(line)] >= threshold and len(line.strip()) < 120):
                drop.add((b, l))
        dropped += len(drop)
        blocks = [[line for l, line in enumerate(block) if (b, l) not in drop] for b, block in enumerate(page)]
        out.append([blk for blk in blocks if blk])
    return out, dropped


def _reflow(lines: list[str]) -> list[str]:
    """Lines of one block → paragraphs: join wrapped lines, undo end-of-line hyphenation, keep
    math-ish lines on their own line; a short line ending a sentence closes a paragraph."""
    if not lines:
        return []
    width = sorted(len(l.strip()) for l in lines)[int(len(lines) * 0.75)] if len(lines) > 2 else 0
    paras: list[str] = []
    cur = ""
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if is_mathish(line):
            if cur:
                paras.append(cur)
            paras.append(line)
            cur = ""
            continue
        if not cur:
            cur = line
        elif _HYPHEN_END.search(cur) and line[:1].islower():
            cur = cur[:-1] + line
        else:
            cur = cur + " " + line
        if width and len(line) < 0.6 * width and line[-1:] in ".!?:":
            paras.append(cur)
            cur = ""
    if cur:
        paras.append(cur)
    return paras


_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st", "\u00ad": "", "\ufffe": "",
                            "\x02": "", "\u200b": ""})
# TeX sets an accent as its own spacing glyph before the letter ("J´an Min´aˇc") and a double quote
# as two single ones (‘‘like this’’): composed again ("Ján Mináč", “like this”)
_SPACING_ACCENT = {"´": "\u0301", "¨": "\u0308", "ˇ": "\u030c", "ˆ": "\u0302", "˜": "\u0303",
                   "˘": "\u0306", "˙": "\u0307", "˚": "\u030a", "¸": "\u0327", "˝": "\u030b", "¯": "\u0304"}
_ACCENT_LETTER = re.compile(r"(?<=[^\W\d_])([´¨ˇˆ˜˘˙˚¸˝¯])([^\W\d_])|(?<![\w`])([´¨ˇˆ˜˘˙˚¸˝¯])([^\W\d_])(?=\w)")


def _compose_accent(m: re.Match) -> str:
    accent, letter = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return unicodedata.normalize("NFC", ("i" if letter == "ı" else letter) + _SPACING_ACCENT[accent])


def _glyph_text(line: str) -> str:
    line = _ACCENT_LETTER.sub(_compose_accent, line.translate(_LIGATURES))
    return line.replace("‘‘", "“").replace("’’", "”")


def clean_pages(pages: list[Page], edge: int = 2) -> tuple[str, int]:
    """edge: lines at each end of a page checked for repetition across pages (the layout path has
    dropped margin lines by position already, so 1 there)."""
    pages = [[[_glyph_text(line) for line in block] for block in page] for page in pages]
    pages, dropped = _strip_running(pages, edge)
    parts = []
    for page in pages:
        for block in page:
            if block and all(line.startswith("|") for line in block):  # a Markdown table: rows as they are
                parts.append("\n".join(block))
                continue
            paras = _reflow(block)
            if paras:
                parts.append("\n".join(paras) if all(is_mathish(p) for p in paras[1:]) and len(paras) > 1 and is_mathish(paras[-1]) else "\n\n".join(paras))
    return "\n\n".join(parts), dropped


def extract_pdf(item: dict[str, Any]) -> dict[str, Any]:
    """{'path', 'backend', 'min_chars', 'layout', 'ocr', 'ocr_dpi'} → {'text', 'meta'} or
    {'reject': reason, 'detail': ...}. Each page is routed: its text layer, OCR, or empty."""
    path, backend = item["path"], resolve_backend(item.get("backend", "auto"))
    if os.path.getsize(path) == 0:
        return {"reject": "empty_pdf", "detail": "0 bytes"}
    try:
        layout = item.get("layout", True)
        pages, image_pages, covers = (BACKENDS[backend](path, layout) if backend == "pymupdf" else BACKENDS[backend](path))
    except PdfReject as rej:
        return {"reject": rej.reason, "detail": rej.detail}
    if not pages:
        return {"reject": "empty_pdf", "detail": "no pages"}
    use_ocr = item.get("ocr", "auto") != "off" and ocr.ENGINE is not None
    routes = [ocr.route_page(" ".join(l for b in page for l in b), cover) for page, cover in zip(pages, covers)]
    if use_ocr:
        for i, route in enumerate(routes):
            if route == ocr.OCR:
                words, width, height = ocr.ocr_page(path, i, item.get("ocr_dpi", 150))
                pages[i] = layout_page(words, width, height)
    text, dropped = clean_pages(pages, 1 if layout and backend == "pymupdf" else 2)
    meta = {"pdf_backend": backend, "pages": len(pages), "image_pages": image_pages, "dropped_lines": dropped,
            "text_pages": routes.count(ocr.TEXT), "ocr_pages": routes.count(ocr.OCR) if use_ocr else 0,
            "empty_pages": routes.count(ocr.EMPTY),  # the routes price a corpus; no timings (rows stay reproducible)
            "ocr_engine": ocr.ENGINE if use_ocr and ocr.OCR in routes else None}
    if len(text.strip()) < item.get("min_chars", 50):
        if use_ocr and ocr.OCR in routes:
            return {"reject": "no_text", "detail": f"{len(text.strip())} chars after OCR of {meta['ocr_pages']} pages", "meta": meta}
        reason = "image_only_pdf" if image_pages else "no_text"
        return {"reject": reason, "detail": f"{len(text.strip())} chars of text on {len(pages)} pages "
                f"({image_pages} with images; needs OCR: install assay[ocr])" if image_pages else "no extractable text", "meta": meta}
    return {"text": text, "meta": meta}


# ---- stage -------------------------------------------------------------------------------------

class PdfParams(Params):
    paths: list[str] = Field(description="Globs or directories of .pdf files.")
    backend: Literal["auto", "pymupdf", "pdfium", "pypdf"] = Field(
        "auto", description="pymupdf (AGPL-3.0, fastest, designed default), pdfium (pypdfium2, Apache-2.0/BSD) or "
        "pypdf (BSD, pure Python). auto: pymupdf if installed, else pdfium.")
    min_chars: int = Field(50, ge=0, description="Fewer extracted characters than this: reject (image_only_pdf / no_text).")
    layout: bool = Field(True, description="pymupdf backend: reading order by columns, tables as Markdown, margin "
                         "heads/footers dropped (pdf_layout.py). false: text blocks in content-stream order.")
    ocr: Literal["auto", "off"] = Field("auto", description="auto: pages without a usable text layer but under an image "
                                        "are OCR'd when an engine is installed (assay[ocr]: rapidocr); off: never "
                                        "(such PDFs are rejected as image_only_pdf).")
    ocr_dpi: int = Field(150, ge=50, le=600, description="Resolution at which a page is rendered for OCR.")
    max_bytes: int = Field(200_000_000, gt=0, description="Reject files larger than this (too_large).")
    timeout_s: float = Field(300.0, gt=0, description="CPU-time limit per PDF (timeout); see extract.html's timeout_s. "
                             "OCR takes seconds of CPU per page.")
    wall_s: float = Field(1800.0, gt=0, description="Wall-clock last resort per PDF: past it the task fails for a rerun.")
    memory_mb: int = Field(4096, gt=0, description="Address-space cap of the extraction child process.")
    isolate: bool = Field(True, description="Run each PDF in a recycled child process so timeout_s holds.")
    source: str | None = Field(None, description="Value of the `source` column (default: pdf).")
    content_type: ContentType = Field("paper", description="Value of the `content_type` column.")


@register("extract.pdf")
class ExtractPdf(FileReader):
    """PDF files → one document per file (pages joined), or a reject with a reason.

    Example: assay extract pdf 'papers/*.pdf' runs/x/pdfs --backend pdfium --source papers
    """

    Params = PdfParams
    suffix = ".pdf"
    files_per_task = 16
    # 2: layout path, per-page routing and OCR; the OCR engine (and its bundled models) is part of it
    version = f"2+{ocr.ENGINE or 'no-ocr'}"
    _watchdog: Watchdog | None = None

    def input_files(self) -> list[str]:
        return [f for f in super().input_files() if f.lower().endswith(self.suffix)]

    def source_for(self, path: str) -> str:
        return self.params.source or self.suffix[1:]

    @staticmethod
    def extract(item: dict[str, Any]) -> dict[str, Any]:
        return extract_pdf(item)

    def item_for(self, path: str) -> dict[str, Any]:
        p = self.params
        return {"path": path, "backend": p.backend, "min_chars": p.min_chars, "layout": p.layout, "ocr": p.ocr,
                "ocr_dpi": p.ocr_dpi}

    def preload(self) -> None:
        # Import the backend here, before the watchdog forks: a child that imported it itself would
        # spend part of its first document's timeout_s on the import, and every restarted child again.
        import importlib

        backend = resolve_backend(self.params.backend)
        importlib.import_module({"pymupdf": "pymupdf", "pdfium": "pypdfium2", "pypdf": "pypdf"}[backend])

    def setup(self) -> None:
        self.preload()
        self.watchdog()

    def watchdog(self) -> Watchdog:
        """One child per worker; every backend call (parsing included) runs in it under timeout_s."""
        if self._watchdog is None:
            import multiprocessing as mp

            p = self.params
            isolate = p.isolate and not mp.current_process().daemon
            self._watchdog = Watchdog(type(self).extract, p.timeout_s, p.memory_mb, isolate, p.wall_s)
        return self._watchdog

    def __del__(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()

    def read_file(self, path: str) -> Iterator[pa.Table]:
        p = self.params
        buf = DocBuffer(self.source_for(path))
        size = os.path.getsize(path)
        name = self.name_of(path)  # the file as rows name it (the same on local disk or a store)
        meta: dict[str, Any] = {"path": name, "bytes": size}
        if size > p.max_bytes:
            buf.reject("too_large", f"{size} bytes > max_bytes={p.max_bytes}", where=name, meta=meta)
        else:
            out = self.watchdog().run(self.item_for(path))
            with buf.guard(name, "extract_error", meta=meta):
                result = out.value if out.ok else {"reject": out.reason, "detail": out.detail}
                meta.update(result.get("meta", {}))
                if "reject" in result:
                    buf.reject(result["reject"], result["detail"], where=name, meta=meta)
                else:
                    meta["title"] = result.get("title") or os.path.splitext(os.path.basename(path))[0]
                    buf.add(result["text"], content_type=p.content_type, meta=meta)
        yield buf.take()


# ---- ePub --------------------------------------------------------------------------------------

class EpubParams(Params):
    paths: list[str] = Field(description="Globs or directories of .epub files.")
    min_chars: int = Field(50, ge=0, description="Fewer extracted characters than this: reject (no_text).")
    max_bytes: int = Field(200_000_000, gt=0, description="Reject files larger than this (too_large).")
    timeout_s: float = Field(120.0, gt=0, description="CPU-time limit per book (timeout).")
    wall_s: float = Field(1800.0, gt=0, description="Wall-clock last resort per book: past it the task fails for a rerun.")
    memory_mb: int = Field(4096, gt=0, description="Address-space cap of the extraction child process.")
    isolate: bool = Field(True, description="Run each book in a recycled child process so timeout_s holds.")
    source: str | None = Field(None, description="Value of the `source` column (default: epub).")
    content_type: ContentType = Field("book", description="Value of the `content_type` column.")


@register("extract.epub")
class ExtractEpub(ExtractPdf):
    """ePub files → one document per book (chapters in spine order, through the HTML writer), or a reject.

    Example: assay extract epub 'books/*.epub' runs/x/books --source books
    """

    Params = EpubParams
    suffix = ".epub"
    version = "1"

    @staticmethod
    def extract(item: dict[str, Any]) -> dict[str, Any]:
        from .epub import extract_epub

        return extract_epub(item)

    def item_for(self, path: str) -> dict[str, Any]:
        return {"path": path, "min_chars": self.params.min_chars}

    def preload(self) -> None:
        from . import epub, html  # noqa: F401  (imported before the watchdog forks, as for PDFs)
