"""Readers that turn outside data (JSONL, Parquet, directories of text files) into documents.

Every record that cannot become a document becomes a reject row with a reason code, so a corrupt
archive, a broken line or bad UTF-8 is visible in `_rejects/` and in the report, never a crash.
"""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from .io import open_binary, strip_compression_suffix
from .schema import CONTENT_TYPES, DOC_SCHEMA, REJECT_DETAIL, REJECT_REASON, doc_id, dumps_meta
from .stage import Params, SourceStage, register

# Errors a damaged compressed stream raises part-way through.
STREAM_ERRORS = (EOFError, zlib.error, OSError, ValueError)
REJECT_SNIPPET_CHARS = 2_000

CODE_SUFFIXES = {
    ".py", ".js", ".ts", ".java", ".c", ".h", ".cc", ".cpp", ".hpp", ".go", ".rs", ".rb", ".php",
    ".cs", ".kt", ".scala", ".swift", ".sh", ".sql", ".r", ".jl", ".lua", ".pl", ".hs", ".ml",
}


class DocBuffer:
    """Collects documents and rejects for one file and hands them out as tables of bounded size."""

    def __init__(self, source: str, flush_rows: int = 5_000):
        self.source = source
        self.flush_rows = flush_rows
        self.rows: list[dict[str, Any]] = []

    def add(self, text: str, *, url: str | None = None, content_type: str | None = None,
            lang: str | None = None, domain: str | None = None, meta: dict | None = None,
            source: str | None = None) -> None:
        source = source or self.source
        self.rows.append({
            "id": doc_id(text, source, url), "text": text, "source": source,
            "content_type": content_type, "url": url, "lang": lang, "domain": domain,
            "meta": dumps_meta(meta), REJECT_REASON: None, REJECT_DETAIL: None,
        })

    def reject(self, reason: str, detail: str, *, raw: str = "", where: str = "", meta: dict | None = None) -> None:
        snippet = raw[:REJECT_SNIPPET_CHARS]
        self.rows.append({
            "id": doc_id(snippet, self.source, where), "text": snippet, "source": self.source,
            "content_type": None, "url": None, "lang": None, "domain": None,
            "meta": dumps_meta(dict(meta or {}, location=where)), REJECT_REASON: reason, REJECT_DETAIL: detail,
        })

    def full(self) -> bool:
        return len(self.rows) >= self.flush_rows

    def take(self) -> pa.Table:
        schema = DOC_SCHEMA.append(pa.field(REJECT_REASON, pa.string())).append(pa.field(REJECT_DETAIL, pa.string()))
        table = pa.Table.from_pylist(self.rows, schema=schema)
        self.rows = []
        return table


def _source_name(path: str, configured: str | None) -> str:
    return configured or Path(strip_compression_suffix(Path(path).name)).stem


class JsonlParams(Params):
    paths: list[str] = Field(description="Files, directories or globs of .jsonl / .jsonl.gz / .jsonl.zst")
    source: str | None = Field(None, description="Dataset name written to `source`; default: the file's stem")
    content_type: str = Field("web", description=f"One of {', '.join(CONTENT_TYPES)}")
    text_field: str = Field("text", description="Field holding the document text")
    url_field: str | None = Field("url", description="Field holding the URL, if any")
    lang_field: str | None = Field(None, description="Field holding a language code, if any")
    max_doc_bytes: int = Field(50_000_000, description="Records larger than this are rejected as too_large")


@register("read.jsonl")
class ReadJsonl(SourceStage):
    """Read JSON Lines (plain, gzip or zstd). Fields other than text/url/lang go to `meta`.

    Rejects: bad_json (line N), invalid_utf8, missing_text, too_large, corrupt_file (damaged
    compression; the lines before the damage are kept), empty_file.

    Example: assay read jsonl data/*.jsonl.gz out/ --text-field content --source mycrawl
    """

    Params = JsonlParams

    def read_file(self, path: str) -> Iterator[pa.Table]:
        p = self.params
        buf = DocBuffer(_source_name(path, p.source))
        seen = 0
        lineno = 0
        try:
            with open_binary(path) as fh:
                for lineno, raw in enumerate(fh, start=1):
                    if not raw.strip():
                        continue
                    seen += 1
                    self._add_line(buf, raw, f"{path}:{lineno}")
                    if buf.full():
                        yield buf.take()
        except STREAM_ERRORS as exc:
            seen += 1
            buf.reject("corrupt_file", f"{type(exc).__name__}: {exc} after line {lineno}", where=path)
        if seen == 0:
            buf.reject("empty_file", "no records", where=path)
        yield buf.take()

    def _add_line(self, buf: DocBuffer, raw: bytes, where: str) -> None:
        p = self.params
        if len(raw) > p.max_doc_bytes:
            buf.reject("too_large", f"{len(raw)} bytes > max_doc_bytes={p.max_doc_bytes}", where=where)
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            buf.reject("invalid_utf8", f"{exc.reason} at byte {exc.start}", raw=raw.decode("utf-8", "replace"), where=where)
            return
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            buf.reject("bad_json", f"{exc.msg} at column {exc.colno}", raw=line, where=where)
            return
        if not isinstance(record, dict):
            buf.reject("bad_json", f"expected an object, got {type(record).__name__}", raw=line, where=where)
            return
        text = record.pop(p.text_field, None)
        if not isinstance(text, str):
            buf.reject("missing_text", f"field {p.text_field!r} is {type(text).__name__}", raw=line, where=where)
            return
        url = record.pop(p.url_field, None) if p.url_field else None
        lang = record.pop(p.lang_field, None) if p.lang_field else None
        buf.add(text, url=url if isinstance(url, str) else None, content_type=p.content_type,
                lang=lang if isinstance(lang, str) else None, meta=record)


class TextFilesParams(Params):
    paths: list[str] = Field(description="Files, directories (recursive) or globs; .gz/.zst are decompressed")
    source: str | None = Field(None, description="Dataset name written to `source`; default: the first path's name")
    content_type: str | None = Field(None, description="Content type; default: `code` for source-code suffixes, else `web`")
    root: str | None = Field(None, description="Paths in meta are made relative to this directory")
    encoding_errors: str = Field("reject", description="`reject` invalid UTF-8, or `replace` bad bytes with U+FFFD")
    max_doc_bytes: int = Field(50_000_000, description="Files larger than this are rejected as too_large")


@register("read.text")
class ReadTextFiles(SourceStage):
    """One document per text file (source code, plain text). Empty files and invalid UTF-8 are rejects.

    Example: assay read text 'repo/**/*.py' out/ --source thealgorithms --content-type code
    """

    Params = TextFilesParams
    files_per_task = 256
    path_params = ("paths", "root")

    def read_file(self, path: str) -> Iterator[pa.Table]:
        p = self.params
        source = p.source or Path(p.paths[0].rstrip("/*")).name or "text"
        buf = DocBuffer(source)
        rel = os.path.relpath(path, p.root) if p.root else path
        name = strip_compression_suffix(path)
        kind = p.content_type or ("code" if Path(name).suffix.lower() in CODE_SUFFIXES else "web")
        meta = {"path": rel, "suffix": Path(name).suffix.lower()}
        try:
            size = os.path.getsize(path)
            if size > p.max_doc_bytes:
                buf.reject("too_large", f"{size} bytes > max_doc_bytes={p.max_doc_bytes}", where=rel)
                yield buf.take()
                return
            with open_binary(path) as fh:
                data = fh.read(p.max_doc_bytes + 1)
        except STREAM_ERRORS as exc:
            buf.reject("corrupt_file", f"{type(exc).__name__}: {exc}", where=rel)
            yield buf.take()
            return
        if len(data) > p.max_doc_bytes:
            buf.reject("too_large", f"decompressed size > max_doc_bytes={p.max_doc_bytes}", where=rel)
        elif not data.strip():
            buf.reject("empty_file", "file is empty or whitespace only", where=rel)
        else:
            try:
                text = data.decode("utf-8", "strict" if p.encoding_errors == "reject" else "replace")
            except UnicodeDecodeError as exc:
                buf.reject("invalid_utf8", f"{exc.reason} at byte {exc.start}", raw=data.decode("utf-8", "replace"), where=rel)
            else:
                buf.add(text, content_type=kind, meta=meta)
        yield buf.take()


class ParquetParams(Params):
    paths: list[str] = Field(description="Parquet files, directories or globs")
    source: str | None = Field(None, description="Dataset name written to `source` when the data has none")
    content_type: str = Field("web", description="Content type when the data has no content_type column")
    text_field: str = Field("text", description="Column holding the document text")
    batch_rows: int = Field(10_000, description="Rows read per batch")


@register("read.parquet")
class ReadParquet(SourceStage):
    """Read outside Parquet into documents: schema columns are mapped, every other column goes to `meta`.

    Example: assay read parquet 'hf_export/*.parquet' out/ --text-field content
    """

    Params = ParquetParams

    def read_file(self, path: str) -> Iterator[pa.Table]:
        p = self.params
        buf = DocBuffer(_source_name(path, p.source))
        seen = 0
        try:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=p.batch_rows):
                for row in batch.to_pylist():
                    seen += 1
                    self._add_row(buf, row, f"{path}:{seen}")
                yield buf.take()
        except (OSError, pa.ArrowException) as exc:
            buf.reject("corrupt_file", f"{type(exc).__name__}: {exc}", where=path)
            seen += 1
        if not seen:
            buf.reject("empty_file", "no rows", where=path)
        yield buf.take()

    def _add_row(self, buf: DocBuffer, row: dict, where: str) -> None:
        p = self.params
        text = row.pop(p.text_field, None)
        if not isinstance(text, str):
            buf.reject("missing_text", f"column {p.text_field!r} is {type(text).__name__}", where=where)
            return
        row.pop("id", None)  # ids are always content-derived
        fields = {k: row.pop(k, None) for k in ("url", "lang", "domain", "content_type")}
        source = row.pop("source", None)
        meta = row.pop("meta", None)
        meta = json.loads(meta) if isinstance(meta, str) and meta.startswith("{") else ({"meta": meta} if meta else {})
        meta.update(row)
        buf.add(text, url=fields["url"], content_type=fields["content_type"] or p.content_type,
                lang=fields["lang"], domain=fields["domain"], meta=meta, source=source)
