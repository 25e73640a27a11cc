"""Generated items are correct by construction, checked here by independent computation (decimal
arithmetic parsed from the question text, brute-force puzzle solvers written for the test, set joins
over the triple file), deterministic for a seed, and carry segments that concatenate to the text."""
from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal, getcontext

import pytest

from assay.pipeline.dataset import Dataset
from assay.pipeline.runner import run_stage
from assay.synth.generators.arith import Arith
from assay.synth.generators.kg import BUNDLED, KGWalks, build_fictional_kg
from assay.synth.generators.logic import Logic

getcontext().prec = 80


def _rows(stage, out):
    run_stage(stage, [], out, options={"workers": 1})
    rows = Dataset(out).read().to_pylist()
    for row in rows:
        assert "".join(s["text"] for s in row["segments"]) == row["text"]
        assert [s["role"] for s in row["segments"]] == ["user", "assistant"]
        meta = json.loads(row["meta"])
        assert row["text"].rstrip().endswith(f"Answer: {meta['answer']}")
    return rows


def test_arithmetic_answers_are_exact(tmp_path):
    rows = _rows(Arith({"count": 200, "seed": 3, "shards": 2}), tmp_path / "arith")
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "×": lambda a, b: a * b, "÷": lambda a, b: a / b}
    seen = set()
    for row in rows:
        meta = json.loads(row["meta"])
        a, op, b = re.search(r"(\d+) ([-+×÷]) (\d+)", meta["question"]).groups()
        seen.add(op)
        expected = ops[op](Decimal(a), Decimal(b))
        assert expected == expected.to_integral_value() and Decimal(meta["answer"]) == expected
        assert 11 <= len(a) <= 13 and (op == "÷" or 11 <= len(b) <= 13)
        for x, y, z in re.findall(r"(\d+) × (\d+) × 10\^\d+ = (\d+)", row["text"]):  # partial products
            power = Decimal(10) ** int(re.search(rf"{x} × {y} × 10\^(\d+)", row["text"]).group(1))
            assert Decimal(x) * Decimal(y) * power == Decimal(z)
    assert seen == set(ops)


def _ordering_ok(clue, order):
    pos = {n: i for i, n in enumerate(order)}
    kind, *args = clue
    if kind in ("pos", "notpos"):
        return (pos[args[0]] == args[1] - 1) == (kind == "pos")
    if kind == "end":
        return pos[args[0]] in (0, len(order) - 1)
    d = pos[args[1]] - pos[args[0]]
    return {"before": d > 0, "right_before": d == 1, "adjacent": abs(d) == 1, "apart": abs(d) > 1}[kind]


def _says(stmt, world):
    kind, *args = stmt
    return {"is": lambda: world[args[0]] == (args[1:] == ["knight"]),
            "same": lambda: world[args[0]] == world[args[1]], "different": lambda: world[args[0]] != world[args[1]],
            "count": lambda: sum(world.values()) == args[0], "either": lambda: world[args[0]] or world[args[1]]}[kind]()


def _sudoku_ok(grid):
    rows = [grid[r * 4:r * 4 + 4] for r in range(4)]
    cols = [grid[c::4] for c in range(4)]
    boxes = [[grid[(br + i) * 4 + bc + j] for i in (0, 1) for j in (0, 1)] for br in (0, 2) for bc in (0, 2)]
    return all(sorted(unit) == [1, 2, 3, 4] for unit in rows + cols + boxes)


def _seen_from(grid, i):
    """Givens in cell i's row, column and box (only prunes the exhaustive search below)."""
    r, c = divmod(i, 4)
    return {grid[j] for j in range(16) if j // 4 == r or j % 4 == c or (j // 8 == r // 2 and j % 4 // 2 == c // 2)}


def test_logic_puzzles_have_exactly_the_stated_solution(tmp_path):
    rows = _rows(Logic({"count": 45, "seed": 1}), tmp_path / "logic")
    families = set()
    for row in rows:
        meta = json.loads(row["meta"])
        families.add((meta["family"], meta["difficulty"]))
        if meta["family"] == "ordering":
            solutions = [p for p in itertools.permutations(meta["people"]) if all(_ordering_ok(c, p) for c in meta["clues"])]
            assert [", ".join(s) for s in solutions] == [meta["answer"]]
        elif meta["family"] == "knights":
            people = meta["people"]
            worlds = [dict(zip(people, bits)) for bits in itertools.product((True, False), repeat=len(people))]
            solutions = [w for w in worlds if all(_says(s, w) == w[who] for who, s in meta["statements"])]
            assert len(solutions) == 1
            assert meta["answer"] == ", ".join(f"{p}: {'knight' if solutions[0][p] else 'knave'}" for p in people)
        else:
            blanks = [i for i, v in enumerate(meta["grid"]) if v == 0]
            fills = []
            options = [[v for v in range(1, 5) if v not in _seen_from(meta["grid"], i)] for i in blanks]
            for values in itertools.product(*options):
                grid = list(meta["grid"])
                for i, v in zip(blanks, values):
                    grid[i] = v
                if _sudoku_ok(grid):
                    fills.append(grid)
            assert fills == [meta["solution_grid"]]
            assert meta["answer"].replace(" / ", "") == "".join(map(str, fills[0]))
    assert {f for f, _ in families} == {"ordering", "knights", "sudoku"} and len(families) >= 7


def test_kg_answers_follow_from_the_triples(tmp_path):
    rows = _rows(KGWalks({"count": 60, "seed": 2, "max_hops": 4, "max_answers": 2}), tmp_path / "kg")
    triples = {tuple(line.split("\t")) for line in BUNDLED.read_text().splitlines() if line and not line.startswith("#")}
    hops = set()
    for row in rows:
        meta = json.loads(row["meta"])
        reached = {meta["start"]}
        for rel in meta["relations"]:
            reached = {t for (h, r, t) in triples if h in reached and r == rel}
        assert sorted(reached) == meta["answers"] and meta["answer"] == ", ".join(sorted(reached))
        assert all(tuple(t) in triples for t in meta["path"] + meta["facts"])
        assert meta["start"] in meta["question"] and meta["start"] not in reached
        # every fact the answer needs is listed in the question
        needed, frontier = set(), {meta["start"]}
        for rel in meta["relations"]:
            step = {(h, r, t) for (h, r, t) in triples if h in frontier and r == rel}
            needed |= step
            frontier = {t for _, _, t in step}
        assert needed <= {tuple(f) for f in meta["facts"]}
        hops.add(len(meta["relations"]))
    assert hops == {2, 3, 4}


def test_bundled_graph_is_the_builders_output():
    lines = [line for line in BUNDLED.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["\t".join(t) for t in build_fictional_kg(0)]


@pytest.mark.parametrize("cls", [Arith, Logic, KGWalks])
def test_same_seed_same_items_whatever_the_sharding(cls, tmp_path):
    one = _texts(cls({"count": 12, "seed": 5, "shards": 1}), tmp_path / "one")
    three = _texts(cls({"count": 12, "seed": 5, "shards": 3}), tmp_path / "three")
    other = _texts(cls({"count": 12, "seed": 6, "shards": 1}), tmp_path / "other")
    assert one == three and one != other and len(set(one)) == 12


def _texts(stage, out):
    run_stage(stage, [], out, options={"workers": 1})
    return [(r["id"], r["text"]) for r in Dataset(out).read().to_pylist()]
