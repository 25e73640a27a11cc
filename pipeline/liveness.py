"""Is the process that left this behind still running? (leases, staging folders)

A host name and a pid are not enough to say: two containers may share a host name while each has its
own pid namespace (pid 7 in one is not pid 7 in the other), and a pid is reused after its process
ends. So a writer records where its pid means something, the kernel's boot id and the inode of its
pid namespace, beside the pid and the pid's start time. A process can be checked directly only from
the same boot and the same pid namespace; anywhere else its heartbeat is all there is to go by.
"""
from __future__ import annotations

import os
import socket
from functools import lru_cache


@lru_cache(maxsize=1)
def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def pid_namespace() -> int | None:
    """The inode of this process's pid namespace (Linux); None where there is none to read."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def pid_start(pid: int) -> float | None:
    """When a process started (so a reused pid is not taken for the one recorded)."""
    try:
        import psutil

        return round(psutil.Process(pid).create_time(), 2)
    except Exception:  # noqa: BLE001 - no such process, or no psutil: unknown
        return None


def me() -> dict:
    """What identifies this process to another one looking for it later."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "boot_id": boot_id(), "pid_ns": pid_namespace(), "pid": pid,
            "pid_start": pid_start(pid)}


def checkable(record: dict) -> bool:
    """The recorded process can be looked up from here: same host, boot and pid namespace. A record
    without boot id or namespace (older Assays) is taken as checkable on the same host, as before."""
    if record.get("host") != socket.gethostname() or not record.get("pid"):
        return False
    for key, ours in (("boot_id", boot_id()), ("pid_ns", pid_namespace())):
        if record.get(key) is not None and record.get(key) != ours:
            return False
    return True


def running(pid: int, started: float | None) -> bool:
    """Process `pid` (of this namespace) is alive and is the one that started at `started`."""
    now = pid_start(int(pid))
    return now is not None and (started is None or abs(now - started) < 1)
