"""Mixture files: bad ones give one-line errors naming the file and the key; the examples parse."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from assay.mixer.recipe import MixtureError, load_mixture
from assay.pipeline.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "mixtures"

GOOD = {
    "name": "m", "tokenizer": {"path": "tok.json"},
    "sources": {"web": {"path": "runs/x"}, "code": {"path": "runs/x", "content_types": ["code"]}},
    "stages": [{"id": "a", "tokens": 1000, "seq_len": 128, "mix": {"web": 1}},
               {"id": "b", "tokens": 1000, "seq_len": 128, "mix": {"code": 1}, "replay": {"share": 0.2, "from": ["a"]}}],
}


def _with(path: list, value) -> dict:
    import copy

    data = copy.deepcopy(GOOD)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


BAD = [
    (_with(["stages", 0, "seq_len"], 4), "stages[0] (id 'a').seq_len: Input should be greater than or equal to 16 (got 4)"),
    (_with(["stages", 1, "replay", "from"], ["b"]), "'b' is not an earlier stage; replay draws only from stages before this one (earlier: a)"),
    (_with(["stages", 0, "mix"], {"wbe": 1}), "stages[0] (id 'a').mix: unknown source 'wbe'; did you mean 'web'?"),
    (_with(["stages", 0, "mixx"], {}), "stages[0] (id 'a').mixx: unknown key; did you mean 'mix'?"),
    (_with(["stages", 0, "tiers"], {"web": ["Top"]}), "tiers.web: unknown tier 'Top'"),
    (_with(["stages", 0, "mask_roles"], ["narrator"]), "mask_roles: unknown role 'narrator'"),
    (_with(["stages", 0, "fim_rate"], 1.5), "fim_rate: Input should be less than or equal to 1"),
    (_with(["stages", 1, "replay", "share"], 1.0), "replay.share: Input should be less than 1"),
    (_with(["stages", 0, "tokens"], 10), "tokens (10) is less than one row of seq_len 128"),
    (_with(["tokenizer"], {}), "tokenizer: give exactly one of `path`"),
    (_with(["sources", "code", "content_types"], ["blog"]), "unknown content type 'blog'"),
    (_with(["sources", "web", "path"], KeyError), "sources.web.path: required key is missing"),
    (_with(["stages", 1, "id"], "a"), "stage id 'a' is used twice"),
    (_with(["meta"], {"fields": ["colour"]}), "unknown meta field 'colour'"),
    # a stage id is a folder name in the build: `.` and `..` were refused only after tokenizing
    (_with(["stages", 1, "id"], "."), "stages[1] (id '.').id: '.' names no folder of its own"),
    (_with(["stages", 1, "id"], ".."), "stages[1] (id '..').id: '..' names no folder of its own"),
    (_with(["stages", 1, "id"], "tokenizer"), "'tokenizer' is a name the build uses for its own files"),
]


@pytest.mark.parametrize("data, expected", BAD, ids=[e[:30] for _, e in BAD])
def test_bad_mixture_gives_one_line_error(tmp_path, data, expected):
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(MixtureError) as err:
        load_mixture(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert expected in message


def test_invalid_yaml_and_cli_exit_code(tmp_path, capsys):
    path = tmp_path / "mix.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(SystemExit) as exit_:
        main(["mix", "plan", str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "invalid YAML" in err


@pytest.mark.parametrize("name", ["step35-mini.yaml", "mimo-mini.yaml"])
def test_examples_parse(name):
    mixture = load_mixture(EXAMPLES / name)
    assert len(mixture.stages) >= 3
    # every source is an output of the demo recipe (curated documents, PR templates, synthesis)
    from assay.pipeline.recipe import load_recipe

    demo = load_recipe(EXAMPLES.parent / "recipes" / "demo.yaml")
    outputs = set(demo.order())
    for name in mixture.sources:
        path = mixture.source_path(name)
        assert path.parent.name == "demo" and path.name in outputs, (name, path)
    assert "curated" in {mixture.source_path(s).name for s in mixture.sources}


def test_build_refusals_name_the_out_argument_not_a_workdir_flag(tmp_path, capsys):
    """Issue #46: `mix build` (which takes OUT) and `mix plan` (which takes --out) said `--workdir`."""
    from mixer_corpus import documents, write_corpus

    write_corpus(tmp_path / "docs", documents(n_web=5, n_code=5, n_pr=0, n_chat=0), shards=1)
    data = _with(["sources", "web", "path"], str(tmp_path / "docs"))
    data["sources"]["code"]["path"] = str(tmp_path / "docs")
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(data))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    for argv, named in ((["mix", "build", str(path), str(taken)], f"OUT {taken}"),
                        (["mix", "plan", str(path), "--out", str(taken)], f"--out {taken}")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "--workdir" not in err and err.startswith(f"error: {named}: exists"), err
    assert (taken / "notes.txt").read_text() == "mine"
