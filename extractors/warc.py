"""WARC reading: response records → (url, HTTP headers, body) or a reject, never an exception.

fastwarc (resiliparse project, Apache-2.0) reads .warc, .warc.gz and .warc.lz4 several times faster
than warcio. We ask it for raw record blocks and parse the HTTP message ourselves so a record cut
short (block shorter than its WARC Content-Length) is caught as `truncated_record` rather than
extracted as half a page, and so chunked transfer encoding and gzip content encoding are undone.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class WarcResponse:
    url: str | None
    record_id: str | None
    date: str | None
    status: int | None
    headers: dict[str, str] = field(default_factory=dict)  # HTTP headers, lower-cased names
    body: bytes = b""
    offset: int | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip("\"'")
        return None


@dataclass
class WarcReject:
    reason: str
    detail: str
    url: str | None = None
    record_id: str | None = None
    offset: int | None = None


def _dechunk(body: bytes) -> bytes:
    out, pos = bytearray(), 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            raise ValueError("bad chunk header")
        size = int(body[pos:end].split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


def parse_http_response(block: bytes) -> tuple[int | None, dict[str, str], bytes]:
    """Split an HTTP response into (status, headers, decoded body)."""
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    if not sep:
        raise ValueError("no end of HTTP headers")
    lines = head.decode("iso-8859-1").splitlines()
    status_line = lines[0].split() if lines else []
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        try:
            body = _dechunk(body)
        except ValueError:
            pass  # many crawlers store the body already de-chunked but keep the header
    encoding = headers.get("content-encoding", "").lower()
    if encoding in ("gzip", "x-gzip", "deflate") and body[:1] in (b"\x1f", b"x"):
        try:
            body = zlib.decompress(body, 47 if encoding != "deflate" else 15)
        except zlib.error:
            pass  # stored already decoded despite the header
    return status, headers, body


def iter_warc(path: str, max_bytes: int | None = None) -> Iterator[WarcResponse | WarcReject]:
    """Yield every response record of a WARC file (plain, gzip or lz4) or a reject for it.

    Non-response records (warcinfo, request, metadata, ...) are skipped: they are not documents.
    A file that breaks mid-stream yields one `corrupt_warc` reject and stops.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=False)
        try:
            for rec in it:
                url = rec.headers.get("WARC-Target-URI")
                rid = rec.headers.get("WARC-Record-ID")
                offset = rec.stream_pos
                declared = rec.content_length
                if max_bytes is not None and declared > max_bytes:
                    yield WarcReject("too_large", f"record of {declared} bytes > max_bytes={max_bytes}", url, rid, offset)
                    continue
                block = rec.reader.read()
                if len(block) < declared:
                    yield WarcReject("truncated_record", f"block has {len(block)} of {declared} bytes", url, rid, offset)
                    continue
                try:
                    status, headers, body = parse_http_response(block)
                except ValueError as exc:
                    yield WarcReject("bad_http", str(exc), url, rid, offset)
                    continue
                yield WarcResponse(url, rid, rec.headers.get("WARC-Date"), status, headers, body, offset)
        except Exception as exc:  # fastwarc raises on a damaged stream; the records before it stand
            yield WarcReject("corrupt_warc", f"{type(exc).__name__}: {exc}"[:500])
