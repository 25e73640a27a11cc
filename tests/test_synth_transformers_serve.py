"""The HTTP backend against an independent OpenAI-compatible server: `transformers serve` (FastAPI and
uvicorn, from transformers' `serving` extra in requirements-dev.txt) serving the same local SmolLM2-135M
copy offline, on 127.0.0.1 on a free port. Requests go through Assay's client and a `synth.solve`
stage; the server's access log counts what reached it, so the request cache is seen to spare the
second run; a wrong model name is the server's own 400 (a permanent reject) and a client deadline
shorter than the generation is a transient timeout."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.pipeline.service import PermanentError, TransientError
from assay.synth.llm.client import OpenAIClient
from assay.synth.llm.weights import resolve_model
from assay.synth.solve import Solve

POST = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d+)')


class Served:
    """A `transformers serve` process and the lines it has logged so far (read on a thread, so the pipe
    never fills)."""

    def __init__(self, model: str):
        self.model, self.lines, self.url = model, [], None
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
               "NO_COLOR": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "transformers.cli.transformers", "serve", model,
                                      "--host", "127.0.0.1", "--port", "0", "--device", "cpu"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     start_new_session=True)
        self._bound = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            match = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            if match:
                self.url = match.group(1) + "/v1"
                self._bound.set()
        self._bound.set()

    def wait_ready(self, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        if not self._bound.wait(deadline_s) or self.url is None:
            self.stop()
            pytest.fail("transformers serve did not start:\n" + "\n".join(self.lines[-30:]))
        while time.monotonic() < deadline:  # bound is not yet ready: ask /health until it says ok
            try:
                with urllib.request.urlopen(self.url.removesuffix("/v1") + "/health", timeout=2) as resp:
                    if json.loads(resp.read()).get("status") == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        pytest.fail("transformers serve never answered /health")

    def posts(self, settle_s: float = 0.3) -> list[int]:
        """Statuses of the chat-completion requests the server has logged (after the log settles)."""
        time.sleep(settle_s)
        return [int(m.group(1)) for line in list(self.lines) if (m := POST.search(line))]

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # uvicorn shuts down gracefully on SIGTERM
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def served():
    server = Served(str(resolve_model(None)))  # the copy `make setup` converted (config names its class)
    server.wait_ready(240)
    yield server
    assert server.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    assert any("Finished server process" in line for line in server.lines), "no clean shutdown"


def _item(question: str, answer: str) -> dict:
    return {"text": question, "source": "t", "meta": {"question": question, "answer": answer, "answer_kind": "integer"}}


def test_solve_stage_against_transformers_serve_and_the_cache_spares_the_rerun(served, tmp_path):
    items = write_table(make_docs([_item("What is 2 + 3?", "5"), _item("What is 4 + 4?", "8")]), tmp_path / "items")
    params = {"url": served.url, "model": served.model, "candidates": 1, "max_tokens": 16, "temperature": 0.0,
              "min_pass_rate": 0.0, "max_pass_rate": 1.0, "concurrency": 2, "timeout_s": 120,
              "cache_dir": str(tmp_path / "cache")}
    before = len(served.posts(0))
    first = run_stage(Solve(params), [items], tmp_path / "one", options={"workers": 1})
    counters = first.manifest["statistics"]["counters"]
    assert counters["service_call"] == 2 and counters["tokens_out"] > 0 and counters["synth_candidates"] == 2
    assert served.posts()[before:] == [200, 200]  # both reached the server, once each
    counts = first.manifest["counts"]
    assert counts["rows_out"] + counts["rows_rejected"] == 2  # the real verifiers judged the real answers
    second = run_stage(Solve(params), [items], tmp_path / "two", options={"workers": 1})
    assert second.manifest["statistics"]["counters"]["service_cache"] == 2
    assert "service_call" not in second.manifest["statistics"]["counters"]
    assert len(served.posts()) == before + 2  # nothing more reached the server
    texts = lambda name: sorted(r["text"] for r in Dataset(tmp_path / name).read().to_pylist())  # noqa: E731
    assert texts("one") == texts("two")


def test_assay_client_against_transformers_serve_answers_errors_and_timeouts(served):
    before = len(served.posts(0))
    client = OpenAIClient(served.url, timeout_s=120)
    request = {"model": served.model, "messages": [{"role": "user", "content": "What is the capital of France?"}],
               "max_tokens": 8, "temperature": 0}
    answer = client.chat(request)
    assert "Paris" in answer["choices"][0]["message"]["content"]  # greedy SmolLM2 knows this one
    assert 0 < answer["usage"]["completion_tokens"] <= 8 and answer["usage"]["prompt_tokens"] > 10
    with pytest.raises(PermanentError) as err:  # the server is pinned to one model: its own 400
        client.chat(dict(request, model="no-such-model"))
    assert err.value.reason == "http_400"
    hurried = OpenAIClient(served.url, timeout_s=0.05)  # shorter than any generation: a transient timeout
    with pytest.raises(TransientError, match="timed out"):
        hurried.chat(dict(request, max_tokens=12, seed=7))
    hurried.close()
    again = client.chat(dict(request, seed=1))  # the keep-alive connection still serves
    assert "Paris" in again["choices"][0]["message"]["content"]
    client.close()
    statuses = served.posts()[before:]
    assert statuses[:2] == [200, 400] and statuses.count(200) >= 2
