"""Embeddings, k-means clustering, rebalancing and knowledge mining on real text with known topics,
and the same cluster assignments and decontamination flags on local, Spark and Ray."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.engines import get_engine
from assay.pipeline.errors import UserError
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.semantic import kmeans
from assay.semantic.cluster import Cluster
from assay.semantic.decontam.stage import Decontam
from assay.semantic.embed import Embed
from assay.semantic.mine import Mine, knowledge_density
from assay.semantic.rebalance import Rebalance, cap_threshold
from assay.semantic.semdedup import SemDedup
from assay.semantic.side import vectors

from conftest import RAY_OPTIONS, SPARK_OPTIONS
from semantic_data import benchmark, topic_corpus

ONE = {"workers": 1}  # in-process: the model loads once for the module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Documents of five known topics (3 shards), their embeddings, the topic of each id, and six
    planted near-duplicates as (original id, copy id) pairs."""
    root = tmp_path_factory.mktemp("semantic")
    texts, labels = topic_corpus(24)
    long = [(t, lab) for t, lab in zip(texts, labels) if len(t) > 200 and texts.count(t) == 1][::15][:6]
    copies = [(t.replace(" the ", " a ", 1) + " Thanks!", lab) for t, lab in long]
    texts, labels = texts + [c[0] for c in copies], labels + [c[1] for c in copies]  # 6 near-duplicates
    table = make_docs([{"text": t, "source": lab, "content_type": "web"} for t, lab in zip(texts, labels)])
    docs = write_table(table, root / "docs", shards=3)
    # the first 64 tokens separate these topics as well as 128 do, at half the CPU
    result = run_stage(Embed({"max_tokens": 64}, resources={"cpus": 2}), [docs], root / "emb", engine="local",
                       options=ONE)
    ids = table.column("id").to_pylist()
    topic = dict(zip(ids, labels))
    planted = {frozenset((ids[texts.index(t)], ids[len(ids) - len(long) + k])) for k, (t, _) in enumerate(long)}
    return root, docs, root / "emb", topic, result.manifest, planted


def test_embeddings_are_a_float16_side_dataset_equal_to_sentence_transformers(corpus):
    root, docs, emb, topic, manifest, _ = corpus
    side = Dataset(emb)
    assert side.schema.names == ["id", "embedding"] and side.schema.field("embedding").type == pa.list_(pa.float16())
    assert manifest["output_kind"] == "side" and manifest["embedding"]["dim"] == 384
    table = side.read()
    assert sorted(table.column("id").to_pylist()) == sorted(topic)
    mat = vectors(table.column("embedding"))
    assert np.allclose(np.linalg.norm(mat, axis=1), 1, atol=2e-3)
    # the same vectors as sentence-transformers' own encode, up to float16 rounding
    from sentence_transformers import SentenceTransformer

    from assay.semantic.model import model_path

    model = SentenceTransformer(model_path(None), device="cpu")
    model.max_seq_length = 64
    text = dict(zip(*Dataset(docs).read(columns=["id", "text"]).to_pydict().values()))
    ids = table.column("id").to_pylist()[:8]
    ref = model.encode([text[i] for i in ids], normalize_embeddings=True)
    assert np.all(np.sum(ref * mat[:8], axis=1) > 0.999)


def test_mean_pooling_covers_the_whole_document():
    from assay.semantic.model import Encoder

    code = "def add(a, b):\n    return a + b\n" * 10
    prose = "The river flooded the valley after weeks of rain, and farmers moved their herds uphill. " * 10
    enc = Encoder(None, max_tokens=64, threads=2)
    first, mean = enc.encode([code + prose], "first"), enc.encode([code + prose], "mean", max_chunks=16)
    only_prose = enc.encode([prose], "first")
    assert (mean @ only_prose.T).item() > (first @ only_prose.T).item() + 0.1  # the tail counts in the mean


def _purity(ids, clusters, topic) -> float:
    """Share of documents in their cluster's majority topic. Word problems and competition math count
    as one topic, math: MiniLM puts them together (the benchmark reports the five-topic figure)."""
    by_cluster = {}
    for i, c in zip(ids, clusters):
        by_cluster.setdefault(c, Counter())[topic[i].replace("word-problem", "math")] += 1
    return sum(max(c.values()) for c in by_cluster.values()) / len(ids)


def test_clusters_separate_known_topics_and_table_reads_well(corpus):
    root, docs, emb, topic, _, _ = corpus
    result = run_stage(Cluster({"clusters": 4, "sample": 1000, "nredo": 10}), [docs, emb], root / "clustered",
                       engine="local", options=ONE)
    out = Dataset(root / "clustered").read(columns=["id", "cluster", "cluster_similarity"])
    purity = _purity(out.column("id").to_pylist(), out.column("cluster").to_pylist(), topic)
    assert purity >= 0.85, purity
    table = pq.read_table(root / "clustered" / "_artifacts" / "clusters.parquet")
    assert table.num_rows == 4 and sum(table.column("sample_documents").to_pylist()) == len(topic)
    assert all(len(t) == 3 for t in table.column("titles").to_pylist())
    terms = " ".join(w for ws in table.column("top_terms").to_pylist() for w in ws)
    assert sum(w in terms.split() for w in ("implementation", "algorithm", "programming", "input", "return", "python",
                                             "int", "str", "list")) >= 2, terms
    assert json.loads((root / "clustered" / "_artifacts" / "fit.json").read_text())["documents"] == len(topic)
    assert result.manifest["statistics"]["histograms"]["cluster_similarity"]["counts"]
    # a sample smaller than the data: the fit is trained on a hash sample, every document still assigned
    run_stage(Cluster({"clusters": 5, "sample": 80, "nredo": 10}), [docs, emb], root / "sampled", engine="local",
              options=ONE)
    assert json.loads((root / "sampled" / "_artifacts" / "fit.json").read_text())["sample"] == 80
    sampled = Dataset(root / "sampled").read(columns=["id", "cluster"])
    assert sampled.num_rows == len(topic) and _purity(*sampled.to_pydict().values(), topic) >= 0.7


def test_two_level_kmeans_handles_many_clusters():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(300, 32))
    x = centers[rng.integers(0, 300, 12_000)] + 0.15 * rng.normal(size=(12_000, 32))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    cents = kmeans.train(x, 300, coarse=16, niter=10)
    assert cents.k == 300 and len(cents.coarse) == 16 and set(np.unique(cents.parent)) == set(range(16))
    ids, sims = kmeans.Assigner(cents, nprobe=4).assign(x)
    exact = np.argmax(x @ cents.fine.T, axis=1)
    assert np.mean(ids == exact) > 0.97  # the inverted-file search finds the true nearest centroid
    assert len(np.unique(ids)) > 250 and np.all(sims > 0.5)


def test_rebalance_caps_the_largest_cluster_and_keeps_every_cluster(corpus):
    root = corpus[0]
    skew = make_docs([{"text": f"document {i} " + "x" * (50 if i % 10 else 500), "source": "s", "content_type": "web"}
                      for i in range(300)])
    skew = skew.append_column("cluster", pa.array([0 if i < 150 else 1 + i % 9 for i in range(300)], pa.int32()))
    src = write_table(skew, root / "skewed", shards=2)
    result = run_stage(Rebalance({"max_share": 0.2}), [src], root / "rebalanced", engine="local", options=ONE)
    summary = json.loads((root / "rebalanced" / "_artifacts" / "fit.json").read_text())
    assert summary["largest_share_before"] > 0.4
    assert summary["largest_share_after"] == pytest.approx(0.2, abs=1e-6) and summary["reachable"]
    out = Dataset(root / "rebalanced").read()
    weights = dict(zip(out.column("cluster").to_pylist(), out.column("cluster_weight").to_pylist()))
    assert weights[0] < 1 and all(w > 0 for w in weights.values()) and len(weights) == 10
    assert result.manifest["counts"]["rows_out"] == 300  # weights only; the mixer samples
    # dropping samples by the weights, and every cluster keeps at least one document
    run_stage(Rebalance({"max_share": 0.2, "drop": True}), [src], root / "dropped", engine="local", options=ONE)
    kept = Dataset(root / "dropped").read()
    assert 150 < kept.num_rows < 300 and set(kept.column("cluster").to_pylist()) == set(range(10))
    assert cap_threshold(np.array([5.0, 1.0, 1.0]), 0.2) == (1.0, False)  # a cap below 1/k cannot be met
    power = run_stage(Rebalance({"method": "power", "alpha": 1.0, "max_share": None}), [src], root / "power",
                      engine="local", options=ONE)
    assert power.manifest["counts"]["rows_out"] == 300


def test_semantic_dedup_inside_clusters_finds_the_planted_copies(corpus):
    root, docs, emb, topic, _, planted = corpus
    run_stage(Cluster({"clusters": 4}), [docs, emb], root / "for-semdedup", engine="local", options=ONE)
    result = run_stage(SemDedup({"eps": 0.03}), [root / "for-semdedup", emb], root / "semdedup", engine="local",
                       options=ONE)
    rejects = Dataset(root / "semdedup").read_rejects().to_pylist()
    assert len(planted) == 6 and result.manifest["counts"]["rows_out"] == len(topic) - 6
    assert {frozenset((r["id"], r["reject_detail"])) for r in rejects} == planted  # a copy or its original goes


def test_mining_retrieves_documents_of_each_inventory_item(corpus, tmp_path):
    root, docs, emb, topic, _, _ = corpus
    inventory = tmp_path / "inventory.txt"
    inventory.write_text("# items\nconcept: arithmetic word problems about money and shopping\n"
                         "concept: a GitHub issue describing a bug in a Python library\nentity: Python function definitions\n")
    result = run_stage(Mine({"inventory": str(inventory), "per_item": 5}), [docs, emb], root / "mined",
                       engine="local", options=ONE)
    kept = Dataset(root / "mined").read(columns=["id", "mined_for", "mine_score"]).to_pylist()
    assert result.manifest["counts"]["rejected"]["not_mined"]["rows"] == len(topic) - len(kept)
    by_item = {}
    for row in kept:
        for item in row["mined_for"]:
            by_item.setdefault(item, []).append(topic[row["id"]])
    assert Counter(by_item["arithmetic word problems about money and shopping"]).most_common(1)[0][0] == "word-problem"
    assert Counter(by_item["a GitHub issue describing a bug in a Python library"]).most_common(1)[0][0] == "issue"
    assert Counter(by_item["Python function definitions"]).most_common(1)[0][0] == "code"
    summary = json.loads((root / "mined" / "_artifacts" / "fit.json").read_text())
    assert summary["items_covered"] == 3 and all(n == 5 for n in summary["per_item"].values())
    assert knowledge_density("Photosynthesis is a process in which plants convert light into chemical energy, "
                             "discovered by Jan Ingenhousz in 1779. " * 8) > knowledge_density("ok lol " * 60)
    with pytest.raises(UserError, match="made with model"):
        Mine({"inventory": str(inventory), "model": str(tmp_path)}).tasks([Dataset(docs), Dataset(emb)])


def _rows(path, cols):
    table = Dataset(path).read(columns=cols)
    return sorted(table.to_pylist(), key=lambda r: r["id"])


ENGINE_CLUSTER = {"clusters": 6, "coarse": 2, "sample": 100}  # sampled, two levels


@pytest.fixture(scope="module")
def local_reference(corpus):
    """Cluster assignments and decontamination flags from the local engine, for both engines to match:
    documents where every other one carries a GSM8K item."""
    root, docs, emb, _, _, _ = corpus
    run_stage(Cluster(ENGINE_CLUSTER), [docs, emb], root / "local-c", engine="local", options=ONE)
    gsm = benchmark("gsm8k")
    plain = Dataset(docs).read(columns=["text"]).column("text").to_pylist()[:40]
    texts = [f"{t}\n\n{gsm[i][1]}" if i % 2 else t for i, t in enumerate(plain)]
    src = write_table(make_docs([{"text": t, "source": "x", "content_type": "web"} for t in texts]), root / "mixed",
                      shards=4)
    run_stage(Decontam({}), [src], root / "local-d", engine="local", options=ONE)
    flags = _rows(root / "local-d", ["id", "decontam_hits"])
    assert sum(1 for r in flags if r["decontam_hits"]) >= 20
    return src, _rows(root / "local-c", ["id", "cluster", "cluster_similarity"]), flags


@pytest.mark.parametrize("engine, options", [
    pytest.param("spark", SPARK_OPTIONS, marks=pytest.mark.spark, id="spark"),
    pytest.param("ray", RAY_OPTIONS, marks=pytest.mark.ray, id="ray"),
])
def test_cluster_and_decontam_identical_on_spark_and_ray(corpus, local_reference, engine, options, request):
    root, docs, emb, _, _, _ = corpus
    src, clusters, flags = local_reference
    request.getfixturevalue(f"{engine}_engine")
    eng = get_engine(engine, options)
    # cluster: fit on every shard, reduce on the driver, apply on every shard (two levels)
    run_stage(Cluster(ENGINE_CLUSTER), [docs, emb], root / f"{engine}-c", engine=eng)
    assert len({r["cluster"] for r in clusters}) > 3
    assert _rows(root / f"{engine}-c", ["id", "cluster", "cluster_similarity"]) == clusters
    run_stage(Decontam({}), [src], root / f"{engine}-d", engine=eng)
    assert _rows(root / f"{engine}-d", ["id", "decontam_hits"]) == flags


def test_kmeans_gives_faiss_kmeans_centroids_and_survives_pymupdf(tmp_path):
    """semantic.kmeans unrolls faiss.Kmeans (same centroids, bit for bit) so that PyMuPDF, imported
    after faiss in the same process, cannot break it (its SWIG std::vector<float> proxy took over)."""
    import subprocess
    import sys

    import numpy as np

    from assay.semantic.kmeans import _kmeans

    x = np.random.default_rng(0).standard_normal((2000, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(tmp_path / "x.npy", x)
    # faiss's own Kmeans, the reference, in a fresh process: in this one, another test of the worker
    # may have imported PyMuPDF already (the very breakage _kmeans avoids).
    reference = ("import sys, numpy as np, faiss\nx = np.load(sys.argv[1])\n"
                 "km = faiss.Kmeans(16, 32, niter=20, seed=7, spherical=True, nredo=3, min_points_per_centroid=1,"
                 " max_points_per_centroid=256, verbose=False)\nkm.train(x)\nnp.save(sys.argv[2], km.centroids)\n")
    done = subprocess.run([sys.executable, "-c", reference, str(tmp_path / "x.npy"), str(tmp_path / "c.npy")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert np.array_equal(np.load(tmp_path / "c.npy"), _kmeans(x, 32, 20, 7, 3))
    pytest.importorskip("pymupdf")
    code = ("import numpy as np, faiss, pymupdf\nfrom assay.semantic.kmeans import _kmeans\n"
            "x = np.random.default_rng(0).random((300, 8), dtype=np.float32)\nprint(_kmeans(x, 8, 5, 1).shape)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "(8, 8)", done.stderr[-2000:]
