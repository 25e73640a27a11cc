"""An OpenAI-compatible chat-completions client (vLLM, SGLang, llama.cpp's server, `assay serve`, any
provider).

One keep-alive connection per calling thread: a stage's `concurrency` threads each hold one, so at
concurrency 64 the client is not opening a TCP connection per request. Failures are sorted the way
the service contract wants them: timeouts, connection errors, 408/409/425/429 and 5xx are transient
(retried by the stage with backoff); other 4xx and answers that are not a chat completion are
permanent (the row is rejected with the reason).
"""
from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from assay.pipeline.service import PermanentError, TransientError

TRANSIENT_STATUS = {408, 409, 425, 429}


class OpenAIClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0,
                 headers: dict[str, str] | None = None):
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {base_url!r}: expected http(s)://host[:port][/path], e.g. http://127.0.0.1:8000/v1")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.path = (parts.path or "") + "/chat/completions"
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = cls(self.host, self.port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def post(self, payload: Any) -> tuple[int, bytes]:
        body = json.dumps(payload).encode()
        for attempt in (0, 1):
            reused = getattr(self._local, "conn", None) is not None
            conn = self._connection()
            try:
                conn.request("POST", self.path, body=body, headers=self.headers)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._drop()
                if reused and attempt == 0:  # the server closed an idle keep-alive connection: try a fresh one
                    continue
                raise TransientError(f"{type(exc).__name__}: {exc}") from None
            except (socket.timeout, TimeoutError) as exc:
                self._drop()
                raise TransientError(f"timed out after {self.timeout_s}s: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise TransientError(f"{type(exc).__name__}: {exc}") from None
            if resp.getheader("Connection", "").lower() == "close":
                self._drop()
            return resp.status, data
        raise AssertionError("unreachable")

    def chat(self, request: dict) -> dict:
        status, data = self.post(request)
        text = data[:300].decode("utf-8", "replace")
        if status in TRANSIENT_STATUS or status >= 500:
            raise TransientError(f"HTTP {status}: {text}")
        if status >= 400:
            raise PermanentError(f"HTTP {status}: {text}", reason=f"http_{status}")
        try:
            answer = json.loads(data)
        except ValueError:
            raise PermanentError(f"answer is not JSON: {text!r}", reason="bad_response") from None
        check_completion(answer)
        return answer

    def close(self) -> None:
        self._drop()


def check_completion(answer: Any) -> None:
    """A chat completion has choices whose message content is a string; anything else is unusable."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices:
        raise PermanentError(f"answer has no choices: {str(answer)[:200]}", reason="bad_response")
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise PermanentError(f"a choice has no message content: {str(choice)[:200]}", reason="bad_response")
