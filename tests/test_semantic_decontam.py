"""Decontamination against the shipped registry and user registries: the normaliser, known positives
(MATH-500 inside MATH, GSM8K with changed numbers inside web pages, HumanEval prompts inside code
files, reflowed and marked-up items), clean documents left alone, modes, the decision stage, CLI."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.pipeline.cli import main as cli_main
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.errors import UserError
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.semantic.decontam import perturb
from assay.semantic.decontam.build_registry import _write_hashes
from assay.semantic.decontam.normalize import mask_digits, token_hashes
from assay.semantic.decontam.stage import Decontam, DecontamApply, mask_spans

from semantic_data import benchmark, code_files, web_pages


def words(text: str) -> list[str]:
    raw = text.encode()
    _, starts, ends = token_hashes(text)
    return [raw[s:e].decode() for s, e in zip(starts, ends)]


def test_normaliser_erases_case_punctuation_markup_digits_but_not_words():
    a = token_hashes("Janet’s DUCKS lay 16 eggs per day — she sells 3,000 at $2.50!")[0]
    b = token_hashes("<p>janet's ducks&nbsp;lay <b>9</b> eggs\nper   day, she Sells 12 at 7</p>")[0]
    c = token_hashes("Janet's geese lay 16 eggs per day, she sells 3,000 at 2.50")[0]
    assert np.array_equal(mask_digits(a), mask_digits(b)) and not np.array_equal(a, b)  # equal once digits are masked
    assert not np.array_equal(mask_digits(a), mask_digits(c))
    # byte spans point into the original text; CJK characters are one token each; accents fold
    assert words("Café naïve x2 日本語") == ["Café", "naïve", "x", "2", "日", "本", "語"]
    assert np.array_equal(token_hashes("café NAÏVE")[0], token_hashes("cafe naive")[0])
    assert len(token_hashes("a\u200bb")[0]) == 1  # a zero-width space does not split a word


@pytest.fixture(scope="module")
def decontam():
    stage = Decontam({})
    stage.setup()
    return stage


def _found(stage, texts, wanted):
    """Per text: was the wanted (benchmark, item) among its hits?"""
    hits = stage.find(pa.array(texts))
    return [bool(h) and any((x["benchmark"], x["item"]) == w for x in h) for h, w in zip(hits, wanted)], hits


def test_every_math500_problem_is_found_in_the_math_test_set():
    stage = Decontam({"only": ["math"]})
    stage.setup()
    items = benchmark("math500")
    found, hits = _found(stage, [t for _, t in items], [("math", i) for i, _ in items])
    assert all(found), [i for (i, _), ok in zip(items, found) if not ok][:5]
    assert {x["kind"] for h in hits for x in h if x["item"] in dict(items)} >= {"exact"}


def test_planted_items_are_found_and_clean_documents_are_not(decontam):
    rng = np.random.default_rng(7)
    pages, code = web_pages(), code_files()
    gsm8k = benchmark("gsm8k")[1::40]  # 33 held-out questions
    cases = []
    for item_id, text in gsm8k:
        around = [pages[int(rng.integers(len(pages)))][:700] for _ in range(2)]
        cases.append(("numbers", ("gsm8k", item_id), perturb.embed_in(perturb.change_numbers(text, rng), around[:1], around[1:])))
        cases.append(("reflow", ("gsm8k", item_id), perturb.embed_in(perturb.reflow(text, rng), around[:1], around[1:])))
        cases.append(("markup", ("gsm8k", item_id), perturb.embed_in(perturb.markup(text, rng), around[:1], around[1:])))
    for item_id, text in benchmark("humaneval")[::8]:
        others = [code[int(rng.integers(len(code)))][:1200] for _ in range(2)]
        cases.append(("code file", ("humaneval", item_id), perturb.in_code_file(text, others)))
    found, _ = _found(decontam, [c[2] for c in cases], [c[1] for c in cases])
    for kind in ("numbers", "reflow", "markup", "code file"):
        got = [ok for c, ok in zip(cases, found) if c[0] == kind]
        assert np.mean(got) >= 0.95, (kind, np.mean(got))
    # the sample corpus's pages and code files are clean
    clean = list(pages) + list(code)
    hits = decontam.find(pa.array(clean))
    assert sum(1 for h in hits if h) == 0, [h for h in hits if h][:3]


def test_paraphrase_defeats_ngrams_but_not_the_semantic_path(tmp_path):
    rng = np.random.default_rng(3)
    items = benchmark("gsm8k")[5:45:4]
    texts = [perturb.paraphrase(t, rng, every=4) for _, t in items]
    ngram = Decontam({"only": ["gsm8k"]})
    ngram.setup()
    assert np.mean(_found(ngram, texts, [("gsm8k", i) for i, _ in items])[0]) < 0.5
    # semantic matching against a small registry (embedding all 13K shipped items takes a minute)
    path = tmp_path / "few.jsonl"
    path.write_text("".join(json.dumps({"id": i, "q": t}) + "\n" for i, t in benchmark("gsm8k")[:45]))
    (tmp_path / "reg.yaml").write_text(f"benchmarks:\n  - {{name: gsm8k, paths: [{path}], fields: [q], id_field: id}}\n")
    semantic = Decontam({"benchmarks": str(tmp_path / "reg.yaml"), "semantic": True, "cache_dir": None},
                        resources={"cpus": 2})
    semantic.setup()
    found, hits = _found(semantic, texts, [("gsm8k", i) for i, _ in items])
    assert np.mean(found) >= 0.9
    assert {x["kind"] for h in hits if h for x in h} >= {"semantic"}
    # pages of the sample corpus match nothing (their first ~400 words: every passage is embedded)
    assert not any(semantic.find(pa.array([p[:2500] for p in web_pages()[:5]])))


ONE = {"workers": 1}  # in-process: no pool to start for a few documents


def _docs(tmp_path, texts):
    table = make_docs([{"text": t, "source": "test", "content_type": "web"} for t in texts])
    return write_table(table, tmp_path / "in", shards=2)


def test_modes_and_the_decision_stage(tmp_path):
    gsm = benchmark("gsm8k")[3][1]
    he = benchmark("humaneval")[10][1]
    page = web_pages()[0][:600]
    texts = [f"{page}\n\n{gsm}\n\nThanks for reading.", page, f"# utils\n{he}\n    pass\n"]
    src = _docs(tmp_path, texts)
    flagged = run_stage(Decontam({"mode": "flag"}), [src], tmp_path / "flag", engine="local", options=ONE)
    rows = {r["text"]: r for r in Dataset(tmp_path / "flag").read().to_pylist()}
    assert rows[texts[1]]["decontam_hits"] is None
    hit = rows[texts[0]]["decontam_hits"][0]
    assert (hit["benchmark"], hit["kind"], hit["overlap"]) == ("gsm8k", "exact", 1.0)
    assert texts[0][hit["start"]:hit["end"]].startswith(gsm[:20])
    counters = flagged.manifest["statistics"]["counters"]
    assert counters["flagged"] == 2 and counters["benchmark/gsm8k"] == 1 and counters["benchmark/humaneval"] == 1

    run_stage(Decontam({"mode": "reject"}), [src], tmp_path / "reject", engine="local", options=ONE)
    rejects = Dataset(tmp_path / "reject").read_rejects().to_pylist()
    assert {r["reject_reason"] for r in rejects} == {"contaminated"} and len(rejects) == 2
    assert any("gsm8k:" in r["reject_detail"] for r in rejects)

    run_stage(Decontam({"mode": "mask", "mask_with": "[removed]"}), [src], tmp_path / "mask", engine="local", options=ONE)
    masked = sorted(Dataset(tmp_path / "mask").read().column("text").to_pylist(), key=len)
    assert all(gsm[:40] not in t for t in masked) and any("[removed]" in t and t.endswith("Thanks for reading.")
                                                          for t in masked)

    # decide later, from the hits: only HumanEval counts
    run_stage(DecontamApply({"benchmarks": ["humaneval"]}), [tmp_path / "flag"], tmp_path / "apply", engine="local", options=ONE)
    out = Dataset(tmp_path / "apply")
    assert out.count() == 2 and out.read_rejects().column("reject_detail").to_pylist()[0].startswith("humaneval:")
    assert mask_spans("abcdef", [(1, 3), (2, 4)], "_") == "a_ef"


def test_user_registry_formats_dates_hashes_and_errors(tmp_path):
    q1 = "A train leaves the station at noon travelling west while a second train waits on the platform"
    q2 = "Which enzyme unwinds the double helix of DNA during replication in eukaryotic cells"
    q3 = "Find the number of ordered pairs of positive integers whose product is exactly the given value"
    (tmp_path / "a.csv").write_bytes(f"question;answer\n{q1} caf\xe9;4\n".encode("latin-1"))
    pq.write_table(pa.table({"id": ["p1"], "stem": [q2], "year": ["2019-05-01"]}), tmp_path / "b.parquet")
    _hashes_to(tmp_path / "c.tokens.npz", [("c1", q3)])
    (tmp_path / "reg.yaml").write_text(
        "benchmarks:\n"
        "  - {name: trains, paths: [a.csv], fields: [question], date: 2024-03-01}\n"
        "  - {name: bio, paths: [b.parquet], fields: [stem], id_field: id, date_field: year}\n"
        "  - {name: hidden, hashes: c.tokens.npz}\n")
    docs = [f"Intro text here. {q1} café. Outro.", f"Notes: {q2}.", f"Problem: {q3}?"]
    stage = Decontam({"benchmarks": str(tmp_path / "reg.yaml")})
    stage.setup()
    assert [[(x["benchmark"], x["item"]) for x in h] for h in stage.find(pa.array(docs))] == [
        [("trains", "a.csv:0")], [("bio", "p1")], [("hidden", "c1")]]
    recent = Decontam({"benchmarks": str(tmp_path / "reg.yaml"), "since": "2020-01-01"})
    recent.setup()  # bio (2019) is older than the cutoff; the undated hash set always counts
    assert [bool(h) for h in recent.find(pa.array(docs))] == [True, False, True]
    (tmp_path / "bad.yaml").write_text("benchmarks:\n  - {name: x, paths: [a.csv], feilds: [q]}\n")
    with pytest.raises(UserError, match=r"bad.yaml: benchmarks.0.feilds: unknown key"):
        Decontam({"benchmarks": str(tmp_path / "bad.yaml")}).setup()
    with pytest.raises(UserError, match="unknown benchmark"):
        Decontam({"only": ["nope"]}).setup()


def _hashes_to(path, rows):
    import assay.semantic.decontam.build_registry as build

    old, build.OUT = build.OUT, path.parent
    try:
        _write_hashes(path.name.removesuffix(".tokens.npz"), [{"id": i, "text": t} for i, t in rows])
    finally:
        build.OUT = old


def test_cli_shortcut_with_mode_and_ngram(tmp_path, capsys):
    gsm = benchmark("gsm8k")[0][1]
    src = _docs(tmp_path, [f"Some page.\n\n{gsm}", "Nothing to see here, just a plain sentence about the weather."])
    cli_main(["decontam", str(src), str(tmp_path / "out"), "--mode", "reject", "--ngram", "16", "--workers", "1"])
    assert "2 in, 1 out, 1 rejected" in capsys.readouterr().out
    assert Dataset(tmp_path / "out").manifest["params"]["ngram"] == 16
