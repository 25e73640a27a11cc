"""Local, Spark and Ray tokenize the same documents into byte-identical token shards (same seed)."""
from __future__ import annotations

import pytest

from assay.mixer.build import build
from assay.mixer.recipe import parse_mixture
from assay.mixer.tokenizer import train_bpe

from conftest import LOCAL_OPTIONS, RAY_OPTIONS, SPARK_OPTIONS
from mixer_corpus import documents, mixture_data, shard_files, write_corpus


@pytest.fixture(scope="module")
def local_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixer-engines")
    docs = documents(n_web=60, n_code=30, n_pr=20, n_chat=20, seed=5)
    write_corpus(root / "docs", docs, shards=2)
    train_bpe([d["text"] for d in docs], 500).save(str(root / "tokenizer.json"))
    data = mixture_data(root / "docs", root / "tokenizer.json",
                        broad={"tokens": 8000}, anneal={"tokens": 4000}, chat={"tokens": 3000})
    mixture = parse_mixture(data, root / "mix.yaml")
    build(mixture, root / "local", engine="local", options=LOCAL_OPTIONS, log=lambda *_: None)
    return mixture, root


@pytest.mark.parametrize("engine, options", [
    pytest.param("spark", SPARK_OPTIONS, marks=pytest.mark.spark, id="spark"),
    pytest.param("ray", RAY_OPTIONS, marks=pytest.mark.ray, id="ray"),
])
def test_engines_write_byte_identical_shards(local_build, engine, options, request):
    request.getfixturevalue(f"{engine}_engine")  # the session's shared SparkSession / Ray instance
    mixture, root = local_build
    out = root / engine
    results = build(mixture, out, engine=engine, options=options, log=lambda *_: None)
    tokenized = next(p for p in out.iterdir() if p.name.startswith("tokenized-"))
    assert (tokenized / "_manifest.json").read_text().count(f'"engine": "{engine}') == 1
    assert len(results) == 3
    ours, local = shard_files(out), shard_files(root / "local")
    assert sorted(ours) == sorted(local) and len(ours) > 9
    assert ours == local
