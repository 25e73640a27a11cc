"""A document's quality scores are its own (issue #27, item 8): the same whatever batch it is scored in,
the batch's order and Arrow layout, the number of threads, and whatever the per-thread scratch buffers
held before; a long document is judged by its first MAX_CHARS characters in every case."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from assay.filters import kernels
from assay.pipeline.schema import make_docs
from assay.quality import ftmodel
from assay.quality.default import DefaultTier
from assay.quality.lm import MAX_CHARS, NgramLM
from assay.quality.scorers import SHIPPED

from conftest import load_real_texts

ODD = ["", "x", "\n\n", "Don't “quote” me, (please)", "naïve café — ÉCOLE İstanbul Ⱥ", "中文文本，没有空格。第二句！",
       "ภาษาไทย", "a " * 3000, "\u00a0\t\v\f", "emoji 😀 and e\u0301"]


def documents() -> list[str]:
    """Real documents of every kind, the odd ones above, and long ones past the cut: real texts joined
    with non-ASCII near and across character MAX_CHARS (bytes and characters differ there)."""
    real = [text for _, text in load_real_texts()][::8]
    long = "\n\n".join(real[:60])
    docs = real + ODD
    for head in (MAX_CHARS - 3, MAX_CHARS - 700):
        docs.append(long[:head] + "é—∗ı" * 300 + long)  # the cut falls inside the non-ASCII run, or past it
    docs.append(("ÉCOLE " * 3000) + long)  # a character whose lower case is longer in UTF-8 before the cut
    return docs


def score_columns(table: pa.Table) -> list[tuple]:
    names = sorted(c for c in table.column_names if c.startswith("quality_") or c == "tier")
    return list(zip(*(table.column(c).to_pylist() for c in names)))


@pytest.fixture(scope="module")
def tier():
    stage = DefaultTier({})
    stage.ensure_setup()
    yield stage
    stage.close()


def test_default_scores_do_not_depend_on_the_batch(tier, monkeypatch):
    docs = documents()
    table = make_docs([{"text": t, "source": "s", "url": f"u{i}"} for i, t in enumerate(docs)])
    n = table.num_rows
    ref = score_columns(tier.process(table))
    assert all(any(v is not None for v in row) for row in ref)

    alone = [score_columns(tier.process(table.slice(i, 1)))[0] for i in range(n)]
    assert alone == ref
    order = np.random.default_rng(0).permutation(n)
    shuffled = score_columns(tier.process(table.take(order)))
    assert [shuffled[j] for j in np.argsort(order)] == ref
    offset = pa.concat_tables([table.slice(0, 7), table]).combine_chunks().slice(7)  # buffers start before the rows
    assert score_columns(tier.process(offset)) == ref
    large = table.set_column(table.schema.get_field_index("text"), "text", table.column("text").cast(pa.large_string()))
    assert score_columns(tier.process(large)) == ref

    # slices of the batch on 1 and on 5 threads, whose scratch buffers still hold other documents' tokens
    monkeypatch.setattr(ftmodel, "PARALLEL_ROWS", 7)
    for threads in (1, 5):
        monkeypatch.setattr(ftmodel, "_threads", lambda threads=threads: threads)
        _drop_pools()
        assert score_columns(tier.process(table)) == ref
    _drop_pools()


def _drop_pools() -> None:
    """Shut ftmodel's thread pool down, so the next batch starts one of the current _threads()."""
    for pool in ftmodel._pools.values():
        pool.shutdown()
    ftmodel._pools.clear()


def test_a_long_document_is_scored_on_its_first_max_chars_characters_in_any_batch():
    lm = NgramLM.load(SHIPPED["lm"])
    classifier = ftmodel.Classifier(SHIPPED["web"])
    docs = documents()
    longest = [t for t in docs if len(t) > 2 * MAX_CHARS]
    assert len(longest) == 3
    heads = pa.array([t[:MAX_CHARS] for t in longest])
    for batch in (pa.array(longest), pa.array(docs)):
        where = [i for i, t in enumerate(batch.to_pylist()) if len(t) > 2 * MAX_CHARS]
        assert lm.score(batch)[where].tolist() == lm.score(heads).tolist()
        assert classifier.score(batch)[where].tolist() == classifier.score(heads).tolist()


def test_token_kernels_read_only_what_they_wrote():
    """Scratch buffers are kept between batches and threads: a kernel given one full of another batch's
    bytes, or one too small for the batch, gives what a fresh one gives."""
    text = pa.array(documents())
    fresh, _ = kernels.fasttext_token_lists(text, MAX_CHARS, np.empty(0, np.uint8))
    assert fresh == kernels.fasttext_tokens(text, MAX_CHARS).to_pylist()
    for scratch in (np.full(1 << 16, ord("x"), np.uint8), np.full(8 << 20, ord(" "), np.uint8)):
        assert kernels.fasttext_token_lists(text, MAX_CHARS, scratch)[0] == fresh
    compiled = ftmodel.Classifier(SHIPPED["edu"]).compiled
    want, _ = compiled.probabilities(text, MAX_CHARS, np.empty(0, np.uint8))
    dirty = np.frombuffer(("hello world " * 800_000).encode(), np.uint8).copy()
    got, _ = compiled.probabilities(text, MAX_CHARS, dirty)
    assert np.array_equal(got, want)


def test_numba_cache_changes_with_the_compiled_modules():
    """numba checks only a kernel's own file: ftpredict compiles kernels' tokenizer into itself, so an
    edit to filters/kernels.py must start a fresh compile cache (the folder is keyed by the modules)."""
    import os
    from pathlib import Path

    import assay.filters.kernels as kernels
    from assay.pipeline import _numba_cache_dir

    assert os.environ["NUMBA_CACHE_DIR"] == _numba_cache_dir()
    before = _numba_cache_dir()
    path = Path(kernels.__file__)
    st = path.stat()
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert _numba_cache_dir() != before
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _numba_cache_dir() == before
