"""`synth.solve`: rejection sampling and pass-rate filtering for items with a checkable answer.

For each item, k candidate solutions are sampled and verified (rule checks, then the answer against
the reference, or the code against the item's tests in the sandbox). The pass rate (passed / k) then
filters items as LongCat and MiMo do: items never solved or solved more rarely than `min_pass_rate`
(too hard, or a wrong reference), and items solved more often than `max_pass_rate` (too easy to teach
anything), are rejected. Kept items yield their accepted solutions as chat documents (SFT data,
`emit: solutions`) or themselves with their pass rate (RL prompts, `emit: problems`).

Items: any document whose `meta` has `question` (else the first user segment, else the text) and
either `answer` (+ `answer_kind`: integer, number, expression, sequence, assignment, grid, entity_set,
text) or `tests` (Python test code importing `solution`). The generators' outputs are such items.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import pyarrow as pa
from pydantic import Field

from assay.pipeline.schema import child_id, dumps_meta, loads_meta
from assay.pipeline.stage import register

from . import verify
from .llm.stage import SEGMENTS_TYPE, LLMParams, LLMStage, Tally, completion, service_failure
from .loop import rule_checks, run_checks, summary, tally
from .templates import load_template, messages

PASS_RATE_EDGES = [0.0, 1e-9, 0.25, 0.5, 0.75, 1 - 1e-9, 1.0]  # 0 | (0, .25) | ... | [.75, 1) | 1


class SolveParams(LLMParams):
    template: str = Field("auto", description="Prompt template; auto: solve (answers) or solve_code (tests)")
    candidates: int = Field(4, ge=1, le=256, description="Candidates sampled per item (k)")
    keep: int = Field(1, ge=1, description="Most accepted solutions emitted per item")
    min_pass_rate: float = Field(0.01, ge=0, le=1, description="Reject items solved by fewer than this share")
    max_pass_rate: float = Field(0.99, ge=0, le=1, description="Reject items solved by more than this share")
    emit: Literal["solutions", "problems"] = Field("solutions", description="Accepted solutions (SFT) or the "
                                                                           "items with their pass rate (RL)")
    sandbox_timeout_s: float = Field(10, gt=0, description="Wall-clock limit per code test run")
    sandbox_memory_mb: int = Field(512, ge=16, description="Memory limit per code test process")
    isolation: Literal["auto", "require", "none", "off"] = Field(
        "auto", description="Sandbox isolation for code: auto refuses to run it without namespaces; none runs it "
                            "unisolated (with your rights and network); require = auto, off = none")
    source: str | None = Field(None, description="Source of emitted solutions (default synth-solve)")


def item_of(row: dict) -> dict:
    meta = loads_meta(row.get("meta"))
    question = meta.get("question")
    if not question:
        users = [s["text"] for s in (row.get("segments") or []) if s.get("role") == "user"]
        question = users[0].strip() if users else row.get("text") or ""
    return {"question": question, "answer": meta.get("answer"), "kind": meta.get("answer_kind") or "text",
            "tests": meta.get("tests")}


@register("synth.solve")
class Solve(LLMStage):
    """Sample k solutions per item, verify each (answers or sandboxed tests), filter items by pass rate.

    Example: assay synth solve runs/x/arith runs/x/solved --candidates 8 --max-pass-rate 0.9"""

    Params = SolveParams
    columns = {"segments": SEGMENTS_TYPE, "pass_rate": pa.float32(), "passes": pa.int32(),
               "synth_candidate": pa.int32(), "synth_template": pa.string(), "synth_model": pa.string()}
    reads = {**LLMStage.reads, "template": "file"}

    def read_files(self) -> dict[str, list[str]]:
        from .templates import template_path

        p = self.params
        auto = Path(p.template).name == "auto" and not Path(p.template).suffix
        names = ("solve", "solve_code") if auto else (p.template,)
        return dict(super().read_files(), template=[str(template_path(n)) for n in names])

    def setup(self) -> None:
        p = self.params
        auto = Path(p.template).name == "auto" and not Path(p.template).suffix  # recipes make it absolute
        self.templates = {name: load_template(name if auto else p.template) for name in ("solve", "solve_code")}
        from .sandbox import Limits

        self.limits = Limits(timeout_s=p.sandbox_timeout_s, memory_mb=p.sandbox_memory_mb)
        self._rates: list[float] = []
        super().setup()

    def after_batch(self) -> None:
        if self._rates:  # one histogram call per batch: numpy's per-call cost is not per item
            self.stats.histogram("pass_rate", self._rates, PASS_RATE_EDGES)
            self._rates = []

    def jobs(self, row: dict):
        item = item_of(row)
        if not item["question"]:
            return "no_question", "no meta.question, user segment or text"
        if item["tests"] is None and item["answer"] is None:
            return "no_reference", "meta has neither answer nor tests"
        template = self.templates["solve_code" if item["tests"] is not None else "solve"]
        script = verify.dominant_script(item["question"])
        return [lambda ask, c=c: self.candidate(ask, c, item, template, script) for c in range(self.params.candidates)]

    def candidate(self, ask, c: int, item: dict, template, script) -> dict:
        step = template.steps[-1]
        text, finish = completion(ask(self.chat_request(messages(step, {"question": item["question"]}), c)))
        named = rule_checks(template, text, finish, script)
        sandbox: dict = {}
        if item["tests"] is not None:
            def run_tests():
                check, verdict = verify.code_tests(text, item["tests"], self.limits, self.params.isolation)
                sandbox.update(verdict or {})
                return check
            named.append(("code", run_tests))
        else:
            named.append(("answer", lambda: verify.answer(text, str(item["answer"]), item["kind"])))
        result = run_checks(named)
        return {**result, "text": text, "template": template.name, "sandbox": sandbox.get("verdict")}

    def finish(self, row: dict, results: list[dict], tally_: Tally):
        tally(results, tally_.counters)
        for r in results:
            if r.get("sandbox"):
                tally_.counters[f"sandbox.{r['sandbox']}"] += 1
        if service_failure(results):
            return service_failure(results)
        k, passes = len(results), sum(r["ok"] for r in results)
        rate = passes / k
        self._rates.append(rate)
        p = self.params
        if passes == 0 and p.emit == "solutions" or rate < p.min_pass_rate:
            return ("never_solved" if passes == 0 else "too_hard"), f"pass rate {passes}/{k}; {summary(results)}"
        if rate > p.max_pass_rate:
            return ("always_solved" if passes == k else "too_easy"), f"pass rate {passes}/{k}"
        if p.emit == "problems":
            return [{"pass_rate": rate, "passes": passes}]
        item = item_of(row)
        source = p.source or "synth-solve"
        out = []
        for c, r in [(c, r) for c, r in enumerate(results) if r["ok"]][: p.keep]:
            user, assistant = item["question"].strip() + "\n\n", r["text"].strip() + "\n"
            text = user + assistant
            meta = loads_meta(row.get("meta"))
            meta["synth"] = {"template": r["template"], "parent": row["id"], "candidate": c, "model": p.model,
                             "seed": p.seed + c, "pass_rate": rate}
            out.append({"id": child_id(row["id"], f"solve:{c}"), "text": text, "source": source,
                        "content_type": "synthetic", "meta": dumps_meta(meta),
                        "segments": [{"role": "user", "text": user}, {"role": "assistant", "text": assistant}],
                        "pass_rate": rate, "passes": passes, "synth_candidate": c, "synth_template": r["template"],
                        "synth_model": p.model})
        return out
