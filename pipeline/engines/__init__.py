"""Engines run a stage's tasks: `local` (process pool), `spark` (mapInArrow), `ray` (Ray Data actors).

Every engine executes the same `execute_task` per task, so a map stage's output is identical on all
three; only the scheduling differs. Engines are cached per process so a test session or a long run
starts one SparkSession and one Ray instance.
"""
from __future__ import annotations

from .base import Engine, EngineOptions, execute_task

_ENGINES: dict[tuple, Engine] = {}


def get_engine(name: str = "local", options: EngineOptions | dict | None = None) -> Engine:
    opts = options if isinstance(options, EngineOptions) else EngineOptions.model_validate(options or {})
    key = (name, opts.model_dump_json())
    if key not in _ENGINES:
        if name == "local":
            from .local import LocalEngine as cls
        elif name == "spark":
            from .spark import SparkEngine as cls
        elif name == "ray":
            from .ray import RayEngine as cls
        else:
            raise ValueError(f"unknown engine {name!r}: expected local, spark or ray")
        _ENGINES[key] = cls(opts)
    return _ENGINES[key]


def close_all() -> None:
    for engine in _ENGINES.values():
        engine.close()
    _ENGINES.clear()


__all__ = ["Engine", "EngineOptions", "execute_task", "get_engine", "close_all"]
