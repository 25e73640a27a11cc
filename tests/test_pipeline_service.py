"""Service-calling stages against a real HTTP server on 127.0.0.1: bounded concurrency, retries,
transient failures leave the shard for the rerun, permanent ones are rejects, and the request cache
means a rerun never pays twice."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.pipeline.service import ShardUnfinished

from stages_for_tests import EchoService


class Service:
    """Answers upper-cased text after a short wait; 'busy' texts fail with 503 `busy_failures` times,
    'bad' texts always get 400. Records calls per text and the most calls ever in flight."""

    def __init__(self, busy_failures: int):
        self.busy_failures = busy_failures
        self.calls: dict[str, int] = {}
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                text = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["text"]
                with service.lock:
                    service.calls[text] = service.calls.get(text, 0) + 1
                    service.in_flight += 1
                    service.max_in_flight = max(service.max_in_flight, service.in_flight)
                    n = service.calls[text]
                time.sleep(0.02)
                with service.lock:
                    service.in_flight -= 1
                if "bad" in text:
                    code, body = 400, {"error": "cannot answer"}
                elif "busy" in text and n <= service.busy_failures:
                    code, body = 503, {"error": "busy"}
                else:
                    code, body = 200, {"answer": text.upper(), "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/answer"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def docs(tmp_path):
    texts = [f"text {i}" for i in range(40)] + ["busy one", "bad one"]
    return write_table(make_docs([{"text": t, "source": "s"} for t in texts]), tmp_path / "in", shards=2)


def _stage(url, cache, **kw):
    return EchoService({"url": url, "cache_dir": str(cache), "concurrency": 4, "retries": 2, "backoff_s": 0.01, **kw})


def test_retries_rejects_concurrency_and_statistics(docs, tmp_path):
    service = Service(busy_failures=2)  # two 503s, then an answer: within 2 retries
    try:
        result = run_stage(_stage(service.url, tmp_path / "cache"), [docs], tmp_path / "out", options={"workers": 1})
    finally:
        service.close()
    c = result.manifest["counts"]
    assert (c["rows_in"], c["rows_out"], c["rejected"]["http_400"]["rows"]) == (42, 41, 1)
    answers = {r["text"]: r["answer"] for r in Dataset(tmp_path / "out").read().to_pylist()}
    assert answers["busy one"] == "BUSY ONE" and answers["text 7"] == "TEXT 7"
    assert 1 < service.max_in_flight <= 4  # concurrency is used, and bounded
    counters = result.manifest["statistics"]["counters"]
    assert counters["service_call"] == 41 and counters["service_retries"] == 2
    assert counters["tokens_in"] == 41 * 3 and counters["tokens_out"] == 41 * 2


def test_transient_failure_leaves_the_shard_and_the_rerun_pays_nothing_twice(docs, tmp_path):
    failing = Service(busy_failures=10)  # more 503s than retries: the shard holding "busy one" fails
    try:
        with pytest.raises(ShardUnfinished):
            run_stage(_stage(failing.url, tmp_path / "cache"), [docs], tmp_path / "out", options={"workers": 1})
    finally:
        failing.close()
    assert not Dataset(tmp_path / "out").complete
    healthy = Service(busy_failures=0)
    try:
        result = run_stage(_stage(healthy.url, tmp_path / "cache"), [docs], tmp_path / "out", options={"workers": 1})
    finally:
        healthy.close()
    assert result.manifest["counts"]["rows_out"] == 41
    # everything answered before the failure came from the cache: only "busy one" (and the permanent
    # failure, which is never cached) were asked again
    assert set(healthy.calls) == {"busy one", "bad one"}


WRITER = """
import sys
from assay.pipeline.service import RequestCache
cache = RequestCache(sys.argv[1])
for i in range(int(sys.argv[2]), int(sys.argv[3])):
    request = {"text": f"t{i}", "extra": "é"}
    cache.put(cache.key(request), request, {"answer": i})
"""


def test_request_cache_journals_shared_by_processes_torn_lines_and_the_old_layout(tmp_path, monkeypatch):
    import hashlib
    import os
    import subprocess
    import sys

    from assay.pipeline.service import RequestCache, _Journal

    root = tmp_path / "cache"
    subprocess.run([sys.executable, "-c", WRITER, str(root), "0", "50"], check=True)
    cache = RequestCache(root)
    key = lambda i: cache.key({"text": f"t{i}", "extra": "é"})  # noqa: E731
    assert [cache.get(key(i)) for i in (0, 49)] == [{"answer": 0}, {"answer": 49}] and cache.get(key(50)) is None
    # another process appends meanwhile: a later miss finds its lines (rescans are at most once a RESCAN_S)
    subprocess.run([sys.executable, "-c", WRITER, str(root), "50", "60"], check=True)
    monkeypatch.setattr(_Journal, "RESCAN_S", 0.0)
    assert cache.get(key(55)) == {"answer": 55}
    # a line a killed writer left half-written is a miss, never an error; whole lines after it still count
    torn = key(60)
    (root / "journal" / "killed.jsonl").write_text(f'{torn}\t{{"request": {{}}, "response": {{"ans')
    (root / "journal" / "broken.jsonl").write_text(f'{key(61)}\tnot json\n{key(62)}\t{{"request": 1, "response": 62}}\n')
    assert cache.get(torn) is None and cache.get(key(61)) is None and cache.get(key(62)) == 62
    cache.put(torn, {"text": "t60", "extra": "é"}, {"answer": 60})  # asked again, stored in this process's journal
    assert cache.get(torn) == {"answer": 60}
    # entries written in the layout before the journals (a file per answer) are still answers
    old = hashlib.sha256(b'{"text": "old"}').hexdigest()
    (root / old[:2]).mkdir()
    (root / old[:2] / f"{old}.json").write_text(json.dumps({"request": {"text": "old"}, "response": {"answer": "old"}}))
    fresh = subprocess.run([sys.executable, "-c", f"from assay.pipeline.service import RequestCache\n"
                            f"c = RequestCache({str(root)!r})\nprint(c.get({old!r}), c.get({torn!r}), len(list(c.entries())))"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert fresh[-1] == str(60 + 1 + 1 + 1)  # two writers, the whole line after a bad one, the re-asked, the old
    assert "'old'}" in fresh[1] and "60}" in fresh[3]
    assert len(os.listdir(root / "journal")) == 5  # two writers, two planted files, this process
