"""Graded labels for distilling a fast classifier (the FineWeb-Edu recipe): rate a sample of documents
0-5 with a rubric, then `assay quality train --labelled` fits fastText on the grades.

Backends: `openai` sends the rubric prompt to any OpenAI-compatible chat endpoint (a local vLLM or
llama.cpp server, or a hosted API) with the standard library's HTTP client; `heuristic` is the offline
teacher used for the shipped `edu` model: the same additive rubric scored from signals and the
reference LM instead of an LLM's reading.
"""
from __future__ import annotations

import json
import re
import urllib.request
from typing import Sequence

import numpy as np
import pyarrow as pa

RUBRIC = """Rate how useful the following web text would be for teaching a student, on an additive
0-5 scale. Start at 0 and add a point for each statement that holds:
1. It contains some real information on a topic (not only navigation, ads, or lists of links).
2. It is coherent prose: sentences follow each other and the text can be read start to finish.
3. It explains something a learner could use (a concept, a method, a fact with its context).
4. It is clearly written, well organised and mostly free of boilerplate and promotion.
5. It is of textbook quality: substantial, accurate-sounding and educational throughout.
Reply with a one-line justification, then a final line "Score: N".

Text:
{text}
"""
_SCORE = re.compile(r"Score:\s*([0-5])")


def parse_grade(reply: str) -> int | None:
    found = _SCORE.findall(reply or "")
    return int(found[-1]) if found else None


def openai_grades(texts: Sequence[str], base_url: str, model: str, api_key: str | None = None,
                  max_chars: int = 6000, timeout: float = 120) -> list[int | None]:
    """One chat completion per text; a reply without a parsable score gives None (left out of training)."""
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    grades: list[int | None] = []
    for text in texts:
        body = {"model": model, "temperature": 0, "max_tokens": 200,
                "messages": [{"role": "user", "content": RUBRIC.format(text=text[:max_chars])}]}
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            reply = json.loads(resp.read())["choices"][0]["message"]["content"]
        grades.append(parse_grade(reply))
    return grades


def heuristic_grades(texts: Sequence[str]) -> list[int]:
    """The rubric's five points from measurements: (1) 100+ real words and under half short lines,
    (2) word order the reference LM recognises, (3) STEM or explanatory density, (4) no heuristic rule
    hit, (5) 400+ words that pass everything else."""
    from .lm import NgramLM
    from assay.filters.rules import Rules
    from .scorers import SHIPPED, math_scores
    from assay.filters.signals import compute_signals

    arr = pa.array(list(texts), pa.string())
    sig = compute_signals(arr)
    table = pa.table({f"sig_{k}": v.astype(np.float32) for k, v in sig.items()})
    hits = Rules().process(table).column("rules_hit_count").to_numpy()
    lm = NgramLM.load(SHIPPED["lm"])
    order = lm.score(arr)
    p1 = (sig["gopher_words"] >= 100) & (sig["fw_short_lines"] < 0.5)
    p2 = order >= 0.3
    p3 = (math_scores(arr) >= 0.3) | (sig["gopher_words"] >= 600)
    p4 = hits == 0
    p5 = p1 & p2 & p4 & (sig["gopher_words"] >= 400)
    return (p1.astype(int) + p2 + p3 + p4 + p5).tolist()
