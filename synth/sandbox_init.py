"""The first process inside a sandbox (run as `python -I -S sandbox_init.py CONFIG`; CONFIG is a
marshal-encoded dict in hex). It imports only built-in modules (ctypes only when isolating): it runs
once per execution, so its start-up time is the sandbox's overhead.

`unshare` starts it as pid 1 of fresh mount, network, pid, IPC and UTS namespaces (plus a user
namespace when the caller is not root). It then:

1. builds a new root on a small tmpfs holding only read-only binds of the allow-listed paths (the
   system's /usr, /etc, the Python installation, ...), a minimal /dev, a fresh /proc of the new pid
   namespace, and one writable, size-capped tmpfs at /sandbox (also bound at /tmp) holding a copy of
   the job's files;
2. pivots into it and detaches the old root, so nothing else of the host file system is reachable;
3. gives up privilege for good: the bounding set is emptied, no_new_privs set, and the user becomes
   `nobody` (a real root caller) or stays the caller's own unprivileged uid with no capabilities;
4. forks the program with CPU, address-space, file-size, process and open-file limits, reaps every
   process, and reports the program's exit status on the status fd. When this process exits the
   kernel kills everything left in the pid namespace (fork bombs included).

With `isolate: false` (no namespaces available) it only applies the limits and runs the program in
the job directory; the host side says so loudly.
"""
import marshal
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 24, 38, 28, 47
PR_SET_PDEATHSIG = 1
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SIGKILL = 9
NOBODY = 65534
libc = ctypes = None  # loaded by _load_libc() when isolating


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


def _copy_tree(src, dst):
    for base, dirs, files in os.walk(src):
        rel = os.path.relpath(base, src)
        target = dst if rel == "." else os.path.join(dst, rel)
        os.makedirs(target, exist_ok=True)
        for name in files:
            with open(os.path.join(base, name), "rb") as fin, open(os.path.join(target, name), "wb") as fout:
                fout.write(fin.read())


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


def build_root(cfg):
    root = cfg["root_dir"]
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
    owner = f",uid={NOBODY},gid={NOBODY}" if cfg["as_nobody"] else ""
    os.makedirs(root + "/dev/shm")
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size=1m,mode=1777{owner}")
    work = root + "/sandbox"
    os.makedirs(work)
    _mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, f"size={cfg['disk_mb']}m,mode=0755{owner}")
    _copy_tree(cfg["job_dir"], work)
    os.makedirs(work + "/tmp")
    if cfg["as_nobody"]:
        for base, dirs, files in os.walk(work):
            for name in dirs + files:
                os.lchown(os.path.join(base, name), NOBODY, NOBODY)
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


def drop_privileges(cfg):
    for cap in range(64):  # empty the bounding set: no exec can ever regain a capability
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
    libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)  # clear the ambient set
    if cfg["as_nobody"]:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)  # drops every capability (uid 0 -> non-zero)
    else:
        # uid 0 of our own user namespace: lock "root has no special powers", then clear the sets.
        libc.prctl(PR_SET_SECUREBITS, 0x2F, 0, 0, 0)  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED (+ locks)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        data = (ctypes.c_uint32 * 6)()
        _check(libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def set_limits(cfg):
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_s"], cfg["cpu_s"] + 1))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main():
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
    os.set_inheritable(cfg["status_fd"], False)  # the program must not be able to forge its own report
    status = os.fdopen(cfg["status_fd"], "wb")
    try:
        if cfg["isolate"]:
            _load_libc()
            libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)  # `unshare` dies -> pid 1 dies -> all die
            build_root(cfg)
            drop_privileges(cfg)
            cwd = "/sandbox"
        else:
            cwd = cfg["job_dir"]
    except Exception as exc:  # noqa: BLE001 - reported to the host, which decides what to do
        status.write(marshal.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}))
        status.close()
        os._exit(125)
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            set_limits(cfg)
            os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
        except BaseException as exc:  # noqa: BLE001
            os.write(2, f"sandbox: cannot start {cfg['argv'][0]}: {exc}\n".encode())
        os._exit(127)
    while True:  # reap every process (we are pid 1) until the program itself ends
        try:
            done, code, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        if done == pid:
            report = {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "max_rss_kb": usage.ru_maxrss}
            if os.WIFSIGNALED(code):
                report["signal"] = os.WTERMSIG(code)
            else:
                report["exit"] = os.WEXITSTATUS(code)
            status.write(marshal.dumps(report))
            break
    status.close()
    os._exit(0)


if __name__ == "__main__":
    main()
