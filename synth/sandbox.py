"""Run untrusted code (model-written solutions and their tests) and return a verdict.

What it protects against, when namespaces are available (`isolation == "namespaces"`):

* runaway CPU: an RLIMIT_CPU per process, and a wall-clock timeout after which the whole pid
  namespace is killed (the sandbox's init is pid 1: when it dies, the kernel kills every process in
  it, so nothing forked by the program survives);
* memory: RLIMIT_AS per process (a memory bomb gets MemoryError / ENOMEM);
* fork bombs: RLIMIT_NPROC, counted inside the sandbox's own user namespace (a root caller runs the
  program as `nobody`, for whom the limit applies), and the pid namespace teardown;
* huge files: RLIMIT_FSIZE per file and a size-capped tmpfs for everything the program writes;
* the file system: the program sees a new root holding only read-only binds of /usr, /etc, /bin,
  /lib* and the Python installation, a minimal /dev and its own /proc; its working directory
  /sandbox (also /tmp) is a private tmpfs that vanishes with it. Home directories, the repository,
  /run (daemon sockets) and /sys are not there at all;
* the network: a fresh network namespace with no interface up (not even loopback); abstract Unix
  sockets of the host are out of reach too;
* privilege: no capabilities (empty bounding set, no_new_privs), so setuid binaries and remounts are
  useless; output beyond `max_output_mb` kills the run.

What it does not protect against: kernel exploits (there is no seccomp filter or VM boundary), CPU
and memory pressure on the host within the limits (n processes x memory_mb; no cgroup), reading the
world-readable files of the allow-listed system paths, and timing side channels. Without namespaces
(`isolation == "none"`: `unshare` missing or user namespaces disabled) only the resource limits and
the timeout apply: the program then runs as the caller, can read and write what the caller can,
can reach the network, and processes that leave the process group can outlive the timeout. That
mode is announced on stderr and recorded in every verdict; `isolation="require"` refuses it.
"""
from __future__ import annotations

import marshal
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.pipeline.errors import UserError

INIT = Path(__file__).with_name("sandbox_init.py")
Isolation = Literal["auto", "require", "off"]
VERDICTS = ("ok", "failed", "timeout", "memory", "killed", "error")


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout_s: float = Field(10.0, gt=0, description="Wall-clock seconds before everything is killed")
    cpu_s: int | None = Field(None, ge=1, description="CPU seconds per process (default: the timeout, rounded up)")
    memory_mb: int = Field(512, ge=16, description="Address space per process (RLIMIT_AS), MiB")
    file_mb: int = Field(16, ge=1, description="Largest file the program may write, MiB")
    disk_mb: int = Field(64, ge=1, description="All files it writes together (tmpfs size), MiB")
    processes: int = Field(16, ge=1, description="Processes and threads at once (RLIMIT_NPROC)")
    open_files: int = Field(64, ge=8, description="Open file descriptors per process")
    tail_kb: int = Field(8, ge=1, description="Kept tail of stdout and of stderr, KiB")
    max_output_mb: int = Field(8, ge=1, description="More output than this kills the run")


@dataclass
class Result:
    verdict: str  # ok, failed, timeout, memory, killed, error
    exit_code: int | None = None
    signal: str | None = None
    limit: str | None = None  # which limit or barrier the program ran into, when it can be told
    wall_s: float = 0.0
    cpu_s: float | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    isolation: str = "none"
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_json(self) -> dict:
        out = asdict(self)
        if not out["extra"]:
            out.pop("extra")
        return out


# ---- can this machine isolate? ------------------------------------------------------------------

_PROBE: tuple[bool, str] | None = None
_PROBE_LOCK = threading.Lock()
_WARNED = False


def _unshare_prefix() -> list[str] | None:
    exe = shutil.which("unshare")
    if exe is None:
        return None
    spaces = ["--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]
    # root makes the namespaces itself and runs the program as nobody; anyone else needs a user namespace
    return [exe, *spaces] if os.geteuid() == 0 else [exe, "--user", "--map-root-user", *spaces]


def isolation_available() -> tuple[bool, str]:
    """(available, why not): probed once per process by starting a real, empty sandbox."""
    global _PROBE
    with _PROBE_LOCK:
        if _PROBE is None:
            if _unshare_prefix() is None:
                _PROBE = (False, "the `unshare` program (util-linux) is not installed")
            else:
                probe = _execute(["/bin/sh", "-c", "exit 0"], {}, Limits(timeout_s=20), True, ())
                _PROBE = (probe.verdict == "ok", "" if probe.verdict == "ok" else
                          f"namespaces unavailable here ({probe.note or probe.stderr_tail.strip()[-200:]})")
        return _PROBE


def _warn_unisolated(why: str) -> None:
    global _WARNED
    if not _WARNED:
        _WARNED = True
        print(f"WARNING: assay sandbox runs WITHOUT isolation: {why}. Programs get resource limits and a "
              "timeout only; they can read and write the caller's files and use the network.", file=sys.stderr)


# ---- running ------------------------------------------------------------------------------------

def default_ro_paths() -> list[str]:
    """System paths and this Python installation (programs run with it, site-packages included)."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}:
        paths.append(p)
    return sorted(set(paths))


def run(argv: list[str], files: dict[str, str | bytes] | None = None, limits: Limits | None = None,
        isolation: Isolation = "auto", ro_paths: tuple[str, ...] = ()) -> Result:
    """Run `argv` inside a sandbox whose working directory holds `files` (relative name -> content)."""
    limits = limits or Limits()
    isolate = False
    note = ""
    if isolation != "off":
        isolate, why = isolation_available()
        if not isolate:
            if isolation == "require":
                raise UserError(f"sandbox isolation was required but {why}")
            _warn_unisolated(why)
            note = f"NOT ISOLATED: {why}"
    result = _execute(argv, files or {}, limits, isolate, ro_paths)
    if note:
        result.note = (note + "; " + result.note).strip("; ")
    return result


def run_python(code: str, files: dict[str, str | bytes] | None = None, **kw) -> Result:
    """Run Python source as `main.py` next to `files`, with this interpreter (-E -s: no env, no user site)."""
    return run([sys.executable, "-E", "-s", "main.py"], {**(files or {}), "main.py": code}, **kw)


class _Tail:
    """Reads one stream to the end, keeping its last `keep` bytes and counting all of them."""

    def __init__(self, stream, keep: int, cap: int, on_cap):
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0
        self.keep, self.cap, self.on_cap = keep, cap, on_cap
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.kept - len(self.chunks[0]) >= self.keep:
                self.kept -= len(self.chunks.popleft())
            if self.total > self.cap:
                self.on_cap()
                break

    def text(self) -> str:
        return b"".join(self.chunks)[-self.keep:].decode("utf-8", "replace")


def _execute(argv: list[str], files: dict[str, str | bytes], limits: Limits, isolate: bool,
             ro_paths: tuple[str, ...]) -> Result:
    job = Path(tempfile.mkdtemp(prefix="assay-sbx-"))
    root = Path(tempfile.mkdtemp(prefix="assay-sbx-root-"))
    try:
        for name, content in files.items():
            target = (job / name).resolve()
            if job.resolve() not in target.parents:
                raise ValueError(f"sandbox file name {name!r} leaves the job directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            (target.write_bytes if isinstance(content, bytes) else target.write_text)(content)
        as_nobody = isolate and os.geteuid() == 0
        status_r, status_w = os.pipe()
        cfg = {
            "isolate": isolate, "as_nobody": as_nobody, "job_dir": str(job), "root_dir": str(root),
            "ro_paths": sorted(set(default_ro_paths()) | set(ro_paths)), "disk_mb": limits.disk_mb,
            "cpu_s": limits.cpu_s or max(1, math.ceil(limits.timeout_s)), "memory_mb": limits.memory_mb,
            "file_mb": limits.file_mb, "processes": limits.processes, "open_files": limits.open_files,
            "status_fd": status_w, "argv": list(argv),
            "env": {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
                    "HOME": "/sandbox" if isolate else str(job), "TMPDIR": "/tmp" if isolate else str(job),
                    "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
        }
        prefix = _unshare_prefix() if isolate else []
        command = [*(prefix or []), sys.executable, "-I", "-S", str(INIT), marshal.dumps(cfg).hex()]
        started = time.monotonic()
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(status_w,), start_new_session=True, cwd=job)
        os.close(status_w)
        flooded = threading.Event()

        def kill() -> None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # unshare dies, its pid-1 child follows, then the namespace
            except ProcessLookupError:
                pass

        def on_flood() -> None:
            flooded.set()
            kill()

        cap = limits.max_output_mb * 1024 * 1024
        out = _Tail(proc.stdout, limits.tail_kb * 1024, cap, on_flood)
        err = _Tail(proc.stderr, limits.tail_kb * 1024, cap, on_flood)
        timed_out = False
        try:
            proc.wait(timeout=limits.timeout_s + (0.5 if isolate else 0))  # namespace setup is not the program's time
        except subprocess.TimeoutExpired:
            timed_out = True
            kill()
            proc.wait()
        wall = time.monotonic() - started
        for tail in (out, err):
            tail.thread.join(timeout=2)
        with os.fdopen(status_r, "rb") as fh:
            raw = fh.read()
        status = marshal.loads(raw) if raw else {}
        result = Result(verdict="error", wall_s=round(wall, 3), cpu_s=status.get("cpu_s"), stdout_tail=out.text(),
                        stderr_tail=err.text(), stdout_bytes=out.total, stderr_bytes=err.total,
                        isolation="namespaces" if isolate else "none")
        _classify(result, status, timed_out, flooded.is_set(), cfg["cpu_s"])
        return result
    finally:
        shutil.rmtree(job, ignore_errors=True)
        try:
            root.rmdir()
        except OSError:
            pass


_MEMORY = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_HINTS = (("File too large", "file_size"), ("No space left on device", "disk"), ("Read-only file system", "read_only_fs"),
          ("Network is unreachable", "network"), ("Temporary failure in name resolution", "network"),
          ("Name or service not known", "network"), ("Resource temporarily unavailable", "processes"),
          ("Permission denied", "permission"), ("No such file or directory", "missing_path"))


def _classify(r: Result, status: dict, timed_out: bool, flooded: bool, cpu_limit: int) -> None:
    sig = status.get("signal")
    r.signal = signal.Signals(sig).name if sig else None
    r.exit_code = status.get("exit")
    if "setup_error" in status:
        r.verdict, r.note = "error", f"sandbox setup failed: {status['setup_error']}"
    elif timed_out:
        r.verdict, r.limit = "timeout", "wall"
    elif flooded:
        r.verdict, r.limit = "killed", "output"
    elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and (r.cpu_s or 0) >= cpu_limit - 0.05):
        r.verdict, r.limit = "timeout", "cpu"
    elif (sig or r.exit_code) and any(m in r.stderr_tail for m in _MEMORY):
        r.verdict, r.limit = "memory", "memory"
    elif sig == signal.SIGXFSZ:
        r.verdict, r.limit = "killed", "file_size"
    elif sig:
        r.verdict = "killed"
    elif r.exit_code == 0:
        r.verdict = "ok"
    elif not status:
        r.verdict, r.note = "error", "the sandbox ended without a report"
    else:
        r.verdict = "failed"
    if r.verdict in ("failed", "killed", "timeout") and r.limit is None:
        r.limit = next((name for text, name in _HINTS if text in r.stderr_tail), None)
