"""Helpers for the fuzz tests: seeded byte-level mutations, a per-case wall-clock guard, and writers
for hand-made PDFs and WARC records whose structure (offsets, lengths) the tests choose."""
from __future__ import annotations

import random
import signal
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

# Byte strings that mean something to one of the parsers: inserted whole they break structure in
# ways random bytes rarely do.
TOKENS = [
    b"\x00", b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b'"', b"\\", b"\\ud800", b"{", b"}", b"[",
    b"\n", b"\r\n\r\n", b"WARC/1.0\r\n", b"Content-Length: 99999999\r\n", b"<", b"<!--", b"<![CDATA[", b"&#x0;",
    b"%PDF-1.7\n", b"endobj", b"xref", b"1 0 R", b"stream\n", b"\x1f\x8b\x08", b"\x28\xb5\x2f\xfd", b"PAR1", b"NaN",
]


class Hang(BaseException):
    """A case ran past its wall-clock limit. A BaseException, like KeyboardInterrupt: readers must let
    it through instead of turning it into a reject."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def fire(signum, frame):
        raise Hang(f"case ran past {seconds}s")

    previous = signal.signal(signal.SIGALRM, fire)
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # an outer timer (pytest-timeout's) keeps running with what it had left
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001), interval)


class Mutator:
    """Seeded mutations of a byte string: flips, truncation, insertion, deletion, duplication of a
    chunk, random overwrites, and damage to the first bytes (magic numbers, headers)."""

    OPS = ("flip", "truncate", "insert", "delete", "duplicate", "splice", "header")

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def __call__(self, data: bytes, op: str | None = None) -> tuple[str, bytes]:
        op = op or self.rng.choice(self.OPS)
        buf = bytearray(data)
        if len(buf) < 2:
            buf += self._noise(8)
        getattr(self, "_" + op)(buf)
        return op, bytes(buf)

    def _pos(self, buf: bytearray) -> int:
        return self.rng.randrange(len(buf))

    def _noise(self, n: int) -> bytes:
        return bytes(self.rng.randrange(256) for _ in range(n))

    def _chunk(self) -> bytes:
        return self.rng.choice(TOKENS) if self.rng.random() < 0.5 else self._noise(self.rng.choice([1, 3, 17, 300]))

    def _flip(self, buf: bytearray) -> None:
        for _ in range(self.rng.choice([1, 1, 2, 5, 40])):
            buf[self._pos(buf)] ^= self.rng.randrange(1, 256)

    def _truncate(self, buf: bytearray) -> None:
        del buf[self._pos(buf):]

    def _insert(self, buf: bytearray) -> None:
        at = self._pos(buf)
        buf[at:at] = self._chunk()

    def _delete(self, buf: bytearray) -> None:
        at = self._pos(buf)
        del buf[at : at + self.rng.randrange(1, max(2, len(buf) // 8))]

    def _duplicate(self, buf: bytearray) -> None:
        start = self._pos(buf)
        chunk = bytes(buf[start : start + self.rng.randrange(1, max(2, len(buf) // 4))])
        at = self._pos(buf)
        buf[at:at] = chunk * self.rng.choice([1, 2, 10])

    def _splice(self, buf: bytearray) -> None:
        at = self._pos(buf)
        noise = self._noise(self.rng.choice([4, 64, 512]))
        buf[at : at + len(noise)] = noise

    def _header(self, buf: bytearray) -> None:
        for _ in range(self.rng.choice([1, 2, 4])):
            buf[self.rng.randrange(min(len(buf), 64))] = self.rng.randrange(256)


# ---- hand-made PDFs -------------------------------------------------------------------------------

def pdf_file(objects: dict[int, bytes], root: int = 1, shift_xref: int = 0, xref: bool = True) -> bytes:
    """A PDF with these numbered objects and a classic xref table; `shift_xref` moves every offset
    (a broken xref), `xref=False` leaves table and trailer out."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objects):
        offsets[num] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (num, objects[num])
    if not xref:
        return bytes(out + b"%%EOF\n")
    start, size = len(out), max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for num in range(1, size):
        out += b"%010d 00000 n \n" % max(0, offsets.get(num, 0) + shift_xref)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, start)
    return bytes(out)


def pdf_stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n%s\nendstream" % (len(data), extra, data)


def text_page_objects(lines: list[str]) -> dict[int, bytes]:
    """Catalog, one page, a Helvetica text content stream: the smallest PDF with real text."""
    body = b"BT /F1 11 Tf 72 740 Td 14 TL\n" + b"".join(
        b"(%s) '\n" % line.encode("latin-1", "replace").replace(b"(", b"[").replace(b")", b"]") for line in lines) + b"ET"
    return {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        4: pdf_stream(body),
        5: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }


# ---- hand-made WARC records ---------------------------------------------------------------------

def http_response(body: bytes, headers: list[tuple[str, str]] | None = None, status: bytes = b"200 OK") -> bytes:
    lines = [b"HTTP/1.1 " + status] + [f"{k}: {v}".encode("latin-1") for k, v in (headers or [("Content-Type", "text/html; charset=utf-8")])]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def warc_record(block: bytes, url: str = "https://example.com/", kind: bytes = b"response",
                length: bytes | int | None = None, version: bytes = b"1.0") -> bytes:
    """One uncompressed WARC record; `length` overrides the Content-Length header (lies)."""
    declared = length if isinstance(length, bytes) else b"%d" % (len(block) if length is None else length)
    target = url.encode("utf-8", "surrogateescape")
    head = (b"WARC/%s\r\nWARC-Type: %s\r\nWARC-Target-URI: %s\r\nWARC-Record-ID: <urn:uuid:%s>\r\n"
            b"WARC-Date: 2024-01-01T00:00:00Z\r\nContent-Type: application/http; msgtype=response\r\n"
            b"Content-Length: %s\r\n\r\n") % (version, kind, target, str(uuid.UUID(int=random.Random(target).getrandbits(128))).encode(), declared)
    return head + block + b"\r\n\r\n"


def write_report(section: str, data: dict) -> None:
    """Merge one suite's counts into the JSON named by ASSAY_FUZZ_REPORT (nothing when it is unset),
    so the reader and recipe suites can fill one file in either order."""
    import json
    import os
    from pathlib import Path

    target = os.environ.get("ASSAY_FUZZ_REPORT")
    if not target:
        return
    path = Path(target)
    report = json.loads(path.read_text()) if path.exists() else {}
    report[section] = data
    report["inputs"] = sum(part.get("inputs", 0) for key, part in report.items() if isinstance(part, dict))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
