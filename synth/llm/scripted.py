"""An OpenAI-compatible chat-completions server whose answers come from a Python function.

For tests that need exact control of what is "generated" (the verifiers stay the real ones), for
failure drills (429, 500, timeouts, malformed bodies, dropped connections), for dry runs of a
pipeline without a model, and as the fixed-latency server of the client benchmark. It runs on
asyncio in a background thread, speaks HTTP/1.1 with keep-alive, and sleeping requests cost nothing,
so at 64 concurrent connections the server is not what limits the client.
"""
from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Reply:
    content: str | None = None  # the assistant message (a normal completion)
    finish_reason: str = "stop"
    status: int = 200
    body: Any = None  # instead of a completion: a dict (sent as JSON), or str/bytes sent as they are
    delay_s: float = 0.0  # on top of the server's latency
    drop: bool = False  # close the connection without answering


def completion_body(request: dict, content: str, finish_reason: str = "stop") -> dict:
    prompt_words = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": request.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(content.split()),
                      "total_tokens": prompt_words + len(content.split())}}


class ScriptedServer:
    def __init__(self, script: Callable[[dict], Reply | str], latency_s: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, models: list[str | dict] | None = None):  # names, or whole /models entries
        self.script, self.latency_s, self.models = script, latency_s, models
        self.requests: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(host, port), daemon=True)
        self._thread.start()
        self._ready.wait(10)
        self.url = f"http://{host}:{self.port}/v1"

    def _run(self, host: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, host, port, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = h.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                raw = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                if not await self._answer(line.split()[1].decode() if len(line.split()) > 1 else "/", raw, writer):
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _answer(self, path: str, raw: bytes, writer: asyncio.StreamWriter) -> bool:
        if not path.endswith("/chat/completions"):  # GET /models lists `models`; `requests` are chat requests
            body = {"object": "list", "data": [m if isinstance(m, dict) else {"id": m, "object": "model"}
                                               for m in self.models]} \
                if path.endswith("/models") and self.models is not None else {"error": "no route"}
            data = json.dumps(body).encode()
            writer.write(f"HTTP/1.1 {200 if 'data' in body else 404} X\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
            await writer.drain()
            return True
        try:
            request = json.loads(raw) if raw else {}
        except ValueError:
            request = {"_unparsable": raw[:200].decode("utf-8", "replace")}
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self.script(request)
            reply = Reply(content=reply) if isinstance(reply, str) else reply
            if self.latency_s or reply.delay_s:
                await asyncio.sleep(self.latency_s + reply.delay_s)
            if reply.drop:
                return False
            body = reply.body if reply.body is not None else completion_body(request, reply.content or "",
                                                                              reply.finish_reason)
            data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
            writer.write(f"HTTP/1.1 {reply.status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                         f"\r\n\r\n".encode() + data)
            await writer.drain()
            return True
        finally:
            with self._lock:
                self.in_flight -= 1

    def close(self) -> None:
        async def stop():
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:  # handlers waiting on idle keep-alive connections
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> "ScriptedServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
