"""Local, Spark and Ray build the same mixture into byte-identical token shards (same seed): the
tokenization and the packing both run on the engine, the packing in buckets of documents."""
from __future__ import annotations

import json

import pytest

from assay.mixer.build import build
from assay.mixer.recipe import parse_mixture
from assay.mixer.tokenizer import train_bpe
from assay.pipeline.dataset import Dataset

from conftest import LOCAL_OPTIONS, RAY_OPTIONS, SPARK_OPTIONS
from mixer_corpus import documents, mixture_data, shard_files, write_corpus


@pytest.fixture(scope="module")
def local_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixer-engines")
    docs = documents(n_web=600, n_code=300, n_pr=200, n_chat=200, seed=5)
    write_corpus(root / "docs", docs, shards=3)
    train_bpe([d["text"] for d in docs], 500).save(str(root / "tokenizer.json"))
    data = mixture_data(root / "docs", root / "tokenizer.json",
                        broad={"tokens": 60000}, anneal={"tokens": 70000}, chat={"tokens": 6000})
    data["pack_docs"] = 300  # 1300 documents: up to 5 buckets, as many as each stage's rows allow
    mixture = parse_mixture(data, root / "mix.yaml")
    build(mixture, root / "local", engine="local", options=LOCAL_OPTIONS, log=lambda *_: None)
    return mixture, root, docs


def _manifest(out, stage):
    return json.loads((out / stage / "_manifest.json").read_text())


def test_buckets_keep_the_stage_guarantees(local_build):
    """Several buckets, each drawn and packed on its own: every document placed or rejected with a
    reason, shares within 1.5 points (the slots' tokens split by the buckets' eligible tokens), little
    padding, nothing cropped, epochs within caps."""
    mixture, root, docs = local_build
    out = root / "local"
    buckets = {s.id: _manifest(out, s.id)["stats"]["pack"]["buckets"] for s in mixture.stages}
    assert buckets == {"broad": 3, "anneal": 2, "chat": 1}
    for stage in mixture.stages:
        manifest = _manifest(out, stage.id)
        assert manifest["plan"] == "local"
        counts = manifest["counts"]
        assert counts["rows_in"] == len(docs) == counts["rows_parent"] + counts["rows_rejected"]
        assert Dataset(out / stage.id).read_rejects().num_rows == counts["rows_rejected"]
        mix = manifest["mix"]
        assert mix["tokens"] >= stage.tokens
        for slot in mix["slots"]:
            assert abs(slot["realized_share"] - slot["share"]) <= 0.015, (stage.id, slot)
            assert slot["realized_epochs"] <= slot["max_epochs"] + 1e-9
        fit = mix["packing"]["best_fit"]
        # whole documents of 50-130 tokens in rows of 256-512: a row's room under the shortest stays
        # padded (real text, with its short documents, pads under 2%: test_mixer_whole.py)
        assert fit["kept_fraction"] >= 0.99 and fit["padded_fraction"] <= 0.05, (stage.id, fit)
    reasons = set(_manifest(out, "broad")["counts"]["rejected"])
    assert {"tier_excluded", "code_hits", "not_in_mix", "not_selected"} <= reasons


@pytest.mark.parametrize("engine, options", [
    pytest.param("spark", SPARK_OPTIONS, marks=pytest.mark.spark, id="spark"),
    pytest.param("ray", RAY_OPTIONS, marks=pytest.mark.ray, id="ray"),
])
def test_engines_write_byte_identical_shards(local_build, engine, options, request):
    request.getfixturevalue(f"{engine}_engine")  # the session's shared SparkSession / Ray instance
    mixture, root, _ = local_build
    out = root / engine
    results = build(mixture, out, engine=engine, options=options, log=lambda *_: None)
    tokenized = next(p for p in out.iterdir() if p.name.startswith("tokenized-"))
    assert (tokenized / "_manifest.json").read_text().count(f'"engine": "{engine}') == 1
    assert len(results) == 3
    for result in results:  # packed by the engine's own plan, not on the driver
        assert result.manifest["engine"].startswith(engine) and result.manifest["plan"] == engine
        assert "fallback_warning" not in result.manifest
    ours, local = shard_files(out), shard_files(root / "local")
    assert sorted(ours) == sorted(local) and len(ours) > 9
    assert ours == local
