"""`dedup.exact` on very large documents: the key is computed in pieces (memory a few times a piece,
not ~55x the document), it is the key one pass gives, and copies of a large document that differ in
case and spacing are still exact duplicates."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pyarrow as pa

from assay.dedup.exact import BIG_BYTES, document_keys
from assay.dedup.tokens import text_keys
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.pipeline.stage import resolve_stage

WORDS = ["Hello", "WORLD", "naïve", "ﬁne", "Ⅻ", "東京", "test-case", "x", "Straße", "ÉCOLE", "tab\there", "new\nline",
         "¡hola!", "ｆｕｌｌ", "3.14", "e=mc²"]


def _text(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_large_documents_get_the_one_pass_key():
    texts = pa.array([_text(10, 1), _text(200_000, 2), "", _text(150_000, 3) + "!!", _text(7, 4)])
    assert sum(len(t.encode()) > BIG_BYTES for t in texts.to_pylist()) == 2
    keys, valid = document_keys(texts)
    one_pass = text_keys(texts)
    assert (keys == one_pass[0]).all() and (valid == one_pass[1]).all()


PEAK = """
import json, resource, sys
import numpy as np
import pyarrow as pa
from assay.dedup.exact import document_keys
size = int(sys.argv[1])
unit = "The quick Brown fox, naïve and ﬁne, jumps over the lazy dog. ".encode()
data = unit * (size // len(unit))  # the document, as the Arrow column holds it: no second copy
text = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, len(data)], np.int32)), pa.py_buffer(data)])
document_keys(pa.array(["warm up: tables and compiled kernels load once"]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
document_keys(text)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"size": len(data), "extra": after - before}))
"""


def test_peak_memory_is_at_most_five_times_the_largest_document():
    out = subprocess.run([sys.executable, "-c", PEAK, str(64 << 20)], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["extra"] <= 5 * got["size"], got  # one pass held ~55x (3.5 GB here)


def test_copies_of_a_large_document_differing_in_case_and_spacing_are_exact_duplicates(tmp_path):
    body = _text(200_000, 5)
    copy = body.replace(" ", "   ").replace("Hello", "hELLO").replace("WORLD", "World")
    docs = write_table(make_docs([{"text": body, "source": "a"}, {"text": copy, "source": "b"},
                                  {"text": body + " more", "source": "c"}]), tmp_path / "in")
    result = run_stage(resolve_stage("dedup.exact")({"remove": True}), [docs], tmp_path / "out", options={"workers": 1})
    assert result.manifest["counts"]["rows_rejected"] == 1
    assert [r["source"] for r in Dataset(tmp_path / "out").read(columns=["source"]).to_pylist()] == ["a", "c"]
