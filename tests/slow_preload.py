"""A forkserver preload module that takes its time (tests/test_pipeline_kill.py): it marks the
moment it starts, then sleeps, so a test can send Ctrl-C while the forkserver is still importing."""
import os
import time
from pathlib import Path

if "ASSAY_TEST_PRELOAD_MARK" in os.environ:  # as a preload module
    Path(os.environ["ASSAY_TEST_PRELOAD_MARK"]).write_text(str(os.getpid()))
    time.sleep(float(os.environ.get("ASSAY_TEST_PRELOAD_SECONDS", "3")))


class SlowToUnpickle:
    """Rebuilding it in a new process takes `seconds`: a window in which a test removes what the
    rest of the process's start-up data refers to."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __reduce__(self):
        return (time.sleep, (self.seconds,))
