"""Dedup: hashing, shingles, MinHash, components, the stages on the local plan, quality on real text."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.dedup import hashing
from assay.dedup.components import UnionFind, choose_keepers, sorted_unique, star_edges
from assay.dedup.evaluate import distinct_texts, plant, score
from assay.dedup.exact import ExactDedup
from assay.dedup.minhash import MinHasher, s_curve
from assay.dedup.near import MinHashDedup
from assay.dedup.remove import RemoveDuplicates
from assay.dedup.shingles import jaccard, shingle_sets, shingle_texts
from assay.dedup.tokens import tokenize
from assay.dedup.url import UrlDedup
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs


@pytest.fixture(scope="module")
def real() -> list[str]:
    from conftest import load_real_texts

    return [t for _, t in load_real_texts()]


def run(stage, table: pa.Table, tmp_path: Path, shards: int = 2, name: str = "out", engine: str = "local"):
    src = tmp_path / "in"
    if not (src / "_manifest.json").exists():
        write_table(table, src, shards)
    result = run_stage(stage, [src], tmp_path / name, engine=engine, force=True)
    return result, Dataset(tmp_path / name)


# ---- hashing and shingles -------------------------------------------------------------------------

def test_hash_strings_is_batch_independent(monkeypatch):
    words = [f"w{i}-{'x' * (i % 7)}" for i in range(5000)] + ["", "日本語", "a\x00b", "a"]
    whole = hashing.hash_strings(pa.array(words))
    sliced = hashing.hash_strings(pa.array(words).slice(1000, 50))
    assert np.array_equal(whole[1000:1050], sliced)
    monkeypatch.setattr(hashing, "_CHUNK_BYTES", 64)  # many chunks: spans hashed relative to each chunk
    assert np.array_equal(hashing.hash_strings(pa.array(words)), whole)
    assert len(set(whole.tolist())) == len(words)  # distinct strings, distinct 64-bit hashes
    assert whole[-2] != whole[-1]  # an embedded zero byte still counts


def test_normalisation_ignores_case_punctuation_and_spacing():
    sh = shingle_texts(pa.array(["The quick, brown fox jumps over the lazy dog!", "the quick brown   FOX jumps over the lazy dog"]), 5)
    a, b = np.split(sh.hashes, sh.offsets[1:-1])
    assert np.array_equal(a, b) and len(a) == 5


def test_short_empty_and_cjk_documents():
    texts = pa.array(["", None, "word", "two words", "one two three four five six", "!!! ...", "我们今天去北京看长城", "日本語のテキスト"])
    sh = shingle_texts(texts, 5)
    counts = sh.counts().tolist()
    # empty/None/punctuation-only: no shingles; shorter than 5 tokens: exactly one; 6 words: 2 windows
    assert counts[:6] == [0, 0, 1, 1, 2, 0]
    assert counts[6] == 10 - 5 + 1  # ten Han characters -> character 5-grams
    assert counts[7] == 8 - 5 + 1
    toks = tokenize(pa.array(["我们 today"]))
    assert np.diff(toks.offsets).tolist() == [3]
    # a short document's single shingle equals the same short document's
    again = shingle_texts(pa.array(["Word", "two, words"]), 5)
    assert np.array_equal(again.hashes, sh.hashes[sh.offsets[2] : sh.offsets[4]])


def test_tokens_follow_unicode_classes():
    texts = pa.array(["\u201cCaf\u00e9\u201d\u2014na\u00efve \u6771\u4eac ok\U0001F600x \uff21\uff22", "A\u00a0b\tC", "สวัสดี"])
    tok = tokenize(texts)
    expected = ["caf\u00e9", "na\u00efve", "\u6771", "\u4eac", "ok", "x", "ab", "a", "b", "c"]
    got = tok.hashes[: tok.offsets[2]]
    assert np.array_equal(got, hashing.hash_strings(pa.array(expected)))  # fullwidth AB folds to "ab"
    assert tok.offsets[3] - tok.offsets[2] == len("สวัสดี")  # Thai: one token per code point


# ---- MinHash ------------------------------------------------------------------------------------

def test_minhash_estimates_jaccard_like_datasketch(real):
    from datasketch import MinHash

    rng = np.random.default_rng(3)
    hasher = MinHasher(num_perm=256, bands=16, rows=16)
    base = [t for t in real[:400] if len(t.split()) > 80][:60]
    pairs_a, pairs_b = [], []
    for t in base:
        words = t.split()
        cut = int(len(words) * rng.uniform(0.2, 0.9))
        pairs_a.append(t)
        pairs_b.append(" ".join(words[len(words) - cut :] + words[: len(words) - cut][: cut // 2]))
    sets_a, sets_b = shingle_sets(pa.array(pairs_a), 5), shingle_sets(pa.array(pairs_b), 5)
    exact = np.array([jaccard(a, b) for a, b in zip(sets_a, sets_b)])
    sig_a = hasher.signatures(shingle_texts(pa.array(pairs_a), 5))
    sig_b = hasher.signatures(shingle_texts(pa.array(pairs_b), 5))
    ours = (sig_a == sig_b).mean(axis=1)
    ds = []
    for a, b in zip(sets_a, sets_b):
        m1, m2 = MinHash(num_perm=256, seed=1), MinHash(num_perm=256, seed=1)
        m1.update_batch([x.tobytes() for x in a])
        m2.update_batch([x.tobytes() for x in b])
        ds.append(m1.jaccard(m2))
    assert exact.std() > 0.1  # a real spread of similarities
    err_ours, err_ds = np.abs(ours - exact), np.abs(np.array(ds) - exact)
    assert err_ours.mean() < 0.04 and abs((ours - exact).mean()) < 0.02  # unbiased, sd ~ 0.03 at 256 perms
    assert err_ours.mean() < 1.5 * err_ds.mean() + 0.01  # as good as the reference implementation


def test_densified_signatures_of_short_documents():
    """Documents with fewer shingles than bins: no bin stays empty, and the densified estimate of
    Jaccard stays unbiased (the densification copies bins consistently across documents)."""
    rng = np.random.default_rng(5)
    hasher = MinHasher()
    texts_a, texts_b = [], []
    for _ in range(300):
        words = [f"w{x}" for x in rng.integers(0, 10**6, int(rng.integers(8, 70)))]
        cut = int(rng.integers(0, len(words) // 2))
        texts_a.append(" ".join(words))
        texts_b.append(" ".join(words[cut:] + [f"v{x}" for x in rng.integers(0, 10**6, cut // 2)]))
    sig_a = hasher.signatures(shingle_texts(pa.array(texts_a), 5))
    sig_b = hasher.signatures(shingle_texts(pa.array(texts_b), 5))
    assert (sig_a != np.iinfo(np.uint32).max).all() and (sig_b != np.iinfo(np.uint32).max).all()
    exact = np.array([jaccard(a, b) for a, b in zip(shingle_sets(pa.array(texts_a), 5), shingle_sets(pa.array(texts_b), 5))])
    est = (sig_a == sig_b).mean(axis=1)
    assert exact.std() > 0.1
    assert abs((est - exact).mean()) < 0.015 and np.abs(est - exact).mean() < 0.06
    one = hasher.signatures(shingle_texts(pa.array(["one", "", "a b c d e"]), 5))
    assert len(set(one[0].tolist())) == 1 and (one[1] == np.iinfo(np.uint32).max).all()


EDGE_TEXTS = [
    "", None, "one", "Two Words", "a b c d", "ＦＵＬＬＷＩＤＴＨ ﬁne text, Ⅻ ½ x²",  # NFKC rows
    "我们今天去北京吃饭了吗 東京タワー", "ไทยภาษา ทดสอบ", "emoji 😀😀 here",  # SOLO scripts, 4-byte
    "ÀÉÎÕÜ ÇA VA ΣΟΦΙΑ ΜΟΣΚВА МОСКВА Ⱥ ǅ İSTANBUL ẞ Ω K Å",  # capitals whose lower case differs in length
    "tab\tsep\u00a0nbsp\u200bzero-width", "eightbyt ninebytes sixteenbyteslong seventeenbytelong "
    "Supercalifragilisticexpialidocious-ÜBERLÄNGE", "MiXeD CaSe ASCII With UPPER words",
]


@pytest.mark.parametrize("ngram", [1, 3, 5])
def test_compiled_kernel_equals_numpy_definition(real, ngram):
    """kernels.oph_signatures (one compiled pass from raw bytes) gives exactly the signatures of
    tokens.tokenize -> shingles.shingle -> MinHasher.signatures, on real text and on the edge cases
    of each step: case folding in both code paths, NFKC rows, scripts without spaces, token lengths
    around the 8/16-byte hash paths, empty and null rows."""
    texts = pa.array(EDGE_TEXTS + real[:400] + [t.upper() for t in real[400:450]], pa.string())
    hasher = MinHasher()
    reference = hasher.signatures(shingle_texts(texts, ngram))
    sig, counts = hasher.text_signatures(texts, ngram)
    assert np.array_equal(counts, shingle_texts(texts, ngram).counts())
    assert np.array_equal(sig, reference)
    chunked = pa.chunked_array([texts.slice(0, 9), texts.slice(9)])
    assert np.array_equal(hasher.text_signatures(chunked, ngram)[0], reference)


@pytest.mark.parametrize("ngram", [1, 5])
def test_pair_jaccard_kernel_equals_numpy_definition(real, ngram):
    """verify.pairs_jaccard (the compiled kernel) gives exactly shingles.jaccard over shingle_sets,
    for pairs in any order, repeated heads, NFKC rows, empty and null rows, and upper-cased copies."""
    from assay.dedup.verify import pairs_jaccard

    texts = pa.array(EDGE_TEXTS + real[:200] + [t.upper() for t in real[:50]], pa.string())
    n = len(texts)
    rng = np.random.default_rng(ngram)
    ia = np.concatenate([rng.integers(0, n, 400), np.arange(len(EDGE_TEXTS)), np.arange(len(EDGE_TEXTS) + 200, n)])
    ib = np.concatenate([np.sort(rng.integers(0, n, 400)), np.arange(len(EDGE_TEXTS))[::-1], np.arange(len(EDGE_TEXTS), len(EDGE_TEXTS) + 50)])
    sets = shingle_sets(texts, ngram)
    want = np.array([jaccard(sets[a], sets[b]) for a, b in zip(ia.tolist(), ib.tolist())])
    got = pairs_jaccard(texts, ia, ib, ngram)
    assert (want == 1.0).sum() > 50 and ((want > 0) & (want < 1)).sum() > 5  # upper-cased copies match
    assert np.array_equal(got, want)
    assert np.array_equal(pairs_jaccard(texts, ib, ia, ngram), want)  # symmetric, bit for bit


def test_signatures_do_not_depend_on_batching(real):
    texts = pa.array(real[:300])
    hasher = MinHasher()
    whole = hasher.band_keys(hasher.signatures(shingle_texts(texts, 5)))
    parts = [hasher.band_keys(hasher.signatures(shingle_texts(texts.slice(i, 37), 5))) for i in range(0, 300, 37)]
    assert np.array_equal(np.concatenate(parts), whole)
    assert s_curve(0.8, 14, 8) == pytest.approx(0.924, abs=1e-3)


# ---- components ---------------------------------------------------------------------------------

def test_union_find_matches_bfs_and_labels_with_smallest_node():
    rng = np.random.default_rng(0)
    n = 3000
    u, v = rng.integers(0, n, 2500), rng.integers(0, n, 2500)
    chain = np.arange(n - 1, 2000, -1)  # a long chain, added in the worst order
    u, v = np.concatenate([u, chain]), np.concatenate([v, chain - 1])
    uf = UnionFind(n)
    for lo in range(0, len(u), 700):  # edges arrive in pieces, like bands
        uf.union(u[lo : lo + 700], v[lo : lo + 700])
    labels = uf.labels()
    adj: dict[int, list[int]] = {}
    for a, b in zip(u.tolist(), v.tolist()):
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    seen = np.full(n, -1)
    for s in range(n):
        if seen[s] >= 0:
            continue
        stack, comp = [s], []
        seen[s] = s
        while stack:
            x = stack.pop()
            comp.append(x)
            for y in adj.get(x, []):
                if seen[y] < 0:
                    seen[y] = s
                    stack.append(y)
        assert set(labels[comp].tolist()) == {min(comp)}


def test_star_edges_and_keep_policies():
    keys = np.array([5, 7, 5, 5, 9, 7], np.uint64)
    a, b = star_edges(keys, np.arange(6))
    assert sorted(zip(a.tolist(), b.tolist())) == [(2, 0), (3, 0), (5, 1)]
    labels = np.array([0, 1, 0, 0, 4, 1])
    length = np.array([10, 50, 30, 30, 1, 60])
    score = np.array([0.1, np.nan, 0.9, 0.9, 0.5, 0.2])
    assert choose_keepers(labels, length, score, "first").tolist() == [0, 1, 0, 0, 4, 1]
    assert choose_keepers(labels, length, score, "longest").tolist() == [2, 5, 2, 2, 4, 5]
    assert choose_keepers(labels, length, score, "quality").tolist() == [2, 5, 2, 2, 4, 5]


def test_sorted_unique_is_np_unique():
    rng = np.random.default_rng(5)
    for values in (np.empty(0, np.int64), rng.integers(-50, 50, 1000), rng.integers(0, 2**62, 10_000)):
        assert np.array_equal(sorted_unique(values), np.unique(values))
        assert sorted_unique(values).dtype == values.dtype


def test_star_edges_past_a_million_keys_match_one_sort():
    """Past 2^16 keys star_edges sorts in parts by the top bits; the edges must be those of
    one whole sort: every repeated key's nodes joined to its smallest node, in key order."""
    rng = np.random.default_rng(3)
    n = (1 << 20) + 4321
    keys = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    copies = rng.random(n) < 0.1
    keys[copies] = keys[rng.integers(0, n, int(copies.sum()))]
    nodes = rng.permutation(n).astype(np.int64)
    a, b = star_edges(keys, nodes)
    order = np.argsort(keys, kind="stable")
    k, nd = keys[order], nodes[order]
    run = np.cumsum(np.concatenate([[True], k[1:] != k[:-1]])) - 1
    head = np.full(run[-1] + 1, n, np.int64)
    np.minimum.at(head, run, nd)
    member = nd != head[run]
    assert len(a) == int(member.sum()) > 50_000
    assert sorted(zip(a.tolist(), b.tolist())) == sorted(zip(nd[member].tolist(), head[run][member].tolist()))
    key_of = np.empty(n, np.uint64)
    key_of[nodes] = keys
    assert np.all(key_of[a][1:] >= key_of[a][:-1])  # still in key order


# ---- stages on the local plan -------------------------------------------------------------------

def test_quality_on_planted_near_duplicates(real, tmp_path):
    base = distinct_texts(real)  # the fixture is already every 5th real text
    planted = plant(base, [0.01, 0.02, 0.05, 0.2], 100, seed=1)
    docs = make_docs([{"text": t, "source": "real"} for t in planted.texts])
    _, out = run(MinHashDedup(), docs, tmp_path, shards=3)
    got = score(planted, out.read().column("dup_group").to_pylist())
    assert got["pairs_jaccard_ge_0.8"] > 100
    assert got["recall_jaccard_ge_0.8"] >= 0.95
    assert got["precision"] >= 0.99
    assert got["per_edit_rate"]["0.2"]["recall"] < 0.2  # far copies (Jaccard ~0.25) are not merged


def test_edge_cases_and_groups(tmp_path):
    text = "the cat sat on the mat and looked at the birds outside the window all afternoon long"
    rows = [
        {"text": text, "source": "a"},
        {"text": "", "source": "a"},
        {"text": "", "source": "b"},
        {"text": "word", "source": "a"},
        {"text": "Word!", "source": "b"},
        {"text": "tiny doc", "source": "a"},
        {"text": text.replace("afternoon long", "afternoon longer"), "source": "b"},  # J = 12/14
        {"text": "我们今天去北京看长城然后吃烤鸭晚上回家休息", "source": "zh"},
        {"text": "我们今天去北京看长城然后吃烤鸭晚上回家睡觉", "source": "zh"},
        {"text": "东京的天气今天很好我们去公园散步吧朋友们", "source": "zh"},
    ]
    docs = make_docs(rows)
    result, out = run(MinHashDedup({"bands": 20, "rows": 5, "num_perm": 100}), docs, tmp_path, shards=2)
    table = out.read()
    assert table.num_rows == len(rows) and result.manifest["counts"]["rows_rejected"] == 0
    group, keep, ids = (table.column(c).to_pylist() for c in ("dup_group", "dup_keep", "id"))
    assert group[1] == ids[1] and group[2] == ids[2]  # empty documents take no part
    assert group[3] == group[4] == ids[3] and keep[3] and not keep[4]  # one-word docs, same word
    assert group[5] == ids[5]
    assert group[6] == ids[0] and not keep[6]
    assert group[8] == ids[7] and group[9] == ids[9]  # CJK near-dup found, unrelated CJK text not


def test_all_identical_input_is_one_group(tmp_path):
    docs = make_docs([{"text": "the same words in every single row of this input", "source": f"s{i % 3}", "url": f"http://x/{i}"} for i in range(500)])
    _, out = run(MinHashDedup(), docs, tmp_path, shards=4)
    table = out.read()
    assert set(table.column("dup_group").to_pylist()) == {table.column("id")[0].as_py()}
    assert table.column("dup_keep").to_pylist() == [True] + [False] * 499


def test_spill_and_rerun_give_identical_output(real, tmp_path):
    docs = make_docs([{"text": t, "source": "real"} for t in real[:1500] + real[:300]])
    stage = MinHashDedup({"memory_mb": 0.05, "batch_rows": 256})  # spills every few batches
    spilled, _ = run(stage, docs, tmp_path, shards=3, name="a")
    held, _ = run(MinHashDedup(), docs, tmp_path, shards=3, name="b")
    assert spilled.manifest["stats"]["dedup"]["spilled_bytes"] > 0
    assert not spilled.manifest["stats"]["dedup"]["inputs_cached"]  # read again for the output
    assert held.manifest["stats"]["dedup"]["inputs_cached"]
    run(MinHashDedup(), docs, tmp_path, shards=3, name="c")
    for i in range(3):
        a, b, c = (pq.read_table(tmp_path / d / f"part-{i:05d}.parquet") for d in "abc")
        assert a.equals(b) and b.equals(c)
    assert sum(pq.read_table(tmp_path / "b" / f"part-{i:05d}.parquet").column("dup_keep").to_pylist().count(False) for i in range(3)) >= 300


def test_verification_removes_false_positive_candidates(real, tmp_path):
    words = " ".join(real[10].split()[:60]).split()
    half = " ".join(words[:30] + [f"z{i}" for i in range(30)])
    docs = make_docs([{"text": " ".join(words), "source": "a"}, {"text": half, "source": "b"}])
    loose = {"num_perm": 120, "bands": 60, "rows": 2}  # threshold ~0.13: this pair (J ~0.3) is a candidate
    _, out = run(MinHashDedup({**loose, "verify_threshold": None}), docs, tmp_path, name="loose")
    assert out.read().column("dup_keep").to_pylist() == [True, False]
    _, out = run(MinHashDedup({**loose, "verify_threshold": 0.8}), docs, tmp_path, name="verified")
    assert out.read().column("dup_keep").to_pylist() == [True, True]


def test_default_verification_keeps_near_misses_apart(real, tmp_path):
    """Pairs sharing most but not all of their text (exact Jaccard 0.45-0.6, below the 14x8 knee)
    become LSH candidates a few % of the time; unverified, each such candidate merges two distinct
    documents. The default parameters verify candidates by exact Jaccard, so none is merged, while
    close copies (1% of words edited) are found as before."""
    from assay.dedup.evaluate import edit_words

    base = [t.split() for t in distinct_texts(real) if len(t.split()) >= 80][:300]
    vocab = sorted({w for words in base for w in words})
    rng = np.random.default_rng(3)
    rows = []
    for i, words in enumerate(base):
        rows.append(" ".join(words[:80]))
        if i % 3 == 0:  # a close copy
            rows.append(edit_words(" ".join(words[:80]), 0.01, vocab, rng))
        else:  # a near miss: the first 60 words and 20 others (Jaccard ~0.55)
            rows.append(" ".join(words[:60] + [vocab[j] for j in rng.integers(0, len(vocab), 20)]))
    docs = make_docs([{"text": t, "source": "real"} for t in rows])

    def groups(params, name):
        result, out = run(MinHashDedup(params), docs, tmp_path, name=name)
        return result.manifest["stats"]["dedup"], out.read().column("dup_group").to_pylist()

    stats, unverified = groups({"verify_threshold": None}, "unverified")
    stats_v, verified = groups({}, "verified")
    close = [(2 * i, 2 * i + 1) for i in range(0, len(base), 3)]
    sets = shingle_sets(pa.array(rows), 5)
    near = [(2 * i, 2 * i + 1) for i in range(len(base)) if i % 3 and jaccard(sets[2 * i], sets[2 * i + 1]) < 0.6]
    assert len(near) > 150
    found = [verified[a] == verified[b] for a, b in close]
    assert found == [unverified[a] == unverified[b] for a, b in close] and np.mean(found) >= 0.95
    assert sum(unverified[a] == unverified[b] for a, b in near) >= 3  # LSH lets some through ...
    assert not any(verified[a] == verified[b] for a, b in near)  # ... verification stops them
    assert stats["verified_edges"] is None and stats_v["verified_edges"] < stats_v["candidate_edges"]


def test_exact_url_and_remove_stages(tmp_path):
    rows = [
        {"text": "Hello World. This is a page.", "url": "https://Example.com/a?utm_source=x", "source": "s1"},
        {"text": "hello world this is a page", "url": "https://example.com/b", "source": "s2"},
        {"text": "Something else entirely, and longer than the rest.", "url": "https://example.com/a", "source": "s2"},
        {"text": "", "url": None, "source": "s1"},
        {"text": "", "url": "", "source": "s1"},
    ]
    docs = make_docs(rows)
    _, out = run(ExactDedup({"keep": "longest"}), docs, tmp_path, name="exact")
    t = out.read()
    ids = t.column("id").to_pylist()
    assert t.column("dup_group").to_pylist() == [ids[0], ids[0], ids[2], ids[3], ids[4]]
    assert t.column("dup_keep").to_pylist() == [True, False, True, True, True]  # tie on length: first wins
    result, out = run(UrlDedup({"keep": "longest", "remove": True}), docs, tmp_path, name="url")
    assert out.read().column("id").to_pylist() == [ids[1], ids[2], ids[3], ids[4]]
    rejects = out.read_rejects()
    assert rejects.column("reject_reason").to_pylist() == ["url-duplicate"]
    assert rejects.column("reject_detail").to_pylist() == [f"url-duplicate of {ids[2]}"]
    assert result.manifest["counts"]["rejected"] == {"url-duplicate": {"rows": 1, "bytes": len(rows[0]["text"])}}
    removed = run_stage(RemoveDuplicates({"reason": "exact-duplicate"}), [tmp_path / "exact"], tmp_path / "removed")
    kept = Dataset(tmp_path / "removed")
    assert kept.count() == 4 and removed.manifest["counts"]["rejected"]["exact-duplicate"]["rows"] == 1
    assert kept.read_rejects().column("reject_detail").to_pylist() == [f"exact-duplicate of {ids[0]}"]


def test_keep_quality_uses_score_column(tmp_path):
    text = "one two three four five six seven eight nine ten eleven twelve"
    docs = make_docs([{"text": text, "source": "a"}, {"text": text + " thirteen", "source": "b"}, {"text": text, "source": "c"}])
    docs = docs.append_column("quality_x", pa.array([0.2, None, 0.7]))
    _, out = run(MinHashDedup({"keep": "quality", "quality_column": "quality_x", "bands": 20, "rows": 5, "num_perm": 100}), docs, tmp_path)
    t = out.read()
    assert t.column("dup_keep").to_pylist() == [False, False, True]
    assert t.column("quality_x").to_pylist() == [0.2, None, 0.7]  # columns the stage does not own survive


def test_report_section_shows_groups_and_removal_per_source(tmp_path):
    from assay.dedup.report import report_section

    text = "a long enough sentence that repeats across several sources in this small run"
    docs = make_docs([{"text": text, "source": s} for s in ("web", "web", "books")] + [{"text": "unique words only here", "source": "books"}])
    run_stage(MinHashDedup({"remove": True}), [_input(docs, tmp_path)], tmp_path / "run" / "near")
    html = report_section(tmp_path / "run")
    assert html is not None and html.count("<img") == 1
    assert "4 documents, 1 groups of 2+, 2 not kept (50.0%)" in html
    assert "<td>web</td><td>2</td><td>1</td><td>50.0%</td>" in html and "<td>books</td><td>2</td><td>1</td>" in html
    assert report_section(tmp_path / "in") is None


def _input(table: pa.Table, tmp_path: Path) -> Path:
    write_table(table, tmp_path / "in", 1)
    return tmp_path / "in"


def test_star_edges_keys_equal_only_in_their_top_bits_are_not_joined():
    """star_edges sorts each key's top bits packed with its position and groups exactly only what
    repeats there: keys that differ in their low bits alone must not become edges, and a repeated
    key among them still must."""
    n = 5000
    keys = (np.uint64(0xABCDEF) << np.uint64(40)) + np.arange(n, dtype=np.uint64)  # same top 24+ bits
    keys[17] = keys[4000]
    a, b = star_edges(keys, np.arange(n) + 10)
    assert sorted(zip(a.tolist(), b.tolist())) == [(4010, 27)]
