"""Sample -> verify -> accept/reject, end to end through the stages, with a scripted generator where
the test needs exact control of what is generated: the verifiers are always the real ones, and code
runs in the real sandbox. (The real SmolLM2 model in the loop: test_synth_client.py, which serves it
once for the module.) Also the report section."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.recipe import parse_recipe
from assay.pipeline.report import write_report
from assay.pipeline.runner import run_recipe, run_stage
from assay.pipeline.schema import make_docs
from assay.synth.llm.scripted import Reply, ScriptedServer
from assay.synth.rewrite import Rewrite
from assay.synth.solve import Solve

DIFF = """--- a/widgets/pages.py
+++ b/widgets/pages.py
@@ -1,4 +1,4 @@
 def paginate(items, size):
-    count = len(items) // size
+    count = -(-len(items) // size)
     return [items[i * size:(i + 1) * size] for i in range(count)]
"""
PR = {"repo": "acme/widgets", "title": "Fix paginate() dropping the last page",
      "problem": "paginate() in widgets/pages.py drops the last, partial page: paginate([1, 2, 3], 2) gives [[1, 2]].",
      "diff": DIFF}
GOOD = ("## Problem analysis\nThe issue shows that `paginate` in widgets/pages.py returns too few pages when the "
        "length of `items` is not a multiple of `size`; the last partial page is lost.\n"
        "## Root cause\nThe page count is computed with floor division, `len(items) // size`, which rounds down.\n"
        "## Solution design\nCount pages with ceiling division so a partial page still counts; the slicing already "
        "handles a short last page, so nothing else has to change.")
CANDIDATES = {  # candidate (seed) -> what the "model" says, and the check that must reject it
    0: (GOOD, None),
    1: (Reply(content=GOOD[:300], finish_reason="length"), "truncated"),
    2: ("## Problem analysis\n" + "The page is lost because the page is lost. " * 12 + "\n## Root cause\nx\n## Solution design\ny",
        "repetition"),
    3: (GOOD.replace("## Solution design\n", "## Solution design\nI searched the web and found this on Stack Overflow. "),
        "browsing_claim"),
    4: (GOOD.replace("widgets/pages.py", "widgets/cache.py"), "hallucinated_reference"),
    5: (GOOD.replace("## Root cause\n", ""), "wrong_format"),
    6: (GOOD.replace("The page count is computed with floor division",
                     "页数是用向下取整除法计算的，所以最后一页总是会丢失，这是整个问题的根本原因，必须修改计算方法才能解决。这一点非常重要，"
                     "因为用户会看到缺少的数据，并且分页的结果与预期完全不同"), "language_mixing"),
    7: (GOOD + "\n```python\nreturn math.ceil(len(items) / size)\n```", "code_mismatch"),
}


def _reply(request):
    reply, _ = CANDIDATES[request["seed"] % 8]
    return reply


def test_rewrite_accepts_the_good_candidate_and_rejects_each_bad_one_with_its_reason(tmp_path):
    records = write_table(make_docs([
        {"text": PR["problem"], "source": "prs", "content_type": "pr", "meta": PR},
        {"text": "An issue without a patch", "source": "prs", "content_type": "pr", "meta": {"title": "no diff"}},
    ]), tmp_path / "prs")
    with ScriptedServer(_reply) as server:
        stage = Rewrite({"url": server.url, "template": "reasoning", "candidates": 8, "keep": 1,
                         "cache_dir": str(tmp_path / "cache"), "model": "scripted"})
        result = run_stage(stage, [records], tmp_path / "out", options={"workers": 1})
    counters = result.manifest["statistics"]["counters"]
    assert counters["synth_candidates"] == 8 and counters["synth_accepted"] == 1
    for _, reason in CANDIDATES.values():
        if reason:
            assert counters[f"reject.{reason}"] == 1, reason
    assert counters["verify.grounding.fail"] == 1 and counters["verify.quoted_code.pass"] == 1
    assert result.manifest["counts"]["rejected"]["missing_field"]["rows"] == 1
    [doc] = Dataset(tmp_path / "out").read().to_pylist()
    assert doc["parent_id"] == make_docs([{"text": PR["problem"], "source": "prs", "meta": PR}])["id"][0].as_py()
    assert [s["role"] for s in doc["segments"]] == ["user", "assistant"]
    assert "".join(s["text"] for s in doc["segments"]) == doc["text"]
    assistant = doc["segments"][1]["text"]
    assert assistant.startswith("## Problem analysis") and DIFF.strip() in assistant  # the real patch, not the model's
    assert doc["content_type"] == "synthetic" and doc["synth_candidate"] == 0


SWEBENCH = Path(__file__).resolve().parent / "fixtures" / "history" / "swebench-sample.jsonl"
GENERIC = ("## Problem analysis\nThe issue describes a behaviour that differs from what the reporter expects, and "
           "the report gives enough detail to reproduce it.\n## Root cause\nThe code path named in the report handles "
           "one case incompletely.\n## Solution design\nHandle the missing case where the behaviour is decided, and "
           "leave the rest of the module as it is.")


def test_rewrite_reads_the_code_history_records(tmp_path):
    """The history family's records (columns repo, problem, diff) feed the reasoning template."""
    from assay.synth.history.sources import SwebenchInstances

    run_stage(SwebenchInstances({"paths": [str(SWEBENCH)]}), [], tmp_path / "swe", options={"workers": 1})
    records = Dataset(tmp_path / "swe").read().to_pylist()
    with ScriptedServer(lambda r: GENERIC) as server:
        stage = Rewrite({"url": server.url, "template": "reasoning", "candidates": 1, "model": "scripted",
                         "cache_dir": str(tmp_path / "cache")})
        result = run_stage(stage, [tmp_path / "swe"], tmp_path / "out", options={"workers": 1})
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert len(prompts) == len(records) and result.manifest["counts"]["rows_out"] == len(records)
    for record in records:
        [prompt] = [p for p in prompts if f"Repository: {record['repo']}\n" in p and record["problem"][:200] in p]
        assert record["diff"].strip()[:3000] in prompt
    docs = Dataset(tmp_path / "out").read().to_pylist()
    by_id = {r["id"]: r for r in records}
    for doc in docs:
        assistant = doc["segments"][1]["text"]
        assert assistant.startswith(GENERIC) and by_id[doc["parent_id"]]["diff"] + "\n```" in assistant


ITEMS = [("always: 3 + 4", "7"), ("never: 3 + 4", "7"), ("half: 3 + 4", "7")]


def _answers(request):
    q, seed = request["messages"][-1]["content"], request["seed"]
    if q.startswith("always") or (q.startswith("half") and seed % 2 == 0):
        return "3 + 4 = 7\nAnswer: 7"
    return "3 + 4 = 8\nAnswer: 8"


@pytest.mark.parametrize("emit", ["solutions", "problems"])
def test_pass_rate_filter_keeps_items_neither_always_nor_never_solved(tmp_path, emit):
    items = write_table(make_docs([{"text": q, "source": "t", "meta": {"question": q, "answer": a, "answer_kind": "integer"}}
                                   for q, a in ITEMS]), tmp_path / "items")
    with ScriptedServer(_answers) as server:
        stage = Solve({"url": server.url, "candidates": 4, "keep": 2, "emit": emit, "cache_dir": str(tmp_path / "c"),
                       "model": "scripted"})
        result = run_stage(stage, [items], tmp_path / "out", options={"workers": 1})
    rejected = {r["text"]: r["reject_reason"] for r in Dataset(tmp_path / "out").read_rejects().to_pylist()}
    assert rejected == {"always: 3 + 4": "always_solved", "never: 3 + 4": "never_solved"}
    kept = Dataset(tmp_path / "out").read().to_pylist()
    assert {r["pass_rate"] for r in kept} == {0.5} and {r["passes"] for r in kept} == {2}
    if emit == "solutions":
        assert len(kept) == 2 and all(r["text"].endswith("Answer: 7\n") for r in kept)
    else:
        assert len(kept) == 1 and kept[0]["id"] == kept[0]["parent_id"]
    counters = result.manifest["statistics"]["counters"]
    assert counters["reject.wrong_answer"] == 6 and counters["verify.answer.pass"] == 6
    assert result.manifest["statistics"]["histograms"]["pass_rate"]["counts"] == [1, 0, 0, 1, 0, 1]


CODE_TESTS = "from solution import add\nassert add(2, 3) == 5\nassert add(-4, 4) == 0\n"
CODE_ANSWERS = {0: "Here it is.\n```python\ndef add(a, b):\n    return a + b\n```",
                1: "```python\ndef add(a, b):\n    return a * b\n```",
                2: "```python\ndef add(a, b):\n    while True:\n        pass\n```",
                3: "Just add the two numbers."}


def test_code_candidates_are_run_against_the_tests_in_the_sandbox(tmp_path):
    items = write_table(make_docs([{"text": "Write add(a, b).", "source": "t",
                                    "meta": {"question": "Write a function add(a, b) returning the sum.", "tests": CODE_TESTS}}]),
                        tmp_path / "items")
    with ScriptedServer(lambda r: CODE_ANSWERS[r["seed"]]) as server:
        stage = Solve({"url": server.url, "candidates": 4, "cache_dir": str(tmp_path / "c"), "model": "scripted",
                       "sandbox_timeout_s": 1.5})
        result = run_stage(stage, [items], tmp_path / "out", options={"workers": 1})
    counters = result.manifest["statistics"]["counters"]
    assert counters["synth_accepted"] == 1 and counters["sandbox.ok"] == 1
    assert counters["reject.code_failed"] == 1 and counters["reject.code_timeout"] == 1 and counters["reject.no_code"] == 1
    [doc] = Dataset(tmp_path / "out").read().to_pylist()
    assert "return a + b" in doc["text"] and doc["pass_rate"] == 0.25


def test_report_section_shows_verifiers_and_pass_rates(tmp_path):
    with ScriptedServer(lambda r: "Answer: 1" if r["seed"] % 2 else "Let me see.\nAnswer: wrong") as server:
        recipe = parse_recipe({
            "name": "synth-report",
            "inputs": {"arith": {"uses": "synth.arith", "params": {"count": 3, "seed": 1}}},
            "stages": [{"id": "solved", "uses": "synth.solve", "inputs": ["arith"],
                        "params": {"url": server.url, "candidates": 2, "model": "scripted",
                                   "cache_dir": str(tmp_path / "cache")}}],
        })
        run_recipe(recipe, workdir=tmp_path / "run", log=lambda *_: None)
    page = write_report(tmp_path / "run").read_text()
    assert "<h2>Synthesis</h2>" in page and "Verifiers" in page and "Pass rates" in page
    assert "wrong_answer" in page and "synth.arith" in page
    manifest = json.loads((tmp_path / "run" / "solved" / "_manifest.json").read_text())
    assert manifest["counts"]["rejected"]["never_solved"]["rows"] == 3
