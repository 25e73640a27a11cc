"""How much Assay and the engines under it print: quiet by default, `assay -v` / `-vv` for more.

The level travels in ASSAY_VERBOSE so that engine sessions started later in the process (Spark's
log4j, Ray's worker log forwarding) and worker processes pick it up.
"""
from __future__ import annotations

import logging
import os

ENV = "ASSAY_VERBOSE"
logger = logging.getLogger("assay")


def verbosity() -> int:
    try:
        return max(0, int(os.environ.get(ENV, "0")))
    except ValueError:
        return 0


def set_verbosity(level: int) -> None:
    """0: warnings and errors only; 1: Assay's per-shard progress (INFO) and Spark/Ray warnings;
    2: debug detail and the engines' own info logs."""
    os.environ[ENV] = str(max(0, level))
    logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s: %(message)s", datefmt="%H:%M:%S")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _Redacting) for f in handler.filters):
            handler.addFilter(_Redacting())
    logger.setLevel(logging.WARNING if level <= 0 else logging.INFO if level == 1 else logging.DEBUG)
    for noisy in ("py4j", "ray", "ray.data", "urllib3", "httpx", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING if level < 2 else logging.INFO)


class _Redacting(logging.Filter):
    """No URL credential in a log line (redact.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .redact import redact

        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def spark_log_level() -> str:
    return {0: "ERROR", 1: "WARN"}.get(verbosity(), "INFO")


def ray_logs_to_driver() -> bool:
    return verbosity() >= 1
