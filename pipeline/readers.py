"""Readers that turn outside data (JSONL, Parquet, directories of text files) into documents.

Every record that cannot become a document becomes a reject row with a reason code and its location
(file, line or row), so a corrupt archive, a broken line or bad UTF-8 is visible in `_rejects/` and in
the report, never a crash. Two guards make that hold for any input, not only the cases foreseen here:

* `DocBuffer.guard(where, reason)` around each record: any exception raised while parsing that record
  becomes one reject (reason from the exception's type, detail `ExcType: message`), and the reader
  goes on with the next record;
* `FileReader`, the base of every file-reading stage, wraps `read_file`: a stream error nobody caught,
  a path that is not a regular file, or a file that yields no row at all still gives one reject row
  for that file, so every input file is accounted for.

Only exceptions a document can cause become rejects. KeyboardInterrupt and SystemExit are not
`Exception`s and pass through; a plain MemoryError means this worker is out of memory, not that the
record is bad, and passes through too (size limits turn big records into `too_large` before that).
"""
from __future__ import annotations

import functools
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, create_model

from .io import (ExpansionLimit, NotAFile, check_regular_file, iter_lines, link_outside, open_binary,
                 seek_line_start, strip_compression_suffix)
from .schema import CONTENT_TYPES, DOC_SCHEMA, REJECT_DETAIL, REJECT_REASON, doc_id, dumps_meta, row_id
from .stage import Params, SourceStage, register

FOLLOW_SYMLINKS = Field(False, description="Read files that symbolic links inside the input folders point to "
                        "outside them (off: each such file is a `symlink_outside` reject)")
REJECT_SNIPPET_CHARS = 2_000
DETAIL_CHARS = 500
READER_SCHEMA = DOC_SCHEMA.append(pa.field(REJECT_REASON, pa.string())).append(pa.field(REJECT_DETAIL, pa.string()))
# The `segments` contract (DESIGN.md): a document built from parts carries a list of {role, text}
# whose texts concatenate exactly to `text`; the mixer masks roles from the loss per training stage.
SEGMENT_ROLES = ("context", "scaffold", "system", "user", "assistant", "tool")
SEGMENTS_TYPE = pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("text", pa.string())]))
SEGMENTS_SCHEMA = READER_SCHEMA.append(pa.field("segments", SEGMENTS_TYPE))
# Chat `messages` roles as segment roles (OpenAI-style records; "developer" is the newer "system").
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
              "tool": "tool", "function": "tool"}

# Param type for `content_type`: a typo is caught by `assay validate`, not discovered in the data.
ContentType = Literal[CONTENT_TYPES]  # type: ignore[valid-type]

CODE_SUFFIXES = {
    ".py", ".js", ".ts", ".java", ".c", ".h", ".cc", ".cpp", ".hpp", ".go", ".rs", ".rb", ".php",
    ".cs", ".kt", ".scala", ".swift", ".sh", ".sql", ".r", ".jl", ".lua", ".pl", ".hs", ".ml",
}


# ---- turning exceptions into rejects ------------------------------------------------------------

class Reject(Exception):
    """Raised inside a reader for a record that is bad in a known way: becomes reject `reason`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


# First match wins; anything else gets the caller's default (bad_json for a JSON line, ...).
_REASONS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    ((ExpansionLimit, MemoryError), "too_large"),
    (NotAFile, "unreadable"),
    (RecursionError, "too_deep"),
    (UnicodeError, "invalid_utf8"),
    (json.JSONDecodeError, "bad_json"),
    ((TypeError, pa.ArrowTypeError), "wrong_type"),
)


def caused_by_input(exc: BaseException) -> bool:
    """True for exceptions a bad document can cause; False for interrupts and exhausted memory.

    Arrow's MemoryError is the exception: Arrow raises it when one allocation fails, typically the
    size a corrupt file's metadata asked for, so it is the file's fault, not this worker's."""
    from .service import ShardUnfinished

    if isinstance(exc, MemoryError):
        return isinstance(exc, pa.ArrowException)
    # The shard could not be finished for a reason outside the document (an extraction child that
    # made no progress on a starved machine): the task fails and a rerun retries it.
    return isinstance(exc, Exception) and not isinstance(exc, ShardUnfinished)


def reject_reason(exc: BaseException, default: str) -> str:
    if isinstance(exc, Reject):
        return exc.reason
    for types, reason in _REASONS:
        if isinstance(exc, types):
            return reason
    if isinstance(exc, OSError) and exc.errno is not None:  # the file system said no (ELOOP, EIO, ...);
        return "unreadable"  # parsers' OSErrors (BadGzipFile, fastwarc) carry no errno
    return default


def describe(exc: BaseException) -> str:
    """One line, bounded: `ExcType: message` (a Reject's own detail as it is)."""
    text = exc.detail if isinstance(exc, Reject) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:DETAIL_CHARS]


_SURROGATES = re.compile("[\ud800-\udfff]")


def valid_utf8(value: str | None) -> tuple[str | None, int]:
    """Replace lone surrogates (JSON `\\ud800` escapes, surrogateescape'd bytes) with U+FFFD, which
    UTF-8 cannot store; return the string and how many were replaced."""
    if value is None or value.isascii():
        return value, 0
    try:
        value.encode("utf-8")  # fails only on a surrogate; in C, 4x faster than the search below
        return value, 0
    except UnicodeEncodeError:
        return _SURROGATES.subn("\ufffd", value)


# ---- collecting rows -----------------------------------------------------------------------------

class DocBuffer:
    """Collects documents and rejects for one file and hands them out as tables of bounded size.

    Every string it stores is valid UTF-8: lone surrogates are replaced and counted in meta
    (`replaced_surrogates`: field -> count), so a row can always be written.
    """

    def __init__(self, source: str, flush_rows: int = 5_000, schema: pa.Schema = READER_SCHEMA,
                 origin: str | None = None):
        self.source = valid_utf8(source)[0]  # it comes from file names, which need not be UTF-8
        self.flush_rows = flush_rows
        self.schema = schema
        self.rows: list[dict[str, Any]] = []
        # A reader that enters files mid-way names each record's position (a line number): the id is
        # then (origin, position), the same however the file was split into tasks.
        self.origin = origin

    def _id(self, position: Any, text: str | None, source: str | None, url: str | None) -> str:
        if self.origin is not None and position is not None:
            return row_id(self.origin, position)
        return doc_id(text, source, url)  # replaced by the source stage's (file, ordinal) id

    def add(self, text: str, *, url: str | None = None, content_type: str | None = None,
            lang: str | None = None, domain: str | None = None, meta: dict | None = None,
            source: str | None = None, segments: list[dict] | None = None, position: Any = None) -> None:
        if not isinstance(text, str):
            raise Reject("wrong_type", f"text is {type(text).__name__}, expected a string")
        meta = dict(meta or {})
        fields = {"text": text, "source": source or self.source, "content_type": content_type,
                  "url": url, "lang": lang, "domain": domain}
        replaced = {}
        for name, value in fields.items():
            if value is None or (value.__class__ is str and value.isascii()):
                continue  # the common case, kept cheap: tiny records come by the million
            if not isinstance(value, str):
                meta.setdefault(name, value)  # an odd value is kept in meta, not forced into the column
                fields[name] = None
                continue
            fields[name], count = valid_utf8(value)
            if count:
                replaced[name] = count
        fields["source"] = fields["source"] or self.source
        meta_json, count = valid_utf8(dumps_meta(meta))
        if count:
            replaced["meta"] = count
        if replaced:
            meta_json = dumps_meta(dict(json.loads(meta_json), replaced_surrogates=replaced))
        if segments is not None:
            segments = [{"role": x["role"], "text": valid_utf8(x["text"])[0]} for x in segments]
        self.rows.append(dict(fields, id=self._id(position, fields["text"], fields["source"], fields["url"]),
                              meta=meta_json, segments=segments, **{REJECT_REASON: None, REJECT_DETAIL: None}))

    def reject(self, reason: str, detail: str, *, raw: str | bytes = "", where: str = "", meta: dict | None = None,
               position: Any = None) -> None:
        if isinstance(raw, bytes):
            raw = raw[:REJECT_SNIPPET_CHARS * 4].decode("utf-8", "replace")
        snippet = valid_utf8(raw[:REJECT_SNIPPET_CHARS])[0]
        where = valid_utf8(where)[0]
        meta_json = valid_utf8(dumps_meta(dict(meta or {}, location=where)))[0]
        self.rows.append({
            "id": self._id(position if position is not None else where, snippet, self.source, where),
            "text": snippet, "source": self.source,
            "content_type": None, "url": None, "lang": None, "domain": None,
            "meta": meta_json, REJECT_REASON: reason, REJECT_DETAIL: valid_utf8(detail)[0],
        })

    @contextmanager
    def guard(self, where: str | Callable[[], str], default: str, raw: str | bytes = "",
              meta: dict | None = None) -> Iterator[None]:
        """Turn any exception a document causes inside the block into one reject at `where`; rows
        added before it stand (readers add a document as their record's last step)."""
        try:
            yield
        except Exception as exc:
            if not caused_by_input(exc):
                raise
            self.reject(reject_reason(exc, default), describe(exc), raw=raw,
                        where=where() if callable(where) else where, meta=meta)

    def full(self) -> bool:
        return len(self.rows) >= self.flush_rows

    def take(self) -> pa.Table:
        rows, self.rows = self.rows, []
        try:  # by way of a record batch: Table.from_pylist costs ~0.4 ms more per table (one page, one table)
            return pa.Table.from_batches([pa.RecordBatch.from_pylist(rows, schema=self.schema)], self.schema)
        except Exception as exc:  # a value add() did not foresee: find the row, keep the others
            if not caused_by_input(exc):
                raise
            return pa.concat_tables([self._one_row(row) for row in rows] or [self.schema.empty_table()])

    def _one_row(self, row: dict[str, Any]) -> pa.Table:
        try:
            return pa.Table.from_pylist([row], schema=self.schema)
        except Exception as exc:
            if not caused_by_input(exc):
                raise
            location = f"{row.get('url') or ''} {row.get('meta') or ''}"[:REJECT_SNIPPET_CHARS]
            self.reject(reject_reason(exc, "wrong_type"), describe(exc), where=location)
            return pa.Table.from_pylist([self.rows.pop()], schema=self.schema)


# ---- the per-file guard --------------------------------------------------------------------------

def check_input_file(reader, path: str, first_range: bool = True) -> bool:
    """Raise the reject of a file `reader` must not read: one a symbolic link takes out of the input
    folder (unless `follow_symlinks`), or one that is not a regular file. False (nothing raised) for a
    later byte range of such a link: the file's one reject comes from its first range."""
    target = None if getattr(reader.params, "follow_symlinks", True) else \
        link_outside(path, reader.params.paths, reader.__dict__.setdefault("_link_memo", {}))
    if target is not None:
        if not first_range:
            return False
        raise Reject("symlink_outside", f"{path} links to {target}, outside the input folder "
                                        "(--follow-symlinks, or follow_symlinks: true, reads it)")
    check_regular_file(path)
    return True


def guard_file(read_file: Callable[..., Iterator[pa.Table]]) -> Callable[..., Iterator[pa.Table]]:
    """Wrap a `read_file(self, path[, byte_range])` generator so that the file always ends up
    accounted for: a non-regular file or an exception nobody caught becomes a reject for the file
    (rows already handed out stand), and a file that gave no row at all gives an `empty_file` reject.
    A byte range of a split file may hold no record start (one long line spans it): no reject then."""
    if getattr(read_file, "_guarded", False):
        return read_file

    @functools.wraps(read_file)
    def read(self, path: str, byte_range: tuple[int, int] | None = None) -> Iterator[pa.Table]:
        buf = DocBuffer(self.source_for(path), schema=self.reader_schema)
        rows = 0
        name = self.name_of(path)  # the file as rows name it (the same on local disk or a store)
        where = f"{name}[{byte_range[0]}:{byte_range[1]}]" if byte_range else name
        with buf.guard(where, "corrupt_file"):
            if not check_input_file(self, path, first_range=not byte_range or byte_range[0] == 0):
                return
            for table in (read_file(self, path, byte_range) if byte_range else read_file(self, path)):
                rows += table.num_rows
                yield table
        if not rows and not buf.rows and not byte_range:
            buf.reject("empty_file", "the file holds no records", where=name)
        if buf.rows:
            yield buf.take()

    read._guarded = True  # type: ignore[attr-defined]
    return read


class FileReader(SourceStage):
    """Base of stages that read files: every subclass's `read_file` is wrapped by `guard_file`, and
    every subclass's params gain `follow_symlinks` (off: a file a link takes out of the input folder,
    such as `passwd -> /etc/passwd`, is a `symlink_outside` reject, not a document)."""

    reader_schema: pa.Schema = READER_SCHEMA  # what its tables hold (with `segments` where it reads them)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "read_file" in cls.__dict__:
            cls.read_file = guard_file(cls.__dict__["read_file"])
        if "Params" in cls.__dict__ and "follow_symlinks" not in cls.Params.model_fields:
            params = create_model(cls.Params.__name__, __base__=cls.Params, __module__=cls.__module__,
                                  follow_symlinks=(bool, FOLLOW_SYMLINKS))
            params.__qualname__ = f"{cls.__qualname__}.Params"  # where pickle finds it
            cls.Params = params

    def source_for(self, path: str) -> str:
        """Value of `source` on this file's rows (also on its file-level rejects)."""
        return _source_name(path, getattr(self.params, "source", None))


def _source_name(path: str, configured: str | None) -> str:
    return configured or Path(strip_compression_suffix(Path(path).name)).stem


# ---- JSON Lines -------------------------------------------------------------------------------------

def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# NaN and Infinity are not JSON: accepting them would write meta that other JSON parsers refuse.
_JSON = json.JSONDecoder(parse_constant=_no_constant)


def take_segments(record: dict, text: Any) -> tuple[Any, list[dict] | None]:
    """(text, segments) of a record: its `segments` (list of {role, text} concatenating to the text,
    which may then be left out), or its chat `messages` (list of {role, content}) as segments joined
    by blank lines. Anything else is a `bad_segments` reject saying what is wrong."""
    segments, messages = record.pop("segments", None), record.pop("messages", None)
    if segments is None and messages is None:
        return text, None
    if segments is not None and messages is not None:
        raise Reject("bad_segments", "both `segments` and `messages` given; keep one")
    if messages is not None:
        segments = _messages_as_segments(messages)
    if not isinstance(segments, list) or not segments:
        raise Reject("bad_segments", f"`segments` must be a non-empty list of {{role, text}}, got {type(segments).__name__}")
    for i, seg in enumerate(segments):
        if not isinstance(seg, dict) or set(seg) != {"role", "text"}:
            raise Reject("bad_segments", f"segment {i} must be an object with exactly `role` and `text`")
        if seg["role"] not in SEGMENT_ROLES:
            raise Reject("bad_segments", f"segment {i}: unknown role {seg['role']!r}; expected one of "
                         f"{', '.join(SEGMENT_ROLES)}")
        if not isinstance(seg["text"], str):
            raise Reject("bad_segments", f"segment {i}: text is {type(seg['text']).__name__}, expected a string")
    joined = "".join(seg["text"] for seg in segments)
    if text is None:
        return joined, segments
    if text != joined:
        raise Reject("bad_segments", f"the segments' texts ({len(joined)} characters) do not concatenate to "
                     f"the text ({len(text) if isinstance(text, str) else type(text).__name__})")
    return text, segments


def _messages_as_segments(messages: Any) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise Reject("bad_segments", f"`messages` must be a non-empty list of {{role, content}}, got {type(messages).__name__}")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in CHAT_ROLES:
            role = msg.get("role") if isinstance(msg, dict) else None
            raise Reject("bad_segments", f"message {i}: role {role!r} is not one of {', '.join(CHAT_ROLES)}")
        content = msg.get("content")
        if isinstance(content, list):  # content parts: only text parts carry text
            if any(not isinstance(c, dict) or c.get("type") != "text" or not isinstance(c.get("text"), str)
                   for c in content):
                raise Reject("bad_segments", f"message {i}: a content part is not a {{type: text, text}} part")
            content = "".join(c["text"] for c in content)
        if content is not None and not isinstance(content, str):
            raise Reject("bad_segments", f"message {i}: content is {type(content).__name__}, expected a string")
        sep = "\n\n" if i < len(messages) - 1 else ""
        out.append({"role": CHAT_ROLES[msg["role"]], "text": (content or "") + sep})
    return out


class JsonlParams(Params):
    paths: list[str] = Field(description="Files, directories or globs of .jsonl / .jsonl.gz / .jsonl.zst")
    source: str | None = Field(None, description="Dataset name written to `source`; default: the file's stem")
    content_type: ContentType = Field("web", description=f"One of {', '.join(CONTENT_TYPES)}")
    text_field: str = Field("text", description="Field holding the document text")
    url_field: str | None = Field("url", description="Field holding the URL, if any")
    lang_field: str | None = Field(None, description="Field holding a language code, if any")
    max_doc_bytes: int = Field(50_000_000, gt=0, description="Records larger than this are rejected as too_large")
    max_expansion: float = Field(200.0, gt=1, description="A compressed file expanding more than this many times its "
                                 "size (past the first MiB) is a decompression bomb: the rest is rejected as too_large")
    task_mb: float = Field(64.0, gt=0, description="Uncompressed files larger than this are read as several tasks "
                           "(byte ranges split at line starts), so one big file spreads over every core")


@register("read.jsonl")
class ReadJsonl(FileReader):
    """Read JSON Lines (plain, gzip or zstd). Fields other than text/url/lang go to `meta`; a
    `segments` list ({role, text}) or chat `messages` ({role, content}) becomes the `segments` column.

    Rejects: bad_json (line N), invalid_utf8, missing_text, wrong_type, too_large, too_deep,
    bad_segments, corrupt_file (damaged compression; the lines before the damage are kept), empty_file.

    A plain (uncompressed) file larger than `task_mb` is read as several tasks, each owning the lines
    that start in its byte range; the rows, their order and the rejects (line numbers included) are
    the same as one whole-file read. Compressed streams cannot be entered mid-way: one task each.

    Example: assay read jsonl data/*.jsonl.gz out/ --text-field content --source mycrawl
    """

    Params = JsonlParams
    splittable = True
    columns = {"segments": SEGMENTS_TYPE}
    reader_schema = SEGMENTS_SCHEMA

    @property
    def task_bytes(self) -> int:  # type: ignore[override]
        return int(self.params.task_mb * 1024 * 1024)

    def read_file(self, path: str, byte_range: tuple[int, int] | None = None) -> Iterator[pa.Table]:
        p = self.params
        name = self.name_of(path)  # the file as rows name it (the same on local disk or a store)
        # ids from line numbers: the same whether the file is read whole or split into tasks
        buf = DocBuffer(self.source_for(path), schema=self.reader_schema, origin=name)
        lineno = 0
        with buf.guard(lambda: f"{name} after line {lineno}", "corrupt_file"):
            with open_binary(path, max_expansion=p.max_expansion) as fh:
                if byte_range:
                    lineno = seek_line_start(fh, byte_range[0])
                lines = iter_lines(fh, p.max_doc_bytes, first_lineno=lineno, until=byte_range[1] if byte_range else None)
                for lineno, raw, size in lines:
                    where = f"{name}:{lineno}"
                    if raw is None:
                        buf.reject("too_large", f"{size} bytes > max_doc_bytes={p.max_doc_bytes}", where=where,
                                   position=lineno)
                    else:
                        with buf.guard(where, "bad_json", raw=raw):
                            self._add_line(buf, raw, lineno == 1, lineno)
                    if buf.full():
                        yield buf.take()
        yield buf.take()

    def _add_line(self, buf: DocBuffer, raw: bytes, first: bool, lineno: int) -> None:
        p = self.params
        record = _JSON.decode(raw.decode("utf-8-sig" if first else "utf-8"))
        if not isinstance(record, dict):
            raise Reject("bad_json", f"expected an object, got {type(record).__name__}")
        text, segments = take_segments(record, record.pop(p.text_field, None))
        if text is None:
            raise Reject("missing_text", f"field {p.text_field!r} is missing or null")
        if not isinstance(text, str):
            raise Reject("wrong_type", f"field {p.text_field!r} is {type(text).__name__}, expected a string")
        url = record.pop(p.url_field, None) if p.url_field else None
        lang = record.pop(p.lang_field, None) if p.lang_field else None
        buf.add(text, url=url, content_type=p.content_type, lang=lang, meta=record, segments=segments,
                position=lineno)


# ---- one document per file ------------------------------------------------------------------------------

class TextFilesParams(Params):
    paths: list[str] = Field(description="Files, directories (recursive) or globs; .gz/.zst are decompressed")
    source: str | None = Field(None, description="Dataset name written to `source`; default: the first path's name")
    content_type: ContentType | None = Field(None, description="Content type; default: `code` for source-code suffixes, else `web`")
    root: str | None = Field(None, description="Paths in meta are made relative to this directory")
    encoding_errors: Literal["reject", "replace"] = Field(
        "reject", description="`reject` invalid UTF-8, or `replace` bad bytes with U+FFFD")
    max_doc_bytes: int = Field(50_000_000, gt=0, description="Files larger than this are rejected as too_large")


@register("read.text")
class ReadTextFiles(FileReader):
    """One document per text file (source code, plain text). Empty files and invalid UTF-8 are rejects.

    Example: assay read text 'repo/**/*.py' out/ --source thealgorithms --content-type code
    """

    Params = TextFilesParams
    files_per_task = 256
    reads = {"paths": "file", "root": "place"}  # root only names paths in meta

    def source_for(self, path: str) -> str:
        first = self.params.paths[0] if self.params.paths else ""
        return self.params.source or Path(first.rstrip("/*")).name or "text"

    def read_file(self, path: str) -> Iterator[pa.Table]:
        p = self.params
        buf = DocBuffer(self.source_for(path))
        logical = getattr(self, "_logical", {}).get(path, path)  # a file on a store: its URL
        rel = os.path.relpath(logical, p.root) if p.root else self.name_of(path)
        name = strip_compression_suffix(path)
        kind = p.content_type or ("code" if Path(name).suffix.lower() in CODE_SUFFIXES else "web")
        with buf.guard(rel, "corrupt_file"):
            size = check_regular_file(path)
            if size > p.max_doc_bytes:
                raise Reject("too_large", f"{size} bytes > max_doc_bytes={p.max_doc_bytes}")
            with open_binary(path) as fh:
                data = fh.read(p.max_doc_bytes + 1)  # bounded: a compressed bomb stops here
            if len(data) > p.max_doc_bytes:
                raise Reject("too_large", f"decompressed size > max_doc_bytes={p.max_doc_bytes}")
            if not data.strip():
                raise Reject("empty_file", "file is empty or whitespace only")
            with buf.guard(rel, "invalid_utf8", raw=data):
                text = data.decode("utf-8", "strict" if p.encoding_errors == "reject" else "replace")
                buf.add(text, content_type=kind, meta={"path": rel, "suffix": Path(name).suffix.lower()})
        yield buf.take()


# ---- Parquet -------------------------------------------------------------------------------------------------

class ParquetParams(Params):
    paths: list[str] = Field(description="Parquet files, directories or globs")
    source: str | None = Field(None, description="Dataset name written to `source` when the data has none")
    content_type: ContentType = Field("web", description="Content type when the data has no (known) content_type")
    text_field: str = Field("text", description="Column holding the document text (string, or UTF-8 binary)")
    batch_rows: int = Field(10_000, gt=0, description="Rows read per batch")
    max_doc_bytes: int = Field(50_000_000, gt=0, description="Texts larger than this are rejected as too_large")


def _text_column_problem(schema: pa.Schema, name: str) -> Reject | None:
    if name not in schema.names:
        return Reject("wrong_schema", f"no column {name!r}; columns: {', '.join(schema.names)[:300]}")
    kind = schema.field(name).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind) or str(kind) in ("string_view", "binary_view")):
        return Reject("wrong_type", f"column {name!r} is {kind}, expected a string column")
    return None


def _batch_rows(batch: pa.RecordBatch) -> Iterator[dict | Exception]:
    """The batch as dicts; when the batch will not convert, row by row, with the failure in place."""
    try:
        yield from batch.to_pylist()
        return
    except Exception as exc:
        if not caused_by_input(exc):
            raise
    for i in range(batch.num_rows):
        try:
            yield batch.slice(i, 1).to_pylist()[0]
        except Exception as exc:
            if not caused_by_input(exc):
                raise
            yield exc


@register("read.parquet")
class ReadParquet(FileReader):
    """Read outside Parquet into documents: schema columns are mapped, every other column goes to `meta`;
    a `segments` column ({role, text}) or chat `messages` ({role, content}) becomes `segments`.

    Rejects: wrong_schema / wrong_type (no usable text column: one reject for the file), missing_text,
    invalid_utf8, too_large, bad_json (a `meta` string that is not a JSON object), bad_segments, corrupt_file.

    Example: assay read parquet 'hf_export/*.parquet' out/ --text-field content
    """

    Params = ParquetParams
    columns = {"segments": SEGMENTS_TYPE}
    reader_schema = SEGMENTS_SCHEMA

    def read_file(self, path: str) -> Iterator[pa.Table]:
        p = self.params
        buf = DocBuffer(self.source_for(path), schema=self.reader_schema)
        seen = 0
        name = self.name_of(path)  # the file as rows name it (the same on local disk or a store)
        with buf.guard(lambda: f"{name} after row {seen}" if seen else name, "corrupt_file"):
            with pq.ParquetFile(path) as pf:
                problem = _text_column_problem(pf.schema_arrow, p.text_field)
                if problem:
                    raise problem
                for batch in pf.iter_batches(batch_size=p.batch_rows):
                    for row in _batch_rows(batch):
                        seen += 1
                        with buf.guard(f"{name}:{seen}", "wrong_type"):
                            if isinstance(row, Exception):
                                raise row
                            self._add_row(buf, row)
                    yield buf.take()
        yield buf.take()

    def _add_row(self, buf: DocBuffer, row: dict) -> None:
        p = self.params
        text = row.pop(p.text_field, None)
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        text, segments = take_segments(row, text)
        if text is None:
            raise Reject("missing_text", f"column {p.text_field!r} is null")
        if len(text) > p.max_doc_bytes or (4 * len(text) > p.max_doc_bytes and len(text.encode("utf-8", "surrogatepass")) > p.max_doc_bytes):
            raise Reject("too_large", f"text of {len(text)} characters > max_doc_bytes={p.max_doc_bytes}")
        row.pop("id", None)  # ids are always content-derived
        fields = {k: row.pop(k, None) for k in ("url", "lang", "domain", "content_type")}
        source = row.pop("source", None)
        meta = _meta_dict(row.pop("meta", None))
        if fields["content_type"] is not None and fields["content_type"] not in CONTENT_TYPES:
            meta.setdefault("content_type", fields["content_type"])  # unknown type: keep it, use the param
            fields["content_type"] = None
        meta.update(row)
        buf.add(text, url=fields["url"], content_type=fields["content_type"] or p.content_type,
                lang=fields["lang"], domain=fields["domain"], meta=meta, source=source, segments=segments)


def _meta_dict(meta: Any) -> dict:
    """A `meta` column value as a dict: a JSON object string is parsed (a broken one is a reject),
    any other non-empty value is kept under the key `meta`."""
    if isinstance(meta, str) and meta.lstrip().startswith("{"):
        try:
            return _JSON.decode(meta)
        except (ValueError, RecursionError) as exc:
            raise Reject("bad_json", f"column 'meta' is not a JSON object: {describe(exc)}") from None
    return {"meta": meta} if meta not in (None, "") else {}
