"""WARC reading: response records → (url, HTTP headers, body) or a reject, never an exception.

fastwarc (resiliparse project, Apache-2.0) reads .warc, .warc.gz and .warc.lz4 several times faster
than warcio. We ask it for raw record blocks and parse the HTTP message ourselves so a record cut
short (block shorter than its WARC Content-Length) is caught as `truncated_record` rather than
extracted as half a page, and so chunked transfer encoding and gzip content encoding are undone.

A damaged file does not end the reading: when fastwarc cannot parse the next record header (bytes
flipped, a Content-Length that lies, garbage between records), the error is a `corrupt_warc` reject
and reading resumes at the next record boundary found in the raw file (the next gzip member, LZ4 or
zstd frame, or `WARC/1.` header). The record just before the damage is kept only if it provably ends
where its Content-Length says (the record separator follows its block) or its WARC-Block-Digest
matches; otherwise it becomes a `corrupt_record` reject.
"""
from __future__ import annotations

import base64
import hashlib
import re
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
    intact: bool = False  # block digest verified
    declared: int = 0  # WARC Content-Length

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


_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
# Where a record can start, per container: gzip member, LZ4 frame, zstd frame, plain WARC header line.
_MAGICS = {b"\x1f\x8b\x08": ".gz", b"\x04\x22\x4d\x18": ".lz4", b"\x28\xb5\x2f\xfd": ".zst"}
_PLAIN = b"WARC/1."
MAX_RESYNCS = 100  # per file: garbage full of fake record starts must not cost one parse each forever


class BodyTooLarge(ValueError):
    pass


def _dechunk(body: bytes) -> bytes:
    out, pos = bytearray(), 0
    while True:
        end = body.find(b"\r\n", pos)
        token = body[pos:end].split(b";")[0].strip() if end >= 0 else b""
        if not _HEX.fullmatch(token):  # int() would also take "-5" or "1_0" and loop or misread
            raise ValueError("bad chunk header")
        size = int(token, 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


def _inflate(body: bytes, wbits: int, max_bytes: int | None) -> bytes:
    """Undo Content-Encoding without letting a small body expand past max_bytes."""
    dec = zlib.decompressobj(wbits)
    out = dec.decompress(body, (max_bytes + 1) if max_bytes else 0)
    if max_bytes and (len(out) > max_bytes or dec.unconsumed_tail):
        raise BodyTooLarge(f"body expands past max_bytes={max_bytes} when decoded")
    return out


def parse_http_response(block: bytes, max_bytes: int | None = None) -> tuple[int | None, dict[str, str], bytes]:
    """Split an HTTP response into (status, headers, decoded body)."""
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    if not sep:
        raise ValueError("no end of HTTP headers")
    lines = head.decode("iso-8859-1").splitlines()
    status_line = lines[0].split() if lines else []
    code = status_line[1] if len(status_line) > 1 else ""
    status = int(code) if code.isascii() and code.isdigit() and len(code) <= 3 else None
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
            body = _inflate(body, 47 if encoding != "deflate" else 15, max_bytes)
        except zlib.error:
            pass  # stored already decoded despite the header
    return status, headers, body


def _block_intact(headers, block: bytes) -> bool:
    """True when the record's WARC-Block-Digest (sha1, base32 or hex) matches its block."""
    algo, _, want = (headers.get("WARC-Block-Digest") or "").partition(":")
    if algo.strip().lower() != "sha1" or not want:
        return False
    digest = hashlib.sha1(block).digest()
    return want.strip().upper() in (base64.b32encode(digest).decode(), digest.hex().upper())


def _container_magic(path: str) -> bytes:
    """The byte pattern a record starts with in this file (by content, else by suffix)."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    for magic, suffix in _MAGICS.items():
        if head.startswith(magic):
            return magic
    for magic, suffix in _MAGICS.items():
        if path.endswith(suffix):
            return magic
    return _PLAIN


def _next_start(path: str, magic: bytes, after: int) -> int | None:
    """Offset of the first record start strictly after `after`, scanning the raw file."""
    pos = max(after + 1, 0)
    with open(path, "rb") as fh:
        while True:
            fh.seek(pos)
            chunk = fh.read(1 << 20)
            if len(chunk) < len(magic):
                return None
            hit = chunk.find(magic)
            if hit >= 0:
                return pos + hit
            pos += len(chunk) - len(magic) + 1


def _ends_where_declared(path: str, magic: bytes, offset: int, declared: int) -> bool:
    """True when the record at `offset` (plain, or one gzip member) has the record separator exactly
    where its Content-Length says its block ends: that length did not lie."""
    if magic not in (_PLAIN, b"\x1f\x8b\x08"):
        return False
    limit = declared + (1 << 16) + 8  # WARC headers take far less than 64 KiB
    data = bytearray()
    with open(path, "rb") as fh:
        fh.seek(offset)
        if magic == _PLAIN:
            data += fh.read(limit)
        else:
            dec = zlib.decompressobj(31)
            while len(data) < limit and not dec.eof:
                raw = dec.unconsumed_tail or fh.read(1 << 16)
                if not raw:
                    break
                data += dec.decompress(raw, limit - len(data))
    end = data.find(b"\r\n\r\n")
    stop = end + 4 + declared
    return end >= 0 and data[stop : stop + 4] == b"\r\n\r\n"


def _read_record(rec, max_bytes: int | None) -> WarcResponse | WarcReject:
    url = rec.headers.get("WARC-Target-URI")
    rid = rec.headers.get("WARC-Record-ID")
    offset = rec.stream_pos
    declared = rec.content_length
    if max_bytes is not None and declared > max_bytes:
        return WarcReject("too_large", f"record of {declared} bytes > max_bytes={max_bytes}", url, rid, offset)
    block = rec.reader.read()
    if len(block) < declared:
        return WarcReject("truncated_record", f"block has {len(block)} of {declared} bytes", url, rid, offset)
    try:
        status, headers, body = parse_http_response(block, max_bytes)
    except BodyTooLarge as exc:
        return WarcReject("too_large", str(exc), url, rid, offset)
    except ValueError as exc:
        return WarcReject("bad_http", str(exc), url, rid, offset)
    out = WarcResponse(url, rid, rec.headers.get("WARC-Date"), status, headers, body, offset)
    out.intact, out.declared = _block_intact(rec.headers, block), declared
    return out


def iter_warc(path: str, max_bytes: int | None = None) -> Iterator[WarcResponse | WarcReject]:
    """Yield every response record of a WARC file (plain, gzip, lz4 or zstd) or a reject for it.

    Non-response records (warcinfo, request, metadata, ...) are skipped: they are not documents.
    Damage yields a `corrupt_warc` reject and reading resumes at the next record start after it.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from ..pipeline.readers import caused_by_input, describe

    magic = _container_magic(path)
    compressed = magic != _PLAIN
    start: int | None = 0
    resyncs = 0
    while start is not None:
        last, pending, restart = start - 1, None, None
        try:
            with open(path, "rb") as fh:
                fh.seek(start)
                # Every record type, so the offset of each record is known for a resync.
                for rec in ArchiveIterator(fh, parse_http=False):
                    if pending is not None:
                        yield pending
                        pending = None
                    last = rec.stream_pos
                    if rec.record_type != WarcRecordType.response:
                        continue
                    pending = _read_record(rec, max_bytes)
                    if compressed and isinstance(pending, WarcReject) and pending.reason == "too_large":
                        restart = last  # skip by the raw file: decompressing the record to skip it could take long
                        break
        except Exception as exc:  # fastwarc raises OSError on a damaged stream; the records before it stand
            if not caused_by_input(exc):
                raise
            if isinstance(pending, WarcResponse) and not (
                    pending.intact or _ends_where_declared(path, magic, pending.offset, pending.declared)):
                pending = WarcReject("corrupt_record", "the record after it could not be read, and neither the record "
                                     "separator nor a block digest proves this one whole: its Content-Length may be wrong",
                                     pending.url, pending.record_id, pending.offset)
            if pending is not None:
                yield pending
                pending = None
            resyncs += 1
            start = _next_start(path, magic, max(last, start)) if resyncs <= MAX_RESYNCS else None
            tail = f"reading resumes at byte {start}" if start is not None else "the rest of the file is skipped"
            yield WarcReject("corrupt_warc", f"{describe(exc)} after byte {max(last, 0)}; {tail}", offset=max(last, 0))
            continue
        if pending is not None:
            yield pending
        start = _next_start(path, magic, restart) if restart is not None else None
        if restart is not None and start is None:
            yield WarcReject("corrupt_warc", f"no record start after the oversized record at byte {restart}: "
                             "the rest of the file is skipped", offset=restart)
