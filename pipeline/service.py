"""A base for map stages whose rows call a service (an LLM server today, anything remote later).

What every such stage needs and none should write again:

* bounded concurrency: `concurrency` calls in flight per worker (threads: the work is waiting);
* retries with exponential backoff for transient failures (timeouts, connection errors, 429, 5xx);
* transient vs permanent: a call still failing transiently after its retries leaves the shard
  unfinished (the task fails, nothing is committed, a rerun resumes); a permanent failure (4xx, a
  response the stage cannot use) rejects the row with a reason;
* a persistent request cache keyed by the request and what answers it (the stage's declared
  `service_identity`, through `identity.cache_namespace`): every answer is stored the moment it
  arrives, so a rerun (after a kill, a transient failure, or a change downstream) never pays twice.
  Answers stored during an unfinished shard are the checkpoints inside it;
* statistics: calls, cache hits, retries, failures, and token counts and cost from `usage`.

The cache is a directory of append-only journals, one per writing process (see RequestCache), safe
for many processes and hosts on shared storage, where a database file would not be.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import socket
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np
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
    """Answers by request, stored the moment they arrive and kept across runs, processes and hosts.

    Layout: `<cache>/journal/<host>-<pid>-<random>.jsonl`, one append-only journal per writing
    process, a line per answer (the request's SHA-256, a tab, `{"request": ..., "response": ...}`),
    appended with one write as soon as the answer is in (a kill loses nothing answered before it).
    No two processes write the same file, so it is safe on shared storage (NFS) from many hosts;
    readers take only complete, parseable lines, so a line a killed writer left half-written is a
    miss. Each journal has an index file beside it (`<cache>/index/`, 20 bytes an answer), so a
    process's first lookup reads the indexes, not the answers, and keeps where each answer lies in two
    sorted arrays; a miss looks again for lines other processes have appended since, at most once a
    second. Creating a file per answer (the layout before, `<cache>/<2 hex>/
    <sha256>.json`, still read) cost more CPU than the HTTP exchange itself.

    A cache on a store (`cache_dir: s3://bucket/cache`): the same journals, mirrored in a local folder
    (ASSAY_CACHE/remote-requests/...). Other processes' journals are fetched whole when they grew
    (at most once per RESCAN_S, on a miss); ours is appended locally and uploaded whole at most every
    PUBLISH_S seconds and when the stage ends, so a kill loses at most the last PUBLISH_S of answers.
    """

    def __init__(self, root: str | os.PathLike):
        from .storage import as_path

        self.root = as_path(root)
        self._journal = _journal_for(self.root)

    def __reduce__(self):  # a copy in another process opens that process's journal
        return RequestCache, (self.root,)

    @staticmethod
    def canonical(request: Any) -> str:
        """The request as JSON with sorted keys: what the key hashes (and what the journal stores)."""
        return json.dumps(request, sort_keys=True, ensure_ascii=False)

    @staticmethod
    def key(request: Any, canonical: str | None = None, namespace: str = "") -> str:
        """SHA-256 of the request, and of what answers it (`namespace`: the backend's identity), so
        two backends never share an answer."""
        text = RequestCache.canonical(request) if canonical is None else canonical
        return hashlib.sha256((f"{namespace}\n{text}" if namespace else text).encode()).hexdigest()

    def get(self, key: str) -> Any | None:
        return self._journal.get(key)

    def put(self, key: str, request: Any, response: Any, canonical: str | None = None) -> None:
        self._journal.put(key, RequestCache.canonical(request) if canonical is None else canonical, response)

    def entries(self) -> Iterator[tuple[Any, Any]]:
        """Every stored (request, response)."""
        return self._journal.entries()

    def flush(self) -> None:
        """Make the answers stored so far visible to other hosts (a cache on a store; else nothing)."""
        publish = getattr(self._journal, "publish", None)
        if publish is not None:
            publish()


_JOURNALS: dict[tuple[str, int], "_Journal"] = {}
_JOURNALS_LOCK = threading.Lock()


def _journal_for(root: Path) -> "_Journal":
    """One journal per cache directory and process (a forked child gets its own)."""
    from .storage import is_remote

    remote = is_remote(root)
    ident = (str(root) if remote else str(root.expanduser().absolute()), os.getpid())
    with _JOURNALS_LOCK:
        journal = _JOURNALS.get(ident)
        if journal is None:
            journal = _JOURNALS[ident] = _RemoteJournal(root) if remote else _Journal(Path(ident[0]))
        return journal


# A journal's index: one record per line, `<cache>/index/<journal name>.idx`, appended by the journal's
# writer right after the line. The key is the first 64 bits of the SHA-256 (the full key is checked
# against the line when it is read); offset and length locate the answer's JSON in the journal.
_RECORD = np.dtype([("key", "<u8"), ("offset", "<u8"), ("length", "<u4")])  # 20 bytes, packed
_LOCATION = np.dtype([("file", "<u4"), ("offset", "<u8"), ("length", "<u4")])
_LINE_HEAD = 65  # 64 hex digits and a tab before the answer's JSON


def _key64(key: str) -> int:
    return int(key[:16], 16)


class _Journal:
    """Every journal's answers, found through the journals' index files: a first lookup reads 20 bytes
    per answer, not the answers, and the index in memory is two sorted arrays (20 bytes an entry),
    whatever the answers weigh. Lines an index does not cover yet (a writer killed between the two
    appends, a journal from before the index files) are read from the journal in 1 MiB pieces."""

    RESCAN_S = 1.0  # a miss looks for other processes' new lines at most this often
    MAX_OPEN = 32  # journals held open for reading
    MERGE_AT = 16384  # entries held in a dict before they join the sorted arrays
    CHUNK = 1 << 20

    def __init__(self, root: Path):
        self.root, self.dir, self.index_dir = root, root / "journal", root / "index"
        self.lock = threading.Lock()  # the index, the scans, the open readers
        self.write_lock = threading.Lock()  # our journal's appends
        self.keys = np.empty(0, np.uint64)  # sorted
        self.locations = np.empty(0, _LOCATION)  # aligned with keys
        self.recent: dict[int, tuple[int, int, int]] = {}  # key64 -> (file number, offset, length)
        self.files: list[Path] = []
        self.numbers: dict[str, int] = {}
        self.consumed: dict[int, int] = {}  # file number -> journal bytes indexed (complete lines)
        self.index_read: dict[int, int] = {}  # file number -> index bytes read (whole records)
        self.readers: OrderedDict[int, int] = OrderedDict()  # file number -> fd
        self.own: int | None = None  # our journal's file number
        self.own_fd: int | None = None
        self.own_index_fd: int | None = None
        self.own_size = 0
        self.scanned_at: float | None = None
        self.legacy = False

    # ---- the index -------------------------------------------------------------------------------

    def _add(self, key: int, where: tuple[int, int, int]) -> None:
        self.recent[key] = where
        if len(self.recent) >= self.MERGE_AT:
            self._merge()

    def _merge(self, keys: np.ndarray | None = None, locations: np.ndarray | None = None) -> None:
        """Fold the recent entries (and `keys`/`locations`, read in bulk) into the sorted arrays."""
        extra_keys = np.fromiter(self.recent, np.uint64, len(self.recent))
        extra = np.array(list(self.recent.values()), _LOCATION) if self.recent else np.empty(0, _LOCATION)
        parts_k = [self.keys, extra_keys] + ([keys] if keys is not None else [])
        parts_l = [self.locations, extra] + ([locations] if locations is not None else [])
        all_keys = np.concatenate(parts_k)
        order = np.argsort(all_keys, kind="stable")
        self.keys, self.locations = all_keys[order], np.concatenate(parts_l)[order]
        self.recent = {}

    def _find(self, key: int) -> tuple[int, int, int] | None:
        where = self.recent.get(key)
        if where is not None:
            return where
        i = int(np.searchsorted(self.keys, key))
        if i < len(self.keys) and self.keys[i] == key:
            loc = self.locations[i]
            return int(loc["file"]), int(loc["offset"]), int(loc["length"])
        return None

    # ---- reading -------------------------------------------------------------------------------

    def _scan(self) -> None:
        """Index the complete lines appended since the last scan (by every process)."""
        self.scanned_at = time.monotonic()
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            names = []
        for name in names:
            if not name.endswith(".jsonl"):
                continue
            number = self.numbers.get(name)
            if number is None:
                number = self.numbers[name] = len(self.files)
                self.files.append(self.dir / name)
                self.consumed[number] = self.index_read[number] = 0
            if number != self.own:
                self._read_index(number)
                self._read_tail(number)
        if not self.legacy:  # the layout before the journals: a file per answer in <2 hex>/
            try:
                self.legacy = any(len(e.name) == 2 and e.is_dir() for e in os.scandir(self.root))
            except FileNotFoundError:
                pass

    def _read_index(self, number: int) -> None:
        """The records the journal's writer appended to its index since the last scan."""
        try:
            with open(self.index_dir / (self.files[number].name + ".idx"), "rb") as fh:
                fh.seek(self.index_read[number])
                data = fh.read()
        except FileNotFoundError:
            return
        whole = len(data) // _RECORD.itemsize * _RECORD.itemsize
        if not whole:
            return
        records = np.frombuffer(data[:whole], _RECORD)
        self.index_read[number] += whole
        locations = np.empty(len(records), _LOCATION)
        locations["file"], locations["offset"], locations["length"] = number, records["offset"], records["length"]
        self._merge(records["key"].copy(), locations)
        end = int((records["offset"] + records["length"]).max()) + 1  # past the newline of the last line indexed
        self.consumed[number] = max(self.consumed[number], end)

    def _read_tail(self, number: int) -> None:
        """Lines past what the index covers, read in pieces; a line still being written waits."""
        try:
            fh = open(self.files[number], "rb")
        except FileNotFoundError:
            return
        with fh:
            start = self.consumed[number]
            fh.seek(start)
            pending = b""
            while chunk := fh.read(self.CHUNK):
                data = pending + chunk
                pos, end = 0, data.rfind(b"\n") + 1
                while pos < end:
                    eol = data.index(b"\n", pos)
                    if eol - pos > _LINE_HEAD + 1 and data[pos + 64:pos + 65] == b"\t":
                        try:
                            key = _key64(data[pos:pos + 64].decode("ascii"))
                        except ValueError:  # not a key: a foreign line
                            key = None
                        if key is not None:
                            self._add(key, (number, start + pos + _LINE_HEAD, eol - pos - _LINE_HEAD))
                    pos = eol + 1
                start += end
                pending = data[end:]
            self.consumed[number] = start

    def _fd(self, number: int) -> int:
        if number == self.own:
            return self.own_fd
        fd = self.readers.get(number)
        if fd is None:
            fd = self.readers[number] = os.open(self.files[number], os.O_RDONLY)
            if len(self.readers) > self.MAX_OPEN:
                os.close(self.readers.popitem(last=False)[1])
        else:
            self.readers.move_to_end(number)
        return fd

    def _raw(self, key: str, where: tuple[int, int, int]) -> bytes | None:
        """The answer's JSON at `where`, if the line there is `key`'s (a 64-bit index key could collide)."""
        number, offset, length = where
        try:
            raw = os.pread(self._fd(number), length + _LINE_HEAD, offset - _LINE_HEAD)
        except OSError:
            return None
        return raw[_LINE_HEAD:] if raw[:64] == key.encode("ascii") else None

    def get(self, key: str) -> Any | None:
        k = _key64(key)
        with self.lock:
            if self.scanned_at is None:
                self._scan()
            where = self._find(k)
            if where is None and time.monotonic() - self.scanned_at >= self.RESCAN_S:
                self._scan()
                where = self._find(k)
            raw = self._raw(key, where) if where is not None else None
        if where is None:
            return self._legacy_get(key) if self.legacy else None
        try:
            return json.loads(raw)["response"] if raw is not None else None
        except (ValueError, KeyError, TypeError):
            return None  # torn or foreign: a miss, the answer is asked for again

    def _legacy_get(self, key: str) -> Any | None:
        try:
            return json.loads((self.root / key[:2] / f"{key}.json").read_text())["response"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def entries(self) -> Iterator[tuple[Any, Any]]:
        with self.lock:
            self._scan()
            self._merge()
            locations = self.locations.copy()
            legacy = self.legacy
        seen: set[bytes] = set()
        for number, offset, length in locations.tolist():
            with open(self.files[number], "rb") as fh:
                fh.seek(offset - _LINE_HEAD)
                raw = fh.read(length + _LINE_HEAD)
            if raw[:64] in seen:  # the same answer indexed twice (its index and a scan of the journal)
                continue
            seen.add(raw[:64])
            try:
                entry = json.loads(raw[_LINE_HEAD:])
            except ValueError:
                continue
            yield entry["request"], entry["response"]
        if legacy:
            for path in self.root.glob("??/*.json"):
                try:
                    entry = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                yield entry["request"], entry["response"]

    # ---- writing -------------------------------------------------------------------------------

    def put(self, key: str, request_json: str, response: Any) -> None:
        response_json = json.dumps(response, ensure_ascii=False)
        line = f'{key}\t{{"request": {request_json}, "response": {response_json}}}\n'.encode()
        with self.write_lock:  # not the index's lock: lookups do not wait for the disk
            if self.own_fd is None:
                with self.lock:
                    self._open_own()
            offset = self.own_size
            _write_all(self.own_fd, line)  # the answer first: an index record never points past it
            self.own_size += len(line)
            record = np.array([(_key64(key), offset + _LINE_HEAD, len(line) - _LINE_HEAD - 1)], _RECORD)
            _write_all(self.own_index_fd, record.tobytes())
            with self.lock:
                self._add(_key64(key), (self.own, offset + _LINE_HEAD, len(line) - _LINE_HEAD - 1))
                self.consumed[self.own] = self.own_size

    def _open_own(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname())[:40] or "host"
        name = f"{host}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        self.own_fd = os.open(self.dir / name, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        self.own_index_fd = os.open(self.index_dir / (name + ".idx"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        self.own = self.numbers[name] = len(self.files)
        self.files.append(self.dir / name)
        self.consumed[self.own] = self.index_read[self.own] = 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # one write almost always; a short write is finished before anyone else writes
        view = view[os.write(fd, view):]


class CallProgress:
    """A line every `ASSAY_PROGRESS_S` seconds (default 15) under `assay -v` while a batch's calls come
    back: one shard of an LLM stage can take many minutes, and progress counted in shards stays still
    until it ends. Written by the worker itself (engines relay only finished shards)."""

    def __init__(self, stage_id: str, total: int, unit: str = "calls"):
        from .logs import verbosity

        self.stage_id, self.total, self.unit, self.done, self.cached = stage_id, total, unit, 0, 0
        self.every = float(os.environ.get("ASSAY_PROGRESS_S", "15"))
        self.on = verbosity() >= 1 and total > 0
        self.started = self.shown = time.monotonic()
        self.lock = threading.Lock()

    def tick(self, how: str) -> None:
        if not self.on:
            return
        with self.lock:
            self.done += 1
            self.cached += how == "cache"
            now = time.monotonic()
            if now - self.shown < self.every and self.done < self.total:
                return
            self.shown = now
            rate = self.done / max(now - self.started, 1e-6)
            line = (f"{time.strftime('%H:%M:%S')} assay INFO: {self.stage_id}: {self.done:,}/{self.total:,} {self.unit} of "
                    f"this batch ({self.cached:,} from the cache), {rate:.1f}/s, eta {(self.total - self.done) / rate:.0f}s")
        import sys

        print(line, file=sys.stderr, flush=True)


class _RemoteJournal(_Journal):
    """The journals of a cache on a store, mirrored locally (see RequestCache)."""

    PUBLISH_S = 5.0

    def __init__(self, remote: Any):
        import atexit

        self.remote = remote
        mirror = default_cache_dir().parent / "remote-requests" / hashlib.sha256(str(remote).encode()).hexdigest()[:16]
        super().__init__(mirror)
        self.published_at, self.published_size = 0.0, -1
        atexit.register(self.publish)

    def _scan(self) -> None:
        from . import storage

        remote_dir = self.remote / "journal"
        sizes = storage.files_under(remote_dir)
        own = self.files[self.own].name if self.own is not None else None
        for name, size in sizes.items():
            local = self.dir / name
            if name.endswith(".jsonl") and "/" not in name and name != own and \
                    (not local.exists() or local.stat().st_size < size):
                from .dataset import atomic_write_bytes

                # a journal only grows: the new copy holds the old lines where they were
                atomic_write_bytes(local, storage.read_bytes(remote_dir / name), fenced=False)
        super()._scan()

    def put(self, key: str, request_json: str, response: Any) -> None:
        super().put(key, request_json, response)
        if time.monotonic() - self.published_at >= self.PUBLISH_S:
            self.publish()

    def publish(self) -> None:
        """Upload our journal whole (a store has no append), unless it is as last uploaded (at exit,
        after the stage's last batch flushed it: no request to a store that may be gone by then)."""
        from . import storage

        with self.write_lock:
            if self.own is None:
                return
            size = self.files[self.own].stat().st_size
            if size != self.published_size:
                storage.put_file(self.files[self.own], self.remote / "journal" / self.files[self.own].name)
                self.published_size = size
            self.published_at = time.monotonic()


def default_cache_dir() -> Path:
    return Path(os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay")) / "requests"


class ServiceStage(MapStage):
    """Implement `request(row) -> JSON-able request | None` (None: no call for this row),
    `call(request) -> response` (raise TransientError / PermanentError), and `parse(row, response)
    -> dict of column values` (raise PermanentError for an unusable answer). Declare the columns.
    """

    Params: ClassVar[type[ServiceParams]] = ServiceParams
    reads = {"cache_dir": "place"}

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
        canonical = self.cache.canonical(request)
        if getattr(self, "_namespace", None) is None:  # what answers: the same request to another backend is another entry
            from .identity import cache_namespace

            self._namespace = cache_namespace(self)
        key = self.cache.key(request, canonical, self._namespace)
        cached = self.cache.get(key)
        if cached is not None:
            return cached, "cache"
        try:
            response, retries = self._call_with_retries(request)
        except PermanentError as exc:
            return exc, "failed"
        self.cache.put(key, request, response, canonical)
        self.stats.count("service_retries", retries)
        return response, "call"

    def process(self, table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        requests = [self.request(row) for row in rows]
        todo = [i for i, r in enumerate(requests) if r is not None]
        answers: dict[int, tuple[Any, str]] = {}
        progress = CallProgress(self.stage_id, len(todo))

        def answer(request: Any) -> tuple[Any, str]:
            got = self._answer(request)
            progress.tick(got[1])
            return got

        with ThreadPoolExecutor(max_workers=self.params.concurrency) as pool:
            for i, got in zip(todo, pool.map(answer, [requests[i] for i in todo])):
                answers[i] = got
        self.cache.flush()  # a cache on a store: this batch's answers uploaded before its shard commits
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
