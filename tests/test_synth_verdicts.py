"""Verdicts a wrong solution cannot talk its way into (issue 46): a solution that returns an object
answering the tests' own operators and methods (`-`, `abs`, `in`, `startswith`, what
`assertAlmostEqual` uses), or that raises StopIteration inside a `map` the tests consume, must fail,
in the sandbox and end to end through `assay synth solve`; ordinary solutions still pass."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from assay.synth import sandbox, verify
from assay.synth.sandbox import Limits

ISOLATED, WHY = sandbox.isolation_available()
ISOLATION = "auto" if ISOLATED else "none"
FAST = Limits(timeout_s=5, memory_mb=256, processes=8)

# One object that answers everything the tests could ask it in the tests' favour.
LIAR = """
class Liar:
    def __sub__(self, other):
        return self
    __rsub__ = __add__ = __radd__ = __sub__
    def __abs__(self):
        return 0.0
    def __round__(self, ndigits=None):
        return 0
    def __lt__(self, other):
        return True
    __le__ = __gt__ = __ge__ = __lt__
    def __eq__(self, other):
        return True
    def __contains__(self, item):
        return True
    def __getattr__(self, name):
        return lambda *args, **kwargs: True
    def __bool__(self):
        return True
    def __hash__(self):
        return 0
"""
ATTACKS = {  # name -> (the wrong solution's body after LIAR, the tests a right solution passes)
    "abs_sub": ("def area(r):\n    return Liar()\n",
                "from solution import area\nassert abs(area(1.0) - 3.14159) < 1e-4\n"),
    "assert_almost_equal": ("def area(r):\n    return Liar()\n",
                            "import unittest\nfrom solution import area\n\nclass T(unittest.TestCase):\n"
                            "    def test_area(self):\n        self.assertAlmostEqual(area(1.0), 3.14159, places=4)\n\n"
                            "unittest.main()\n"),
    "contains": ("def primes(n):\n    return Liar()\n",
                 "from solution import primes\nassert 7 in primes(10) and 97 in primes(100)\n"),
    "assert_in": ("def primes(n):\n    return Liar()\n",
                  "import unittest\nfrom solution import primes\n\nclass T(unittest.TestCase):\n"
                  "    def test_in(self):\n        self.assertIn(7, primes(10))\n\nunittest.main()\n"),
    "startswith": ("def greet(name):\n    return Liar()\n",
                   "from solution import greet\nassert greet('Ada').startswith('Hello, Ada')\n"
                   "assert greet('Ada').endswith('!')\n"),
    "method_of_an_object": ("class Solution:\n    def area(self, r):\n        return Liar()\n",
                            "from solution import Solution\nassert abs(Solution().area(1.0) - 3.14159) < 1e-4\n"),
    "property_of_an_object": ("class Circle:\n    def __init__(self, r):\n        pass\n"
                              "    @property\n    def area(self):\n        return Liar()\n",
                              "from solution import Circle\nassert abs(Circle(1.0).area - 3.14159) < 1e-4\n"),
    "class_posing_as_a_function": ("class area(Liar):\n    def __init__(self, r):\n        pass\n",
                                   "from solution import area\nassert abs(area(1.0) - 3.14159) < 1e-4\n"),
    "stop_iteration_all_map": ("def is_prime(n):\n    raise StopIteration\n",
                               "from solution import is_prime\n"
                               "assert all(map(lambda c: is_prime(c[0]) == c[1], [(2, True), (9, False), (7, True)]))\n"),
    "stop_iteration_loop_over_map": ("def is_prime(n):\n    raise StopIteration\n",
                                     "from solution import is_prime\n"
                                     "for n, want in map(lambda n: (n, is_prime(n)), [2, 3, 9]):\n"
                                     "    assert want == (n != 9)\n"),
    "results_compared_with_each_other": ("def norm(s):\n    return Liar()\n",
                                          "from solution import norm\nassert norm('A  b') == norm('a B')\n"),
    "a_liar_inside_what_is_iterated": ("def primes(n):\n    return iter([Liar(), Liar()])\n",
                                       "from solution import primes\nassert 7 in primes(10)\n"),
    "a_liar_inside_a_dataclass": ("from dataclasses import dataclass\n@dataclass\nclass Result:\n    value: object\n"
                                  "def area(r):\n    return Result(Liar())\n",
                                  "from solution import area, Result\nassert area(1.0) == Result(3.14159)\n"),
    "the_solutions_process_rewrites_the_harness": (
        "import sys\nharness = sys.modules['__main__']\nplain = harness.Channel.encode\n"
        "def encode(self, x, depth=0):\n"
        "    return plain(self, Liar() if type(x) is float and depth == 0 else x, depth)\n"
        "harness.Channel.encode = encode\nharness._OPS['eq'] = harness._OPS['contains'] = lambda *a: True\n"
        "def area(r):\n    return 0.0\n",
        "from solution import area\nassert abs(area(1.0) - 3.14159) < 1e-4\n"),
}
RIGHT = {
    "area": "import math\ndef area(r):\n    return math.pi * r * r\n",
    "primes": "def primes(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]\n",
    "greet": "def greet(name):\n    return f'Hello, {name}!'\n",
    "Solution": "import math\nclass Solution:\n    def area(self, r):\n        return math.pi * r * r\n",
    "Result": "import math\nfrom dataclasses import dataclass\n@dataclass\nclass Result:\n    value: object\n"
              "def area(r):\n    return Result(round(math.pi * r * r, 5))\n",
    "Circle": "import math\nclass Circle:\n    def __init__(self, r):\n        self.r = r\n"
              "    @property\n    def area(self):\n        return math.pi * self.r ** 2\n",
    "norm": "def norm(s):\n    return ' '.join(s.lower().split())\n",
    "is_prime": "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n",
}
RIGHT_FOR = {"abs_sub": "area", "assert_almost_equal": "area", "contains": "primes",
             "assert_in": "primes", "startswith": "greet", "method_of_an_object": "Solution",
             "property_of_an_object": "Circle", "class_posing_as_a_function": "area",
             "stop_iteration_all_map": "is_prime", "stop_iteration_loop_over_map": "is_prime",
             "results_compared_with_each_other": "norm", "a_liar_inside_what_is_iterated": "primes",
             "the_solutions_process_rewrites_the_harness": "area", "a_liar_inside_a_dataclass": "Result"}


def _verdict(code: str, tests: str) -> dict:
    _, verdict = verify.code_tests(f"```python\n{code}```", tests, limits=FAST, isolation=ISOLATION)
    return verdict


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_wrong_solution_cannot_answer_the_tests_questions_itself(attack):
    body, tests = ATTACKS[attack]
    wrong = _verdict(LIAR + body, tests)
    assert wrong["verdict"] == "failed", wrong
    right = _verdict(RIGHT[RIGHT_FOR[attack]], tests)
    assert right["verdict"] == "ok", right["stderr_tail"]


def test_what_was_refused_says_why():
    body, tests = ATTACKS["abs_sub"]
    wrong = _verdict(LIAR + body, tests)
    assert "plain data" in wrong["stderr_tail"] and "Liar" in wrong["stderr_tail"], wrong["stderr_tail"]
    body, tests = ATTACKS["stop_iteration_all_map"]
    wrong = _verdict(body, tests)
    assert "StopIteration" in wrong["stderr_tail"], wrong["stderr_tail"]


LEGIT = """
import enum
from collections import namedtuple
from dataclasses import dataclass
from fractions import Fraction
class Suit(enum.Enum):
    HEARTS = 1
    SPADES = 2
@dataclass
class Span:
    start: int
    end: int
    def width(self):
        return self.end - self.start
def span_of(text, word):
    at = text.index(word)
    return Span(at, at + len(word))
def suit(n):
    return Suit.HEARTS if n % 2 else Suit.SPADES
Card = namedtuple("Card", "rank suit")
class Counter:
    def __init__(self, start=0):
        self.n = start
    def step(self, by=1):
        self.n += by
        return self.n
    def __len__(self):
        return self.n
    def __contains__(self, x):
        return 0 <= x < self.n
    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i
    def __eq__(self, other):
        return isinstance(other, Counter) and self.n == other.n
    def __hash__(self):
        return self.n
class Node:
    def __init__(self, val, next=None):
        self.val, self.next = val, next
def squares(n):
    return (i * i for i in range(n))
def pairs(xs):
    return zip(xs, xs[1:])
def first(xs, pred):
    return next((x for x in xs if pred(x)), None)
def card():
    return Card("A", "spades")
def fraction(a, b):
    return a / b
def words(s):
    return s.split()
def from_list(xs):
    return [xs[::-1]]
def total(node):
    return 0 if node is None else node.val + total(node.next)
def letters():
    return {"a": 1, "b": 2}.keys()
def evens(n):
    return range(0, n, 2)
def half():
    return Fraction(1, 2)
def pairs_of(d):
    return ((k, v) for k, v in sorted(d.items()))
"""
LEGIT_TESTS = """
import math
import unittest
from solution import *
import solution

c = Counter()
assert c.step() == 1 and c.step(2) == 3 and len(c) == 3 and c.n == 3
assert 2 in c and 5 not in c and c[2] == 4 and list(c) == [0, 1, 4]
assert Counter(3) == Counter(3) and Counter(3) != Counter(4) and len({Counter(1), Counter(1)}) == 1
assert isinstance(Counter(), solution.Counter)
c.n = 10
assert len(c) == 10
assert list(squares(4)) == [0, 1, 4, 9] and 9 in squares(4) and 5 not in squares(4)
assert sum(squares(4)) == 14 and sorted(squares(3), reverse=True) == [4, 1, 0]
assert list(pairs([1, 2, 3])) == [(1, 2), (2, 3)]
assert first([1, 4, 6], lambda x: x % 2 == 0) == 4
assert card().rank == "A" and card() == ("A", "spades")
assert abs(fraction(1, 3) - 0.3333) < 1e-3 and math.isclose(fraction(1, 4), 0.25)
assert words("a b").__len__() == 2 and words("hello world")[0].startswith("hel")
assert total(Node(1, Node(2, Node(3)))) == 6 and Node(5).next is None and Node(1, Node(2)).val == 1
assert letters() == {"a", "b"} and evens(7) == range(0, 7, 2) and evens(7)[-1] == 6
assert half() == Fraction(1, 2) and half() * 2 == 1 and dict(pairs_of({"b": 2, "a": 1})) == {"a": 1, "b": 2}
assert span_of("a bc", "bc") == Span(2, 4) and span_of("a bc", "bc").end == 4 and Span(2, 4).width() == 2
assert span_of("ab", "a") != span_of("ab", "b") and suit(1) == Suit.HEARTS and suit(2).name == "SPADES"
assert all(map(lambda n: fraction(n, 1) == n, [1, 2, 3]))

class T(unittest.TestCase):
    def test_almost(self):
        self.assertAlmostEqual(fraction(1, 3), 0.33333, places=4)
        self.assertIn("b", words("a b"))
        with self.assertRaises(ZeroDivisionError):
            fraction(1, 0)
        it = iter(squares(1))
        self.assertEqual(next(it), 0)
        with self.assertRaises(StopIteration):
            next(it)

unittest.main(exit=False)
print("legit tests passed")
"""


def test_legitimate_solutions_still_pass_everything_ordinary_tests_do():
    """Objects the tests build from the solution's classes keep their methods, operators and
    attributes; functions' results, generators, zips, ranges, dict views, fractions, namedtuples,
    dataclass instances (fields compared here), enum members, exceptions, StopIteration from an
    iterator's own next() and callbacks work."""
    verdict = _verdict(LEGIT, LEGIT_TESTS)
    assert verdict["verdict"] == "ok", verdict["stderr_tail"]
    assert "legit tests passed" in verdict["stdout_tail"]


def test_assay_synth_solve_rejects_the_lying_solution_end_to_end(tmp_path):
    """The path a user takes: a scripted model answers every candidate with the lying solution; the
    item must not be kept (today it was, with pass rate 1.0)."""
    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.schema import make_docs
    from assay.synth.llm.scripted import ScriptedServer

    body, tests = ATTACKS["abs_sub"]
    items = write_table(make_docs([{"text": "Write area(r), the area of a circle of radius r.", "source": "t",
                                    "meta": {"question": "Write area(r), the area of a circle of radius r.",
                                             "tests": tests}}]), tmp_path / "items")
    answer = f"Here it is.\n```python\n{LIAR}{body}```\n"
    with ScriptedServer(lambda request: answer) as server:
        done = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "synth", "solve", str(items),
                               str(tmp_path / "out"), "--url", server.url, "--model", "scripted", "--candidates", "2",
                               "--max-pass-rate", "1", "--isolation", ISOLATION, "--cache-dir", str(tmp_path / "cache")],
                              env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    kept = Dataset(tmp_path / "out").read().num_rows
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert kept == 0, manifest["counts"]
    assert manifest["counts"]["rejected"]["never_solved"]["rows"] == 1
