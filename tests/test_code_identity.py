"""A stage's code identity covers every Assay module it runs through (issue #45): a one-line change in
a helper module re-runs that stage and its descendants, and nothing else.

The recipe runs from a copy of the package (the wheel's layout, `assay/<folder>`, first on
PYTHONPATH), so the helpers are edited there and the repository's files never are. Each run is a new
process, as a user's next `assay run` after upgrading Assay is."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent('''
    import json, sys
    import assay.pipeline
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe

    assert assay.pipeline.__file__.startswith(sys.argv[3]), assay.pipeline.__file__  # the copy runs
    results = run_recipe(load_recipe(sys.argv[1]), workdir=sys.argv[2], log=lambda *a: None)
    print(json.dumps(sorted(r.stage_id for r in results if not r.skipped)))
''')

PAGE = ("<html><head><title>Page {i}</title></head><body><nav>Home | About</nav><article><h1>Page {i}</h1>"
        "<p>Paragraph {i} of a page about rivers, lakes and the weather in spring, long enough to keep.</p>"
        "<p>A second paragraph {i}: the water rises in April and falls again by the end of June.</p>"
        "</article><footer>Copyright</footer></body></html>")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> dict[str, Path]:
    from assay.mixer.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("codeid")
    package = root.resolve() / "site" / "assay"
    folders = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for name, folder in folders.items():
        if name.count(".") == 1:  # the top-level folders (assay.semantic.decontam lives inside semantic/)
            shutil.copytree(REPO / folder, package / name.split(".")[1],
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "pages").mkdir()
    for i in range(4):
        (root / "pages" / f"p{i}.html").write_text(PAGE.format(i=i))
    notes = [f"Note {i}: the committee met on day {i % 3} and agreed on item {i}, then adjourned." for i in range(12)]
    (root / "notes.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in notes))
    train_bpe(notes * 4, 300).save(str(root / "tokenizer.json"))
    (root / "recipe.yaml").write_text(textwrap.dedent(f'''
        name: code-identity
        engine: local
        engine_options: {{workers: 0}}
        inputs:
          pages: {{uses: extract.html, params: {{paths: ["{root}/pages/*.html"], source: s}}}}
          notes: {{uses: read.jsonl, params: {{paths: ["{root}/notes.jsonl"], source: n}}}}
        stages:
          - {{id: signals, uses: filter.signals, inputs: [pages]}}
          - {{id: near, uses: dedup.minhash, inputs: [notes]}}
          - {{id: tok, uses: mix.tokenize, inputs: [notes], params: {{tokenizer: "{root}/tokenizer.json"}}}}
    '''))
    (root / "run.py").write_text(RUN)
    return {"root": root, "package": package}


def _run(project: dict[str, Path]) -> set[str]:
    root = project["root"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # the copy compiles once
    # numba's kernels run as Python: a few rows need no machine code, and compiling the copy's kernels
    # anew (its cache is keyed by file) took most of the test's time. Identity does not depend on it.
    env.update(PYTHONPATH=str(root / "site"), ASSAY_CACHE=str(root / "cache"), NUMBA_DISABLE_JIT="1")
    done = subprocess.run([sys.executable, str(root / "run.py"), str(root / "recipe.yaml"), str(root / "work"),
                           str(project["package"])], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_one_line_change_in_a_helper_reruns_its_stage_and_descendants_only(project):
    assert _run(project) == {"pages", "notes", "signals", "near", "tok"}
    assert _run(project) == set()  # nothing changed: nothing runs
    # None of the helpers is in its stage's class hierarchy; extract.html reaches native_select only
    # through imports inside functions (stages.py -> html.py -> native.py -> native_select.py).
    helpers = {"extractors/native_select.py": {"pages", "signals"},  # extract.html's main-content selector
               "dedup/kernels.py": {"near"},                          # dedup.minhash's numba kernels
               "filters/kernels.py": {"signals"},                     # filter.signals' repetition counts
               "mixer/tokenizer.py": {"tok"}}                         # mix.tokenize's vocabulary
    for helper, reran in helpers.items():
        with open(project["package"] / helper, "a") as handle:
            handle.write("\n_EDITED = True\n")
        assert _run(project) == reran, helper
