"""The OpenAI-compatible backend against real servers on 127.0.0.1: `assay serve` with the real
SmolLM2 model, and a scripted server for failure modes (429/500 retries, timeouts, malformed answers,
refusals). The request cache means a rerun calls nothing, and a killed run resumes without repeating
a completed request."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.pipeline.service import PermanentError, RequestCache, ShardUnfinished, TransientError
from assay.synth.llm.client import OpenAIClient
from assay.synth.llm.scripted import Reply, ScriptedServer
from assay.synth.solve import Solve

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def _items(tmp_path, questions, shards=1):
    rows = [{"text": q, "source": "t", "meta": {"question": q, "answer": "7", "answer_kind": "integer"}} for q in questions]
    return write_table(make_docs(rows), tmp_path / "items", shards=shards)


def _solve(url, cache, **kw):
    params = {"url": url, "cache_dir": str(cache), "candidates": 1, "min_pass_rate": 0.0, "max_pass_rate": 1.0,
              "retries": 2, "backoff_s": 0.01, "timeout_s": 5, "concurrency": 4, "model": "scripted", **kw}
    return Solve(params)


def _script(calls: dict):
    """'busy' answers 429 twice, 'broken' always 500, 'garbage' non-JSON, 'empty' JSON without choices,
    'refused' 400; everything else gets a correct answer."""
    def answer(request):
        q = request["messages"][-1]["content"]
        calls[q] = calls.get(q, 0) + 1
        if "busy" in q and calls[q] <= 2:
            return Reply(status=429, body={"error": "slow down"})
        if "broken" in q:
            return Reply(status=500, body={"error": "boom"})
        if "garbage" in q:
            return Reply(body="<html>not json</html>")
        if "empty" in q:
            return Reply(body={"object": "chat.completion"})
        if "refused" in q:
            return Reply(status=400, body={"error": {"message": "bad request"}})
        return "Three plus four makes seven.\nAnswer: 7"
    return answer


def test_retries_refusals_malformed_answers_and_bounded_concurrency(tmp_path):
    calls: dict = {}
    items = _items(tmp_path, [f"q{i}: what is 3 + 4?" for i in range(20)] + ["busy one", "garbage one", "empty one",
                                                                                "refused one"])
    with ScriptedServer(_script(calls), latency_s=0.02) as server:
        result = run_stage(_solve(server.url, tmp_path / "cache"), [items], tmp_path / "out", options={"workers": 1})
        in_flight = server.max_in_flight
    counts = result.manifest["counts"]
    assert counts["rows_out"] == 21 and counts["rows_rejected"] == 3
    assert {k: v["rows"] for k, v in counts["rejected"].items()} == {"bad_response": 2, "http_400": 1}
    assert calls["busy one"] == 3  # two 429s, then the answer, within 2 retries
    counters = result.manifest["statistics"]["counters"]
    assert counters["service_retries"] == 2 and counters["service_call"] == 21
    assert 1 < in_flight <= 4
    rejects = {r["text"]: r["reject_detail"] for r in Dataset(tmp_path / "out").read_rejects().to_pylist()}
    assert "not JSON" in rejects["garbage one"] and "no choices" in rejects["empty one"]


def test_transient_failures_leave_the_shard_and_the_rerun_pays_nothing_twice(tmp_path):
    calls: dict = {}
    items = _items(tmp_path, [f"q{i}: what is 3 + 4?" for i in range(10)] + ["broken one"])
    with ScriptedServer(_script(calls)) as server:
        with pytest.raises(ShardUnfinished):
            run_stage(_solve(server.url, tmp_path / "cache"), [items], tmp_path / "out", options={"workers": 1})
        port = server.port
    assert calls["broken one"] == 3 and not Dataset(tmp_path / "out").complete
    again: dict = {}
    with ScriptedServer(lambda r: (again.setdefault(r["messages"][-1]["content"], 0), "Answer: 7")[1], port=port) as server:
        result = run_stage(_solve(server.url, tmp_path / "cache"), [items], tmp_path / "out", options={"workers": 1})
    assert set(again) == {"broken one"}  # every answered request came from the cache
    assert result.manifest["counts"]["rows_out"] == 11


def test_a_server_that_times_out_is_a_transient_failure(tmp_path):
    items = _items(tmp_path, ["slow one"])
    with ScriptedServer(lambda r: Reply(content="Answer: 7", delay_s=3)) as server:
        started = time.monotonic()
        with pytest.raises(ShardUnfinished, match="timed out"):
            run_stage(_solve(server.url, tmp_path / "cache", timeout_s=0.3, retries=1), [items], tmp_path / "out",
                      options={"workers": 1})
        assert len(server.requests) == 2 and time.monotonic() - started < 10


def test_the_cache_means_a_rerun_calls_nothing(tmp_path):
    items = _items(tmp_path, [f"q{i}: what is 3 + 4?" for i in range(8)])
    with ScriptedServer(lambda r: "Answer: 7") as server:
        first = run_stage(_solve(server.url, tmp_path / "cache"), [items], tmp_path / "one", options={"workers": 1})
        asked = len(server.requests)
        second = run_stage(_solve(server.url, tmp_path / "cache"), [items], tmp_path / "two", options={"workers": 1})
        assert len(server.requests) == asked == 8
    assert second.manifest["statistics"]["counters"]["service_cache"] == 8
    assert [r["text"] for r in Dataset(tmp_path / "one").read().to_pylist()] == \
           [r["text"] for r in Dataset(tmp_path / "two").read().to_pylist()]
    assert first.manifest["statistics"]["counters"]["tokens_out"] > 0


RUNNER = """
import sys
from assay.pipeline.runner import run_stage
from assay.synth.solve import Solve
url, items, out, cache = sys.argv[1:5]
run_stage(Solve({"url": url, "cache_dir": cache, "candidates": 2, "min_pass_rate": 0.0, "max_pass_rate": 1.0,
                 "concurrency": 2, "model": "scripted"}), [items], out, options={"workers": 1})
"""


def test_a_killed_run_resumes_without_repeating_completed_requests(tmp_path):
    items = _items(tmp_path, [f"q{i}: what is 3 + 4?" for i in range(12)])
    key = lambda r: (r["messages"][-1]["content"], r["seed"])  # noqa: E731
    with ScriptedServer(lambda r: "Answer: 7", latency_s=0.15) as server:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, server.url, str(items), str(tmp_path / "out"),
                                 str(tmp_path / "cache")], start_new_session=True, env=ENV)
        deadline = time.monotonic() + 60
        while len(server.requests) < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        first = {key(r) for r in server.requests}
        port = server.port
    cached = {key(request) for request, _ in RequestCache(tmp_path / "cache").entries()}
    assert 0 < len(cached) < 24 and not Dataset(tmp_path / "out").complete
    with ScriptedServer(lambda r: "Answer: 7", port=port) as server:  # the same backend: its answers are cached
        run_stage(_solve(server.url, tmp_path / "cache", candidates=2, concurrency=2), [items], tmp_path / "out",
                  options={"workers": 1})
        second = [key(r) for r in server.requests]
    assert not set(second) & cached  # nothing completed before the kill was asked again
    assert set(second) | cached == {(f"q{i}: what is 3 + 4?", s) for i in range(12) for s in (0, 1)}
    assert len(second) == len(set(second)) and first  # and nothing twice within the rerun


def test_client_sorts_failures():
    with ScriptedServer(lambda r: Reply(status=404, body={"error": "no such model"})) as server:
        with pytest.raises(PermanentError) as err:
            OpenAIClient(server.url).chat({"messages": []})
    assert err.value.reason == "http_404"


class RawServer:
    """A server on 127.0.0.1 that answers each request on a connection with the next of `replies`
    (raw bytes, or a callable given the socket), for HTTP framing the scripted server never sends."""

    def __init__(self, replies):
        import socket
        import threading

        self.replies, self.connections = list(replies), 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while self.replies:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                while self.replies:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if not data:
                        break
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                    while len(body) < length:
                        body += conn.recv(65536)
                    reply = self.replies.pop(0)
                    if callable(reply):
                        reply(conn)
                        break
                    conn.sendall(reply)
                    if b"Connection: close" in reply or b"HTTP/1.0" in reply:
                        break

    def close(self):
        self.sock.close()


COMPLETION = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Answer: 7"}}]}).encode()


def test_client_reads_every_http_framing_and_bounds_the_whole_call():
    """Chunked bodies, interim 100 answers, Connection: close, HTTP/1.0 bodies that run to the end of
    the connection; an idle keep-alive connection the server dropped is retried once on a fresh one;
    a cut-off answer is transient; and `timeout_s` bounds the whole call, not each read."""
    half = len(COMPLETION) // 2
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x;ext=1\r\n" % half + COMPLETION[:half]
               + b"\r\n" + b"%x\r\n" % (len(COMPLETION) - half) + COMPLETION[half:] + b"\r\n0\r\nX-Trailer: y\r\n\r\n")
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(COMPLETION) + COMPLETION
    server = RawServer([
        b"HTTP/1.1 100 Continue\r\n\r\n" + chunked,
        plain,
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(COMPLETION) + COMPLETION,
        b"HTTP/1.0 200 OK\r\n\r\n" + COMPLETION,
        plain,
        lambda conn: None,  # the server drops the kept-alive connection without answering ...
        plain,  # ... and the retry on a fresh connection gets this
        lambda conn: conn.sendall(plain[:-5]),  # cut off mid-body
    ])
    client = OpenAIClient(server.url, timeout_s=5)
    try:
        for _ in range(5):
            assert client.chat({"messages": []})["choices"][0]["message"]["content"] == "Answer: 7"
        assert server.connections == 3  # kept alive, except after `close` and HTTP/1.0
        client.chat({"messages": []})
        assert server.connections == 4  # the dropped one, then a fresh one
        with pytest.raises(TransientError, match="mid-response"):
            client.chat({"messages": []})
    finally:
        client.close()
        server.close()

    def trickle(conn):  # every byte in time for a per-read timeout, the whole answer too late
        try:
            for byte in plain:
                conn.sendall(bytes([byte]))
                time.sleep(0.01)
        except OSError:  # the client gave up
            pass

    server = RawServer([trickle])
    started = time.monotonic()
    with pytest.raises(TransientError, match="timed out"):
        OpenAIClient(server.url, timeout_s=0.5).chat({"messages": []})
    assert time.monotonic() - started < 1.5
    server.close()


# ---- `assay serve` with the real local model ------------------------------------------------------

@pytest.fixture(scope="module")
def served():
    proc = subprocess.Popen([sys.executable, "-m", "assay.pipeline.cli", "serve", "--port", "0", "--max-batch", "4",
                             "--threads", "1"], stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True)
    url = None
    deadline = time.monotonic() + 240  # the first run on a machine fetches and converts the weights
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
        if match:
            url = match.group(1)
            break
        if not line and proc.poll() is not None:
            break
    if url is None:
        proc.kill()
        pytest.fail("assay serve did not start")
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30)


def test_assay_serve_answers_chat_completions(served):
    with urllib.request.urlopen(served + "/models", timeout=10) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == "smollm2-135m-instruct"
    client = OpenAIClient(served, timeout_s=120)
    request = {"model": "smollm2-135m-instruct", "messages": [{"role": "user", "content": "What is the capital of France?"}],
               "max_tokens": 8, "temperature": 0}
    with ThreadPoolExecutor(2) as pool:  # two at once: decoded in one batch
        answers = list(pool.map(client.chat, [request, dict(request, seed=1)]))
    for answer in answers:
        assert "Paris" in answer["choices"][0]["message"]["content"]  # greedy SmolLM2 knows this one
        assert answer["usage"]["completion_tokens"] <= 8 and answer["usage"]["prompt_tokens"] > 10
    with pytest.raises(PermanentError) as err:
        client.chat({"messages": [{"role": "robot", "content": 3}]})
    assert err.value.reason == "http_400"


def test_real_local_model_in_the_loop(served, tmp_path):
    """SmolLM2-135M (behind `assay serve`) samples; the real verifiers judge it; the pass rate decides."""
    items = write_table(make_docs([{"text": "What is 2 + 3?", "source": "t",
                                    "meta": {"question": "What is 2 + 3?", "answer": "5", "answer_kind": "integer"}}]),
                        tmp_path / "items")
    stage = Solve({"url": served, "candidates": 2, "max_tokens": 24, "temperature": 0.8, "timeout_s": 300,
                   "cache_dir": str(tmp_path / "c"), "concurrency": 2})
    result = run_stage(stage, [items], tmp_path / "out", options={"workers": 1})
    counters = result.manifest["statistics"]["counters"]
    assert counters["synth_candidates"] == 2 and counters["service_call"] == 2 and counters["tokens_out"] > 0
    passes = counters.get("synth_accepted", 0)
    reasons = {k[7:] for k in counters if k.startswith("reject.")}
    assert reasons <= {"truncated", "repetition", "language_mixing", "browsing_claim", "execution_claim", "no_answer",
                       "wrong_answer", "too_short"}
    assert sum(v for k, v in counters.items() if k.startswith("reject.")) == 2 - passes
    expected = {0: "never_solved", 2: "always_solved"}.get(passes)
    rejected = result.manifest["counts"]["rejected"]
    assert (list(rejected) == [expected]) if expected else (result.manifest["counts"]["rows_out"] == 1)


def test_local_backend_in_process():
    """The stages' default backend (no url): the model inside the worker, a bad request is a reject."""
    from assay.synth.llm.backend import LocalBackend

    backend = LocalBackend(threads=1, max_batch=2)
    try:
        answer = backend.chat({"messages": [{"role": "user", "content": "Say yes."}], "max_tokens": 3, "seed": 1})
        assert answer["choices"][0]["finish_reason"] in ("stop", "length") and answer["usage"]["completion_tokens"] <= 3
        with pytest.raises(PermanentError) as err:
            backend.chat({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10 ** 6})
        assert err.value.reason == "bad_request"
    finally:
        backend.close()
