"""An OpenAI-compatible chat-completions client (vLLM, SGLang, llama.cpp's server, `assay serve`, any
provider).

HTTP/1.1 straight over sockets, one keep-alive connection per calling thread: a stage's `concurrency`
threads each hold one, so at concurrency 64 the client opens no TCP connection per request, and a
request costs one `sendall` of a prebuilt head plus the body and a `recv` or two, with only the
headers a chat completion needs looked at (Content-Length, Transfer-Encoding, Connection). The
standard library's http.client parses every response header with the email package, which made the
client, not the server, the limit at concurrency 64 (benchmarks/synth.py).

`timeout_s` bounds the whole call (connect, send, the wait for the answer and reading it), not each
socket operation, and `max_response_bytes` the size of an answer it reads (a server that sends
gigabytes is refused, not buffered). Failures are sorted the way the service contract wants them: timeouts, connection
errors, malformed HTTP, 408/409/425/429 and 5xx are transient (retried by the stage with backoff);
other 4xx and answers that are not a chat completion are permanent (the row is rejected with the
reason). A kept-alive connection the server closed while idle is retried once on a fresh one.
"""
from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from assay.pipeline.service import PermanentError, TransientError

TRANSIENT_STATUS = {408, 409, 425, 429}
MAX_HEAD = 64 * 1024  # status line and headers
MAX_RESPONSE = 64 * 1024 * 1024  # a chat completion is kilobytes; the cap is for servers gone wrong
RECV = 256 * 1024


class _Closed(Exception):
    """The server closed the connection; `answered` tells whether any of the response had come."""

    def __init__(self, answered: bool):
        super().__init__("the server closed the connection" + (" mid-response" if answered else ""))
        self.answered = answered


class _BadHTTP(Exception):
    pass


class _TooLarge(Exception):
    pass


class _Connection:
    __slots__ = ("sock", "buf", "used", "generation")

    def __init__(self, sock: socket.socket, generation: int):
        self.sock, self.buf, self.used, self.generation = sock, bytearray(), 0, generation

    def recv_into_buf(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self.sock.settimeout(remaining)
        chunk = self.sock.recv(RECV)
        if not chunk:
            raise _Closed(answered=bool(self.buf))
        self.buf += chunk


class OpenAIClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0,
                 headers: dict[str, str] | None = None, max_response_bytes: int = MAX_RESPONSE):
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {base_url!r}: expected http(s)://host[:port][/path], e.g. http://127.0.0.1:8000/v1")
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.path = (parts.path or "") + "/chat/completions"
        self.timeout_s, self.max_response = timeout_s, max_response_bytes
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.base_path, self.netloc = parts.path or "", parts.netloc.rpartition('@')[2]
        self._head = (self._request_head("POST", self.path) + "Content-Length: ").encode("latin-1")
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[_Connection] = set()
        self._generation = 0  # close() ends every thread's connection: their next call opens a new one

    def _request_head(self, method: str, path: str) -> str:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.netloc}"]
        lines += [f"{name}: {value}" for name, value in self.headers.items() if name.lower() != "content-length"]
        return "\r\n".join(lines) + "\r\n"

    # ---- connections ---------------------------------------------------------------------------

    def _connection(self, deadline: float) -> _Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.generation == self._generation:
            return conn
        sock = socket.create_connection((self.host, self.port), timeout=max(deadline - time.monotonic(), 0.001))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # the body must not wait for an ACK
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        conn = self._local.conn = _Connection(sock, self._generation)
        with self._lock:
            self._open.add(conn)
        return conn

    def _drop(self, conn: _Connection | None = None) -> None:
        conn = conn or getattr(self._local, "conn", None)
        if conn is None:
            return
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._lock:
            self._open.discard(conn)
        try:
            conn.sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Close every thread's connection (a later call opens a new one)."""
        with self._lock:
            self._generation += 1
            conns, self._open = list(self._open), set()
        for conn in conns:
            try:
                conn.sock.close()
            except OSError:
                pass
        self._local.conn = None

    # ---- one exchange --------------------------------------------------------------------------

    def post(self, payload: Any) -> tuple[int, bytes]:
        """POST a JSON payload (or bytes of one) to the chat-completions path: (status, body)."""
        body = payload if isinstance(payload, (bytes, bytearray)) else json.dumps(payload).encode()
        return self._exchange(self._head + b"%d\r\n\r\n" % len(body) + body)

    def models(self) -> list[dict]:
        """The server's GET /models list (`data`), or [] when it does not answer one."""
        try:
            status, data = self._exchange((self._request_head("GET", self.base_path + "/models") + "\r\n").encode("latin-1"))
            listed = json.loads(data).get("data") if status == 200 else None
        except (TransientError, PermanentError, ValueError, AttributeError):
            return []
        return [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []

    def _exchange(self, message: bytes) -> tuple[int, bytes]:
        deadline = time.monotonic() + self.timeout_s
        for attempt in (0, 1):
            conn, reused = None, False
            try:
                conn = self._connection(deadline)
                reused = conn.used > 0
                conn.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                conn.sock.sendall(message)
                status, data, keep = _read_response(conn, deadline, self.max_response)
            except _TooLarge as exc:
                self._drop(conn)
                raise PermanentError(f"answer larger than {self.max_response:,} bytes: {exc}",
                                     reason="response_too_large") from None
            except _Closed as exc:
                self._drop(conn)
                if reused and not exc.answered and attempt == 0:  # closed while idle: a fresh connection
                    continue
                raise TransientError(f"connection closed: {exc}") from None
            except (socket.timeout, TimeoutError) as exc:  # socket.timeout is TimeoutError, an OSError
                self._drop(conn)
                raise TransientError(f"timed out after {self.timeout_s}s: {exc}") from None
            except (OSError, _BadHTTP, ssl.SSLError) as exc:
                self._drop(conn)
                if isinstance(exc, (BrokenPipeError, ConnectionResetError)) and reused and not conn.buf \
                        and attempt == 0:
                    continue  # the idle connection was gone before the request went out
                raise TransientError(f"{type(exc).__name__}: {exc}") from None
            conn.used += 1
            if not keep:
                self._drop(conn)
            return status, data
        raise AssertionError("unreachable")

    def chat(self, request: dict) -> dict:
        status, data = self.post(request)
        if status in TRANSIENT_STATUS or status >= 500:
            raise TransientError(f"HTTP {status}: {data[:300].decode('utf-8', 'replace')}")
        if status >= 400:
            raise PermanentError(f"HTTP {status}: {data[:300].decode('utf-8', 'replace')}", reason=f"http_{status}")
        try:
            answer = json.loads(data)
        except ValueError:
            raise PermanentError(f"answer is not JSON: {data[:300].decode('utf-8', 'replace')!r}",
                                 reason="bad_response") from None
        check_completion(answer)
        return answer


def _read_response(conn: _Connection, deadline: float, cap: int = MAX_RESPONSE) -> tuple[int, bytes, bool]:
    """(status, body, whether the connection stays open) of the next response on `conn`; a body
    beyond `cap` bytes raises _TooLarge as soon as it is known to be (its length, or what came)."""
    while True:
        while (end := conn.buf.find(b"\r\n\r\n")) < 0:
            if len(conn.buf) > MAX_HEAD:
                raise _BadHTTP("response head too long")
            conn.recv_into_buf(deadline)
        head = bytes(conn.buf[:end]).decode("latin-1").split("\r\n")
        del conn.buf[:end + 4]
        version, _, rest = head[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _BadHTTP(f"not an HTTP/1.x response: {head[0][:100]!r}")
        status = int(code)
        length, chunked = None, False
        keep = version == "HTTP/1.1"
        for line in head[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise _BadHTTP(f"bad Content-Length {value.strip()!r}") from None
            elif name == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif name == "connection":
                tokens = value.lower()
                keep = "close" not in tokens and (keep or "keep-alive" in tokens)
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            continue
        if status in (204, 304):
            return status, b"", keep
        if chunked:
            return status, _read_chunked(conn, deadline, cap), keep
        if length is not None:
            if length > cap:
                raise _TooLarge(f"Content-Length {length:,}")
            while len(conn.buf) < length:
                conn.recv_into_buf(deadline)
            data = bytes(conn.buf[:length])
            del conn.buf[:length]
            return status, data, keep
        try:  # neither: the body runs to the end of the connection
            while True:
                if len(conn.buf) > cap:
                    raise _TooLarge(f"more than {cap:,} bytes before the end of the connection")
                conn.recv_into_buf(deadline)
        except _Closed:
            pass
        data = bytes(conn.buf)
        conn.buf.clear()
        return status, data, False


def _read_chunked(conn: _Connection, deadline: float, cap: int) -> bytes:
    out = bytearray()
    while True:
        # A chunk-size line and the trailers are framing, never more than MAX_HEAD: a server sending
        # one without end must not fill memory past the cap on the body.
        while (eol := conn.buf.find(b"\r\n")) < 0:
            if len(conn.buf) > MAX_HEAD:
                raise _TooLarge("a chunk-size line without end")
            conn.recv_into_buf(deadline)
        if eol > MAX_HEAD:
            raise _TooLarge("a chunk-size line without end")
        size_text = bytes(conn.buf[:eol]).split(b";")[0].strip()
        if not size_text or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
            raise _BadHTTP(f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        del conn.buf[:eol + 2]
        if len(out) + size > cap:
            raise _TooLarge(f"a chunk of {size:,} bytes after {len(out):,}")
        if size == 0:  # trailers, then an empty line
            trailers = 0
            while (eol := conn.buf.find(b"\r\n")) != 0:
                if trailers + max(eol, len(conn.buf)) > MAX_HEAD:
                    raise _TooLarge("trailers without end")
                if eol < 0:
                    conn.recv_into_buf(deadline)
                else:
                    trailers += eol + 2
                    del conn.buf[:eol + 2]
            del conn.buf[:2]
            return bytes(out)
        while len(conn.buf) < size + 2:
            conn.recv_into_buf(deadline)
        out += conn.buf[:size]
        del conn.buf[:size + 2]


def check_completion(answer: Any) -> None:
    """A chat completion has choices whose message content is a string; anything else is unusable."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices:
        raise PermanentError(f"answer has no choices: {str(answer)[:200]}", reason="bad_response")
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise PermanentError(f"a choice has no message content: {str(choice)[:200]}", reason="bad_response")
