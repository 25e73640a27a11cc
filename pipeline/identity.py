"""What a result is: everything a stage read, declared once, hashed once.

A stage's output is "the same" exactly when everything it read is the same. This module turns a
stage's declaration into that identity, and everything that needs "the same?" asks it:

* the runner's fingerprint (skip a stage, resume its shards, or run it again),
* the reason a stage ran ("params changed", "input file model changed", "code changed", ...),
* the request cache's namespace of a stage that calls a model.

What a stage reads, by kind:

* **datasets**: its upstream datasets, by their own fingerprints (so a change anywhere upstream
  reaches every stage below it, and nothing else);
* **files**: the params it declares in `reads` with kind "file" (models, registries, templates,
  calibrations, tokenizers, input globs), hashed by content, plus files it reads without a param
  (`Stage.read_files`, e.g. a bundled default model). A stat-keyed cache (path, size, mtime, inode)
  keeps a 1 GB model from being hashed again on every run, while `touch` alone changes nothing;
* **code**: the stage's `version`, Assay's version and the source of every module in its class
  hierarchy plus its declared `code_modules`;
* **services**: the endpoint and the model behind it (`Stage.service_identity`);
* **params**: the validated params, with places the stage only writes (`reads` kind "place": a cache
  folder) left out, so moving a cache does not re-run anything.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import sqlite3
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from .dataset import Dataset
    from .stage import Stage

FILE = "file"    # read by the stage: part of its identity, by content
PLACE = "place"  # a location the stage writes or caches into: resolved, never part of its identity


def _cache_root() -> Path:
    return Path(os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay"))


class _HashCache:
    """sha256 of files keyed by (path, size, mtime_ns, inode, device): a file whose stat is unchanged is
    not read again. Kept in SQLite (safe under concurrent processes); in memory only where the cache
    folder cannot be written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memory: dict[tuple, str] = {}
        self._db: sqlite3.Connection | None = None
        self._pid = -1

    def _conn(self) -> sqlite3.Connection | None:
        if self._pid != os.getpid():  # a forked worker opens its own connection
            self._pid, self._db = os.getpid(), None
            try:
                root = _cache_root()
                root.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(root / "file-hashes.sqlite", timeout=30, check_same_thread=False)
                db.execute("CREATE TABLE IF NOT EXISTS hashes (path BLOB PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
                           " ino INTEGER, dev INTEGER, sha256 TEXT)")
                self._db = db
            except (OSError, sqlite3.Error):
                self._db = None
        return self._db

    def digest(self, path: str, folders: dict[str, str] | None = None) -> str:
        from .storage import real_path

        real = os.path.realpath(path) if folders is None else real_path(path, folders)
        st = os.stat(real)
        key = (real, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
        with self._lock:
            if key in self._memory:
                return self._memory[key]
            db = self._conn()
            if db is not None:
                try:
                    row = db.execute("SELECT size, mtime_ns, ino, dev, sha256 FROM hashes WHERE path = ?",
                                     (os.fsencode(real),)).fetchone()
                    if row and tuple(row[:4]) == key[1:]:
                        self._memory[key] = row[4]
                        return row[4]
                except sqlite3.Error:
                    pass
        with open(real, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        with self._lock:
            self._memory[key] = digest
            db = self._conn()
            if db is not None:
                try:
                    with db:
                        db.execute("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?, ?, ?)",
                                   (os.fsencode(real), *key[1:], digest))
                except sqlite3.Error:
                    pass
        return digest


_HASHES = _HashCache()


def file_digest(path: str | os.PathLike, folders: dict[str, str] | None = None) -> str:
    """sha256 of a file's bytes (stat-cached); for an object on a store, its ETag and size. `folders`:
    real paths of folders, kept by a caller that digests many files (`storage.real_path`)."""
    if "://" in str(path):
        from .storage import remote_digest

        return remote_digest(str(path))
    return _HASHES.digest(str(path), folders)


def path_digest(value: str | os.PathLike) -> str:
    """The content identity of a file, a folder (every file in it, by relative path) or a glob. A path
    that does not exist is its own identity ("missing:..."): creating it later changes the identity."""
    import glob

    value = os.path.expanduser(str(value))
    if "://" in value:  # a file, folder or glob on a store: its objects' ETags
        from .storage import expand_urls

        urls = expand_urls([value])
        return _combine((url, file_digest(url)) for url in urls) if urls else f"missing:{value}"
    if glob.has_magic(value):
        matches = sorted(glob.glob(value, recursive=True))
        return _combine((m, path_digest(m)) for m in matches)
    if os.path.isdir(value):
        entries = []
        for root, dirs, files in os.walk(value):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.startswith("."):
                    full = os.path.join(root, name)
                    if os.path.isfile(full):
                        entries.append((os.path.relpath(full, value), file_digest(full)))
        return _combine(entries)
    if os.path.isfile(value):
        return file_digest(value)
    return f"missing:{value}"


def _combine(pairs: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for name, digest in pairs:
        h.update(os.fsencode(name) + b"\0" + digest.encode() + b"\n")
    return h.hexdigest()


_CODE: dict[str, str] = {}


def module_digest(module_name: str) -> str:
    """sha256 of a module's source file (cached per process)."""
    if module_name not in _CODE:
        module = sys.modules.get(module_name)
        try:
            source = inspect.getsourcefile(module) if module is not None else None
        except TypeError:
            source = None
        _CODE[module_name] = file_digest(source) if source and os.path.isfile(source) else f"unknown:{module_name}"
    return _CODE[module_name]


def code_identity(cls: type) -> dict[str, str]:
    """The stage's code: its version, Assay's version, and the source of each module of its class
    hierarchy (the stage and the bases it inherits behaviour from) and of its declared code_modules."""
    from . import __version__

    modules = {k.__module__ for k in cls.__mro__ if k.__module__ not in ("builtins", "abc", "typing")}
    modules |= set(getattr(cls, "code_modules", ()))
    for name in list(modules):
        if name not in sys.modules:
            try:
                __import__(name)
            except ImportError:
                pass
    return {"version": str(getattr(cls, "version", "1")), "assay": __version__,
            "modules": _combine((m, module_digest(m)) for m in sorted(modules))}


def _digest_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def declared(stage: "Stage", inputs: Sequence["Dataset"] = (), input_fingerprints: Sequence[str | None] | None = None
             ) -> dict[str, Any]:
    """Everything `stage` reads, each part reduced to a digest: the stage's identity."""
    from .stage import SourceStage

    cls = type(stage)
    places = {name for name, kind in stage.reads.items() if kind == PLACE}
    params = stage.params.model_dump(mode="json")
    identity: dict[str, Any] = {
        "stage": cls.ref(),
        "params": _digest_json({k: v for k, v in params.items() if k not in places}),
        "code": code_identity(cls),
        "inputs": list(input_fingerprints) if input_fingerprints is not None
        else [(ds.manifest or {}).get("fingerprint") for ds in inputs],
        "files": {name: _combine((str(p), path_digest(p)) for p in paths)
                  for name, paths in sorted(stage.read_files().items())},
    }
    if isinstance(stage, SourceStage):  # outside files: their content is part of the input
        identity["files"]["<inputs>"] = _digest_json(stage.input_identity())
    service = stage.service_identity()
    if service is not None:
        identity["service"] = _digest_json(service)
    return identity


def fingerprint_of(identity: dict[str, Any]) -> str:
    return _digest_json(identity)[:32]


def cache_namespace(stage: "Stage") -> str:
    """The request cache's namespace: the stage's backend (service and model files), so two backends
    never share an answer. Params are not in it: the request itself carries what was asked."""
    service = stage.service_identity()
    files = {name: _combine((str(p), path_digest(p)) for p in paths) for name, paths in sorted(stage.read_files().items())}
    return _digest_json({"service": service, "files": files})[:24]


def why(new: dict[str, Any], old: dict[str, Any] | None) -> str:
    """Why a stage with identity `new` runs where `old` was recorded: the first differences, in words."""
    if not old:
        return "new"
    reasons = []
    if new.get("stage") != old.get("stage"):
        reasons.append("another stage")
    if new.get("params") != old.get("params"):
        reasons.append("params changed")
    if new.get("code") != old.get("code"):
        reasons.append("code changed")
    new_files, old_files = new.get("files", {}), old.get("files", {})
    for name in sorted(set(new_files) | set(old_files)):
        if new_files.get(name) != old_files.get(name):
            reasons.append("input files changed" if name == "<inputs>" else f"input file {name!r} changed")
    if new.get("inputs") != old.get("inputs"):
        reasons.append("upstream changed")
    if new.get("service") != old.get("service"):
        reasons.append("service changed")
    return ", ".join(reasons) or "forced"


def describe_inputs(cls: type) -> list[str]:
    """What a stage class reads, in words (for `assay stages NAME`): the parts of its identity."""
    from .stage import GlobalStage, SourceStage

    lines = []
    if issubclass(cls, SourceStage):
        lines.append("files: its input files (`paths`), by content")
    elif getattr(cls, "needs_inputs", True) or not issubclass(cls, GlobalStage):
        lines.append("datasets: its input datasets, by fingerprint")
    for name, kind in cls.reads.items():
        if name == "paths" and issubclass(cls, SourceStage):
            continue
        lines.append(f"file: param `{name}`, by content" if kind == FILE
                     else f"place: param `{name}` (written or cached into; not part of its identity)")
    if "read_files" in {k for klass in cls.__mro__ if klass.__module__ != "assay.pipeline.stage" for k in vars(klass)}:
        lines.append("files it reads without a param (shipped defaults), by content")
    if "service_identity" in {k for klass in cls.__mro__ if klass.__module__ != "assay.pipeline.stage"
                              for k in vars(klass)}:
        lines.append("service: the endpoint and the model behind it")
    modules = sorted({k.__module__ for k in cls.__mro__ if k.__module__ not in ("builtins", "abc", "typing")}
                     | set(getattr(cls, "code_modules", ())))
    lines.append(f"code: version {getattr(cls, 'version', '1')} and the source of {', '.join(modules)}")
    lines.append("params: every param except places")
    return lines


def paths_of(value: Any) -> list[str]:
    """A param's value as a list of paths (a str, a list of str, or nothing)."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]
