"""A base for map stages whose rows call a service (an LLM server today, anything remote later).

What every such stage needs and none should write again:

* bounded concurrency: `concurrency` calls in flight per worker (threads: the work is waiting);
* retries with exponential backoff for transient failures (timeouts, connection errors, 429, 5xx);
* transient vs permanent: a call still failing transiently after its retries leaves the shard
  unfinished (the task fails, nothing is committed, a rerun resumes); a permanent failure (4xx, a
  response the stage cannot use) rejects the row with a reason;
* a persistent request cache keyed by the request itself: every answer is stored the moment it
  arrives, so a rerun (after a kill, a transient failure, or a change downstream) never pays twice.
  Answers stored during an unfinished shard are the checkpoints inside it;
* statistics: calls, cache hits, retries, failures, and token counts and cost from `usage`.

The cache is a directory of small JSON files (`<cache>/<2 hex>/<sha256>.json`, written atomically),
safe for many processes and hosts on shared storage, where a database file would not be.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from pydantic import Field

from .stage import MapStage, Params, set_column, with_rejects


class TransientError(Exception):
    """Worth retrying: the service was busy, slow or unreachable."""


class PermanentError(Exception):
    """Retrying will not help: the request or the answer is wrong for this row. `reason` is the
    reject code."""

    def __init__(self, message: str, reason: str = "service_error"):
        super().__init__(message)
        self.reason = reason


class ShardUnfinished(RuntimeError):
    """Calls still failing after their retries: the shard stays uncommitted for the rerun."""


class ServiceParams(Params):
    concurrency: int = Field(8, ge=1, description="Calls in flight per worker")
    timeout_s: float = Field(120, gt=0, description="Seconds one call may take")
    retries: int = Field(4, ge=0, description="Retries of a transient failure before the shard is left unfinished")
    backoff_s: float = Field(1.0, ge=0, description="First retry delay; doubles each retry (with jitter)")
    cache_dir: str | None = Field(None, description="Request cache directory; default: ~/.cache/assay/requests")
    price_in: float = Field(0.0, ge=0, description="Cost per 1M prompt tokens (for the cost statistic)")
    price_out: float = Field(0.0, ge=0, description="Cost per 1M completion tokens")


class RequestCache:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @staticmethod
    def key(request: Any) -> str:
        return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        try:
            return json.loads(self._path(key).read_text())["response"]
        except (OSError, ValueError, KeyError):
            return None

    def put(self, key: str, request: Any, response: Any) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(json.dumps({"request": request, "response": response}, ensure_ascii=False))
        os.replace(tmp, path)


def default_cache_dir() -> Path:
    return Path(os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay")) / "requests"


class ServiceStage(MapStage):
    """Implement `request(row) -> JSON-able request | None` (None: no call for this row),
    `call(request) -> response` (raise TransientError / PermanentError), and `parse(row, response)
    -> dict of column values` (raise PermanentError for an unusable answer). Declare the columns.
    """

    Params: ClassVar[type[ServiceParams]] = ServiceParams
    path_params = ("cache_dir",)

    def setup(self) -> None:
        self.cache = RequestCache(self.params.cache_dir or default_cache_dir())

    def request(self, row: dict) -> Any | None:
        raise NotImplementedError

    def call(self, request: Any) -> Any:
        raise NotImplementedError

    def parse(self, row: dict, response: Any) -> dict:
        raise NotImplementedError

    def _call_with_retries(self, request: Any) -> tuple[Any, int]:
        p = self.params
        delay = p.backoff_s
        for attempt in range(p.retries + 1):
            try:
                return self.call(request), attempt
            except TransientError as exc:
                if attempt == p.retries:
                    raise ShardUnfinished(f"stage {self.stage_id!r}: a call still failed after {p.retries} retries "
                                          f"({exc}); rerun to resume, answered calls are cached") from exc
                time.sleep(delay * (0.5 + random.random()))  # jitter keeps retries of many workers apart
                delay *= 2
        raise AssertionError("unreachable")

    def _answer(self, request: Any) -> tuple[Any, str]:
        """(response or PermanentError, how it was obtained)."""
        key = self.cache.key(request)
        cached = self.cache.get(key)
        if cached is not None:
            return cached, "cache"
        try:
            response, retries = self._call_with_retries(request)
        except PermanentError as exc:
            return exc, "failed"
        self.cache.put(key, request, response)
        self.stats.count("service_retries", retries)
        return response, "call"

    def process(self, table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        requests = [self.request(row) for row in rows]
        todo = [i for i, r in enumerate(requests) if r is not None]
        answers: dict[int, tuple[Any, str]] = {}
        with ThreadPoolExecutor(max_workers=self.params.concurrency) as pool:
            for i, answer in zip(todo, pool.map(self._answer, [requests[i] for i in todo])):
                answers[i] = answer
        values: dict[str, list] = {name: [None] * len(rows) for name in self.columns}
        reasons: list[str | None] = [None] * len(rows)
        details: list[str | None] = [None] * len(rows)
        for i, (response, how) in answers.items():
            self.stats.count(f"service_{how}")
            if isinstance(response, PermanentError):
                reasons[i], details[i] = response.reason, str(response)[:500]
                continue
            self._count_usage(response)
            try:
                parsed = self.parse(rows[i], response)
            except PermanentError as exc:
                reasons[i], details[i] = exc.reason, str(exc)[:500]
                continue
            for name, value in parsed.items():
                values[name][i] = value
        for name, typ in self.columns.items():
            table = set_column(table, name, pa.array(values[name], typ))
        return with_rejects(table, reasons, details)

    def _count_usage(self, response: Any) -> None:
        usage = response.get("usage") if isinstance(response, dict) else None
        if not isinstance(usage, dict):
            return
        prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
        self.stats.count("tokens_in", prompt)
        self.stats.count("tokens_out", completion)
        cost = (prompt * self.params.price_in + completion * self.params.price_out) / 1e6
        if cost:
            self.stats.count("cost", cost)


def post_json(url: str, payload: Any, timeout_s: float, headers: dict[str, str] | None = None) -> Any:
    """POST JSON and return the decoded answer, sorting failures into transient and permanent."""
    import socket
    import urllib.error
    import urllib.request

    data = json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read()[:300].decode("utf-8", "replace")
        if exc.code in (408, 409, 425, 429) or exc.code >= 500:
            raise TransientError(f"HTTP {exc.code}: {text}") from None
        raise PermanentError(f"HTTP {exc.code}: {text}", reason=f"http_{exc.code}") from None
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise PermanentError(f"answer is not JSON: {body[:200]!r}", reason="bad_response") from None
