"""Imported once by the local engine's forkserver (its first preload module), never by the driver:
the pool workers it forks inherit what this sets.

A Ctrl-C can stop the driver while the forkserver is still starting a worker. The driver removes the
pool's semaphores as it exits, and the new worker, rebuilding them from its start-up data, fails with
FileNotFoundError inside multiprocessing: a traceback after the driver's one-line message that says
nothing the message does not. That case ends quietly; every other start-up error is printed."""
from __future__ import annotations

import sys
import traceback


def _quiet_when_the_pool_is_gone(exc_type, exc, tb) -> None:
    if issubclass(exc_type, FileNotFoundError) and any(
            frame.f_code.co_filename.endswith("multiprocessing/synchronize.py") for frame, _ in traceback.walk_tb(tb)):
        return
    sys.__excepthook__(exc_type, exc, tb)


sys.excepthook = _quiet_when_the_pool_is_gone
