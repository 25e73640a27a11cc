"""The sample -> verify -> accept/reject loop shared by the rewriters and the solver.

A candidate runs its checks in order and stops at the first failure (the expensive ones, such as
running code, come last). Each outcome is recorded, so the stage statistics hold, per verifier, how
many candidates it passed and failed (`verify.<name>.pass|fail`), and per reason how many were
rejected (`reject.<reason>`).
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

from . import verify
from .templates import Template

Named = list[tuple[str, Callable[[], verify.Check]]]


def rule_checks(template: Template, text: str, finish_reason: str, expected_script: str | None) -> Named:
    """The template's rule checks plus its required sections and minimum length."""
    table = {
        "truncation": lambda: verify.truncation(text, finish_reason),
        "repetition": lambda: verify.repetition(text),
        "language": lambda: verify.language_mixing(text, expected_script),
        "claims": lambda: verify.unverifiable_claims(text),
    }
    named: Named = [("length", lambda: verify.min_length(text, template.min_chars))]
    named += [(name, table[name]) for name in template.checks]
    if template.sections:
        named.append(("format", lambda: verify.sections(text, template.sections)))
    return named


def run_checks(named: Named) -> dict:
    """{"ok", "reason", "detail", "outcomes": [[name, reason or None], ...]}"""
    outcomes = []
    for name, check in named:
        result = check()
        outcomes.append([name, result.reason])
        if not result.ok:
            return {"ok": False, "reason": result.reason, "detail": result.detail, "outcomes": outcomes}
    return {"ok": True, "reason": None, "detail": "", "outcomes": outcomes}


def tally(results: list[dict], counters: Counter) -> None:
    counters["synth_candidates"] += len(results)
    for r in results:
        counters["synth_accepted"] += bool(r.get("ok"))
        if not r.get("ok"):
            counters[f"reject.{r.get('reason') or 'unknown'}"] += 1
        for name, reason in r.get("outcomes", ()):
            counters[f"verify.{name}.{'fail' if reason else 'pass'}"] += 1


def summary(results: list[dict]) -> str:
    reasons = Counter(r.get("reason") or "unknown" for r in results if not r.get("ok"))
    return ", ".join(f"{reason} x{n}" for reason, n in reasons.most_common())
