"""Per-document time and memory limits: one pathological page must not stall a worker.

Extraction runs in a child process that takes documents over a pipe and answers them in order. The
parent waits at most `timeout_s` for each answer; when the time is up it kills the child, reports the document as a
`timeout` reject and starts a fresh child for the rest of the batch. Python-level timers (SIGALRM)
are not enough because the slow part is often C code (libxml2 parsing a 50 MB page) that does not
return to the interpreter until it is done. The child also gets an address-space cap (beyond what
it inherits) so a page that explodes in memory fails as `too_large` in the child instead of taking
the machine down.

The cost is one pickle round trip per document plus one child start per batch (and per timeout);
`benchmarks/extraction.py` measures it against in-process extraction. `submit` hides it: a reader
queues the next document behind the current one, so the child goes from one to the next without
waiting for the parent to wake up, collect the answer and send more (0.4 ms a page on a VM).
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import time
import traceback
from collections import deque
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
    done_at: float | None = None  # time.monotonic() when the child finished: the next item's clock starts there


# Items the child holds at once: the one it works on and the next, queued.
_DEPTH = 2


def _address_space() -> int:
    """Bytes of virtual address space this process maps now (0 where /proc is not there)."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _child(conn, fn: Callable[[Any], Any], memory_mb: int | None) -> None:
    import signal

    from assay.pipeline.engines.local import die_with_parent

    # Ctrl-C belongs to the parent, which stops the batch; the child must neither print a traceback
    # nor outlive a parent that was killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    # A reader thread drains the pipe while the main thread extracts: the parent's send of a queued
    # item never waits on the extraction, so neither side can block the other on a full pipe.
    import queue
    import threading

    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                item = conn.recv()
            except Exception:  # EOF, a closed pipe, or no memory for the item: the child ends, a crash reject
                item = None
            inbox.put(item)
            if item is None:
                return

    threading.Thread(target=read, daemon=True).start()  # before the cap: its stack counts against it
    if memory_mb:
        try:
            import resource

            # On top of what the fork inherited: a worker of Ray or Spark maps gigabytes of address
            # space it never touches, and a cap below that fails every allocation of the child.
            limit = _address_space() + memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
    while True:
        item = inbox.get()
        if item is None:
            return
        try:
            out = Outcome(True, fn(item))
        except MemoryError:
            out = Outcome(False, reason="too_large", detail="out of memory in extractor")
        except RecursionError:
            out = Outcome(False, reason="too_deep", detail="document nesting too deep")
        except Exception as exc:  # a bad document must become a reject, never end the batch
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            out = Outcome(False, reason="extract_error", detail=tb[:500])
        out.done_at = time.monotonic()
        conn.send(out)


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
        # (item, when it was sent) for each item submitted and not yet collected, oldest first.
        self._pending: deque[tuple[Any, float]] = deque()
        self._free_at = 0.0  # when the child finished the last collected item
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
        self._pending.clear()
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        self._pending.clear()
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
        """Hand `item` to the child now and return at once (isolated mode), so the caller does its own
        work while the child extracts; up to two items are queued, the second starts when the child
        is done with the first. `run(item)` with the same object collects the answer, its time limit
        counted from when the child could start it. True also when `item` is queued already; False:
        not queued, `run(item)` sends it then."""
        if not self.isolate:
            return False
        if any(queued is item for queued, _ in self._pending):
            return True
        if len(self._pending) >= _DEPTH:
            return False
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self._start()
        try:
            self._conn.send(item)
        except (OSError, BrokenPipeError):
            self._kill()
            return False
        self._pending.append((item, time.monotonic()))
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
        pending = self._pending.popleft() if self._pending else None
        if pending is not None and pending[0] is not item:
            self._kill()  # the answer to an item nobody collected must not be read as this one's
            pending = None
        if pending is None and (self._proc is None or not self._proc.is_alive()):
            self._kill()  # anything queued in a dead child is lost: it is sent again when run
            self._start()
        try:
            if pending is None:
                self._conn.send(item)
                wait = self.timeout_s
            else:
                # Queued behind another item, the child started on it when it finished that one.
                started = max(pending[1], self._free_at)
                wait = max(0.0, self.timeout_s - (time.monotonic() - started))
            if self._conn.poll(wait):
                out = self._conn.recv()
                self._free_at = out.done_at or time.monotonic()
                return out
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


