"""The value scorers with the shipped models: the reference classifier (DCLM-style) and the DSIR
importance scorer rank held-out documentation above news pages of the raw pool, and rebuild to the same
bytes."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from assay.pipeline.schema import make_docs
from assay.pipeline.stage import resolve_stage
from assay.quality.build import DATA, reference_rows, train_value_models
from assay.quality.corpus import read_jsonl_gz


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


@pytest.fixture(scope="module")
def held_out():
    docs = reference_rows(DATA, "test")[::3]  # documentation pages the models never saw
    news = [r["text"] for r in read_jsonl_gz(DATA / "contrast-calib.jsonl.gz") if r["kind"] in ("clean", "full")]
    return docs, news


@pytest.mark.parametrize("stage, params, column", [("quality.fasttext", {"model": "reference", "name": "reference"}, "quality_reference"),
                                                   ("quality.dsir", {}, "quality_dsir")])
def test_shipped_value_scorers_rank_documentation_above_the_raw_pool(held_out, stage, params, column):
    docs, news = held_out
    scorer = resolve_stage(stage)(params)
    out = scorer.process(make_docs([{"text": t, "source": "x"} for t in docs + news]))
    scores = out.column(column).to_numpy()
    assert ((scores >= 0) & (scores <= 1)).all()
    assert _auc(scores[:len(docs)], scores[len(docs):]) > 0.95
    scorer.close()


def test_value_models_rebuild_to_the_same_bytes(tmp_path):
    positives = reference_rows(DATA)[:60]
    raw = [r["text"] for r in read_jsonl_gz(DATA / "contrast-train.jsonl.gz") if r["kind"] == "clean"][:60]
    for run in ("a", "b"):
        train_value_models(positives, raw, tmp_path / run)
    for name in ("reference.ftz", "dsir.npz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_dsir_scores_a_document_without_words_as_neutral():
    from assay.quality.dsir import Importance
    from assay.quality.scorers import SHIPPED

    model = Importance.load(SHIPPED["dsir"])
    llr = model.llr(pa.array(["", "   ", None, "numpy array of float values"], pa.string()))
    assert llr[:3].tolist() == [0.0, 0.0, 0.0] and llr[3] != 0.0
