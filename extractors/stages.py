"""HTML extraction stages: `extract.html` (files), `extract.warc` (WARC files), `extract.records`
(a dataset with an `html` column). All three send each page through `html.extract_html` under a
`limits.Watchdog`, so size, time and memory limits hold per document."""
from __future__ import annotations

import multiprocessing as mp
import re
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import pyarrow as pa
from pydantic import Field

from ..pipeline.readers import ContentType, DocBuffer, FileReader, check_input_file
from ..pipeline.schema import DOC_SCHEMA, REJECT_DETAIL, REJECT_REASON, doc_id, dumps_meta, loads_meta, row_id
from ..pipeline.stage import MapStage, Params, register
from .limits import Watchdog
from .urls import url_domain


class HtmlOptions(Params):
    mode: Literal["native", "precise", "fast"] = Field(
        "native", description="native (default): Assay's own main-content selector, no trafilatura; the most "
        "precise of the three on the extraction benchmarks and about twice as fast as precise. precise: "
        "trafilatura's main-content selection with Assay's Markdown writer (the default before native), kept for "
        "comparison and for pages where trafilatura's XPath rules are wanted. fast: resiliparse's main content "
        "(fastest, lower precision). All keep math and code.")
    include_comments: bool = Field(True, description="Keep comment/answer sections (forums, Q&A pages).")
    min_chars: int = Field(1, ge=0, description="Reject pages whose extracted text is shorter (reason no_content).")
    max_bytes: int = Field(10_000_000, gt=0, description="Reject pages larger than this many bytes before parsing (too_large).")
    timeout_s: float = Field(10.0, gt=0, description="CPU-time limit per page (the extraction child's CPU clock, so a "
                             "page's fate does not depend on machine load); a page over it is killed and rejected (timeout).")
    wall_s: float = Field(300.0, gt=0, description="Wall-clock last resort per page: a page not done after this long "
                          "without using up timeout_s (a starved machine) fails the task, which a rerun retries; never a reject.")
    memory_mb: int = Field(4096, gt=0, description="Address space the extraction child may map beyond what it inherits (too_large when hit).")
    isolate: bool = Field(True, description="Run extraction in a recycled child process so timeout_s can be enforced; "
                          "false runs in-process (no time limit; for debugging and overhead measurements).")
    source: str | None = Field(None, description="Value of the `source` column; default: the input file's name.")
    content_type: ContentType = Field("web", description="Value of the `content_type` column.")


class _HtmlExtracting:
    """Shared by the three stages: one watchdog per worker, reused across files and batches."""

    params: HtmlOptions
    _watchdog: Watchdog | None = None

    def setup(self) -> None:
        from . import html  # noqa: F401  (import lxml/trafilatura before forking the child)

        if self.params.mode == "precise":
            import trafilatura  # noqa: F401
        elif self.params.mode == "native":
            from . import native, threads  # noqa: F401

    def watchdog(self) -> Watchdog:
        if self._watchdog is None:
            from .html import extract_html

            p = self.params
            isolate = p.isolate and not mp.current_process().daemon  # daemons may not fork children
            self._watchdog = Watchdog(extract_html, p.timeout_s, p.memory_mb, isolate, p.wall_s)
        return self._watchdog

    def __del__(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()

    def item(self, html: bytes | str, charset: str | None, prescan: bool = False) -> dict[str, Any]:
        """The watchdog's request. `prescan`: this process runs the formula-markup scan (5% of the
        extraction time on the benchmark's 483 held-out pages) while the child works on the page
        before; the child then skips it."""
        p = self.params
        item = {"html": html, "charset": charset, "mode": p.mode, "include_comments": p.include_comments}
        if prescan:
            from .html import decode_html
            from .math import math_passes

            # The bytes when they hold no NUL (so no UTF-16/32): an ASCII-compatible encoding has the
            # ASCII markers where its text has them, and the page need not be decoded here too.
            binary = isinstance(html, bytes) and b"\x00" not in html
            item["math_passes"] = math_passes(html if binary else decode_html(html, charset)[0])
        return item

    def extract(self, html: bytes | str, charset: str | None,
                item: dict[str, Any] | None = None) -> tuple[dict | None, str | None, str | None]:
        """→ (result, reject_reason, reject_detail). `item`: this page's request from `item()`, when
        the caller built it (and perhaps handed it to the watchdog's `submit` already)."""
        p = self.params
        size = len(html)
        if size > p.max_bytes:
            return None, "too_large", f"{size} bytes > max_bytes={p.max_bytes}"
        if size == 0:
            return None, "empty", "no bytes"
        out = self.watchdog().run(item if item is not None else self.item(html, charset))
        if not out.ok:
            return None, out.reason, out.detail
        result = out.value
        if len(result["text"].strip()) < max(p.min_chars, 1):
            return result, "no_content", f"extracted {len(result['text'].strip())} chars"
        return result, None, None

    def add(self, buf: DocBuffer, html: bytes | str, charset: str | None, url: str | None,
            where: str, meta: dict[str, Any]) -> None:
        self.add_result(buf, self.extract(html, charset), html, url, where, meta)

    def add_result(self, buf: DocBuffer, extracted: tuple[dict | None, str | None, str | None],
                   html: bytes | str, url: str | None, where: str, meta: dict[str, Any]) -> None:
        result, reason, detail = extracted
        if reason is not None:
            snippet = html[:2000].decode("utf-8", "replace") if isinstance(html, bytes) else html[:2000]
            buf.reject(reason, detail or reason, raw=snippet, where=url or where, meta=meta)
            return
        meta = {**meta, "title": result["title"], **result["meta"]}
        buf.add(result["text"], url=url, content_type=self.params.content_type, domain=url_domain(url), meta=meta)


def _source(path: str, configured: str | None) -> str:
    name = Path(path).name
    for suffix in (".gz", ".lz4", ".warc", ".html", ".htm"):
        name = name.removesuffix(suffix)
    return configured or name


class HtmlFilesParams(HtmlOptions):
    paths: list[str] = Field(description="Globs or directories of .html/.htm files, plain or .gz.")


@register("extract.html")
class ExtractHtmlFiles(_HtmlExtracting, FileReader):
    """HTML files → documents (Markdown-ish text, math as LaTeX, code fenced). The page URL comes from
    <link rel=canonical> or og:url when the page states one.

    Example: assay extract html 'crawl/pages/*.html.gz' runs/x/pages --source mysite
    """

    Params = HtmlFilesParams
    files_per_task = 64
    version = "2"  # #44: page types (noscript posts, pruning floor, main-region fallback), page_type

    def input_files(self) -> list[str]:
        suffixes = (".html", ".htm", ".html.gz", ".htm.gz", ".xhtml")
        # (a URL's query, a presigned one's signature, is not part of its file name)
        return [f for f in super().input_files() if f.lower().split("?", 1)[0].endswith(suffixes)]

    def source_for(self, path: str) -> str:
        return self.params.source or "html"

    # While the extraction child works on one page, this process reads and scans the next (`_ahead`)
    # and queues it behind the current one, then converts and writes the current page's row.
    _following: dict[str, str] = {}  # each file of the running task → the file after it
    _ahead: tuple[str, bytes, dict] | None = None  # (path, bytes, request) of the next page

    def run_task(self, task, writer) -> Iterator[pa.Table]:
        """The task's pages in batches: a file is one page, and a table per page cost more CPU (a
        one-row table, its ids, the batch's concatenation: 0.25 ms a page) than many a small page's
        extraction. Each file's rows go to one buffer, checked and guarded as `guard_file` does,
        with the ids `with_row_ids` gives (file, ordinal); rows, their order and rejects are as
        from `read_file`."""
        self.ensure_setup()
        counts = getattr(writer, "counts", writer)
        self._following = dict(zip(task.inputs, task.inputs[1:]))
        self._ahead = None
        buf = DocBuffer(self.source_for(""), schema=self.reader_schema)  # one source for every file
        ids: list[str] = []
        size = 0
        for path in self.local_inputs(task, counts):
            name = self.name_of(path)
            first = len(buf.rows)
            with buf.guard(name, "corrupt_file"):
                check_input_file(self, path)
                self._add_page(buf, path, name)
            if len(buf.rows) == first:
                buf.reject("empty_file", "the file holds no records", where=name)
            added = buf.rows[first:]
            counts.rows_in += len(added)
            ids += [row_id(name, i) for i in range(len(added))]
            size += sum(len(row["text"] or "") for row in added)
            if len(buf.rows) >= _BATCH_ROWS or size >= _BATCH_BYTES:
                yield _with_ids(buf.take(), ids)
                ids, size = [], 0
        if buf.rows:
            yield _with_ids(buf.take(), ids)

    def _fits(self, data: bytes) -> bool:
        return 0 < len(data) <= self.params.max_bytes  # else extract() rejects it without the child

    def read_file(self, path: str) -> Iterator[pa.Table]:
        buf = DocBuffer(self.source_for(path))
        name = self.name_of(path)  # the file as rows name it (the same on local disk or a store)
        with buf.guard(name, "corrupt_file"):
            self._add_page(buf, path, name)
        yield buf.take()

    def _add_page(self, buf: DocBuffer, path: str, name: str) -> None:
        """Extract the page at `path` into one row of `buf` (a document or a reject)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == path:
            data, item = ahead[1], ahead[2]  # read, scanned and (normally) handed over already
        else:
            data = _read_page(path, self.params.max_bytes)
            item = self.item(data, None)
        dog = self.watchdog()
        if dog.isolate and self._fits(data):
            dog.submit(item)  # no-op when it is already the child's
            self._ahead = self._read_ahead(self._following.get(path))
            if self._ahead is not None:
                dog.submit(self._ahead[2])  # queued: the child starts it as soon as this page is done
        extracted = self.extract(data, None, item)
        self.add_result(buf, extracted, data, _page_url(data), name, {"path": name})

    def _read_ahead(self, path: str | None) -> tuple[str, bytes, dict] | None:
        """The next page, read and scanned; any trouble is left to its own read_file."""
        import os
        import stat

        if path is None:
            return None
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None  # a FIFO or device: read_file's guard refuses it, it must not block here
            data = _read_page(path, self.params.max_bytes)
            return (path, data, self.item(data, None, prescan=True)) if self._fits(data) else None
        except Exception:
            return None


_BATCH_ROWS, _BATCH_BYTES = 256, 16 << 20  # a batch's rows and characters of text


def _with_ids(table: pa.Table, ids: list[str]) -> pa.Table:
    return table.set_column(table.schema.get_field_index("id"), "id", pa.array(ids, pa.string()))


def _read_page(path: str, max_bytes: int) -> bytes:
    from ..pipeline.io import open_binary

    with open_binary(path) as fh:
        return fh.read(max_bytes + 1)  # bounded: a gzip bomb stops here, extract() rejects it


# One pass over the first 64 KiB: each <link>/<meta> tag (attributes up to 2,000 bytes) is matched
# once and its attributes are read by a second, linear pattern. Patterns that search for `rel=` and
# `href=` across a tag with nested `[^>]*` go quadratic on a page of unclosed `<link` tags.
_TAG = re.compile(rb"<(link|meta)\b([^>]{0,2000})", re.I)
_ATTR = re.compile(rb"""([a-z:_-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)


def _page_url(data: bytes) -> str | None:
    """The page's own URL from <link rel=canonical href> or else <meta property=og:url content>."""
    found: dict[str, bytes] = {}
    for tag in _TAG.finditer(data[:65536]):
        lowered = tag.group(2).lower()
        if b"canonical" not in lowered and b"og:url" not in lowered:
            continue  # most <meta>/<link> tags: their attributes need not be read
        attrs = {a.group(1).lower(): a.group(2) or a.group(3) or a.group(4) or b"" for a in _ATTR.finditer(tag.group(2))}
        if tag.group(1).lower() == b"link" and b"canonical" in attrs.get(b"rel", b"").lower().split():
            found.setdefault("canonical", attrs.get(b"href", b""))
        elif tag.group(1).lower() == b"meta" and attrs.get(b"property", b"").lower() == b"og:url":
            found.setdefault("og", attrs.get(b"content", b""))
    for key in ("canonical", "og"):
        url = found.get(key, b"").strip()
        if url.lower().startswith((b"http://", b"https://")):
            return url.decode("utf-8", "replace")
    return None


class WarcParams(HtmlOptions):
    paths: list[str] = Field(description="Globs of WARC files: .warc, .warc.gz or .warc.lz4.")
    html_only: bool = Field(True, description="Reject responses whose Content-Type is not HTML (not_html).")
    ok_status_only: bool = Field(True, description="Reject responses whose HTTP status is not 2xx (http_status).")


@register("extract.warc")
class ExtractWarc(_HtmlExtracting, FileReader):
    """WARC response records → documents. Other record types (request, metadata, warcinfo) are skipped;
    truncated or corrupt records become rejects, and reading resumes after damage.

    Example: assay extract warc 'crawl/*.warc.gz' runs/x/web --source cc-sample
    """

    Params = WarcParams
    files_per_task = 1
    version = "2"  # #44, as extract.html

    def source_for(self, path: str) -> str:
        return _source(path, self.params.source)

    def read_file(self, path: str) -> Iterator[pa.Table]:
        from .warc import WarcReject, iter_warc

        p = self.params
        buf = DocBuffer(self.source_for(path))
        name = self.name_of(path)  # the file as rows name it (the same on local disk or a store)
        for rec in iter_warc(path, max_bytes=p.max_bytes):
            where = rec.url or f"{name}@{rec.offset}"
            if isinstance(rec, WarcReject):
                buf.reject(rec.reason, rec.detail, where=where,
                           meta={"path": name, "warc_record_id": rec.record_id, "warc_offset": rec.offset})
            else:
                meta = {"path": name, "warc_record_id": rec.record_id, "warc_date": rec.date,
                        "warc_offset": rec.offset, "http_status": rec.status}
                with buf.guard(where, "extract_error", meta=meta):
                    self._add_response(buf, rec, name, meta)
            if buf.full():
                yield buf.take()
        yield buf.take()

    def _add_response(self, buf: DocBuffer, rec, path: str, meta: dict[str, Any]) -> None:
        p = self.params
        ctype = rec.content_type
        if p.ok_status_only and not (rec.status and 200 <= rec.status < 300):
            buf.reject("http_status", f"HTTP {rec.status}", where=rec.url or path, meta=meta)
        elif p.html_only and ctype and "html" not in ctype:
            buf.reject("not_html", f"Content-Type {ctype}", where=rec.url or path, meta=meta)
        else:
            self.add(buf, rec.body, rec.charset, rec.url, path, meta)


class RecordsParams(HtmlOptions):
    html_column: str = Field("html", description="Column holding the raw HTML (string or binary).")
    drop_html: bool = Field(True, description="Drop the HTML column from the output (it is large).")


@register("extract.records")
class ExtractRecords(_HtmlExtracting, MapStage):
    """A dataset with an `html` column (and optional `url`) → `text` filled by extraction; other
    columns pass through.

    Example: assay extract records runs/x/raw_html runs/x/extracted --html-column html
    """

    Params = RecordsParams
    batch_rows = 256
    version = "2"  # #44, as extract.html
    columns = {"text": pa.string()}

    def output_schema(self, input_schemas: Sequence[pa.Schema]) -> pa.Schema:
        schema = pa.unify_schemas(list(input_schemas), promote_options="permissive")
        for field in DOC_SCHEMA:
            if field.name not in schema.names:
                schema = schema.append(field)
        if self.params.drop_html and self.params.html_column in schema.names:
            schema = schema.remove(schema.get_field_index(self.params.html_column))
        return schema

    def process(self, table: pa.Table) -> pa.Table:
        p = self.params
        rows = table.to_pylist()
        reasons, details = [], []
        for row in rows:
            html = row.get(p.html_column)
            url = row.get("url")
            result, reason, detail = self.extract(html or "", None)
            meta = loads_meta(row.get("meta")) if isinstance(row.get("meta"), str) else {}
            if result is not None and reason is None:
                row["text"] = result["text"]
                meta.update(title=result["title"], **result["meta"])
                row["domain"] = row.get("domain") or url_domain(url)
                row["content_type"] = row.get("content_type") or p.content_type
                row["id"] = doc_id(row["text"], row.get("source"), url)
            elif row.get("id") is None:
                row["id"] = doc_id(str(html)[:2000], row.get("source"), url)
            row["meta"] = dumps_meta(meta)
            reasons.append(reason)
            details.append(detail)
        schema = self.output_schema([table.schema])
        if p.drop_html:
            for row in rows:
                row.pop(p.html_column, None)
        out = pa.Table.from_pylist(rows, schema=schema)
        return out.append_column(REJECT_REASON, pa.array(reasons, pa.string())).append_column(
            REJECT_DETAIL, pa.array(details, pa.string()))
