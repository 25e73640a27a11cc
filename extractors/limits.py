"""Per-document time and memory limits: one pathological page must not stall a worker.

Extraction runs in a child process that takes documents over a pipe and answers them in order. The
parent lets each document use at most `timeout_s` seconds of the child's *CPU time*; past that it
kills the child, reports the document as a `timeout` reject and starts a fresh child for the rest of
the batch. CPU time, not the wall clock: a document's fate (row or reject) must not depend on how
busy the machine is (a wall-clock limit rejected a large page under load and kept it at low load, so
the same input gave different datasets on different days). The wall clock is only a last resort,
`wall_s` (a child that makes no progress: blocked, or starved by the machine): the batch then fails
with `Unfinished`, which the readers let through, so the shard stays uncommitted and a rerun
retries it instead of committing a load-dependent reject. Python-level timers (SIGALRM) are not
enough because the slow part is often C code (libxml2 parsing a 50 MB page) that does not return to
the interpreter until it is done. The child also gets an address-space cap (beyond what it inherits)
so a page that explodes in memory fails as `too_large` in the child instead of taking the machine
down.

The cost is one pickle round trip per document plus one child start per batch (and per timeout);
`benchmarks/extraction.py` measures it against in-process extraction. `submit` hides it: a reader
queues the next document behind the current one, so the child goes from one to the next without
waiting for the parent to wake up, collect the answer and send more (0.4 ms a page on a VM).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from ..pipeline.service import ShardUnfinished

# Fork is cheap and inherits the imported extractor; the child touches no Arrow or thread pools.
_CTX = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()


@dataclass
class Outcome:
    ok: bool
    value: Any = None  # the function's result when ok
    reason: str | None = None  # reject code when not ok
    detail: str | None = None
    done_at: float | None = None  # time.monotonic() when the child finished: the next item's clock starts there
    cpu_at: float | None = None  # the child's CPU seconds then (`_cpu_seconds`): the next item's CPU budget starts there


class Unfinished(ShardUnfinished):
    """A document ran past the wall-clock last resort without using up its CPU time: the machine,
    not the document, is at fault, so no reject is written and the shard is left for the rerun."""


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


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_LINUX = sys.platform.startswith("linux")


def _cpu_seconds(pid: int | None = None) -> float | None:
    """User + system CPU seconds of a process (all its threads; `pid` None: this one), or None where
    they cannot be read (the limit then falls back to the wall clock). Parent and child read the same
    clock: on Linux the process's CPU clock, whose id clock_getcpuclockid(3) computes from the pid as
    below (0.7 us a reading; /proc/PID/stat took 14 us, three times a page); elsewhere /proc."""
    if _LINUX:
        try:
            return time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID if pid is None else (~pid << 3) | 2)
        except OSError:  # a process already reaped
            return None
    try:
        with open(f"/proc/{pid or 'self'}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)
    except (OSError, IndexError, ValueError):
        return None


def _widen(conn) -> None:
    """Up to 4 MiB of send buffer on the parent's end of the pipe (a socket pair; the kernel's default,
    about 200 KiB, is less than many pages): a page goes over in one write and the child's reader
    wakes for it once, not once per slice (1,000 fewer context switches and ~2% of the CLI's CPU on
    the benchmark's 579 pages). The kernel caps it at net.core.wmem_max; anything else is left as is."""
    import socket

    fd = os.dup(conn.fileno())
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # not a socket
        os.close(fd)
        return
    with sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        except OSError:
            pass


def _child(conn, fn: Callable[[Any], Any], memory_mb: int | None) -> None:
    import signal

    from assay.pipeline.engines.local import die_with_parent

    # Ctrl-C belongs to the parent, which stops the batch; the child must neither print a traceback
    # nor outlive a parent that was killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    # What the fork inherited (modules, the parent's stage: about 60,000 objects) lives as long as the
    # child. Frozen, the cyclic collector no longer walks it: collections took 42 ms of the child's CPU
    # over the benchmark's 591 held-out pages, 8 ms frozen, and 3,500 fewer pages were copied after the
    # fork (a collection writes to every object it walks).
    import gc

    gc.freeze()
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
        out.done_at, out.cpu_at = time.monotonic(), _cpu_seconds()
        conn.send(out)


class Watchdog:
    """Call `fn(item)` in a recycled child process with a CPU-time limit per item.

    Use as a context manager; `run(item)` returns an `Outcome`, or raises `Unfinished` when an item
    outlived `wall_s` of wall-clock time without using up its CPU time (default 30 × `timeout_s`).
    Where /proc is missing (not Linux) `timeout_s` is counted on the wall clock instead. With
    `isolate=False` it calls `fn` in-process (no time limit) — for tests of the function itself and
    for measuring the overhead.
    """

    def __init__(self, fn: Callable[[Any], Any], timeout_s: float = 10.0, memory_mb: int | None = 4096,
                 isolate: bool = True, wall_s: float | None = None):
        self.fn, self.timeout_s, self.memory_mb, self.isolate = fn, timeout_s, memory_mb, isolate
        self.wall_s = wall_s if wall_s is not None else 30 * timeout_s
        self._proc = None
        self._conn = None
        # (item, when it was sent, the child's CPU seconds then) for each item submitted and not yet
        # collected, oldest first.
        self._pending: deque[tuple[Any, float, float | None]] = deque()
        self._free_at = 0.0  # when the child finished the last collected item
        self._free_cpu: float | None = 0.0  # the child's CPU seconds then
        self.restarts = 0

    def __enter__(self) -> "Watchdog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        parent, child = _CTX.Pipe()
        _widen(parent)
        self._proc = _CTX.Process(target=_child, args=(child, self.fn, self.memory_mb), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._free_at, self._free_cpu = 0.0, 0.0  # a new process: its CPU clock starts at zero

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

    def _send(self, item: Any) -> tuple[float, float | None]:
        self._conn.send(item)
        return time.monotonic(), _cpu_seconds(self._proc.pid)

    def submit(self, item: Any) -> bool:
        """Hand `item` to the child now and return at once (isolated mode), so the caller does its own
        work while the child extracts; up to two items are queued, the second starts when the child
        is done with the first. `run(item)` with the same object collects the answer, its time limit
        counted from when the child could start it. True also when `item` is queued already; False:
        not queued, `run(item)` sends it then."""
        if not self.isolate:
            return False
        if any(queued is item for queued, _, _ in self._pending):
            return True
        if len(self._pending) >= _DEPTH:
            return False
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self._start()
        try:
            sent = self._send(item)
        except (OSError, BrokenPipeError):
            self._kill()
            return False
        self._pending.append((item, *sent))
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
                started, cpu_start = self._send(item)
            else:
                # Queued behind another item, the child started on it when it finished that one (both
                # clocks only go forward, so the later moment is the larger reading).
                started = max(pending[1], self._free_at)
                cpu_start = None if pending[2] is None or self._free_cpu is None else max(pending[2], self._free_cpu)
            out = self._wait(started, cpu_start)
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
            # Interrupted while the child works (Ctrl-C, a caller's own deadline, `Unfinished`): kill
            # it, or its late answer to this item would be read as the answer to the next one.
            self._kill()
            raise
        if out is not None:
            return out
        self._kill()
        self.restarts += 1
        clock = "CPU " if cpu_start is not None else ""
        return Outcome(False, reason="timeout", detail=f"extraction exceeded {self.timeout_s:g}s of {clock}time")

    def _wait(self, started: float, cpu_start: float | None) -> Outcome | None:
        """The child's answer, or None when the item used up its CPU time. Polls in slices no longer
        than the CPU time left (one thread cannot spend CPU faster than the wall clock runs)."""
        pid = self._proc.pid
        while True:
            cpu = _cpu_seconds(pid) if cpu_start is not None else None
            if cpu is None:  # no /proc: the wall clock is all there is
                cpu_start, used = None, time.monotonic() - started
            else:
                used = cpu - cpu_start
            if used >= self.timeout_s:
                return None
            wall_left = started + self.wall_s - time.monotonic()
            if wall_left <= 0:
                raise Unfinished(f"extraction made no progress in {self.wall_s:g}s of wall-clock time "
                                 f"({used:.1f}s of CPU time used): the machine, not the document; rerun to retry")
            if self._conn.poll(max(0.01, min(self.timeout_s - used, wall_left))):
                out = self._conn.recv()
                self._free_at = out.done_at or time.monotonic()
                self._free_cpu = out.cpu_at
                # Judged by the child's own count, not by when this process woke up to read it.
                if cpu_start is not None and out.cpu_at is not None and out.cpu_at - cpu_start > self.timeout_s:
                    return None
                return out
