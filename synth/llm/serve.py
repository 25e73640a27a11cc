"""`assay serve`: a local model behind the OpenAI chat-completions API (POST /v1/chat/completions,
GET /v1/models, GET /health), on 127.0.0.1 by default.

HTTP/1.1 with keep-alive; one thread per connection from a bounded pool, and the model batches
whatever requests are in flight at once (see local.py). Non-streaming only.

Limits, because anything on the machine (and any web page its browser opens) can reach a local port:
at most `max_connections` connections are served at once (one more is answered 503 at once, without
a thread), a connection idle for `timeout_s` is closed, a request must arrive whole (head and body)
within REQUEST_S of its first byte however slowly it trickles (a client sending a byte now and
then would otherwise hold its slot for ever), and only requests naming this host are
answered: the `Host` header must be a loopback name or one of `allow_hosts` (a DNS-rebinding page
sends its own name), and a browser's `Origin` must be one too (a page elsewhere cannot drive the
model). A client that goes away mid-answer is not an error worth a log line.
"""
from __future__ import annotations

import io
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .local import BadRequest, LocalChatModel

MAX_BODY = 8 * 1024 * 1024
REQUEST_S = 10.0  # from a request's first byte to its last, at most (and at most timeout_s)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_BUSY_BODY = json.dumps({"error": {"message": "every worker is busy; retry", "type": "server_busy", "code": 503}}).encode()
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(_BUSY_BODY) + _BUSY_BODY)
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)  # the client left or stalled


def _hostname(value: str) -> str:
    """The name in a Host header or an Origin's authority: `[::1]:8000` -> `::1`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read bounded by the idle timeout until a request starts and then
    by what is left of the request's deadline: a trickle of bytes does not renew it."""

    def __init__(self, sock: socket.socket, idle_s: float, request_s: float):
        self.sock, self.idle_s, self.request_s = sock, idle_s, request_s
        self.deadline: float | None = None  # None: between requests

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.deadline is None:
            self.sock.settimeout(self.idle_s)
        else:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            self.sock.settimeout(left)
        n = self.sock.recv_into(buffer)
        if n and self.deadline is None:
            self.deadline = time.monotonic() + self.request_s
        return n


def _once(fn):
    """fn, callable any number of times from any thread, run at most once."""
    gate = threading.Lock()

    def call() -> None:
        if gate.acquire(blocking=False):
            fn()

    return call


class BoundedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with at most `max_connections` handler threads, and quiet about clients
    that went away."""

    daemon_threads = True

    def __init__(self, address, handler, max_connections: int):
        self.slots = threading.BoundedSemaphore(max_connections)
        self._releases: dict = {}  # request -> the one release of its slot
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            try:
                request.settimeout(1)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        # Released once, by the handler thread or here: an interrupt while the thread starts may come
        # after the thread has run and released, and a second release would replace the interrupt.
        self._releases[request] = release = _once(self.slots.release)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._releases.pop(request, None)
            release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            release = self._releases.pop(request, None)
            if release:
                release()

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, GONE):
            return
        print(f"assay serve: {client_address[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)


def make_server(model: LocalChatModel, host: str = "127.0.0.1", port: int = 8000, *, max_connections: int = 64,
                timeout_s: float = 60.0, allow_hosts: tuple[str, ...] = (), weights: str | None = None) -> ThreadingHTTPServer:
    """`weights` (the model's content digest) is listed with the model on GET /v1/models, so a client's
    request cache tells this model from another one served later at the same address."""
    started = int(time.time())
    allowed = LOOPBACK_NAMES | {_hostname(h) for h in allow_hosts} | ({host.lower()} if host not in ("0.0.0.0", "::") else set())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = timeout_s  # every read and write on the connection; an idle keep-alive one too

        def log_message(self, *args):  # one line per request would drown the console
            pass

        def setup(self) -> None:
            super().setup()
            self.rfile.close()  # the socket file setup() made: ours reads instead (and keeps no fd open)
            self._reader = _DeadlineReader(self.connection, timeout_s, min(REQUEST_S, timeout_s))
            self.rfile = io.BufferedReader(self._reader)

        def handle_one_request(self) -> None:
            self._reader.deadline = None  # the next request's clock starts with its first byte
            super().handle_one_request()

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.connection.settimeout(timeout_s)  # writing the answer: the idle bound, not what the read left
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except GONE:
                self.close_connection = True

        def _error(self, code: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(code, {"error": {"message": message, "type": kind, "code": code}})

        def _refused(self) -> bool:
            """Answer 403 to a request naming another host, or sent by a page of another origin."""
            checks = [("Host", self.headers.get("Host") or "")]
            if "Origin" in self.headers:  # browsers send it; `null` (a sandboxed page) names no host
                checks.append(("Origin", self.headers["Origin"]))
            for header, value in checks:
                name = _hostname(urlsplit(value).netloc if header == "Origin" else value)
                if "*" not in allowed and name not in allowed:
                    self._error(403, f"{header} {value!r} is not this server's (allowed: {', '.join(sorted(allowed))}; "
                                     "`assay serve --allow-host NAME` adds one)", "forbidden")
                    self.close_connection = True
                    return True
            return False

        def do_GET(self):
            if self._refused():
                return
            path = self.path.split("?")[0].rstrip("/")
            if path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "model": model.name})
            elif path == "/v1/models":
                entry = {"id": model.name, "object": "model", "created": started, "owned_by": "assay"}
                self._send(200, {"object": "list", "data": [dict(entry, assay_weights=weights) if weights else entry]})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self):
            if self._refused():
                return
            if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route {self.path}", "not_found")
                return
            value = self.headers.get("Content-Length") or "0"
            digits = value.strip()
            length = int(digits) if digits.isascii() and digits.isdigit() else -1  # not "²", which isdigit()
            if length <= 0 or length > MAX_BODY:
                self._error(413 if length > MAX_BODY else 400,
                            f"Content-Length {value!r}: a JSON body of at most 8 MiB, its length in bytes, is required")
                self.close_connection = True
                return
            try:
                request = json.loads(self.rfile.read(length))
                if not isinstance(request, dict):
                    raise BadRequest("the body must be a JSON object")
                if request.get("stream"):
                    raise BadRequest("streaming is not supported; send stream=false")
                self._send(200, model.chat(request))
            except GONE:
                self.close_connection = True
            except (ValueError, BadRequest) as exc:  # JSON errors are ValueErrors too
                self._error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - the server keeps serving; the client sees a 500
                self._error(500, f"{type(exc).__name__}: {exc}", "server_error")

    return BoundedServer((host, port), Handler, max_connections)


def serve_in_thread(model: LocalChatModel, host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start a server in a background thread (tests, notebooks); returns it and its base URL."""
    server = make_server(model, host, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}/v1"
