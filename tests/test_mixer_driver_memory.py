"""`mix build --engine spark|ray` keeps the driver's peak RSS flat when the corpus grows tenfold:
tokenization, planning and packing all run on the engine's workers, and the driver adds up a few
numbers per shard, slot and bucket (issue #31). 20k -> 200k documents: with planning and packing on
the driver it grew 229 -> 399 MB on Spark and 285 -> 457 MB on Ray; now 218 -> 221 and 275 -> 279."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from assay.mixer.tokenizer import train_bpe

from mixer_corpus import documents, mixture_data, write_corpus

pytestmark = pytest.mark.slow

# The driver: `assay mix build` in its own process, then its own peak RSS (VmHWM; ru_maxrss would
# count the pytest process it was forked from, and RUSAGE_CHILDREN Spark's JVM).
DRIVER = """
import json, re, sys
from pathlib import Path
from assay.pipeline.cli import main
main(sys.argv[1:])
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"peak_mb": peak_kb / 1024}))
"""


def _mixture(root, n: int, tokenizer) -> str:
    """A three-stage mixture over n documents, its budgets growing with n."""
    docs = documents(n_web=n // 2, n_code=n // 5, n_pr=n * 3 // 20, n_chat=n * 3 // 20, seed=n)
    write_corpus(root / "docs", docs, shards=max(1, n // 5000))
    data = mixture_data(root / "docs", tokenizer, broad={"tokens": 25 * n}, anneal={"tokens": 20 * n},
                        chat={"tokens": 4 * n})
    data.update(shard_tokens=1 << 20, pack_docs=10_000)
    (root / "mix.yaml").write_text(yaml.safe_dump(data))
    return str(root / "mix.yaml")


@pytest.mark.parametrize("engine", [pytest.param("spark", marks=pytest.mark.spark),
                                    pytest.param("ray", marks=pytest.mark.ray)])
def test_mix_build_driver_memory_stays_flat_when_the_corpus_grows_tenfold(engine, tmp_path, request):
    tokenizer = tmp_path / "tokenizer.json"
    train_bpe([d["text"] for d in documents(n_web=400, n_code=200, n_pr=100, n_chat=100)], 1000).save(str(tokenizer))
    where = ["--spark-master", "local[2]"] if engine == "spark" else \
        ["--ray-address", request.getfixturevalue("ray_engine").ray.get_runtime_context().gcs_address]
    runs = []
    for n in (20_000, 200_000):
        root = tmp_path / str(n)
        root.mkdir()
        mix = _mixture(root, n, tokenizer)
        out = subprocess.run([sys.executable, "-c", DRIVER, "mix", "build", mix, str(root / "out"), "--engine", engine,
                              "--workers", "2", "--no-report", *where], capture_output=True, text=True, timeout=1200)
        assert out.returncode == 0, out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        broad = json.loads((root / "out" / "broad" / "_manifest.json").read_text())
        got.update(documents=broad["counts"]["rows_in"], tokens=broad["mix"]["tokens"], plan=broad["plan"])
        runs.append(got)
    small, large = runs
    print(json.dumps({engine: runs}))
    # the work grew tenfold
    assert large["documents"] == 10 * small["documents"] and large["tokens"] > 9 * small["tokens"]
    assert large["peak_mb"] <= 1.2 * small["peak_mb"], runs
    assert small["plan"] == large["plan"] == engine
