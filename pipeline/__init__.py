"""Assay's shared core: document schema, datasets, stages, engines, runner, recipes, CLI, report."""
import os as _os

__version__ = "0.1.0"


def _numba_cache_dir() -> str:
    """numba caches a compiled kernel per source file and checks only that file's timestamp, so a
    kernel that inlines a function from another module (ftpredict compiles kernels' tokenizer into
    itself) would keep running the old code after that other module changed. One cache folder per
    state of Assay's compiled modules (their sizes and mtimes: a stat each, no reading) rules that
    out: any change to any of them starts a fresh cache."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent  # the folders the assay.* packages live in
    h = hashlib.sha256(__version__.encode())
    for name in ("filters/kernels.py", "quality/ftpredict.py", "dedup", "semantic/decontam", "synth/llm/local.py"):
        path = root / name
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            try:
                st = file.stat()
            except OSError:
                continue
            h.update(f"{file.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    base = Path(_os.environ.get("ASSAY_CACHE", Path.home() / ".cache" / "assay"))
    return str(base / "numba" / h.hexdigest()[:16])


if "NUMBA_CACHE_DIR" not in _os.environ:  # read by numba when it is first imported
    _os.environ["NUMBA_CACHE_DIR"] = _numba_cache_dir()
