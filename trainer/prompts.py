"""Prompt formats: how an item becomes the (context, continuation) pairs a model scores. Zero-shot.

Two formulations, after OLMES (Gu et al. 2024), fixed so that figures compare across runs:

* `cf`, cloze: the prompt is the benchmark's template below and each choice is scored as
  `" " + choice` after it (the schema's convention). Every task has it.
* `mcf`, multiple-choice: the question, then the options lettered ` A. ...` one a line, then
  `Answer:`; the continuations are `" A"`, `" B"`, ... Only multiple-choice items have it; cloze and
  generation items stay cloze. (A tiny proxy scores MCF at chance: OLMES finds the format needs
  models far past this scale; it is here for larger proxies.)

CF templates (`{context}` is the item's context):

| tasks | prompt | continuation |
|---|---|---|
| arc_easy, arc_challenge, openbookqa, csqa, siqa, mmlu_redux, triviaqa, nq_open, any other | `Question: {context}\\nAnswer:` | `" " + choice` |
| piqa | `Goal: {context}\\nAnswer:` | `" " + solution` |
| boolq | `{passage}\\nQuestion: {question}?\\nAnswer:` (the schema's context + `\\nAnswer:`) | `" no"` / `" yes"` |
| hellaswag, copa, lambada_openai (any cloze item) | `{context}` | `" " + choice` |
| winogrande | partial scoring: the sentence up to the blank with each option filled in | `" " + the rest of the sentence` (one continuation, several contexts) |
| mbpp | the task as a docstring: three double quotes, `{context}`, three double quotes, `\\n` | the reference code |

No few-shot examples: at this scale they cost context (128 tokens on the decision proxy) and
OLMES's small models gain little from them.
"""
from __future__ import annotations

from dataclasses import dataclass

from assay.pipeline.errors import UserError

from .tasks import Item

FORMATS = ("cf", "mcf")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
RAW = {"hellaswag", "copa", "lambada_openai"}  # the context is already the sentence to continue


@dataclass
class Request:
    """What the model scores for one item: continuation j after contexts[j]. `gold` indexes them."""

    contexts: list[str]
    continuations: list[str]
    gold: int
    kind: str


def _question(item: Item) -> str:
    if item.benchmark == "piqa":
        return f"Goal: {item.context}\nAnswer:"
    if item.benchmark == "boolq":
        return f"{item.context}\nAnswer:"
    return f"Question: {item.context}\nAnswer:"


def request(item: Item, fmt: str = "cf") -> Request:
    if fmt not in FORMATS:
        raise UserError(f"prompt format {fmt!r} is not one of {', '.join(FORMATS)}")
    n = len(item.choices)
    if fmt == "mcf" and item.kind == "multiple_choice":
        if n > len(LETTERS):
            raise UserError(f"{item.benchmark} {item.id}: {n} choices are more than MCF can letter")
        stem = _question(item).removesuffix("\nAnswer:") if item.benchmark not in RAW else item.context
        options = "".join(f"\n {LETTERS[j]}. {c}" for j, c in enumerate(item.choices))
        return Request([f"{stem}{options}\nAnswer:"] * n, [f" {LETTERS[j]}" for j in range(n)], item.gold, item.kind)
    if item.benchmark == "winogrande" and item.meta.get("partial_contexts"):
        rest = " " + str(item.meta.get("continuation", "")).strip()
        return Request(list(item.meta["partial_contexts"]), [rest] * n, item.gold, item.kind)
    if item.benchmark == "winogrande" and item.context.count("_") == 1:
        head, _, tail = item.context.partition("_")
        return Request([head + c for c in item.choices], [" " + tail.strip()] * n, item.gold, item.kind)
    if item.benchmark == "mbpp":
        return Request([f'"""{item.context}"""\n'], [item.choices[0]], 0, item.kind)
    prompt = item.context if item.benchmark in RAW or item.kind == "cloze" else _question(item)
    return Request([prompt] * n, [" " + c for c in item.choices], item.gold, item.kind)
