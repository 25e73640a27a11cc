"""Is a model's math answer equal to the reference? Exact for numbers, symbolic (then numeric) for
expressions.

Model output is untrusted, so it is never handed to `sympy.sympify`/`parse_expr` (they call `eval`):
a small recursive-descent parser accepts numbers, variables, + - * / ^ (and **), parentheses,
implicit multiplication, a few functions, and the LaTeX forms \\frac{}{}, \\sqrt{}, \\cdot, \\times,
\\pi, and builds the sympy expression itself. Powers with huge exponents are refused.
"""
from __future__ import annotations

import random
import re

import sympy

FUNCTIONS = {"sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "log": sympy.log,
             "ln": sympy.log, "exp": sympy.exp, "abs": sympy.Abs}
MAX_LENGTH = 300
MAX_EXPONENT = 4096


class Unparsable(ValueError):
    pass


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|(\\?[A-Za-z]+)|(\*\*|[-+*/^(){}]))")


def _prepare(text: str) -> str:
    s = text.strip().strip("$").strip()
    s = re.sub(r"\\(left|right|displaystyle|,|;|!|\s)", "", s)
    s = s.replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/").replace("×", "*").replace("÷", "/")
    s = s.replace("−", "-").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    if "=" in s:  # "x = 5": the value is what follows the last '='
        s = s.rsplit("=", 1)[1]
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # thousands separators
    s = re.sub(r"(?<=\d)[ _](?=\d{3}\b)", "", s)
    return s.rstrip(". ")


class _Parser:
    def __init__(self, text: str):
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise Unparsable(f"unexpected {text[pos:pos + 10]!r}")
            num, name, op = m.groups()
            self.tokens.append(("num", num) if num else ("name", name) if name else ("op", op))
            pos = m.end()
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise Unparsable(f"expected {value or 'more input'}")
        self.i += 1
        return tok

    def parse(self):
        expr = self.expr()
        if self.peek() is not None:
            raise Unparsable(f"trailing {self.peek()[1]!r}")
        return expr

    def expr(self):
        value = self.term()
        while self.peek() and self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.unary()
        while True:
            tok = self.peek()
            if tok and tok[1] in ("*", "/"):
                self.take()
                rhs = self.unary()
                value = value * rhs if tok[1] == "*" else value / rhs
            elif tok and (tok[0] in ("num", "name") or tok[1] in ("(", "{")):  # implicit product: 2x, 3(x+1)
                value = value * self.power()
            else:
                return value

    def unary(self):
        tok = self.peek()
        if tok and tok[1] in ("+", "-"):
            self.take()
            value = self.unary()
            return -value if tok[1] == "-" else value
        return self.power()

    def power(self):
        base = self.atom()
        tok = self.peek()
        if tok and tok[1] in ("^", "**"):
            self.take()
            exponent = self.unary()
            if exponent.is_number and abs(exponent) > MAX_EXPONENT:
                raise Unparsable("exponent too large")
            return sympy.Pow(base, exponent)
        return base

    def group(self, close: str):
        value = self.expr()
        self.take(close)
        return value

    def atom(self):
        kind, value = self.take()
        if kind == "num":
            return sympy.Rational(value)
        if value == "(":
            return self.group(")")
        if value == "{":
            return self.group("}")
        if kind == "name":
            name = value.lstrip("\\")
            if value == "\\frac":
                self.take("{")
                num = self.group("}")
                self.take("{")
                return num / self.group("}")
            if name == "pi":
                return sympy.pi
            if name in FUNCTIONS:
                opener = self.take()[1]
                if opener not in ("(", "{"):
                    raise Unparsable(f"{name} needs an argument")
                return FUNCTIONS[name](self.group(")" if opener == "(" else "}"))
            if value.startswith("\\") or len(name) > 1:
                raise Unparsable(f"unknown name {value!r}")
            return sympy.Symbol(name)
        raise Unparsable(f"unexpected {value!r}")


def parse(text: str):
    s = _prepare(text)
    if not s or len(s) > MAX_LENGTH:
        raise Unparsable("empty or too long")
    return _Parser(s).parse()


def equivalent(answer: str, reference: str) -> bool:
    """True when the two parse to equal values: exactly for numbers, symbolically or at random points
    for expressions. Unparsable answers are not equivalent."""
    try:
        a, b = parse(answer), parse(reference)
    except (Unparsable, ZeroDivisionError, TypeError, ValueError):
        return False
    diff = a - b
    if not a.free_symbols and not b.free_symbols:
        try:
            return bool(abs(sympy.N(diff, 60)) <= sympy.Float("1e-40") * max(1, abs(sympy.N(b, 60))))
        except TypeError:  # complex or undefined values
            return False
    if diff == 0 or (len(str(diff)) <= 200 and sympy.simplify(diff) == 0):
        return True
    rng = random.Random(0)
    for _ in range(5):  # equal at random points (a fallback when simplify gives up)
        point = {s: sympy.Rational(rng.randint(-97, 97), rng.randint(1, 13)) for s in diff.free_symbols}
        try:
            value = complex(sympy.N(diff.subs(point), 30))
            scale = abs(complex(sympy.N(b.subs(point), 30)))
        except (TypeError, ValueError, ZeroDivisionError):
            return False
        if abs(value) > 1e-9 * max(1.0, scale):
            return False
    return True
