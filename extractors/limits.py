"""Per-document time and memory limits: one pathological page must not stall a worker.

Extraction runs in a child process fed one document at a time over a pipe. The parent waits at most
`timeout_s` for each answer; when the time is up it kills the child, reports the document as a
`timeout` reject and starts a fresh child for the rest of the batch. Python-level timers (SIGALRM)
are not enough because the slow part is often C code (libxml2 parsing a 50 MB page) that does not
return to the interpreter until it is done. The child also gets an address-space cap so a page that
explodes in memory fails as `too_large` in the child instead of taking the machine down.

The cost is one pickle round trip per document plus one child start per batch (and per timeout);
`benchmarks/extraction.py` measures it against in-process extraction. `submit` hides most of it: a
reader hands over the next document before it converts and writes the current one, so the child
extracts while the parent works.
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

# Fork is cheap and inherits the imported extractor; the child touches no Arrow or thread pools.
_CTX = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()


@dataclass
class Outcome:
    ok: bool
    value: Any = None  # the function's result when ok
    reason: str | None = None  # reject code when not ok
    detail: str | None = None


def _child(conn, fn: Callable[[Any], Any], memory_mb: int | None) -> None:
    import signal

    from assay.pipeline.engines.local import die_with_parent

    # Ctrl-C belongs to the parent, which stops the batch; the child must neither print a traceback
    # nor outlive a parent that was killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if memory_mb:
        try:
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        try:
            conn.send(Outcome(True, fn(item)))
        except MemoryError:
            conn.send(Outcome(False, reason="too_large", detail="out of memory in extractor"))
        except RecursionError:
            conn.send(Outcome(False, reason="too_deep", detail="document nesting too deep"))
        except Exception as exc:  # a bad document must become a reject, never end the batch
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            conn.send(Outcome(False, reason="extract_error", detail=tb[:500]))


class Watchdog:
    """Call `fn(item)` in a recycled child process with a wall-clock limit per item.

    Use as a context manager; `run(item)` returns an `Outcome`. With `isolate=False` it calls `fn`
    in-process (no time limit) — for tests of the function itself and for measuring the overhead.
    """

    def __init__(self, fn: Callable[[Any], Any], timeout_s: float = 10.0, memory_mb: int | None = 4096,
                 isolate: bool = True):
        self.fn, self.timeout_s, self.memory_mb, self.isolate = fn, timeout_s, memory_mb, isolate
        self._proc = None
        self._conn = None
        self._pending: tuple[Any, float] | None = None  # (item, when it was sent) from submit()
        self.restarts = 0

    def __enter__(self) -> "Watchdog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        parent, child = _CTX.Pipe()
        self._proc = _CTX.Process(target=_child, args=(child, self.fn, self.memory_mb), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def _kill(self) -> None:
        self._pending = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        self._pending = None
        if self._proc is not None:
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (OSError, BrokenPipeError):
                pass
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(2)
            self._conn.close()
        self._proc = self._conn = None

    def submit(self, item: Any) -> bool:
        """Hand `item` to the child now and return at once (isolated mode, nothing else pending), so the
        caller does its own work while the child extracts; `run(item)` with the same object collects the
        answer, its time limit counted from here. False: not started, `run(item)` sends it then."""
        if not self.isolate or self._pending is not None:
            return False
        if self._proc is None or not self._proc.is_alive():
            self._start()
        try:
            self._conn.send(item)
        except (OSError, BrokenPipeError):
            self._kill()
            return False
        self._pending = (item, time.monotonic())
        return True

    def run(self, item: Any) -> Outcome:
        if not self.isolate:
            try:
                return Outcome(True, self.fn(item))
            except RecursionError:
                return Outcome(False, reason="too_deep", detail="document nesting too deep")
            except MemoryError:
                raise  # in-process there is no per-document cap: this worker itself is out of memory
            except Exception as exc:
                return Outcome(False, reason="extract_error", detail=f"{type(exc).__name__}: {exc}"[:500])
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is not item:
            self._kill()  # the answer to an item nobody collected must not be read as this one's
            pending = None
        if pending is None and (self._proc is None or not self._proc.is_alive()):
            self._start()
        try:
            if pending is None:
                self._conn.send(item)
                wait = self.timeout_s
            else:
                wait = max(0.0, self.timeout_s - (time.monotonic() - pending[1]))
            if self._conn.poll(wait):
                return self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            if self._proc is not None:
                self._proc.join(1)
            code = self._proc.exitcode if self._proc is not None else None
            self._kill()
            self.restarts += 1
            if code is not None and -code in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                # stopped from outside (the user or the engine), not by the document: never a reject
                raise KeyboardInterrupt(f"extractor stopped by signal {-code}")
            return Outcome(False, reason="extract_crash", detail=f"extractor process died (exit {code})")
        except BaseException:
            # Interrupted while the child works (Ctrl-C, a caller's own deadline): kill it, or its late
            # answer to this item would be read as the answer to the next one.
            self._kill()
            raise
        self._kill()
        self.restarts += 1
        return Outcome(False, reason="timeout", detail=f"extraction exceeded {self.timeout_s:g}s")


