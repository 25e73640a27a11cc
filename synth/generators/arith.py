"""Large-number arithmetic (Step 3.5: 11-13-digit operands) with exact answers and worked solutions.

Operations: addition and subtraction (with a check by the inverse operation), multiplication (the
second factor split into 3-digit groups, one partial product per group, then their sum) and exact
division (the quotient checked by multiplying back). Python integers are exact at any size, so every
answer is correct by construction; the tests recompute them independently with `decimal`.
"""
from __future__ import annotations

import random
from typing import Literal

from pydantic import Field

from assay.pipeline.stage import register

from .base import GeneratorParams, GeneratorStage, Item

Op = Literal["add", "sub", "mul", "div"]
SYMBOL = {"add": "+", "sub": "-", "mul": "×", "div": "÷"}
ASK = ("Compute {a} {op} {b}.", "What is {a} {op} {b}?", "Calculate the exact value of {a} {op} {b}.",
       "Find {a} {op} {b}. Give the exact integer.")


class ArithParams(GeneratorParams):
    min_digits: int = Field(11, ge=1, le=40, description="Fewest digits of an operand")
    max_digits: int = Field(13, ge=1, le=40, description="Most digits of an operand")
    ops: list[Op] = Field(default_factory=lambda: ["add", "sub", "mul", "div"], description="Operations to draw from")


def number(rng: random.Random, lo_digits: int, hi_digits: int) -> int:
    digits = rng.randint(lo_digits, hi_digits)
    return rng.randint(10 ** (digits - 1), 10 ** digits - 1)


def groups_of_three(n: int) -> list[tuple[int, int]]:
    """(group, power of 1000) from the lowest group up: 9876543 -> [(543, 0), (876, 1), (9, 2)]."""
    out, k = [], 0
    while n:
        n, g = divmod(n, 1000)
        out.append((g, k))
        k += 1
    return out


def solve(op: str, a: int, b: int) -> tuple[int, list[str]]:
    if op == "add":
        c = a + b
        return c, [f"{a} + {b} = {c}", f"Check: {c} - {b} = {c - b}"]
    if op == "sub":
        c = a - b
        return c, [f"{a} - {b} = {c}", f"Check: {c} + {b} = {c + b}"]
    if op == "mul":
        lines = [f"Split {b} into groups of three digits and multiply {a} by each group:"]
        total = 0
        for g, k in groups_of_three(b):
            part = a * g * 1000 ** k
            total += part
            lines.append(f"{a} × {g} × 10^{3 * k} = {part}")
        lines.append(f"Sum of the partial products: {total}")
        return total, lines
    q = a // b
    return q, [f"{a} ÷ {b} = {q}", f"Check: {q} × {b} = {q * b}"]


@register("synth.arith")
class Arith(GeneratorStage):
    """Synthetic 11-13-digit arithmetic (add, subtract, multiply, exact divide) with worked solutions.

    Example: assay synth arith runs/x/arith --count 1000 --seed 7"""

    Params = ArithParams
    task_name = "arith"

    def make(self, rng: random.Random, index: int) -> Item:
        p = self.params
        lo, hi = min(p.min_digits, p.max_digits), max(p.min_digits, p.max_digits)
        op = rng.choice(p.ops)
        if op == "div":  # an exact quotient: the dividend has lo..hi digits and is a multiple of the divisor
            a = number(rng, lo, hi)
            b = number(rng, 2, max(2, min(6, len(str(a)) - 2)))
            a -= a % b
            if a < 10 ** (lo - 1):
                a += b * (-(-(10 ** (lo - 1) - a) // b))
        else:
            a, b = number(rng, lo, hi), number(rng, lo, hi)
        answer, steps = solve(op, a, b)
        question = rng.choice(ASK).format(a=a, op=SYMBOL[op], b=b)
        solution = "\n".join(steps + [f"Answer: {answer}"])
        return Item(question, solution, str(answer), "integer", {"op": op, "a": str(a), "b": str(b)})
