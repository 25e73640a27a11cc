"""The file-digest cache (`$ASSAY_CACHE/file-hashes.sqlite`) under threads: concurrent digests of new
files never fail (an earlier JSON cache lost files to a shared temp name) and every digest is right."""
from __future__ import annotations

import hashlib
import threading

from assay.pipeline.identity import _HashCache


def test_concurrent_digests_in_threads_never_collide(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache"))
    cache = _HashCache()  # its own connection, in this test's cache folder
    files = []
    for t in range(8):
        for i in range(40):
            path = tmp_path / f"t{t}" / f"f{i}.bin"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(f"{t}-{i}".encode() * 100)
            files.append(path)
    errors, wrong = [], []
    start = threading.Barrier(8)

    def work(t: int) -> None:
        start.wait()
        for path in files[t * 40:(t + 1) * 40]:  # each a new file: every call rewrites the cache
            try:
                if cache.digest(str(path)) != hashlib.sha256(path.read_bytes()).hexdigest():
                    wrong.append(path)
            except OSError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and wrong == []
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["file-hashes.sqlite"]  # no temp left
    fresh = _HashCache()  # a new process's view: every digest was stored
    assert all(fresh.digest(str(p)) == hashlib.sha256(p.read_bytes()).hexdigest() for p in files)
