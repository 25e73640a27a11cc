"""Fuzz the recipe loader: whatever the file holds, `load_recipe` returns a recipe or raises one
RecipeError line that names the file; nothing else escapes and nothing takes long.

Inputs, from a fixed seed: byte-level mutants of real recipes, structural mutants (a value anywhere
replaced by one of the wrong type, keys dropped, unknown keys added, nodes nested deeper), and
hand-made files (not UTF-8, not YAML, not a mapping, alias bombs and loops, huge, FIFO)."""
from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from assay.pipeline.recipe import MAX_RECIPE_BYTES, Recipe, RecipeError, load_recipe
from conftest import DEMO_RECIPE
from fuzzing import Hang, Mutator, deadline, write_report

SEED = 20240910
CASE_LIMIT_S = 5

ALL_READERS = """
name: all-readers
engine_options: {workers: 1}
inputs:
  j: {uses: read.jsonl, params: {paths: [a/*.jsonl.gz], content_type: pr, max_doc_bytes: 1000, text_field: body}}
  t: {uses: read.text, params: {paths: [code], root: code, encoding_errors: replace}}
  p: {uses: read.parquet, params: {paths: [p.parquet], batch_rows: 10}}
  h: {uses: extract.html, params: {paths: [h], mode: fast, timeout_s: 3}}
  w: {uses: extract.warc, params: {paths: [w.warc.gz], html_only: false}}
  d: {uses: extract.pdf, params: {paths: [d], backend: pdfium, ocr: "off"}}
stages:
  - {id: len, uses: filter.length, inputs: [j, t, p, h, w, d], params: {min_chars: 3}}
  - {id: exact, uses: dedup.exact, inputs: [len], params: {remove: true}, engine: local}
"""

WEIRD = [None, True, 0, -1, 2**70, 1.5, float("nan"), float("inf"), "", "x" * 5000, "../../outside", "\x00",
         "日本語", [], {}, [1, [2, [3]]], {"a": {"b": {}}}, "read.jsonl", "filter.length", "spark", ":", "os:system",
         "assay.pipeline.recipe:Recipe", "no.such.module:Stage", {"paths": 5}, [{"id": "x"}], "\U0001F600" * 100]


def _nodes(tree, path=()):
    yield path, tree
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _nodes(value, path + (key,))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _nodes(value, path + (i,))


def structural_mutant(tree, rng: random.Random) -> tuple[str, object]:
    """A copy of `tree` with one node changed: replaced by a weird value, removed, given an unknown
    key, or wrapped 60 levels deep."""
    tree = copy.deepcopy(tree)
    path, node = rng.choice(list(_nodes(tree)))
    if not path:
        return "top", rng.choice(WEIRD)
    parent = tree
    for part in path[:-1]:
        parent = parent[part]
    op = rng.choice(["replace", "replace", "replace", "remove", "unknown_key", "deep"])
    if op == "replace":
        parent[path[-1]] = copy.deepcopy(rng.choice(WEIRD))
    elif op == "remove":
        del parent[path[-1]]
    elif op == "unknown_key" and isinstance(node, dict):
        node[rng.choice(["pathz", "usez", "param", "id", "inputs", 7])] = rng.choice(WEIRD[:6])
    else:
        deep = node
        for _ in range(60):
            deep = [deep]
        parent[path[-1]] = deep
        op = "deep"
    return op, tree


def recipe_cases(root: Path) -> list[tuple[str, Path]]:
    mutate, rng = Mutator(SEED), random.Random(SEED)
    cases: list[tuple[str, Path]] = []

    def add(origin: str, data: bytes) -> None:
        path = root / f"{len(cases):04d}.yaml"
        path.write_bytes(data)
        cases.append((origin, path))

    seeds = [DEMO_RECIPE.read_bytes(), ALL_READERS.encode()]
    for data in seeds:
        add("seed", data)
    for i in range(160):
        op, bad = mutate(seeds[i % 2])
        add(f"mutant:{op}", bad)
    trees = [yaml.safe_load(s) for s in seeds]
    for i in range(200):
        op, tree = structural_mutant(trees[i % 2], rng)
        add(f"structure:{op}", yaml.safe_dump(tree, allow_unicode=True, sort_keys=False).encode("utf-8", "surrogatepass"))
    levels = b"".join(b'%s: &%s [%s]\n' % (b"l%d" % i, b"l%d" % i, b",".join([b"*l%d" % (i - 1)] * 9)) for i in range(1, 9))
    edges = {
        "latin1": "name: caf\xe9\n".encode("latin-1"), "utf16": "name: x\n".encode("utf-16"),
        "bom": b"\xef\xbb\xbfname: with-bom\n", "list": b"- a\n- b\n", "scalar": b"42\n", "empty": b"", "comment-only": b"# nothing\n",
        "not-yaml": b"name: [unclosed\n", "tabs": b"name:\tx\n\tinputs: {}\n", "nul": b"name: a\x00b\n",
        "deep-flow": b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n",
        "deep-block": b"name: x\nstages:\n" + b"".join(b"  " * i + b"- \n" for i in range(1, 120)),
        "alias-bomb": b'l0: &l0 ["x","x","x","x","x","x","x","x","x"]\n' + levels + b"name: bomb\n",
        "alias-loop": b"name: &a [*a]\n", "merge-keys": b"defaults: &d {min_chars: 3}\nname: x\n",
        "bad-date": b"name: 2024-13-45\n", "python-tag": b"name: !!python/object/apply:os.system [echo]\n",
        "int-keys": b"name: x\n1: 2\n", "surrogate": b'name: "\\ud800"\n',
        "huge": b"name: x\n#" + b"x" * (MAX_RECIPE_BYTES + 10), "bad-content-type": ALL_READERS.replace("pr,", "blog,").encode(),
        "cycle": ALL_READERS.replace("inputs: [len]", "inputs: [exact]").encode(),
    }
    for name, data in edges.items():
        add(f"edge:{name}", data)
    fifo = root / "fifo.yaml"
    os.mkfifo(fifo)
    cases += [("edge:fifo", fifo), ("edge:directory", root), ("edge:missing", root / "missing.yaml")]
    return cases


KINDS = [("invalid YAML", "invalid_yaml"), ("not UTF-8", "not_utf8"), ("nests", "too_deep"), ("expands to", "alias_bomb"),
         ("larger than", "too_large"), ("cannot read", "unreadable"), ("expected a mapping", "not_a_mapping"),
         ("unknown key", "unknown_key"), ("unknown param", "unknown_param"), ("required", "missing_key"), (".uses:", "bad_uses"),
         (".params.", "bad_param_value"), (".inputs:", "bad_inputs"), ("cycle", "cycle"), ("used twice", "duplicate_id"),
         ("lone surrogate", "bad_unicode")]


def _kind(message: str) -> str:
    """A RecipeError message as a short category, for the report."""
    return next((kind for needle, kind in KINDS if needle in message), "bad_value")


def test_fuzz_recipe_loader(tmp_path):
    started = time.perf_counter()
    cases = recipe_cases(tmp_path)
    outcomes: Counter = Counter()
    failures = []
    for origin, path in cases:
        try:
            with deadline(CASE_LIMIT_S):
                recipe = load_recipe(path)
                assert isinstance(recipe, Recipe)
                for stage_id in recipe.order():  # a recipe that loads also builds its stages
                    recipe.stage_spec(stage_id).build()
            outcomes["loaded"] += 1
        except RecipeError as exc:
            message = str(exc)
            if "\n" in message or not message.startswith(f"{path}: "):
                failures.append(f"{origin} {path}: not one line naming the file: {message[:200]!r}")
            outcomes[_kind(message)] += 1
        except Hang:
            failures.append(f"{origin} {path}: ran past {CASE_LIMIT_S}s")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            failures.append(f"{origin} {path}: {type(exc).__name__}: {exc}"[:300])
    seconds = round(time.perf_counter() - started, 1)
    top = ", ".join(f"{k} {v}" for k, v in outcomes.most_common(12))
    print(f"\nfuzz: recipe loader  {len(cases)} inputs  {seconds}s  outcomes: {top}")
    write_report("recipes", {"seed": SEED, "inputs": len(cases), "seconds": seconds, "outcomes": dict(outcomes)})
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])
    assert outcomes["loaded"] >= 2  # the seeds themselves load
    assert len(cases) >= 380


def test_validate_catches_an_unknown_content_type(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(ALL_READERS.replace("content_type: pr", "content_type: blog"))
    result = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "validate", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: inputs.j.params.content_type:") and "'blog'" in line


@pytest.mark.parametrize("kind", ["content_type", "encoding_errors", "batch_rows"])
def test_reader_params_are_checked(kind):
    from assay.pipeline.readers import ReadJsonl, ReadParquet, ReadTextFiles
    from pydantic import ValidationError

    bad = {"content_type": (ReadJsonl, {"content_type": "blog"}), "encoding_errors": (ReadTextFiles, {"encoding_errors": "ignore"}),
           "batch_rows": (ReadParquet, {"batch_rows": 0})}[kind]
    with pytest.raises(ValidationError):
        bad[0]({"paths": ["x"], **bad[1]})
