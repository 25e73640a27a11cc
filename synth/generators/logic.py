"""Logic puzzles with a unique solution and controllable difficulty (easy / medium / hard).

Families:
* `ordering`: people in a line and clues (positions, before/after, adjacency, ends); harder puzzles
  have more people and no direct "X is third" clues;
* `knights`: knights always tell the truth, knaves always lie; each islander makes one statement;
* `sudoku`: a 4x4 grid (2x2 boxes) with blanks; harder means more blanks.

Each puzzle is made by drawing a hidden solution and adding true clues until a brute-force solver
finds exactly one consistent solution (then dropping clues that are not needed), so the stated answer
is the only one. `meta.clues` holds the clues in structured form for independent checking.
"""
from __future__ import annotations

import itertools
import random
from typing import Literal

from pydantic import Field

from assay.pipeline.stage import register

from .base import GeneratorParams, GeneratorStage, Item

Family = Literal["ordering", "knights", "sudoku"]
Difficulty = Literal["easy", "medium", "hard"]
NAMES = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy")
ORDINAL = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh")


class LogicParams(GeneratorParams):
    families: list[Family] = Field(default_factory=lambda: ["ordering", "knights", "sudoku"],
                                   description="Puzzle families to draw from")
    difficulties: list[Difficulty] = Field(default_factory=lambda: ["easy", "medium", "hard"],
                                           description="Difficulties to draw from")


# ---- ordering ----------------------------------------------------------------------------------

def ordering_holds(clue: list, order: tuple[str, ...]) -> bool:
    pos = {name: i for i, name in enumerate(order)}
    kind, args = clue[0], clue[1:]
    if kind == "pos":
        return pos[args[0]] == args[1] - 1
    if kind == "notpos":
        return pos[args[0]] != args[1] - 1
    if kind == "before":
        return pos[args[0]] < pos[args[1]]
    if kind == "right_before":
        return pos[args[0]] + 1 == pos[args[1]]
    if kind == "adjacent":
        return abs(pos[args[0]] - pos[args[1]]) == 1
    if kind == "apart":
        return abs(pos[args[0]] - pos[args[1]]) > 1
    if kind == "end":
        return pos[args[0]] in (0, len(order) - 1)
    raise ValueError(kind)


def ordering_text(clue: list) -> str:
    kind, a = clue[0], clue[1]
    b = clue[2] if len(clue) > 2 else None
    return {
        "pos": lambda: f"{a} is {ORDINAL[b - 1] if isinstance(b, int) else b} in line.",
        "notpos": lambda: f"{a} is not {ORDINAL[b - 1] if isinstance(b, int) else b} in line.",
        "before": lambda: f"{a} stands somewhere ahead of {b}.",
        "right_before": lambda: f"{a} stands directly in front of {b}.",
        "adjacent": lambda: f"{a} and {b} stand next to each other.",
        "apart": lambda: f"{a} and {b} do not stand next to each other.",
        "end": lambda: f"{a} stands at one end of the line.",
    }[kind]()


def _minimise(rng: random.Random, clues: list, count) -> list:
    """Drop clues (in random order) whose removal keeps exactly one solution."""
    kept = list(clues)
    for clue in rng.sample(clues, len(clues)):
        trial = [c for c in kept if c is not clue]
        if count(trial) == 1:
            kept = trial
    return kept


def make_ordering(rng: random.Random, difficulty: str) -> Item:
    n = {"easy": rng.choice((3, 4)), "medium": 5, "hard": 6}[difficulty]
    people = rng.sample(NAMES, n)
    truth = tuple(rng.sample(people, n))
    kinds = ["before", "right_before", "adjacent", "apart", "end", "notpos"] + ([] if difficulty == "hard" else ["pos"])
    pool = []
    for kind in kinds:
        if kind in ("pos", "notpos"):
            pool += [[kind, x, k] for x in people for k in range(1, n + 1)]
        elif kind == "end":
            pool += [[kind, x] for x in people]
        else:
            pool += [[kind, x, y] for x in people for y in people if x != y and (kind in ("before", "right_before") or x < y)]
    pool = [c for c in pool if ordering_holds(c, truth)]
    rng.shuffle(pool)
    perms = list(itertools.permutations(people))

    def count(clues):
        return sum(all(ordering_holds(c, p) for c in clues) for p in perms)

    clues: list = []
    for clue in pool:
        clues.append(clue)
        if count(clues) == 1:
            break
    clues = _minimise(rng, clues, count)
    rng.shuffle(clues)
    question = (f"{n} people ({', '.join(sorted(people))}) stand in a line, one behind the other. Position 1 is "
                f"the front of the line.\n" + "\n".join(f"{i}. {ordering_text(c)}" for i, c in enumerate(clues, 1))
                + "\nWhat is the order of the line from front to back?")
    answer = ", ".join(truth)
    lines = [f"The only order that satisfies every clue is {answer}. Checking each clue:"]
    lines += [f"{i}. {ordering_text(c)} Holds." for i, c in enumerate(clues, 1)]
    lines.append(f"Answer: {answer}")
    return Item(question, "\n".join(lines), answer, "sequence",
                {"family": "ordering", "difficulty": difficulty, "people": sorted(people), "clues": clues})


# ---- knights and knaves --------------------------------------------------------------------------

def statement_true(stmt: list, world: dict[str, bool]) -> bool:
    kind = stmt[0]
    if kind == "is":
        return world[stmt[1]] == (stmt[2] == "knight")
    if kind == "same":
        return world[stmt[1]] == world[stmt[2]]
    if kind == "different":
        return world[stmt[1]] != world[stmt[2]]
    if kind == "count":
        return sum(world.values()) == stmt[1]
    if kind == "either":
        return world[stmt[1]] or world[stmt[2]]
    raise ValueError(kind)


def statement_text(stmt: list) -> str:
    kind = stmt[0]
    return {
        "is": lambda: f"{stmt[1]} is a {stmt[2]}.",
        "same": lambda: f"{stmt[1]} and {stmt[2]} are of the same kind.",
        "different": lambda: f"{stmt[1]} and {stmt[2]} are of different kinds.",
        "count": lambda: f"Exactly {stmt[1]} of us {'is a knight' if stmt[1] == 1 else 'are knights'}.",
        "either": lambda: f"At least one of {stmt[1]} and {stmt[2]} is a knight.",
    }[kind]()


def make_knights(rng: random.Random, difficulty: str) -> Item:
    n = {"easy": 2, "medium": 3, "hard": rng.choice((4, 5))}[difficulty]
    for _ in range(10_000):
        people = rng.sample(NAMES, n)
        truth = {p: rng.random() < 0.5 for p in people}
        worlds = [dict(zip(people, bits)) for bits in itertools.product((True, False), repeat=n)]
        said: list = []
        for speaker in people:
            others = [p for p in people if p != speaker]
            pool = [["is", p, r] for p in people for r in ("knight", "knave")]
            pool += [[k, a, b] for k in ("same", "different", "either") for a in people for b in people if a < b]
            pool += [["count", k] for k in range(n + 1)]
            pool = [s for s in pool if s[0] != "is" or s[1] in others]  # "I am a knight" says nothing
            fits = [s for s in pool if statement_true(s, truth) == truth[speaker]]
            said.append([speaker, rng.choice(fits)])
        consistent = [w for w in worlds if all(statement_true(s, w) == w[who] for who, s in said)]
        if len(consistent) == 1:
            break
    else:
        raise RuntimeError("no knights-and-knaves puzzle with a unique solution in 10000 draws")
    question = (f"On an island, knights always tell the truth and knaves always lie. You meet {n} islanders: "
                f"{', '.join(people)}.\n" + "\n".join(f"{who} says: \"{statement_text(s)}\"" for who, s in said)
                + "\nWho is a knight and who is a knave?")
    answer = ", ".join(f"{p}: {'knight' if truth[p] else 'knave'}" for p in people)
    lines = ["Only one assignment makes every knight's statement true and every knave's statement false:"]
    for who, s in said:
        role = "knight" if truth[who] else "knave"
        lines.append(f"{who} is a {role}, and \"{statement_text(s)}\" is {'true' if truth[who] else 'false'}.")
    lines.append(f"Answer: {answer}")
    return Item(question, "\n".join(lines), answer, "assignment",
                {"family": "knights", "difficulty": difficulty, "people": people, "statements": said})


# ---- 4x4 sudoku ----------------------------------------------------------------------------------

def sudoku_solutions(grid: list[int], limit: int = 2) -> list[list[int]]:
    """All completions of a 4x4 grid (0 = blank), up to `limit`, by backtracking."""
    found: list[list[int]] = []

    def ok(g, i, v):
        r, c = divmod(i, 4)
        br, bc = r // 2 * 2, c // 2 * 2
        return (v not in g[r * 4:r * 4 + 4] and v not in g[c::4]
                and v not in (g[br * 4 + bc], g[br * 4 + bc + 1], g[(br + 1) * 4 + bc], g[(br + 1) * 4 + bc + 1]))

    def walk(g):
        if len(found) >= limit:
            return
        try:
            i = g.index(0)
        except ValueError:
            found.append(list(g))
            return
        for v in range(1, 5):
            if ok(g, i, v):
                g[i] = v
                walk(g)
                g[i] = 0

    walk(list(grid))
    return found


def make_sudoku(rng: random.Random, difficulty: str) -> Item:
    base = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
    digits = rng.sample(range(1, 5), 4)
    rows = [b * 2 + r for b in rng.sample((0, 1), 2) for r in rng.sample((0, 1), 2)]  # bands and rows in them
    cols = [b * 2 + c for b in rng.sample((0, 1), 2) for c in rng.sample((0, 1), 2)]
    full = [digits[base[r * 4 + c] - 1] for r in rows for c in cols]
    blanks = {"easy": 6, "medium": 8, "hard": 10}[difficulty]
    grid = list(full)
    for i in rng.sample(range(16), 16):
        if sum(v == 0 for v in grid) >= blanks:
            break
        trial = list(grid)
        trial[i] = 0
        if len(sudoku_solutions(trial)) == 1:
            grid = trial
    show = lambda g: "\n".join(" ".join(str(v) if v else "." for v in g[r * 4:r * 4 + 4]) for r in range(4))  # noqa: E731
    question = ("Fill in the 4x4 grid so that every row, every column and every 2x2 box contains the digits 1-4 "
                "exactly once. Dots are blanks.\n" + show(grid) + "\nGive the completed rows.")
    answer = " / ".join("".join(map(str, full[r * 4:r * 4 + 4])) for r in range(4))
    solution = f"The completed grid (each row, column and box holds 1-4 once):\n{show(full)}\nAnswer: {answer}"
    return Item(question, solution, answer, "grid",
                {"family": "sudoku", "difficulty": difficulty, "grid": grid, "solution_grid": full})


MAKERS = {"ordering": make_ordering, "knights": make_knights, "sudoku": make_sudoku}


@register("synth.logic")
class Logic(GeneratorStage):
    """Logic puzzles (ordering, knights and knaves, 4x4 sudoku) with unique, stated solutions.

    Example: assay synth logic runs/x/logic --count 300 --difficulties hard"""

    Params = LogicParams
    task_name = "logic"

    def make(self, rng: random.Random, index: int) -> Item:
        family = rng.choice(self.params.families)
        return MAKERS[family](rng, rng.choice(self.params.difficulties))
