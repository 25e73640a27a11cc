"""Where data lives: local paths through the OS, anything else fsspec knows (`s3://`, `gs://`,
`hdfs://`, `memory://` ...) through fsspec. Every module that reads or writes a dataset, an artifact,
a run or a cache goes through here, so the rest of Assay says "a path" and means either.

Local paths stay `pathlib.Path` and keep their fast path (os calls, fsync, atomic rename). A URL
becomes a `UPath` (universal-pathlib: the pathlib API over fsspec) with fsspec's listing cache off,
since another process or host may have written since the last look.

What an object store changes, and how Assay's commit protocol holds without a rename:

* A PUT is all or nothing: an object appears whole or not at all, and an unfinished multipart upload
  is never listed. So files go to their final key directly (`put`); file systems that are not object
  stores (hdfs, sftp) get a temporary name and a rename, as on local disk.
* Shard files are written locally first (a staging folder per shard) and uploaded on commit, then
  the shard's marker, then (at the end of the stage) the manifest: a reader goes by markers and
  manifests, so an object without its marker (a killed or retried attempt) is never taken for data.
* Leases use conditional writes where the store has them (S3 `If-None-Match`/`If-Match`: exactly one
  of two racing writers wins); elsewhere write-then-verify with a token (see Lease in dataset.py).

Credentials never pass through Assay: fsspec finds them itself (AWS_* variables, ~/.aws, instance
roles, fsspec's own configuration), and URLs carry none, so none reaches a manifest, log or report.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterator

# Protocols whose writes are whole objects (a PUT): no temporary name needed, none wanted (a rename is
# a copy there). Anything else remote gets a temp name and fs.mv.
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2", "memory"}
# Protocols whose writes take S3's conditional headers (IfNoneMatch / IfMatch), used by leases.
CONDITIONAL = {"s3", "s3a"}
# The schemes a path may have: storage, never the web by default (a shared recipe naming
# `http://intranet/...` would make whoever runs it fetch from their own network). More are allowed
# by name in ASSAY_REMOTE_SCHEMES (comma-separated, e.g. "https").
REMOTE_SCHEMES = OBJECT_STORES | {"hdfs", "webhdfs", "viewfs", "sftp", "gdrive", "dbfs", "lakefs", "hf"}


def allowed_schemes() -> set[str]:
    extra = os.environ.get("ASSAY_REMOTE_SCHEMES", "")
    return REMOTE_SCHEMES | {s.strip().lower() for s in extra.split(",") if s.strip()}


def is_url(value: Any) -> bool:
    """A location with a scheme other than file:// (a local path is never a URL here)."""
    if _is_upath(value):
        return True
    text = str(value)
    return "://" in text and not text.startswith("file://")


def _is_upath(value: Any) -> bool:
    # Nothing is a UPath until upath is imported (as_path does that for a URL): a local run never
    # imports upath and fsspec (50 ms at start-up) nor pays an import lookup per call.
    upath = sys.modules.get("upath")
    if upath is None:
        return False
    return isinstance(value, upath.UPath) and getattr(value, "protocol", "") not in ("", "file", "local")


def as_path(value: str | os.PathLike | Any):
    """A local `Path`, or a `UPath` for a URL (listing cache off)."""
    if _is_upath(value):
        return value
    text = os.fspath(value) if not isinstance(value, str) else value
    if text.startswith("file://"):
        return Path(text[len("file://"):])
    if "://" not in text:
        return Path(text)
    import fsspec
    from upath import UPath

    scheme = text.split("://", 1)[0].lower()
    if scheme not in allowed_schemes():
        from .errors import UserError
        from .redact import redact

        raise UserError(f"{redact(text)}: {scheme}:// is not a storage scheme Assay reads by default; allow it with "
                        f"ASSAY_REMOTE_SCHEMES={scheme} (schemes allowed: {', '.join(sorted(allowed_schemes()))})")
    try:
        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError) as exc:  # no such protocol, or its backend (s3fs, gcsfs ...) missing
        from .errors import UserError

        raise UserError(f"{text}: {str(exc).splitlines()[0]}") from None
    return UPath(text, use_listings_cache=False)


def is_remote(path: Any) -> bool:
    return _is_upath(path)


def fs_of(path) -> Any:
    """The fsspec file system of a remote path."""
    return path.fs


def key(path) -> str:
    """The path inside its file system (bucket/key for S3)."""
    return path.path


def protocol(path) -> str:
    proto = path.protocol
    return proto[0] if isinstance(proto, (tuple, list)) else proto


def join(base, *parts: str):
    """`base / parts` for a path or a URL given as a string."""
    path = as_path(base)
    for part in parts:
        path = path / part
    return path


def resolve(path):
    """An absolute local path, or the URL as it is."""
    return path if is_remote(path) else Path(path).resolve()


def inside(child, parent) -> bool:
    """`child` is `parent` or lies below it (same file system)."""
    return resolved_inside(resolve(as_path(child)), resolve(as_path(parent)))


def within(path: str, folder: str) -> bool:
    """`path` is `folder` or inside it, both local absolute path strings already resolved (a check
    over many files: no Path objects)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def real_path(path: str, folders: dict[str, str]) -> str:
    """`os.path.realpath(path)` of a local path string, for a check over many files: a file that is
    not itself a link is its folder's real path (found once, kept in `folders`, one dict per check)
    joined with its name, one lstat where realpath takes one per component of the path."""
    import stat

    head, name = os.path.split(path)
    if not head or name in ("", ".", ".."):
        return os.path.realpath(path)
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return os.path.realpath(path)
    except OSError:
        return os.path.realpath(path)
    real_head = folders.get(head)
    if real_head is None:
        real_head = folders[head] = os.path.realpath(head)
    return os.path.join(real_head, name)


def resolved_inside(child, parent) -> bool:
    """`inside` for paths `resolve` gave already (a check over many files resolves each once)."""
    if is_remote(child) != is_remote(parent):
        return False
    if is_remote(child):
        a, b = str(child).rstrip("/"), str(parent).rstrip("/")
        return a == b or a.startswith(b + "/")
    return child.is_relative_to(parent)  # also when equal


# ---- reading ------------------------------------------------------------------------------------

def exists(path) -> bool:
    path = as_path(path)
    if is_remote(path):
        return fs_of(path).exists(key(path))
    return path.exists()


def is_dir(path) -> bool:
    path = as_path(path)
    if is_remote(path):
        return fs_of(path).isdir(key(path))
    return path.is_dir()


def is_file(path) -> bool:
    path = as_path(path)
    if is_remote(path):
        return fs_of(path).isfile(key(path))
    return path.is_file()


def read_bytes(path) -> bytes:
    return as_path(path).read_bytes()


def size(path) -> int:
    if isinstance(path, str) and "://" not in path:  # a local path (per file, per run): no Path object
        return os.path.getsize(path)
    path = as_path(path)
    if is_remote(path):
        return int(fs_of(path).size(key(path)))
    return os.path.getsize(path)


def listdir(path) -> list[str]:
    """Names directly inside a folder (prefix); [] when there is none."""
    path = as_path(path)
    if is_remote(path):
        fs = fs_of(path)
        try:
            entries = fs.ls(key(path), detail=False)
        except FileNotFoundError:
            return []
        base = key(path).rstrip("/")
        return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in entries if e.rstrip("/") != base})
    try:
        return sorted(p.name for p in path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def files_under(path) -> dict[str, int]:
    """Every file below a folder, by path relative to it, with its size (one listing on a store)."""
    path = as_path(path)
    if is_remote(path):
        fs = fs_of(path)
        base = key(path).rstrip("/") + "/"
        try:
            found = fs.find(key(path), detail=True)
        except FileNotFoundError:
            return {}
        return {name[len(base):]: int(info.get("size") or 0) for name, info in found.items()
                if name.startswith(base) and info.get("type") != "directory"}
    out = {}
    for p in path.rglob("*"):
        if p.is_file():
            out[p.relative_to(path).as_posix()] = p.stat().st_size
    return out


def expand_urls(patterns: list[str]) -> list[str]:
    """Files matching URL globs (with `**`) or below URL folders, as URLs; hidden names skipped."""
    found = set()
    for pattern in patterns:
        path = as_path(pattern)
        fs = fs_of(path)
        if protocol(path) in ("http", "https"):  # no listing there, and '?' starts a query, not a glob
            found.add(pattern)
            continue
        if any(c in pattern for c in "*?["):
            matches = fs.glob(key(path), detail=True)
        elif fs.isdir(key(path)):
            matches = fs.find(key(path), detail=True)
        else:
            matches = {key(path): fs.info(key(path))} if fs.exists(key(path)) else {}
        for match, info in matches.items():
            if info.get("type") != "directory" and not match.rsplit("/", 1)[-1].startswith("."):
                found.add(fs.unstrip_protocol(match))
    return sorted(found)


def glob(path, pattern: str) -> list:
    """Sorted matches of `pattern` below the folder `path`."""
    return sorted(as_path(path).glob(pattern), key=str)


def open_read(path, block_size: int = 8 << 20) -> BinaryIO:
    """A binary file object: the OS file for a local path, a buffered fsspec file for a URL."""
    path = as_path(path)
    if is_remote(path):
        return fs_of(path).open(key(path), "rb", block_size=block_size)
    return open(path, "rb")


def parquet_file(path):
    """A `pyarrow.parquet.ParquetFile` of a local path or a URL."""
    import pyarrow.parquet as pq

    if is_url(path):
        return pq.ParquetFile(open_read(path))
    return pq.ParquetFile(str(path))


def read_parquet(path, columns: list[str] | None = None):
    import pyarrow.parquet as pq

    if is_url(path):
        with open_read(path) as handle:
            return pq.read_table(handle, columns=columns)
    return pq.read_table(str(path), columns=columns)


def remote_digest(path) -> str:
    """The content identity of an object without reading it: its ETag (or checksum) and size."""
    path = as_path(path)
    info = fs_of(path).info(key(path))
    tag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("crc32c") or info.get("mtime")
    return f"{protocol(path)}:{str(tag).strip(chr(34))}:{info.get('size')}"


def file_version(path) -> Any:
    """What changes when a file is rewritten: its mtime (local) or its ETag and size (a store)."""
    path = as_path(path)
    if is_remote(path):
        return remote_digest(path)
    return path.stat().st_mtime_ns


@contextmanager
def local_copy(path, suffix_from: str | None = None) -> Iterator[Path]:
    """A local file holding the bytes at `path`: the path itself when local, else a temporary download
    (keeping the file name, whose suffix says how to decompress it), removed afterwards."""
    path = as_path(path)
    if not is_remote(path):
        yield path
        return
    folder = staging_dir("assay-in-")
    try:
        target = folder / (suffix_from or path.name)
        fs = fs_of(path)
        if fs.isdir(key(path)):
            fs.get(key(path).rstrip("/") + "/", str(target), recursive=True)
        else:
            fs.get_file(key(path), str(target))
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def cached_copy(path, cache_root: Path | None = None) -> Path:
    """A local copy of a remote file kept in a cache keyed by its URL and content identity (ETag, size):
    for files that are memory-mapped or read many times (token shards). A local path is returned as is."""
    import hashlib

    path = as_path(path)
    if not is_remote(path):
        return path
    root = Path(cache_root or os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay")) / "remote"
    ident = hashlib.sha256(f"{path}\0{remote_digest(path)}".encode()).hexdigest()[:32]
    target = root / ident / path.name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
        fs_of(path).get_file(key(path), str(tmp))
        os.replace(tmp, target)
    return target


def tree_digest(path) -> str | None:
    """The content identity of every object below a remote folder, hidden names included (a git
    directory is `.git`), from one listing: their keys, ETags and sizes. None when there is none."""
    import hashlib

    path = as_path(path)
    base = key(path).rstrip("/") + "/"
    try:
        found = fs_of(path).find(key(path), detail=True)
    except FileNotFoundError:
        return None
    entries = sorted((name[len(base):], str(info.get("ETag") or info.get("etag") or info.get("md5Hash")
                                            or info.get("mtime")).strip('"'), info.get("size"))
                     for name, info in found.items() if name.startswith(base) and info.get("type") != "directory")
    return hashlib.sha256(repr(entries).encode()).hexdigest() if entries else None


def cached_tree(path, cache_root: Path | None = None) -> Path:
    """A local copy of a remote folder, for what must be a local directory (a git repository, read
    by libgit2): downloaded once per content (tree_digest) into the cache, whole or not at all (a
    temporary folder renamed into place), keeping the folder's own name. A local path is returned as is;
    a remote folder that holds nothing is its (missing) local path's own problem: FileNotFoundError."""
    import hashlib

    path = as_path(path)
    if not is_remote(path):
        return path
    digest = tree_digest(path)
    if digest is None:
        raise FileNotFoundError(f"{path}: no objects below it")
    root = Path(cache_root or os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay")) / "remote-trees"
    ident = hashlib.sha256(f"{path}\0{digest}".encode()).hexdigest()[:32]
    target = root / ident / path.name
    if not target.exists():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{ident}.", dir=root))
        try:
            fs_of(path).get(key(path).rstrip("/") + "/", str(tmp / path.name), recursive=True)
            (root / ident).mkdir(exist_ok=True)
            try:
                os.rename(tmp / path.name, target)
            except OSError:  # another process got there first: its copy is the same content
                if not target.exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def local_file(value) -> Path:
    """What a loader that only takes local paths (fastText, libgit2, a model directory) needs: a local
    path as it is; for a URL, its local copy (a file: cached_copy; a folder: cached_tree)."""
    path = as_path(value)
    if not is_remote(path):
        return path
    return cached_copy(path) if is_file(path) else cached_tree(path)


def config_file(value, what: str) -> Path:
    """A recipe, mixture, train config or ablation spec: read from local disk, since the relative paths
    inside it are relative to it. A URL is refused in one line that says what to do instead."""
    if is_url(value):
        from .errors import UserError

        raise UserError(f"{what} {value}: read from local disk (the relative paths inside it are relative to "
                        "it); copy it here first (e.g. `aws s3 cp URL .`); the paths inside it and the outputs "
                        "may be URLs")
    return Path(value)


# ---- writing ------------------------------------------------------------------------------------

def makedirs(path) -> None:
    """Create a local folder (and its parents); a store has no folders to make."""
    path = as_path(path)
    if not is_remote(path):
        path.mkdir(parents=True, exist_ok=True)


def put_bytes(path, data: bytes, fsync_dir=None, temp_tag: str = "") -> None:
    """Write `data` at `path` so that a reader sees all of it or nothing. Local: the caller's atomic
    write (dataset.atomic_write_bytes). Remote: one PUT on an object store, else a temporary name
    and a rename."""
    path = as_path(path)
    fs = fs_of(path)
    if protocol(path) in OBJECT_STORES:
        fs.pipe_file(key(path), data)
        return
    tmp = f"{key(path)}{temp_tag or '.tmp'}"
    fs.pipe_file(tmp, data)
    fs.mv(tmp, key(path))


def put_file(local: Path, path, temp_tag: str = "") -> None:
    """Upload the local file `local` to the remote `path` (whole or not at all, as put_bytes)."""
    path = as_path(path)
    fs = fs_of(path)
    if protocol(path) in OBJECT_STORES:
        fs.put_file(str(local), key(path))
        return
    parent = key(path).rsplit("/", 1)[0]
    tmp = f"{parent}/.{path.name}{temp_tag or '.tmp'}"
    fs.put_file(str(local), tmp)
    fs.mv(tmp, key(path))


def remove(path) -> None:
    """Remove a file; nothing there is fine."""
    path = as_path(path)
    if is_remote(path):
        try:
            fs_of(path).rm_file(key(path))
        except FileNotFoundError:
            pass
        return
    path.unlink(missing_ok=True)


def rmtree(path) -> None:
    """Remove a folder (prefix) and all below it; nothing there is fine."""
    path = as_path(path)
    if is_remote(path):
        fs = fs_of(path)
        try:
            if fs.exists(key(path)):
                fs.rm(key(path), recursive=True)
        except FileNotFoundError:
            pass
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def staging_dir(prefix: str = "assay-out-") -> Path:
    """A local folder for files on their way to or from a store (removed by the caller): below
    ASSAY_STAGING when set (a worker's own scratch disk), else the system temp folder. Its name says
    which process made it, so the first staging folder a later process makes sweeps away those of
    killed runs (a kill -9 runs no clean-up of its own)."""
    root = os.environ.get("ASSAY_STAGING") or None
    if root:
        os.makedirs(root, exist_ok=True)
    base = root or tempfile.gettempdir()
    if base not in _SWEPT:
        _SWEPT.add(base)
        sweep_staging(base)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{_owner_tag()}-", dir=root))


_SWEPT: set[str] = set()
_STAGING_NAME = r"^assay-[a-z0-9]+-p(\d+)s(\d+)n(\d+)-"


def _owner_tag() -> str:
    from .liveness import pid_namespace, pid_start

    return f"p{os.getpid()}s{int(pid_start(os.getpid()) or 0)}n{pid_namespace() or 0}"


def sweep_staging(base: str) -> list[str]:
    """Remove the staging folders below `base` whose process is gone (killed runs'): only folders
    named by staging_dir, only those made in this pid namespace (elsewhere a pid says nothing)."""
    import re

    from .liveness import pid_namespace, pid_start

    ours, removed = pid_namespace() or 0, []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        found = re.match(_STAGING_NAME, name)
        if not found or int(found.group(3)) != ours:
            continue
        now = pid_start(int(found.group(1)))  # its pid gone, or now another process's
        if now is None or abs(int(now) - int(found.group(2))) > 1:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
            removed.append(name)
    return removed


# ---- conditional writes (leases) ----------------------------------------------------------------

class Conflict(Exception):
    """A conditional write lost: the object was created or changed by someone else."""


def supports_conditional(path) -> bool:
    return is_remote(path) and protocol(as_path(path)) in CONDITIONAL and \
        os.environ.get("ASSAY_S3_CONDITIONAL", "1") != "0"


def read_with_tag(path) -> tuple[bytes | None, str | None]:
    """An object's bytes and its ETag (None, None when there is none)."""
    path = as_path(path)
    fs = fs_of(path)
    try:
        info = fs.info(key(path))
        data = fs.cat_file(key(path))
    except FileNotFoundError:
        return None, None
    return data, info.get("ETag")


def put_if(path, data: bytes, etag: str | None) -> str | None:
    """Write only if the object is still as read: absent (`etag` None) or holding `etag`; return the
    new ETag. Raises Conflict when another writer got there first."""
    path = as_path(path)
    condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
    try:
        answer = fs_of(path).pipe_file(key(path), data, **condition)
        return answer.get("ETag") if isinstance(answer, dict) else None
    except OSError as exc:
        text = str(exc)
        if "pre-condition" in text.lower() or "precondition" in text.lower() or "412" in text or \
                "ConditionalRequestConflict" in text or "409" in text:
            raise Conflict(text) from exc
        raise
