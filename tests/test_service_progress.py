"""A long shard of a service stage shows progress (`assay -v`): the worker prints how many of the
batch's calls came back, from the cache or the server, at a bounded rate, up to the last one."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from assay.pipeline.dataset import write_table
from assay.pipeline.schema import make_docs
from assay.synth.llm.scripted import ScriptedServer


def test_an_llm_stage_through_a_server_reports_progress_within_a_shard(tmp_path):
    rows = [{"text": f"q{i}: what is 3 + 4?", "source": "t",
             "meta": {"question": f"q{i}: what is 3 + 4?", "answer": "7", "answer_kind": "integer"}} for i in range(6)]
    items = write_table(make_docs(rows), tmp_path / "items")
    command = [sys.executable, "-m", "assay.pipeline.cli", "synth", "solve", str(items), "--candidates", "4",
               "--concurrency", "2", "--cache-dir", str(tmp_path / "cache"), "--workers", "1"]
    with ScriptedServer(lambda r: "Answer: 7", latency_s=0.25) as server:
        env = {**os.environ, "ASSAY_PROGRESS_S": "0.5"}
        loud = subprocess.run(command[:3] + ["-v"] + command[3:] + [str(tmp_path / "out"), "--url", server.url],
                              capture_output=True, text=True, timeout=300, env=env)
        quiet = subprocess.run(command + [str(tmp_path / "again"), "--url", server.url], capture_output=True, text=True,
                               timeout=300, env=env)
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr + quiet.stderr
    counts = [int(n) for n in re.findall(r"solve: (\d+)/24 candidates of this batch", loud.stderr)]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[-1] == 24, loud.stderr
    assert "candidates of this batch" not in quiet.stderr  # quiet by default
