"""The request cache's first lookup in a process reads the journals' index files (20 bytes an answer),
not the answers: on a 150 MB cache it reads a few MB and holds a few MB, where reading whole journals
held all of it. Journals the index does not cover (a writer killed between its two appends, journals
from before the index files) are still found, read in bounded pieces."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENTRIES = 60_000
ANSWER = "x" * 2400  # ~2.5 KB a line: a chat completion's size

WRITE = f"""
import sys
from assay.pipeline.service import RequestCache
cache = RequestCache(sys.argv[1])
for i in range(int(sys.argv[2]), int(sys.argv[3])):
    request = {{"text": f"t{{i}}"}}
    cache.put(cache.key(request), request, {{"answer": i, "body": {ANSWER!r}}})
"""

LOOKUP = """
import json, sys, tracemalloc, psutil
from assay.pipeline.service import RequestCache
me = psutil.Process()
cache = RequestCache(sys.argv[1])
wanted = [int(i) for i in sys.argv[2:]]
tracemalloc.start()
before = me.io_counters().read_chars
found = [(cache.get(cache.key({"text": f"t{i}"})) or {}).get("answer") for i in wanted]
read = me.io_counters().read_chars - before
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"found": found, "read": read, "peak": peak}))
"""


def lookup(root: Path, *wanted: int) -> dict:
    out = subprocess.run([sys.executable, "-c", LOOKUP, str(root), *map(str, wanted)], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def journal_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "journal").iterdir())


def test_first_lookup_reads_the_index_not_the_answers(tmp_path):
    root = tmp_path / "cache"
    # two writers, as two workers would have
    for lo, hi in ((0, ENTRIES // 2), (ENTRIES // 2, ENTRIES)):
        subprocess.run([sys.executable, "-c", WRITE, str(root), str(lo), str(hi)], check=True)
    size = journal_bytes(root)
    assert size > 140e6
    got = lookup(root, 0, 12345, ENTRIES - 1, ENTRIES + 5)
    assert got["found"] == [0, 12345, ENTRIES - 1, None]
    assert got["read"] < size / 50, got  # the index files: 20 bytes an answer
    assert got["peak"] < 16e6, got  # two arrays of 20 bytes an answer, not the journals

    # A writer killed between the answer and its index record, and a journal from before index files:
    # their lines are read from the journal (in pieces: memory stays bounded).
    index = root / "index"
    first = sorted(index.iterdir())[0]
    records = first.read_bytes()
    first.write_bytes(records[:-20 * 1000])  # the last 1,000 answers of that journal lost their records
    (sorted(index.iterdir())[1]).unlink()  # the other journal has no index at all
    got = lookup(root, 0, ENTRIES // 2 - 1, ENTRIES // 2, ENTRIES - 1)
    assert got["found"] == [0, ENTRIES // 2 - 1, ENTRIES // 2, ENTRIES - 1]
    assert got["peak"] < 16e6, got


def test_a_colliding_index_key_is_a_miss_not_another_answer(tmp_path):
    """The index keeps 64 bits of a key; the line's full key is compared before its answer is used."""
    from assay.pipeline.service import RequestCache

    root = tmp_path / "cache"
    cache = RequestCache(root)
    key = cache.key({"text": "real"})
    cache.put(key, {"text": "real"}, {"answer": "real"})
    twin = key[:16] + ("0" if key[16] != "0" else "1") + key[17:]  # same first 64 bits, another key
    assert cache.get(key) == {"answer": "real"} and cache.get(twin) is None
    assert os.listdir(root / "index")
