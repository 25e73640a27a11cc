"""`synth.rewrite`: rewrite records with an LLM through a template, k candidates per record, every
candidate verified; a record yields up to `keep` accepted rewrites (one-to-many, `parent_id`) or is
rejected with `no_valid_candidate` and the candidates' reasons.

Input schema (any document dataset; nothing but `text` is required). A template's `{{field}}` is
the row's column of that name when it holds a string or number (`text`, `id`, `source`, `url`, and
the code-history records' `repo`, `problem`, `diff`, `pr_number`, ...), else the value of that key
in the JSON object `meta`; then, for a name that is not a column, these aliases fill in, first
non-empty wins:

    problem  <- meta.problem | problem_statement | issue | issue_body | body | text
    title    <- meta.title | pr_title | issue_title
    diff     <- meta.diff | patch | golden_patch
    repo     <- meta.repo | repository

So the code-history records (synth.commits / prs / swebench: columns `repo`, `problem`, `diff`,
the PR title in `meta`), SWE-bench rows read as JSONL (`problem_statement`, `patch` in `meta`) and
plain documents all work. A record missing a
field the template `needs` is rejected with `missing_field`.

Outputs are `content_type: synthetic` documents with `segments`: `chat` templates give a user turn
(the problem) and an assistant turn (the reconstruction plus the template's suffix, e.g. the real
patch); `document` templates one `context` segment; `qa` templates alternating user/assistant turns.
"""
from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field

from assay.pipeline.schema import child_id, dumps_meta, loads_meta
from assay.pipeline.stage import register

from . import verify
from .llm.stage import SEGMENTS_TYPE, LLMParams, LLMStage, Tally, completion, service_failure
from .loop import rule_checks, run_checks, summary, tally
from .templates import load_template, messages, render

ALIASES = {
    "problem": ("problem", "problem_statement", "issue", "issue_body", "body"),
    "title": ("title", "pr_title", "issue_title"),
    "diff": ("diff", "patch", "golden_patch"),
    "repo": ("repo", "repository"),
}


def _scalar(value) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def record_fields(row: dict) -> dict[str, str]:
    meta = loads_meta(row.get("meta")) if isinstance(row.get("meta"), str) else (row.get("meta") or {})
    fields = {k: str(v) for k, v in meta.items() if _scalar(v)}
    fields.update((k, str(v)) for k, v in row.items() if k != "meta" and _scalar(v) and v != "")
    for name, keys in ALIASES.items():
        if name in row:  # a record's own column (a history PR without a patch has diff = null) is final
            continue
        value = next((fields[k] for k in keys if fields.get(k)), None)
        if value:
            fields[name] = value
    fields.setdefault("problem", fields.get("text", ""))
    return fields


_QA = re.compile(r"^\s*(?:\*\*)?Q(?:uestion)?\s*\d*(?:\*\*)?\s*[:.]\s*(.+?)\s*\n\s*(?:\*\*)?A(?:nswer)?\s*\d*(?:\*\*)?\s*[:.]\s*"
                 r"(.+?)(?=\n\s*(?:\*\*)?Q(?:uestion)?\s*\d*(?:\*\*)?\s*[:.]|\Z)", re.M | re.S | re.I)


def qa_pairs(text: str) -> list[tuple[str, str]]:
    return [(q.strip(), a.strip()) for q, a in _QA.findall(text) if q.strip() and a.strip()]


class RewriteParams(LLMParams):
    template: str = Field("reasoning", description="A bundled template (reasoning, active_reading, rephrase, qa) "
                                                   "or a path to your own YAML template")
    candidates: int = Field(2, ge=1, le=64, description="Candidates sampled per record (rejection sampling)")
    keep: int = Field(1, ge=1, description="Most accepted rewrites kept per record")
    source: str | None = Field(None, description="Source of the output documents (default synth-<template>)")


@register("synth.rewrite")
class Rewrite(LLMStage):
    """Rewrite records with an LLM (reasoning reconstruction of PRs, Active Reading notes, rephrasing,
    QA), sampling k candidates and keeping those that pass every check.

    Example: assay synth rewrite runs/x/prs runs/x/reasoning --template reasoning --url http://127.0.0.1:8000/v1"""

    Params = RewriteParams
    columns = {"segments": SEGMENTS_TYPE, "synth_template": pa.string(), "synth_candidate": pa.int32(),
               "synth_model": pa.string()}
    reads = {**LLMStage.reads, "template": "file"}

    def setup(self) -> None:
        self.template = load_template(self.params.template)  # a bad template fails before a model loads
        super().setup()

    def jobs(self, row: dict):
        fields = record_fields(row)
        missing = [name for name in self.template.needs if not fields.get(name)]
        if missing:
            return "missing_field", f"the template needs {', '.join(missing)}"
        source = "\n".join(fields.get(k, "") for k in ("title", "problem", "diff", "text"))
        script = verify.dominant_script(fields.get("text", ""))
        return [lambda ask, c=c: self.candidate(ask, c, fields, source, script) for c in range(self.params.candidates)]

    def candidate(self, ask, c: int, fields: dict, source: str, script: str | None) -> dict:
        previous, steps = "", self.template.steps
        for n, step in enumerate(steps):
            overrides = {k: v for k, v in (("max_tokens", step.max_tokens), ("temperature", step.temperature),
                                           ("stop", step.stop)) if v is not None}
            text, finish = completion(ask(self.chat_request(messages(step, {**fields, "previous": previous}), c,
                                                            **overrides)))
            if finish == "length" and n < len(steps) - 1:  # a cut-off outline would poison the next step
                return {"ok": False, "reason": "truncated", "detail": f"step {n + 1} hit max_tokens",
                        "outcomes": [["truncation", "truncated"]]}
            previous = text
        named = rule_checks(self.template, text, finish, script)
        for kind in self.template.grounding:
            if kind == "references":
                named.append(("grounding", lambda: verify.grounded_references(text, source)))
            elif kind == "quoted_code":
                named.append(("quoted_code", lambda: verify.quoted_code(text, source)))
            elif kind == "content":
                named.append(("grounding", lambda: verify.grounded_answer(text, fields.get("text", ""))))
            elif kind == "qa_pairs":
                named.append(("qa_format", lambda: verify.PASS if qa_pairs(text) else
                              verify.fail("wrong_format", "no 'Q: ... A: ...' pairs")))
                named.append(("grounding", lambda: next((chk for chk in (verify.grounded_answer(a, fields.get("text", ""))
                                                                          for _, a in qa_pairs(text)) if not chk.ok),
                                                         verify.PASS)))
        return {**run_checks(named), "text": text}

    def finish(self, row: dict, results: list[dict], tally_: Tally):
        tally(results, tally_.counters)
        accepted = [(c, r) for c, r in enumerate(results) if r["ok"]][: self.params.keep]
        if not accepted:
            return service_failure(results) or ("no_valid_candidate", summary(results))
        fields = record_fields(row)
        source = self.params.source or f"synth-{self.template.name}"
        out = []
        for c, result in accepted:
            segments = self.segments(result["text"], fields)
            text = "".join(s["text"] for s in segments)
            meta = loads_meta(row.get("meta"))
            meta["synth"] = {"template": self.template.name, "parent": row["id"], "candidate": c,
                             "model": self.params.model, "seed": self.params.seed + c}
            out.append({"id": child_id(row["id"], f"{self.template.name}:{c}"), "text": text,
                        "source": source, "content_type": "synthetic", "meta": dumps_meta(meta), "segments": segments,
                        "synth_template": self.template.name, "synth_candidate": c, "synth_model": self.params.model})
        return out

    def segments(self, generated: str, fields: dict) -> list[dict]:
        t = self.template
        if t.output == "chat":
            user = render(t.user_turn or "{{problem}}", fields).strip() + "\n\n"
            return [{"role": "user", "text": user},
                    {"role": "assistant", "text": generated.strip() + render(t.assistant_suffix, fields).rstrip() + "\n"}]
        if t.output == "qa":
            out = []
            for q, a in qa_pairs(generated):
                out += [{"role": "user", "text": q + "\n"}, {"role": "assistant", "text": a + "\n\n"}]
            return out
        return [{"role": "context", "text": generated.strip() + "\n"}]
