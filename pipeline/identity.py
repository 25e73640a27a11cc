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
  (`Stage.read_files`, e.g. a bundled default model). A stat-keyed cache (path, size, mtime, ctime,
  inode) keeps a 1 GB model from being hashed again on every run, while `touch` alone changes nothing;
* **code**: the stage's `version`, Assay's version and the source of every module in its class
  hierarchy and of every Assay module those import, transitively (read from their source, imports
  inside functions too), so a helper cannot be left out;
* **services**: the endpoint and the model behind it (`Stage.service_identity`: what the server says
  it serves, or the local weights by content), which is also the request cache's namespace;
* **params**: the validated params, with places the stage only writes (`reads` kind "place": a cache
  folder) left out, so moving a cache does not re-run anything.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
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
    """sha256 of files keyed by (path, size, mtime_ns, ctime_ns, inode, device): a file whose stat is
    unchanged is not read again (a write that puts the mtime back still moves the ctime). Beside it,
    what was derived from a file's content (a module's imports), keyed by its sha256. Kept in SQLite
    (safe under concurrent processes); in memory only where the cache folder cannot be written."""

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
                db.execute("CREATE TABLE IF NOT EXISTS file_hashes (path BLOB PRIMARY KEY, size INTEGER,"
                           " mtime_ns INTEGER, ctime_ns INTEGER, ino INTEGER, dev INTEGER, sha256 TEXT)")
                db.execute("CREATE TABLE IF NOT EXISTS derived (sha256 TEXT, kind TEXT, value TEXT,"
                           " PRIMARY KEY (sha256, kind))")
                self._db = db
            except (OSError, sqlite3.Error):
                self._db = None
        return self._db

    def digest(self, path: str, folders: dict[str, str] | None = None) -> str:
        from .storage import real_path

        real = os.path.realpath(path) if folders is None else real_path(path, folders)
        st = os.stat(real)
        key = (real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        with self._lock:
            if key in self._memory:
                return self._memory[key]
            db = self._conn()
            if db is not None:
                try:
                    row = db.execute("SELECT size, mtime_ns, ctime_ns, ino, dev, sha256 FROM file_hashes WHERE path = ?",
                                     (os.fsencode(real),)).fetchone()
                    if row and tuple(row[:5]) == key[1:]:
                        self._memory[key] = row[5]
                        return row[5]
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
                        db.execute("INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?, ?, ?, ?)",
                                   (os.fsencode(real), *key[1:], digest))
                except sqlite3.Error:
                    pass
        return digest

    def derived(self, digest: str, kind: str, compute) -> str:
        """`compute()` (a str) of the file whose sha256 is `digest`, remembered by that digest."""
        with self._lock:
            db = self._conn()
            if db is not None:
                try:
                    row = db.execute("SELECT value FROM derived WHERE sha256 = ? AND kind = ?", (digest, kind)).fetchone()
                    if row:
                        return row[0]
                except sqlite3.Error:
                    pass
        value = compute()
        with self._lock:
            db = self._conn()
            if db is not None:
                try:
                    with db:
                        db.execute("INSERT OR REPLACE INTO derived VALUES (?, ?, ?)", (digest, kind, value))
                except sqlite3.Error:
                    pass
        return value


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


_CODE: dict[str, str] = {}  # source file -> digest, once per process (a test clears it to act as a new one)
_IMPORTS: dict[str, frozenset[str]] = {}  # module -> the modules it imports (the followed namespaces only)
_LOCATED: dict[str, str | None] = {}  # module -> its source file (None: not a module, or no source)


def _package_dirs(package: str) -> list[str] | None:
    """The folders a package's submodules are found in; None for a namespace package (`assay`: the
    installer's finder knows where its folders are) or a name that is no package."""
    module = sys.modules.get(package)
    if module is not None:
        return list(module.__path__) if getattr(module, "__file__", None) and hasattr(module, "__path__") else None
    source = _locate(package)
    return [os.path.dirname(source)] if source and os.path.basename(source) == "__init__.py" else None


def _locate(name: str) -> str | None:
    """The source file of module `name`, found without running it: through its package's folders, or
    for a child of a namespace package (`assay.dedup`) from its spec, which runs nothing either."""
    if name not in _LOCATED:
        module = sys.modules.get(name)
        source = getattr(module, "__file__", None) if module is not None else None
        parent, _, leaf = name.rpartition(".")
        if source is None and parent:
            dirs = _package_dirs(parent)
            if dirs is not None:
                candidates = [os.path.join(d, leaf, "__init__.py") for d in dirs] + [os.path.join(d, leaf + ".py") for d in dirs]
                source = next((c for c in candidates if os.path.isfile(c)), None)
            elif parent in sys.modules:
                try:
                    spec = importlib.util.find_spec(name)
                except (ImportError, ValueError):
                    spec = None
                source = spec.origin if spec is not None and spec.has_location else None
        _LOCATED[name] = source if source and source.endswith(".py") and os.path.isfile(source) else None
    return _LOCATED[name]


def _runs(node: ast.AST) -> bool:
    """False for an `if TYPE_CHECKING:` block: its imports are for the type checker, never run."""
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
                or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(source: str) -> list[list]:
    """Every import statement that can run in a module's source (inside functions too, not under `if
    TYPE_CHECKING:`), as [level, module, [names]] (`import a.b`: [0, "a.b", []]). Parsing is the cost
    of a closure, so the statements are remembered by the file's content digest."""
    def parse() -> str:
        try:
            todo = [ast.parse(Path(source).read_bytes())]
        except (OSError, SyntaxError, ValueError):
            return "[]"
        found = []
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Import):
                found.extend([0, alias.name, []] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.append([node.level, node.module or "", [alias.name for alias in node.names]])
            todo.extend(child for child in ast.iter_child_nodes(node) if _runs(child))
        return json.dumps(found)

    return json.loads(_HASHES.derived(module_file_digest(source), "imports", parse))


def _imports(name: str, tops: frozenset[str]) -> frozenset[str]:
    """The modules `name` imports, in the top-level namespaces `tops`. `from pkg import mod` is the
    module `mod`, not `pkg`'s __init__ (a family's __init__ imports all its stages); `from pkg import
    name` of anything else is `pkg`."""
    key = f"{name}|{','.join(sorted(tops))}"
    if key not in _IMPORTS:
        source = _locate(name)
        package = name if source and os.path.basename(source) == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for level, module, names in _import_statements(source) if source else []:
            if level:
                parts = package.split(".")
                if level - 1 >= len(parts):
                    continue
                module = ".".join(parts[:len(parts) - level + 1] + ([module] if module else []))
            if module.split(".")[0] not in tops:
                continue
            if not names:
                found.add(module)
            for alias in names:
                found.add(f"{module}.{alias}" if alias != "*" and _locate(f"{module}.{alias}") else module)
        _IMPORTS[key] = frozenset(m for m in found if _locate(m))
    return _IMPORTS[key]


def code_closure(roots: Iterable[str]) -> list[str]:
    """`roots` and every module they import, transitively, within Assay (`assay.*`) and the roots' own
    top-level packages (a user's stage and its helpers): the code a stage can run, which no list kept
    by hand can be trusted to name."""
    roots = sorted(set(roots))
    tops = frozenset({"assay"} | {r.split(".")[0] for r in roots})
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports(name, tops) - seen)
    return sorted(seen)


def _stage_modules(cls: type) -> list[str]:
    """The modules of a stage's class hierarchy and all they import (see code_closure)."""
    return code_closure(k.__module__ for k in cls.__mro__ if k.__module__ not in ("builtins", "abc", "typing"))


def module_file_digest(source: str) -> str:
    """sha256 of a module's source file (by the stat-keyed file cache; remembered per process)."""
    if source not in _CODE:
        _CODE[source] = file_digest(source)
    return _CODE[source]


def module_digest(module_name: str) -> str:
    source = _locate(module_name)
    return module_file_digest(source) if source is not None else f"unknown:{module_name}"


def code_identity(cls: type) -> dict[str, str]:
    """The stage's code: its version, Assay's version, and the source of every module of its class
    hierarchy and every module those import within Assay, transitively (`code_closure`)."""
    from . import __version__

    return {"version": str(getattr(cls, "version", "1")), "assay": __version__,
            "modules": _combine((m, module_digest(m)) for m in _stage_modules(cls))}


def _digest_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def declared(stage: "Stage", inputs: Sequence["Dataset"] = (), input_fingerprints: Sequence[str | None] | None = None
             ) -> dict[str, Any]:
    """Everything `stage` reads, each part reduced to a digest: the stage's identity."""
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
    outside = stage.input_identity()
    if outside is not None:  # outside files: their content is part of the input
        identity["files"]["<inputs>"] = _digest_json(outside)
    service = stage.service_identity()
    if service is not None:
        identity["service"] = _digest_json(service)
    return identity


def fingerprint_of(identity: dict[str, Any]) -> str:
    return _digest_json(identity)[:32]


def cache_namespace(stage: "Stage") -> str:
    """The request cache's namespace: the part of the stage's identity that says what answers (its
    `service_identity`, the same value its fingerprint holds), so a backend with other weights never
    hands out another's answer, and an answer is reused exactly where the stage would be. Params are
    not in it: the request itself carries what was asked. "" for a stage that declares no service."""
    service = stage.service_identity()
    return _digest_json(service)[:32] if service is not None else ""


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
    modules = _stage_modules(cls)
    lines.append(f"code: version {getattr(cls, 'version', '1')} and the source of its {len(modules)} modules "
                 f"(its own and all they import): {', '.join(modules)}")
    lines.append("params: every param except places")
    return lines


def paths_of(value: Any) -> list[str]:
    """A param's value as a list of paths (a str, a list of str, or nothing)."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [str(value)]
    return [str(v) for v in value]
