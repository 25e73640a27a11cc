"""Dedup on Ray runs the Ray plan (not the local fallback) and writes the same shards as the local plan."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from assay.dedup.exact import ExactDedup
from assay.dedup.near import MinHashDedup
from assay.pipeline.dataset import write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

pytestmark = pytest.mark.ray
SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample" / "code"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts = [p.read_text() for p in sorted(SAMPLE.rglob("*.py")) if p.stat().st_size > 400]
    rows = [{"text": t, "source": "real"} for t in texts]
    rows += [{"text": texts[i], "source": "copy"} for i in range(0, len(texts), 4)]  # exact copies
    rows += [{"text": texts[i].replace("return", "return ", 1), "source": "edit"} for i in range(1, len(texts), 3)]
    root = tmp_path_factory.mktemp("dedup-ray") / "in"
    write_table(make_docs(rows), root, shards=3)
    return root


@pytest.mark.parametrize("stage", [
    MinHashDedup({"keep": "longest", "verify_threshold": 0.7, "ngram": 3}),
    MinHashDedup({"keep": "first", "remove": True}),
    ExactDedup({"remove": True}),
], ids=["minhash-verified", "minhash-remove", "exact-remove"])
def test_local_and_ray_plans_agree(ray_engine, corpus, tmp_path, stage):
    loc = run_stage(stage, [corpus], tmp_path / "local", engine="local")
    ray = run_stage(stage, [corpus], tmp_path / "ray", engine=ray_engine)
    assert ray.manifest["plan"] == "ray" and "fallback_warning" not in ray.manifest
    assert loc.manifest["counts"] == ray.manifest["counts"]
    for i in range(3):
        assert pq.read_table(tmp_path / "local" / f"part-{i:05d}.parquet").equals(
            pq.read_table(tmp_path / "ray" / f"part-{i:05d}.parquet")), f"shard {i} differs"
    removed = ray.manifest["stats"]["dedup"]["removed"]
    assert removed > 0  # the corpus has planted duplicates


DRIVER = """
import json, re, sys
from pathlib import Path
from assay.dedup.near import MinHashDedup
from assay.pipeline.runner import run_stage
result = run_stage(MinHashDedup({}), [sys.argv[1]], sys.argv[2], engine="ray",
                   options={"ray_address": sys.argv[3], "workers": 2})
# VmHWM: this process's own peak (ru_maxrss would count the pytest process it was forked from)
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"peak_mb": peak_kb / 1024,
                  "stats": result.manifest["stats"]["dedup"]}))
"""


def short_documents(n: int, root: Path, seed: int = 0) -> Path:
    """n documents of 8-19 consecutive words of real text; half of them exact copies of an earlier
    one, so most rows end in a group (the old plan's driver held every candidate edge and a group
    id per grouped row)."""
    from conftest import load_real_texts

    words = " ".join(t for _, t in load_real_texts()).split()
    rng = np.random.default_rng(seed)
    starts, lens = rng.integers(0, len(words) - 20, n).tolist(), rng.integers(8, 20, n).tolist()
    texts = [" ".join(words[s:s + k]) for s, k in zip(starts, lens)]
    for i in np.flatnonzero(rng.random(n) < 0.5)[1:].tolist():
        texts[i] = texts[int(rng.integers(0, i))]
    return write_table(make_docs({"text": t, "source": "real"} for t in texts), root, shards=4)


def test_driver_memory_stays_flat_when_the_corpus_grows_tenfold(ray_engine, tmp_path):
    """Each size runs in its own driver process, connected to the session's Ray by address; its peak
    RSS covers imports, the connection and the whole plan. 30k -> 300k documents: the old driver-side
    union-find grew 331 -> 514 MB; the distributed components 283 -> 285 MB."""
    address = ray_engine.ray.get_runtime_context().gcs_address
    runs = []
    for n in (30_000, 300_000):
        corpus = short_documents(n, tmp_path / f"in-{n}")
        out = subprocess.run([sys.executable, "-c", DRIVER, str(corpus), str(tmp_path / f"out-{n}"), address],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    small, large = runs
    assert large["stats"]["in_groups"] > 9 * small["stats"]["in_groups"] > 9 * 10_000  # the work grew tenfold
    assert large["peak_mb"] <= 1.2 * small["peak_mb"], runs


def test_distributed_components_equal_union_find(ray_engine):
    """Large-star/small-star rounds over 3 partitions give every node the smallest node of its
    component, as the local union-find does: on a long path numbered in shuffled order (the slowest
    case for label propagation), random sparse edges, and stars."""
    from assay.dedup.components import UnionFind
    from assay.dedup.ray_plan import _part, _split, connected_components

    ray = ray_engine.ray
    rng = np.random.default_rng(3)
    n = 20_000
    path = rng.permutation(5_000)
    edges = np.concatenate([
        np.stack([path[:-1], path[1:]], 1),
        rng.integers(5_000, n, (6_000, 2)),
        np.stack([np.full(300, 19_000), rng.integers(15_000, n, 300)], 1),
    ])
    edges = edges[edges[:, 0] != edges[:, 1]]
    hi_lo = np.stack([edges.max(1), edges.min(1)], 1)
    P = 3
    pieces = [[ray.put(p)] for p in _split(hi_lo, _part(hi_lo[:, 0], P), P)]
    refs, rounds = connected_components(ray, pieces, P)
    got = np.arange(n)
    for part in ray.get(refs):
        assert np.all(part[:, 0] > part[:, 1])
        got[part[:, 0]] = part[:, 1]
    uf = UnionFind(n)
    uf.union(edges[:, 0], edges[:, 1])
    assert np.array_equal(got, uf.labels()) and 2 < rounds < 40
