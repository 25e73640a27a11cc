"""The compiled fastText prediction (quality/ftpredict.py) gives fastText's own probabilities."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from assay.quality import ftmodel
from assay.quality.corpus import read_jsonl_gz
from assay.quality.ftpredict import CompiledModel, UnsupportedModel
from assay.quality.scorers import SHIPPED

ODD = ["", "x", "\n\n", "__label__hq appears in the text", "Don't “quote” me, (please)", "naïve café — ÉCOLE",
       "中文文本，没有空格。第二句！", "ภาษาไทย", "a " * 3000, "one\ntwo\n\nthree", "\u00a0\t\v\f", "z" * 5000]


def texts() -> list[str]:
    rows = read_jsonl_gz(SHIPPED["web"].parents[1] / "data" / "contrast-calib.jsonl.gz")
    return [r["text"] for r in rows[:300]] + ODD


def fasttext_predict(classifier: ftmodel.Classifier, text: list[str], max_chars) -> np.ndarray:
    """fastText's own predict on the prepared texts, in the compiled model's label order."""
    names, probs = classifier.model.predict(ftmodel.prepare(pa.array(text), max_chars), k=-1, threshold=-1.0)
    labels = classifier.compiled.labels
    return np.array([[dict(zip(n, p)).get(label, 0.0) for label in labels] for n, p in zip(names, probs)])


@pytest.mark.parametrize("model", ["web", "edu"])
@pytest.mark.parametrize("max_chars", [20_000, 50, None])
def test_compiled_prediction_equals_fasttext_on_the_shipped_models(model, max_chars):
    classifier = ftmodel.Classifier(SHIPPED[model])
    assert classifier.compiled is not None
    text = texts()
    got, _ = classifier.compiled.probabilities(pa.array(text), max_chars, np.empty(16, np.uint8))  # scratch grows
    expected = fasttext_predict(classifier, text, max_chars)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=2e-7)
    # through the classifier: slices on threads, columns in the model's label order
    many = text * 20
    np.testing.assert_allclose(classifier.probabilities(pa.array(many), max_chars), np.tile(classifier._predicted(pa.array(text), max_chars), (20, 1)), atol=2e-7)


@pytest.mark.parametrize("options", [{"quantize": False}, {"word_ngrams": 3, "cutoff": 2_000}, {"word_ngrams": 1}])
def test_compiled_prediction_equals_fasttext_on_trained_models(tmp_path, options):
    """Dense (.bin) and pruned quantized models, word n-grams of 1 to 3, three labels."""
    rows = read_jsonl_gz(SHIPPED["web"].parents[1] / "data" / "contrast-calib.jsonl.gz")
    labels = [r["kind"] if r["kind"] != "shuffled" else "spam" for r in rows]
    path = ftmodel.train([r["text"] for r in rows], labels, tmp_path / ("m.bin" if not options.get("quantize", True) else "m.ftz"),
                         epoch=3, **options)
    classifier = ftmodel.Classifier(path)
    assert classifier.compiled is not None and len(classifier.compiled.labels) == 3
    text = texts()
    got, _ = classifier.compiled.probabilities(pa.array(text), 20_000, np.empty(1 << 16, np.uint8))
    np.testing.assert_allclose(got, fasttext_predict(classifier, text, 20_000), atol=2e-7)


def test_models_it_does_not_cover_are_refused_and_scored_by_fasttext(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(UnsupportedModel):
        CompiledModel(bad)
    classifier = ftmodel.Classifier(SHIPPED["web"])
    classifier.compiled = None  # as for a model with character n-grams: fastText's own predict
    text = texts()
    np.testing.assert_allclose(classifier.probabilities(pa.array(text))[:, classifier.labels.index("hq")],
                               fasttext_predict(ftmodel.Classifier(SHIPPED["web"]), text, 20_000)[:, 1], atol=2e-7)
