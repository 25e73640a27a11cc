"""A forkserver preload module that takes its time (tests/test_pipeline_kill.py): it marks the
moment it starts, then sleeps, so a test can send Ctrl-C while the forkserver is still importing."""
import os
import time
from pathlib import Path

Path(os.environ["ASSAY_TEST_PRELOAD_MARK"]).write_text(str(os.getpid()))
time.sleep(float(os.environ.get("ASSAY_TEST_PRELOAD_SECONDS", "3")))
