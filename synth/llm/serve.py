"""`assay serve`: a local model behind the OpenAI chat-completions API (POST /v1/chat/completions,
GET /v1/models, GET /health), on 127.0.0.1 by default.

HTTP/1.1 with keep-alive; one thread per connection, and the model batches whatever requests are in
flight at once (see local.py). Non-streaming only.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .local import BadRequest, LocalChatModel

MAX_BODY = 8 * 1024 * 1024


def make_server(model: LocalChatModel, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    started = int(time.time())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # one line per request would drown the console
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(code, {"error": {"message": message, "type": kind, "code": code}})

        def do_GET(self):
            path = self.path.split("?")[0].rstrip("/")
            if path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "model": model.name})
            elif path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model.name, "object": "model", "created": started,
                                                              "owned_by": "assay"}]})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self):
            if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route {self.path}", "not_found")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY:
                self._error(400 if length <= 0 else 413, "a JSON body (at most 8 MiB) is required")
                self.close_connection = True
                return
            try:
                request = json.loads(self.rfile.read(length))
                if not isinstance(request, dict):
                    raise BadRequest("the body must be a JSON object")
                if request.get("stream"):
                    raise BadRequest("streaming is not supported; send stream=false")
                self._send(200, model.chat(request))
            except (ValueError, BadRequest) as exc:  # JSON errors are ValueErrors too
                self._error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - the server keeps serving; the client sees a 500
                self._error(500, f"{type(exc).__name__}: {exc}", "server_error")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_in_thread(model: LocalChatModel, host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start a server in a background thread (tests, notebooks); returns it and its base URL."""
    server = make_server(model, host, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}/v1"
