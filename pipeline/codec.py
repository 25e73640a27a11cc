"""Python values to bytes and back without running code: what Assay reads back from a workdir.

A workdir may sit on shared storage that others can write, so nothing read back from it may run
code: this replaces pickle for fit partials and for what a stage shares with its workers. A value
is stored as one NumPy `.npz` file: its structure as JSON (dicts, lists, tuples, str, int, float,
bool, None, bytes) and every array as a plain `.npy` member, loaded with `allow_pickle=False`.
Objects are allowed only from classes registered with `@plain_data` (their `__dict__` is stored
and set back; `__init__` is not called and nothing but attributes is restored).
"""
from __future__ import annotations

import base64
import io
import json
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T", bound=type)
_CLASSES: dict[str, type] = {}


class CodecError(ValueError):
    """A value that cannot be stored safely, or bytes that are not a stored value."""


def plain_data(cls: T) -> T:
    """Allow instances of `cls` (plain attributes: arrays, numbers, strings, lists, dicts) in a stored value."""
    _CLASSES[f"{cls.__module__}:{cls.__qualname__}"] = cls
    return cls


def dumps(value: Any) -> bytes:
    arrays: list[np.ndarray] = []

    def enc(v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, float)):
            return v
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                return {"__list__": [enc(x) for x in v.tolist()]}
            arrays.append(np.ascontiguousarray(v))
            return {"__array__": len(arrays) - 1}
        if isinstance(v, bytes):
            return {"__bytes__": base64.b64encode(v).decode()}
        if isinstance(v, tuple):
            return {"__tuple__": [enc(x) for x in v]}
        if isinstance(v, (set, frozenset)):
            return {"__set__": [enc(x) for x in sorted(v, key=repr)]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        if isinstance(v, dict):
            if all(isinstance(k, str) and not k.startswith("__") for k in v):
                return {k: enc(x) for k, x in v.items()}
            return {"__items__": [[enc(k), enc(x)] for k, x in v.items()]}
        name = f"{type(v).__module__}:{type(v).__qualname__}"
        if name in _CLASSES:
            return {"__object__": name, "state": enc(dict(vars(v)))}
        raise CodecError(f"cannot store a {name} safely (register the class with @plain_data)")

    structure = json.dumps(enc(value)).encode()
    sink = io.BytesIO()
    members = {f"a{i}": a for i, a in enumerate(arrays)}
    np.savez(sink, __structure__=np.frombuffer(structure, np.uint8), **members)
    return sink.getvalue()


def loads(data: bytes) -> Any:
    try:
        store = np.load(io.BytesIO(data), allow_pickle=False)
        structure = json.loads(store["__structure__"].tobytes())
    except Exception as exc:  # noqa: BLE001 - anything unreadable is not a stored value
        raise CodecError(f"not a stored value: {exc}") from exc

    def dec(v: Any) -> Any:
        if isinstance(v, list):
            return [dec(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "__array__" in v:
            return store[f"a{v['__array__']}"]
        if "__bytes__" in v:
            return base64.b64decode(v["__bytes__"])
        if "__tuple__" in v:
            return tuple(dec(x) for x in v["__tuple__"])
        if "__set__" in v:
            return {dec(x) for x in v["__set__"]}
        if "__list__" in v:
            return np.array([dec(x) for x in v["__list__"]], dtype=object)
        if "__items__" in v:
            return {_hashable(dec(k)): dec(x) for k, x in v["__items__"]}
        if "__object__" in v:
            cls = _CLASSES.get(v["__object__"])
            if cls is None:
                raise CodecError(f"stored value names the class {v['__object__']!r}, which is not allowed")
            obj = cls.__new__(cls)
            obj.__dict__.update(dec(v["state"]))
            return obj
        return {k: dec(x) for k, x in v.items()}

    return dec(structure)


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
