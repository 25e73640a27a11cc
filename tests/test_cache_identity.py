"""The request cache never hands one backend's answer to another: the key holds what answers (a
server's address and the model it reports, a local model's weights), the same declared value that is
part of the stage's identity, so new weights under one name re-run the stage; and the weights' digest
is remembered by file stat (identity's one file-hash cache), so a large model is not read on every run."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from assay.pipeline import identity
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.synth.llm.scripted import ScriptedServer
from assay.synth.solve import Solve


def _items(tmp_path: Path, n: int = 3) -> Path:
    rows = [{"text": f"q{i}: what is 3 + 4?", "source": "t",
             "meta": {"question": f"q{i}: what is 3 + 4?", "answer": "7", "answer_kind": "integer"}} for i in range(n)]
    return write_table(make_docs(rows), tmp_path / "items")


def _solve(cache: Path, **params) -> Solve:
    return Solve({"cache_dir": str(cache), "candidates": 1, "min_pass_rate": 0.0, "max_pass_rate": 1.0, "retries": 1,
                  "backoff_s": 0.01, "timeout_s": 30, "concurrency": 2, "emit": "problems", **params})


def _counters(result) -> dict:
    return result.manifest["statistics"]["counters"]


def test_two_servers_at_one_address_never_share_answers(tmp_path):
    """The same URL and model name, another model behind it (a restarted server): its own answers."""
    items = _items(tmp_path)
    with ScriptedServer(lambda r: "Three and four: seven.\nAnswer: 7", models=["model-a"]) as first:
        port = first.port
        one = run_stage(_solve(tmp_path / "cache", url=first.url, model="m"), [items], tmp_path / "one", options={"workers": 1})
    with ScriptedServer(lambda r: "I think eight.\nAnswer: 8", port=port, models=["model-b"]) as second:
        two = run_stage(_solve(tmp_path / "cache", url=second.url, model="m"), [items], tmp_path / "two", options={"workers": 1})
        asked = len(second.requests)
    assert _counters(one)["service_call"] == 3
    assert asked == 3 and _counters(two).get("service_cache", 0) == 0
    # The same server again: every answer from the cache.
    with ScriptedServer(lambda r: "unused", port=port, models=["model-a"]) as again:
        three = run_stage(_solve(tmp_path / "cache", url=again.url, model="m"), [items], tmp_path / "three",
                          options={"workers": 1}, force=True)
        assert again.requests == []
    assert _counters(three)["service_cache"] == 3
    passed = lambda out: Dataset(out).read().column("pass_rate").to_pylist()  # noqa: E731
    assert passed(tmp_path / "one") == passed(tmp_path / "three") == [1.0] * 3 and passed(tmp_path / "two") == [0.0] * 3


def test_new_weights_under_one_name_and_address_rerun_the_stage(tmp_path):
    """A server that now reports other weights for the same model name at the same URL: the stage runs
    again (it had been skipped as unchanged) and asks the server anew. A stamp that is not the weights
    (`created`, which vLLM sets to the time of the request) changes nothing."""
    items = _items(tmp_path)
    out, cache = tmp_path / "out", tmp_path / "cache"
    answer = lambda r: "Three and four: seven.\nAnswer: 7"  # noqa: E731
    served = lambda weights, created=1: [{"id": "m", "object": "model", "created": created,  # noqa: E731
                                          "owned_by": "assay", "assay_weights": weights}]
    with ScriptedServer(answer, models=served("sha256:aaa")) as first:
        port = first.port
        one = run_stage(_solve(cache, url=first.url, model="m"), [items], out, options={"workers": 1})
        same = run_stage(_solve(cache, url=first.url, model="m"), [items], out, options={"workers": 1})
    with ScriptedServer(answer, port=port, models=served("sha256:bbb")) as second:
        two = run_stage(_solve(cache, url=second.url, model="m"), [items], out, options={"workers": 1})
        asked = len(second.requests)
    with ScriptedServer(answer, port=port, models=served("sha256:bbb", created=2)) as third:
        stamped = run_stage(_solve(cache, url=third.url, model="m"), [items], out, options={"workers": 1})
    assert _counters(one)["service_call"] == 3 and same.skipped
    assert not two.skipped and two.manifest["ran_because"] == "service changed"
    assert asked == 3 and _counters(two)["service_call"] == 3 and _counters(two).get("service_cache", 0) == 0
    assert stamped.skipped


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """The bundled SmolLM2 as a transformers folder: the same model as the default .gguf, other files."""
    from assay.synth.llm.weights import resolve_model

    folder = tmp_path_factory.mktemp("model") / "smollm2"
    shutil.copytree(resolve_model(None), folder)
    return folder


def test_local_model_paths_never_share_answers(tmp_path, model_folder):
    """model_path A, then B: B's run asks B (no cache hit), and A again is answered from the cache."""
    items = _items(tmp_path, 1)
    local = dict(max_tokens=8, temperature=0.0, concurrency=1)
    a = run_stage(_solve(tmp_path / "cache", **local), [items], tmp_path / "a", options={"workers": 1})
    b = run_stage(_solve(tmp_path / "cache", model_path=str(model_folder), **local), [items], tmp_path / "b",
                  options={"workers": 1})
    again = run_stage(_solve(tmp_path / "cache", **local), [items], tmp_path / "again", options={"workers": 1}, force=True)
    assert _counters(a)["service_call"] == 1
    assert _counters(b)["service_call"] == 1 and _counters(b).get("service_cache", 0) == 0
    assert _counters(again)["service_cache"] == 1 and _counters(again).get("service_call", 0) == 0


def test_weights_are_hashed_once_through_identitys_file_cache(tmp_path, monkeypatch):
    """The local weights' digest (the cache namespace) comes from identity's SQLite file cache: read
    once, not again in a new process; `touch` reads it again, to the same digest; a write that puts
    the mtime back is still seen (the ctime)."""
    from assay.synth.llm.backend import weights_identity

    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache"))
    big = tmp_path / "weights.gguf"
    big.write_bytes(os.urandom(1 << 20) * 48)  # 48 MiB
    me = psutil.Process()

    def read_while(fn):
        identity._HASHES._memory.clear()  # a new process: only the on-disk cache remembers
        before = me.io_counters().read_chars
        value = fn()
        return value, me.io_counters().read_chars - before

    first, read_first = read_while(lambda: weights_identity(str(big)))
    second, read_second = read_while(lambda: weights_identity(str(big)))
    assert first == second and read_first >= 48 << 20 and read_second < 1 << 20
    os.utime(big)  # touched, same bytes: read again, same digest
    assert weights_identity(str(big)) == first
    stat = big.stat()
    with open(big, "r+b") as fh:  # one byte changed, size and mtime put back: the ctime still tells
        fh.write(b"\0" if fh.read(1) != b"\0" else b"\1")
    os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights_identity(str(big)) != first
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "a").write_text("one")
    (folder / "b").write_text("two")
    digest = weights_identity(str(folder))
    (folder / "b").rename(folder / "c")  # same bytes under another name: another model folder
    assert weights_identity(str(folder)) != digest
