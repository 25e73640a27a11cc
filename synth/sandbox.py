"""Run untrusted code (model-written solutions and their tests) and return a verdict.

The verdict is the supervisor's own observation, never something the program can write or print:
the program's exit status and resource use as `wait4` reports them to the sandbox's supervisor (its
parent, which the program can neither signal, trace, read nor write), the wall clock and the output
volume as the caller measures them, and, for code tests, a per-run secret that the test harness
prints after its last statement (`sandbox_harness.py`: the tests run in a process the solution cannot
end early). Text the program prints ("MemoryError", "File too large") only gives a `hint`.

What it protects against, when namespaces are available (`isolation == "namespaces"`), for root and
non-root callers alike:

* the caller: the supervisor starts with an empty environment and is not dumpable, the program gets
  a fresh environment, stdin from /dev/null and no descriptor beyond stdio, and lives in its own pid
  namespace, where the caller's processes do not exist; a seccomp filter refuses ptrace,
  process_vm_readv/writev and prlimit of any other process;
* runaway CPU: an RLIMIT_CPU per process, and a wall-clock timeout after which the whole pid
  namespace is killed (the sandbox's supervisor is its pid 1: when it dies, the kernel kills every
  process in it, so nothing forked by the program survives);
* memory: RLIMIT_AS per process (a memory bomb gets MemoryError / ENOMEM);
* fork bombs: RLIMIT_NPROC, counted per sandbox (a root caller runs each program as a uid of its own,
  any other caller in a user namespace of its own), and the pid namespace teardown;
* huge files: RLIMIT_FSIZE per file and a size-capped tmpfs for everything the program writes;
* the file system: the program sees a new root holding only read-only binds of /usr, /etc, /bin,
  /lib* and the Python installation, a minimal /dev and its own /proc; its working directory
  /sandbox (also /tmp) is a private tmpfs that vanishes with it. Home directories, the repository,
  /run (daemon sockets) and /sys are not there at all;
* the network: a fresh network namespace with no interface up (not even loopback); abstract Unix
  sockets of the host are out of reach too;
* privilege: no capabilities (empty bounding set, no_new_privs), so setuid binaries and remounts are
  useless; output beyond `max_output_mb` kills the run;
* its caller's death: the supervisor watches a pipe only the caller holds, and exits (taking the
  sandbox with it) as soon as the caller is gone, Ctrl-C, SIGTERM and SIGKILL alike; nothing of the
  sandbox is left in the caller's temporary directory.

What it does not protect against: kernel exploits (the seccomp filter is a short deny list, not a
system-call allow list, and there is no VM boundary), CPU and memory pressure on the host
within the limits (n processes x memory_mb; no cgroup), reading the world-readable files of the
allow-listed system paths, and timing side channels. `isolation="auto"` (the default) refuses to run
anything when namespaces are missing (`unshare` missing, user namespaces disabled); only
`isolation="none"` runs the program unisolated: then only the limits, the seccomp filter and the
timeout apply, and the program runs as the caller, can read and write what the caller can (the
caller's environment through /proc included), can reach the network, and processes that leave its
process group can outlive the run. That mode is announced on stderr and recorded in every verdict.
"""
from __future__ import annotations

import marshal
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.pipeline.errors import UserError

INIT = Path(__file__).with_name("sandbox_init.py")
HARNESS = Path(__file__).with_name("sandbox_harness.py")
Isolation = Literal["auto", "require", "none", "off"]  # require = auto, off = none (older names)
VERDICTS = ("ok", "failed", "timeout", "killed", "error")
SETUP_S = 60  # the most the supervisor may take to build the sandbox, outside the program's timeout


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout_s: float = Field(10.0, gt=0, description="Wall-clock seconds before everything is killed")
    cpu_s: int | None = Field(None, ge=1, description="CPU seconds per process (default: the timeout, rounded up)")
    memory_mb: int = Field(512, ge=16, description="Address space per process (RLIMIT_AS), MiB")
    file_mb: int = Field(16, ge=1, description="Largest file the program may write, MiB")
    disk_mb: int = Field(64, ge=1, description="All files it writes together (tmpfs size), MiB")
    processes: int = Field(16, ge=1, description="Processes and threads at once in this sandbox (RLIMIT_NPROC)")
    open_files: int = Field(64, ge=8, description="Open file descriptors per process")
    tail_kb: int = Field(8, ge=1, description="Kept tail of stdout and of stderr, KiB")
    max_output_mb: int = Field(8, ge=1, description="More output than this kills the run")


@dataclass
class Result:
    verdict: str  # ok, failed, timeout, killed, error
    exit_code: int | None = None
    signal: str | None = None
    limit: str | None = None  # a limit the supervisor saw hit: wall, cpu, output
    hint: str | None = None  # what the program's own stderr suggests (memory, file_size, network, ...): not proof
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
NO_NAMESPACES = ("the sandbox cannot isolate programs here ({why}); enable unprivileged user namespaces "
                 "(sysctl user.max_user_namespaces=15000 kernel.unprivileged_userns_clone=1, on Ubuntu also "
                 "kernel.apparmor_restrict_unprivileged_userns=0; in a container allow unshare/CLONE_NEWUSER) with "
                 "util-linux's `unshare` installed, or set isolation: none (--isolation none) to run model-written "
                 "code unisolated, with your rights, files and network")


def _unshare_prefix() -> list[str] | None:
    exe = shutil.which("unshare")
    if exe is None:
        return None
    spaces = ["--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]
    # root makes the namespaces itself and runs the program as a uid of its own; anyone else needs a user namespace
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
                why = " ".join((probe.note or probe.stderr_tail).split())[-200:]
                _PROBE = (probe.verdict == "ok", "" if probe.verdict == "ok" else f"namespaces unavailable: {why}")
        return _PROBE


def isolate(isolation: Isolation) -> bool:
    """Whether to isolate under this policy; a UserError when it must but cannot."""
    if isolation in ("none", "off"):
        return False
    available, why = isolation_available()
    if not available:
        raise UserError(NO_NAMESPACES.format(why=why))
    return True


def _warn_unisolated() -> None:
    global _WARNED
    if not _WARNED:
        _WARNED = True
        print("WARNING: assay sandbox runs WITHOUT isolation (isolation: none). Programs get resource limits and "
              "a timeout only; they can read and write the caller's files and use the network.", file=sys.stderr)


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
    return _run(argv, files or {}, limits, isolation, ro_paths)


def run_python(code: str, files: dict[str, str | bytes] | None = None, **kw) -> Result:
    """Run Python source as `main.py` next to `files`, with this interpreter (-E -s: no env, no user site)."""
    return run([sys.executable, "-E", "-s", "main.py"], {**(files or {}), "main.py": code}, **kw)


def run_tests(solution: str, tests: str, limits: Limits | None = None, isolation: Isolation = "auto",
              module: str = "solution") -> Result:
    """Run `tests` (Python that imports `module`) against `solution`, each in its own process (see
    sandbox_harness.py). `ok` only when the tests' process ran to its end and exited 0."""
    files = {f"{module}.py": solution, "test_solution.py": tests, "_assay_harness.py": HARNESS.read_bytes()}
    argv = [sys.executable, "-E", "-s", "_assay_harness.py", "test_solution.py", module]
    return _run(argv, files, limits, isolation, (), secret=secrets.token_hex(16))


def _run(argv, files, limits, isolation, ro_paths, secret=None) -> Result:
    isolated = isolate(isolation)
    if not isolated:
        _warn_unisolated()
    result = _execute(argv, files, limits or Limits(), isolated, ro_paths, secret)
    if not isolated:
        result.note = ("NOT ISOLATED (isolation: none); " + result.note).strip("; ")
    return result


class _Tail:
    """Reads one stream to the end, keeping its last `keep` bytes and counting all of them; notes
    whether `secret` went by."""

    def __init__(self, stream, keep: int, cap: int, on_cap, secret: bytes = b""):
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0
        self.keep, self.cap, self.on_cap = keep, cap, on_cap
        self.secret, self.seen, self._carry = secret, False, b""
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            if self.secret and not self.seen:
                window = self._carry + chunk
                self.seen = self.secret in window
                self._carry = window[-len(self.secret):]
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.kept - len(self.chunks[0]) >= self.keep:
                self.kept -= len(self.chunks.popleft())
            if self.total > self.cap:
                self.on_cap()
                break

    def text(self) -> str:
        data = b"".join(self.chunks)
        if self.secret:
            data = data.replace(b"\n" + self.secret + b"\n", b"").replace(self.secret, b"")
        return data[-self.keep:].decode("utf-8", "replace")


class _Status(threading.Thread):
    """The supervisor's reports: b"S" once the program is started, then one marshal-encoded dict."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd, self.data, self.ready = fd, b"", threading.Event()
        self.start()

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as fh:
            while chunk := fh.read(65536):
                self.data += chunk
                self.ready.set()
        self.ready.set()

    def report(self) -> tuple[bool, dict]:
        started = self.data.startswith(b"S")
        body = self.data[1:] if started else self.data
        try:
            return started, (marshal.loads(body) if body else {})
        except (EOFError, ValueError, TypeError):
            return started, {}


def _job_files(files: dict[str, str | bytes]) -> dict[str, bytes]:
    out = {}
    for name, content in files.items():
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise ValueError(f"sandbox file name {name!r} leaves the job directory")
        out[str(path)] = content.encode() if isinstance(content, str) else bytes(content)
    return out


def _execute(argv: list[str], files: dict[str, str | bytes], limits: Limits, isolate: bool,
             ro_paths: tuple[str, ...], secret: str | None = None) -> Result:
    tmp = tempfile.gettempdir()
    cfg = {
        "isolate": isolate, "as_root": os.geteuid() == 0, "files": _job_files(files), "tmp": tmp,
        "root_name": f"assay-sbx-{secrets.token_hex(8)}", "secret": secret,
        "ro_paths": sorted(set(default_ro_paths()) | set(ro_paths)), "disk_mb": limits.disk_mb,
        "cpu_s": limits.cpu_s or max(1, math.ceil(limits.timeout_s)), "memory_mb": limits.memory_mb,
        "file_mb": limits.file_mb, "processes": limits.processes, "open_files": limits.open_files,
        "timeout_s": limits.timeout_s, "argv": list(argv),
        "env": {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
                "HOME": "/sandbox" if isolate else ".", "TMPDIR": "/tmp" if isolate else ".",
                "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
    }
    status_r, status_w = os.pipe()
    watch_r, watch_w = os.pipe()  # the caller's lifeline: the supervisor ends when it reads EOF
    cfg["status_fd"], cfg["watchdog_fd"] = status_w, watch_r
    command = [*((_unshare_prefix() or []) if isolate else []), sys.executable, "-I", "-S", str(INIT)]
    try:
        # An empty environment: the supervisor's /proc/PID/environ must hold nothing of the caller's.
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(status_w, watch_r), start_new_session=True, cwd="/", env={})
    except BaseException:
        for fd in (status_r, watch_w):
            os.close(fd)
        raise
    finally:
        os.close(status_w)
        os.close(watch_r)
    flooded = threading.Event()

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # unshare dies, its pid-1 child follows, then the namespace
        except ProcessLookupError:
            pass

    def on_flood() -> None:
        flooded.set()
        kill()

    try:
        status = _Status(status_r)
        cap = limits.max_output_mb * 1024 * 1024
        out = _Tail(proc.stdout, limits.tail_kb * 1024, cap, on_flood, (secret or "").encode())
        err = _Tail(proc.stderr, limits.tail_kb * 1024, cap, on_flood)
        try:
            proc.stdin.write(marshal.dumps(cfg))
            proc.stdin.close()
        except BrokenPipeError:  # it ended before reading (unshare refused): its stderr says why
            pass
        timed_out = not status.ready.wait(SETUP_S)
        started = time.monotonic()  # the program's clock starts when it does
        if not timed_out:
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            kill()
        proc.wait()
        wall = time.monotonic() - started
        # The supervisor's report is in once its pipe closes, which it does when it ends: wait for it
        # (a loaded machine can take seconds to schedule the reader; without the report the verdict
        # would be "killed"). The output pipes close too, unless the program (isolation none) left a
        # child holding them.
        status.join(timeout=60)
        for reader in (out.thread, err.thread):
            reader.join(timeout=10)
    except BaseException:  # Ctrl-C, or anything else: the sandbox goes first
        kill()
        proc.wait()
        raise
    finally:
        os.close(watch_w)
        # The supervisor removes its folder; this is for one killed before it could.
        shutil.rmtree(os.path.join(tmp, cfg["root_name"]), ignore_errors=True)
    begun, report = status.report()
    result = Result(verdict="error", wall_s=round(wall, 3), cpu_s=report.get("cpu_s"), stdout_tail=out.text(),
                    stderr_tail=err.text(), stdout_bytes=out.total, stderr_bytes=err.total,
                    isolation="namespaces" if isolate else "none")
    _classify(result, report, begun, timed_out, flooded.is_set(), cfg["cpu_s"], secret is None or out.seen)
    return result


_MEMORY = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_HINTS = (("File too large", "file_size"), ("No space left on device", "disk"), ("Read-only file system", "read_only_fs"),
          ("Network is unreachable", "network"), ("Temporary failure in name resolution", "network"),
          ("Name or service not known", "network"), ("Resource temporarily unavailable", "processes"),
          ("can't start new thread", "processes"), ("Permission denied", "permission"),
          ("No such file or directory", "missing_path"))


def _classify(r: Result, report: dict, started: bool, timed_out: bool, flooded: bool, cpu_limit: int,
              finished: bool) -> None:
    """The verdict from what the supervisor and the caller saw; the program's text only gives a hint."""
    sig = report.get("signal")
    r.signal = signal.Signals(sig).name if sig else None
    r.exit_code = report.get("exit")
    if "setup_error" in report:
        r.verdict, r.note = "error", f"sandbox setup failed: {report['setup_error']}"
    elif not started:
        r.verdict = "error"
        r.note = "the sandbox did not start" + (" in time" if timed_out else "") + (
            f": {r.stderr_tail.strip().splitlines()[-1]}" if r.stderr_tail.strip() else "")
    elif timed_out:
        r.verdict, r.limit = "timeout", "wall"
    elif flooded:
        r.verdict, r.limit = "killed", "output"
    elif not report:
        r.verdict, r.note = "killed", "the sandbox's supervisor was killed before the program ended"
    # The kernel's check of RLIMIT_CPU and the rusage the supervisor reads do not agree to the
    # millisecond (0.997 s read for a 1 s limit here; under a loaded full-suite run a real limit was
    # read below 0.95 s, the verdict `killed`): a tenth of the limit is the slack. A program that
    # signals itself early stays `killed`.
    elif sig in (signal.SIGXCPU, signal.SIGKILL) and (r.cpu_s or 0) >= 0.9 * cpu_limit:
        r.verdict, r.limit = "timeout", "cpu"
    elif sig:
        r.verdict = "killed"
    elif r.exit_code == 0 and finished:
        r.verdict = "ok"
    else:
        r.verdict = "failed"
        if r.exit_code == 0:
            r.note = "the tests did not run to their end (the harness never printed the run's secret)"
    if r.verdict != "ok":
        text = r.stderr_tail
        r.hint = "memory" if any(m in text for m in _MEMORY) else next((n for t, n in _HINTS if t in text), None)
