"""The sandbox's supervisor (run as `python -I -S sandbox_init.py`, its configuration a marshal-encoded
dict on stdin, never in argv: /proc/PID/cmdline is readable by anyone). Built-in modules and ctypes
only: it runs once per execution, so its start-up time is the sandbox's overhead.

`unshare` starts it as pid 1 of fresh mount, network, pid, IPC and UTS namespaces (plus a user
namespace when the caller is not root), with an empty environment. It then:

1. makes itself non-dumpable, so a process of the same uid without CAP_SYS_PTRACE (the program, when
   the caller is not root) can neither ptrace it nor open its /proc/1/{mem,environ,fd/*};
2. builds a new root on a small tmpfs holding only read-only binds of the allow-listed paths (the
   system's /usr, /etc, the Python installation, ...), a minimal /dev, a fresh /proc of the new pid
   namespace, and one writable, size-capped tmpfs at /sandbox (also bound at /tmp) holding the job's
   files; pivots into it, detaches the old root, and removes the empty folder it mounted on;
3. forks the program, which gives up privilege for good before it executes: an empty bounding set,
   no_new_privs, a seccomp filter (no ptrace, no process_vm_readv/writev, no prlimit of another
   process), and a uid of its own (a root caller: 1,900,000,000 + this process's host pid, unique
   among live sandboxes, so RLIMIT_NPROC counts one sandbox; otherwise the caller's uid inside a user
   namespace of its own, where RLIMIT_NPROC is counted per namespace), with CPU, address-space,
   file-size, process and open-file limits, stdin from /dev/null and no descriptor beyond stdio
   (the harness of code tests also gets the run's secret on fd 3);
4. reaps every process until the program ends, then reports its status on the status fd. It stays
   unreachable: pid 1 of a namespace gets no signal it has no handler for from inside it, and its
   only handler (SIGCHLD) just wakes it up. When it exits the kernel kills everything left in the
   pid namespace (fork bombs included).
5. watches a pipe whose other end only the caller holds: when the caller dies, by any signal, the
   pipe reads end-of-file and the supervisor exits at once, taking the sandbox with it. It also
   gives up 10 s after the caller's own timeout (a caller that is alive but stuck).

With `isolate: false` (isolation "none") it applies the same limits and filter, runs the program in a
fresh folder of the caller's temporary directory (removed at the end) and kills the program's
process group when it ends; the host side says so loudly.
"""
import marshal
import os
import resource
import select
import signal
import sys
import time

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 28, 38, 47
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
UID_BASE = 1_900_000_000  # + host pid: a uid no account has and no other live sandbox uses
libc = ctypes = None


def _load_libc():
    global libc, ctypes
    import ctypes as _ctypes

    ctypes = _ctypes
    libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _write_files(files, dst):
    for name, content in files.items():
        path = os.path.join(dst, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(content)


def _bind_ro(src, target):
    _mount(src, target, None, MS_BIND | MS_REC)
    # A bind keeps its source's flags; remounting read-only must repeat the locked ones (nodev, noexec).
    st = os.statvfs(target)
    keep = (MS_NODEV if st.f_flag & os.ST_NODEV else 0) | (MS_NOEXEC if st.f_flag & os.ST_NOEXEC else 0)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | keep)


def _mirror(root, path):
    """Recreate `path` (and the symlinks on its way) inside the new root; return the real path."""
    parts = [p for p in path.split("/") if p]
    here = ""
    for part in parts:
        here = f"{here}/{part}"
        inside = root + here
        if os.path.islink(here):
            target = os.readlink(here)
            if not os.path.lexists(inside):
                os.symlink(target, inside)
            resolved = os.path.realpath(here)
            return _mirror(root, resolved + path[len(here):]) if resolved != here else resolved
        if not os.path.exists(inside):
            if os.path.isdir(here):
                os.mkdir(inside, 0o755)
            else:
                open(inside, "w").close()
    return path


def host_pid():
    """This process's pid in the caller's pid namespace (the host /proc is still mounted)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    raise OSError("no NSpid in /proc/self/status")


def build_root(cfg, uid):
    tmp = os.open(cfg["tmp"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    root = os.path.join(cfg["tmp"], cfg["root_name"])
    os.mkdir(root, 0o700)
    try:
        _build(cfg, root, uid)
    finally:  # the folder it mounted on is empty on the host; removed now, whatever happens next
        try:
            os.rmdir(cfg["root_name"], dir_fd=tmp)
        except OSError:
            pass
        os.close(tmp)


def _build(cfg, root, uid):
    libc.sethostname(b"sandbox", 7)  # our own UTS namespace: the host's name is not the program's business
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "full", "random", "urandom"):
        if os.path.exists(f"/dev/{dev}"):
            open(f"{root}/dev/{dev}", "w").close()
            _mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    owner = f",uid={uid},gid={uid}" if uid else ""
    os.makedirs(root + "/dev/shm")
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size=1m,mode=1777{owner}")
    work = root + "/sandbox"
    os.makedirs(work)
    _mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, f"size={cfg['disk_mb']}m,mode=0755{owner}")
    _write_files(cfg["files"], work)
    os.makedirs(work + "/tmp")
    if uid:
        for base, dirs, files in os.walk(work):
            for name in dirs + files:
                os.lchown(os.path.join(base, name), uid, uid)
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount(work + "/tmp", root + "/tmp", None, MS_BIND)
    # The read-only binds come after /tmp: an interpreter installed under /tmp (a checkout there, a
    # CI runner's venv) must stay visible on top of the program's private /tmp.
    bound = []
    for path in sorted(cfg["ro_paths"]):
        if not os.path.exists(path):
            continue
        real = _mirror(root, path)
        if not any(real == b or real.startswith(b + "/") for b in bound):  # else a bind holds it already
            _bind_ro(real, root + real)
            bound.append(real)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    os.chdir(root)
    _check(libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


# ---- the program's side of the fork --------------------------------------------------------------

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# ptrace, process_vm_readv, process_vm_writev, kcmp, pidfd_getfd, perf_event_open; then prlimit64
DENIED = {"x86_64": (101, 310, 311, 312, 438, 298), "aarch64": (117, 270, 271, 272, 438, 241)}
PRLIMIT64 = {"x86_64": 302, "aarch64": 261}


def seccomp_filter():
    """A BPF program refusing (EPERM) the calls that reach into another process, prlimit on any
    process but the caller's own (pid 0), and every call of a foreign ABI (i386, x32)."""
    machine = os.uname().machine
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    ALLOW, DENY = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    code = [(LD, 0, 0, 4), (JEQ, 0, "deny", AUDIT_ARCH[machine]), (LD, 0, 0, 0), (JGE, "deny", 0, 0x40000000)]
    code += [(JEQ, "deny", 0, nr) for nr in DENIED[machine]]
    code += [(JEQ, 0, "allow", PRLIMIT64[machine]), (LD, 0, 0, 16), (JEQ, 0, "deny", 0), (LD, 0, 0, 20),
             (JEQ, "allow", "deny", 0), (RET, 0, 0, ALLOW), (RET, 0, 0, DENY)]
    labels = {"allow": len(code) - 2, "deny": len(code) - 1}
    jump = lambda at, to: labels[to] - at - 1 if isinstance(to, str) else to  # noqa: E731
    return [(op, jump(i, jt), jump(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)]


def install_seccomp():
    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    rules = seccomp_filter()
    table = (Filter * len(rules))(*[Filter(*r) for r in rules])
    _check(libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(Program(len(rules), table)), 0, 0), "seccomp")


def drop_privileges(uid):
    for cap in range(64):  # empty the bounding set: no exec can ever regain a capability
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
    libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)  # clear the ambient set
    if uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # drops every capability (uid 0 -> non-zero)
    else:
        # uid 0 of our own user namespace: lock "root has no special powers", then clear the sets.
        libc.prctl(PR_SET_SECUREBITS, 0x2F, 0, 0, 0)  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED (+ locks)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        data = (ctypes.c_uint32 * 6)()
        _check(libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")


def set_limits(cfg):
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_s"], cfg["cpu_s"] + 1))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def start_program(cfg, cwd, uid, secret_fd):
    """In the forked child: give everything up, then become the program. Never returns."""
    try:
        if not cfg["isolate"]:
            os.setsid()  # a group of its own, which the supervisor kills at the end
        os.chdir(cwd)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        if secret_fd is not None:
            os.dup2(secret_fd, 3) if secret_fd != 3 else os.set_inheritable(3, True)
        os.closerange(3 if secret_fd is None else 4, 1 << 20)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; an exec'd program must not
            signal.signal(sig, signal.SIG_DFL)
        if cfg["isolate"]:
            drop_privileges(uid)
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if os.uname().machine in AUDIT_ARCH:
            install_seccomp()
        elif cfg["isolate"]:
            raise OSError(f"no seccomp filter for {os.uname().machine}")
        set_limits(cfg)
        os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"sandbox: cannot start {cfg['argv'][0]}: {exc}\n".encode())
    os._exit(127)


# ---- the supervisor --------------------------------------------------------------------------------

def supervise(pid, watchdog, deadline):
    """Reap every process until `pid` ends (its report), or the caller goes or `deadline` (monotonic)
    passes (None: the caller enforces the timeout; the deadline is for a caller that cannot)."""
    poller = select.poll()
    poller.register(watchdog, select.POLLIN)
    poller.register(WAKE[0], select.POLLIN)
    while True:
        while True:
            try:
                done, code, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return {"exit": None, "note": "the program vanished"}
            if done == 0:
                break
            if done == pid:
                report = {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "max_rss_kb": usage.ru_maxrss}
                if os.WIFSIGNALED(code):
                    report["signal"] = os.WTERMSIG(code)
                else:
                    report["exit"] = os.WEXITSTATUS(code)
                return report
        left = deadline - time.monotonic()
        events = poller.poll(max(0, left) * 1000) if left > 0 else []
        if not events:
            return None
        for fd, _ in events:
            if fd == watchdog:
                return None
            os.read(WAKE[0], 4096)


WAKE = ()


def main():
    global WAKE
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # no handler: pid 1 then ignores it from inside
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    cfg = marshal.loads(b"".join(chunks))
    status = os.fdopen(cfg["status_fd"], "wb", buffering=0)
    os.set_inheritable(cfg["status_fd"], False)
    job = None
    try:
        _load_libc()
        _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
        if cfg["isolate"]:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # `unshare` dies -> pid 1 dies -> all die
            uid = UID_BASE + host_pid() if cfg["as_root"] else 0
            build_root(cfg, uid)
            cwd = "/sandbox"
        else:
            uid, job = None, os.path.join(cfg["tmp"], cfg["root_name"])
            os.mkdir(job, 0o700)
            _write_files(cfg["files"], job)
            cwd = job
    except Exception as exc:  # noqa: BLE001 - reported to the host, which decides what to do
        status.write(marshal.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}))
        _cleanup(job)
        os._exit(125)
    secret_fd = None
    if cfg.get("secret"):
        secret_fd, w = os.pipe()
        os.write(w, cfg["secret"].encode())
        os.close(w)
    WAKE = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(WAKE[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # "Started" goes out before the fork: the program can exec and be seen (and this supervisor be
    # killed) before the parent side of a fork is scheduled again, and a kill then read as "the
    # sandbox did not start" (seen in CI). From here on a missing report means the supervisor was killed.
    status.write(b"S")
    try:
        pid = os.fork()
    except OSError as exc:
        status.write(marshal.dumps({"setup_error": f"fork: {exc}"}))
        _cleanup(job)
        os._exit(125)
    if pid == 0:
        start_program(cfg, cwd, uid, secret_fd)
    if secret_fd is not None:
        os.close(secret_fd)
    report = supervise(pid, cfg["watchdog_fd"], time.monotonic() + cfg["timeout_s"] + 10)
    if not cfg["isolate"]:
        try:
            os.killpg(pid, signal.SIGKILL)  # what the program left running in its group
        except OSError:
            pass
    if report is not None:
        status.write(marshal.dumps(report))
    _cleanup(job)
    os._exit(0)


def _cleanup(job):
    if job:
        import shutil

        shutil.rmtree(job, ignore_errors=True)


if __name__ == "__main__":
    main()
