"""A result is the result of the inputs the user has now: identity, unique ids, fusion, one writer,
replacement rules, durability and no code from data (issues #27 and #28)."""
from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from assay.pipeline import codec, identity
from assay.pipeline.dataset import Dataset, Lease, OutputBusy, OutputRefused, ShardWriter, atomic_write_text, write_table
from assay.pipeline.engines import get_engine
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

from conftest import LOCAL_OPTIONS
from stages_for_tests import LengthCentered, Sentences, SlowUpper, TruncateFromFile

ENGINE = get_engine("local", {"workers": 1})


def _docs(n: int = 12):
    texts = [f"Document {i} has words. And a second sentence {i}. Third" for i in range(n)]
    return make_docs([{"text": t, "source": "s", "content_type": "web"} for t in texts])


@pytest.fixture()
def docs(tmp_path):
    return write_table(_docs(), tmp_path / "in", shards=2)


# ---- 1. files a stage reads are part of its identity ---------------------------------------------

def test_editing_a_file_the_stage_reads_reruns_it_and_touch_does_not(docs, tmp_path):
    limit = tmp_path / "limit.txt"
    limit.write_text("5\n")
    out = tmp_path / "cut"
    params = {"limit_file": str(limit), "cache_dir": str(tmp_path / "cache-a")}
    first = run_stage(TruncateFromFile(params), [docs], out, engine=ENGINE)
    assert {len(t) for t in Dataset(out).read().column("text").to_pylist()} == {5}
    assert first.manifest["ran_because"] == "new"

    os.utime(limit, (time.time() + 5, time.time() + 5))  # touched: same bytes
    assert run_stage(TruncateFromFile(params), [docs], out, engine=ENGINE).skipped
    moved_cache = dict(params, cache_dir=str(tmp_path / "cache-b"))  # a place it writes: not identity
    assert run_stage(TruncateFromFile(moved_cache), [docs], out, engine=ENGINE).skipped

    limit.write_text("7\n")
    again = run_stage(TruncateFromFile(params), [docs], out, engine=ENGINE)
    assert not again.skipped
    assert again.manifest["ran_because"] == "input file 'limit_file' changed"
    assert {len(t) for t in Dataset(out).read().column("text").to_pylist()} == {7}


def test_file_hashes_are_cached_by_stat(tmp_path, monkeypatch):
    big = tmp_path / "model.bin"
    big.write_bytes(os.urandom(1 << 20))
    first = identity.file_digest(big)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: opened.append(p) or real_open(p, *a, **k))
    identity._HASHES._memory.clear()  # a new process: only the on-disk cache remembers
    assert identity.file_digest(big) == first and not opened


def test_changing_the_stage_code_reruns_it(docs, tmp_path, monkeypatch):
    module = tmp_path / "mystage.py"
    source = textwrap.dedent('''
        import pyarrow as pa
        from assay.pipeline.stage import MapStage, with_rejects, set_column

        class Shout(MapStage):
            def process(self, table):
                table = set_column(table, "text", [t.upper() for t in table.column("text").to_pylist()])
                return with_rejects(table, [None] * table.num_rows)
    ''')
    module.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("mystage")
    out = tmp_path / "out"
    run_stage(mod.Shout(), [docs], out, engine=get_engine("local", {"workers": 0}))
    assert run_stage(mod.Shout(), [docs], out, engine=get_engine("local", {"workers": 0})).skipped
    module.write_text(source.replace("t.upper()", "t.lower()"))
    identity._CODE.clear()  # what a new `assay` process sees
    mod = importlib.reload(mod)
    again = run_stage(mod.Shout(), [docs], out, engine=get_engine("local", {"workers": 0}))
    assert not again.skipped and again.manifest["ran_because"] == "code changed"


# ---- 3. row ids are unique by construction ------------------------------------------------------

def test_identical_rows_pass_a_one_to_many_stage(tmp_path):
    same = make_docs([{"text": "Same text. Twice over", "source": "s"}] * 2)
    assert same.column("id")[0] == same.column("id")[1]  # built by content: one id for both
    ds = write_table(same, tmp_path / "in")
    result = run_stage(Sentences(), [ds], tmp_path / "out", engine=ENGINE)
    assert result.manifest["counts"]["rows_in"] == 2 and result.manifest["counts"]["rows_out"] == 4


def test_readers_give_identical_records_distinct_ids(tmp_path):
    from assay.pipeline.readers import ReadJsonl

    src = tmp_path / "a.jsonl"
    src.write_text('{"text": "same"}\n' * 3 + '{"text": "other"}\n')
    run_stage(ReadJsonl({"paths": [str(src)]}), [], tmp_path / "read", engine=ENGINE)
    ids = Dataset(tmp_path / "read").read().column("id").to_pylist()
    assert len(ids) == 4 and len(set(ids)) == 4
    run_stage(ReadJsonl({"paths": [str(src)]}), [], tmp_path / "again", engine=ENGINE)
    assert Dataset(tmp_path / "again").read().column("id").to_pylist() == ids  # stable across runs


# ---- 5. fused middle stages -----------------------------------------------------------------------

def _recipe(tmp_path: Path, stages: str) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"text number {i} " * (i + 1)}) + "\n" for i in range(20)))
    path = tmp_path / "r.yaml"
    path.write_text(textwrap.dedent(f'''
        name: fused
        fuse: true
        inputs:
          raw: {{uses: read.jsonl, params: {{paths: ["{src}"]}}}}
        stages:
    ''') + stages)
    return path


def test_a_fused_middle_stage_read_by_a_later_added_stage(tmp_path):
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe

    chain = ("  - {id: a, uses: filter.unicode, inputs: [raw]}\n"
             "  - {id: b, uses: filter.length, inputs: [a], params: {min_words: 1}}\n")
    work = tmp_path / "w"
    run_recipe(load_recipe(_recipe(tmp_path, chain)), workdir=work, log=lambda *_: None)
    assert Dataset(work / "b").complete and not Dataset(work / "a").complete  # `a` holds no rows
    with pytest.raises(Exception, match="fused"):
        run_stage(SlowUpper({"seconds_per_batch": 0}), [work / "a"], tmp_path / "c", engine=ENGINE)
    more = chain + "  - {id: c, uses: filter.length, inputs: [a], params: {min_words: 3}}\n"
    results = {r.stage_id: r for r in run_recipe(load_recipe(_recipe(tmp_path, more)), workdir=work,
                                                 log=lambda *_: None)}
    assert not results["a"].skipped and Dataset(work / "a").complete
    assert Dataset(work / "c").count() > 0


# ---- one writer per output (#28.4) and replacing another's output (#28.8) ---------------------------

def test_a_second_writer_is_refused_while_the_first_runs(docs, tmp_path):
    out = tmp_path / "out"
    script = textwrap.dedent(f'''
        import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
        from assay.pipeline.engines import get_engine
        from assay.pipeline.runner import run_stage
        from stages_for_tests import SlowUpper
        run_stage(SlowUpper({{"seconds_per_batch": 1.5}}), [{str(docs)!r}], {str(out)!r},
                  engine=get_engine("local", {{"workers": 1}}))
    ''')
    first = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 60
        while not (out / "_lease.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        with pytest.raises(OutputBusy, match="another Assay run is writing it"):
            run_stage(Sentences(), [docs], out, engine=ENGINE)
    finally:
        assert first.wait(120) == 0
    kept = Dataset(out).read().column("text").to_pylist()
    assert len(kept) == 12 and all(t == t.upper() for t in kept)  # the first run's output, whole
    assert not (out / "_lease.json").exists()


def test_a_stale_lease_is_taken_over_and_its_shards_resumed(docs, tmp_path):
    import socket

    out = tmp_path / "out"
    run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    manifest = json.loads((out / "_manifest.json").read_text())
    (out / "_manifest.json").unlink()
    (out / "_lease.json").write_text(json.dumps({"fingerprint": manifest["fingerprint"], "host": socket.gethostname(),
                                                 "pid": 2 ** 22 + 11, "producer": manifest["producer"]}))
    again = run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    assert again.manifest["resumed_shards"] == 2 and again.manifest["ran_because"] == "resumed"


def test_a_skipped_stage_gives_up_the_stale_lease_a_killed_run_left_beside_its_manifest(docs, tmp_path):
    """kill -9 between the manifest and the lease's removal: the rerun skips the stage (it is complete)
    and the dead run's lease goes with it; a live run's lease stays."""
    import socket

    out = tmp_path / "out"
    run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    manifest = json.loads((out / "_manifest.json").read_text())
    dead = {"fingerprint": manifest["fingerprint"], "host": socket.gethostname(), "pid": 2 ** 22 + 11,
            "producer": manifest["producer"]}
    (out / "_lease.json").write_text(json.dumps(dead))
    again = run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    assert again.skipped and not (out / "_lease.json").exists()
    live = dict(dead, pid=os.getpid(), heartbeat=time.time())
    (out / "_lease.json").write_text(json.dumps(live))
    with pytest.raises(OutputBusy):  # a live holder: nothing is taken from it
        Lease(out, manifest["fingerprint"]).acquire()
    assert run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE).skipped
    assert json.loads((out / "_lease.json").read_text())["pid"] == os.getpid()


def test_another_stage_or_params_do_not_replace_an_output_without_force(docs, tmp_path):
    out = tmp_path / "out"
    run_stage(Sentences(), [docs], out, engine=ENGINE)
    before = Dataset(out).count()
    with pytest.raises(OutputRefused, match="pass --force"):
        run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    assert Dataset(out).count() == before and Dataset(out).manifest["stage"].endswith("Sentences")
    run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE, force=True)
    other = tmp_path / "other"
    run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], other, engine=ENGINE)
    with pytest.raises(OutputRefused, match="other params"):
        run_stage(SlowUpper({"seconds_per_batch": 0.001}), [docs], other, engine=ENGINE)


def test_a_param_a_newer_assay_added_does_not_make_the_same_command_another(docs, tmp_path):
    """`make demo` after an upgrade: the stage's params gained a field (with its default), so their
    digest differs, but every param the old run had is unchanged: the rerun replaces its own output."""
    out = tmp_path / "out"
    run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    manifest = json.loads((out / "_manifest.json").read_text())
    manifest["params"].pop("seconds_per_batch")  # as an older Assay, without that param, recorded it
    manifest["producer"]["params"] = "0123456789abcdef"
    manifest["fingerprint"] = "older"
    (out / "_manifest.json").write_text(json.dumps(manifest))
    again = run_stage(SlowUpper({"seconds_per_batch": 0}), [docs], out, engine=ENGINE)
    assert not again.skipped and again.manifest["producer"]["params"] != "0123456789abcdef"
    manifest = json.loads((out / "_manifest.json").read_text())
    manifest["producer"]["params"], manifest["fingerprint"] = "0123456789abcdef", "older"
    (out / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(OutputRefused, match="other params"):  # a param both have, with another value
        run_stage(SlowUpper({"seconds_per_batch": 0.001}), [docs], out, engine=ENGINE)


def test_a_recipe_does_not_take_over_another_recipes_workdir(tmp_path):
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe

    stages = "  - {id: a, uses: filter.length, inputs: [raw], params: {min_words: 1}}\n"
    path = _recipe(tmp_path, stages)
    run_recipe(load_recipe(path), workdir=tmp_path / "w", log=lambda *_: None)
    other = tmp_path / "other.yaml"
    other.write_text(path.read_text().replace("name: fused", "name: another"))
    with pytest.raises(OutputRefused, match="holds the runs of 'fused'"):
        run_recipe(load_recipe(other), workdir=tmp_path / "w", log=lambda *_: None)
    run_recipe(load_recipe(other), workdir=tmp_path / "w", log=lambda *_: None, replace=True)


# ---- 9. durability ------------------------------------------------------------------------------

def test_commits_flush_data_and_folders_and_temp_names_never_collide(tmp_path, monkeypatch):
    flushed = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(os.readlink(f"/proc/self/fd/{fd}")) or real(fd))
    atomic_write_text(tmp_path / "a.json", "{}")
    assert str(tmp_path / "a.json") not in flushed  # the temp file is flushed before its rename
    assert any(".a.json.tmp-" in p for p in flushed) and str(tmp_path) in flushed
    writer = ShardWriter(tmp_path / "ds", 0, _docs().schema, "t")
    writer.add_input(12, 0)
    writer.write(_docs())
    writer._flush()  # rows reach the temp file (they wait for a full row group otherwise)
    names = [p.name for p in (tmp_path / "ds").iterdir()]
    assert any(n.startswith(".part-00000.parquet.tmp-") and n.count("-") >= 4 for n in names), names
    flushed.clear()
    writer.commit()
    assert any("part-00000.parquet.tmp-" in p for p in flushed) and str(tmp_path / "ds") in flushed


# ---- 5 of #28: nothing read back from a workdir runs code ----------------------------------------

class _Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/assay-pwned-by-pickle",))


def test_fit_partials_and_shared_values_are_data_not_pickles(docs, tmp_path):
    Path("/tmp/assay-pwned-by-pickle").unlink(missing_ok=True)
    state = {"n": 3, "a": __import__("numpy").arange(4), "t": (1, "x"), "k": {1: "int key"}, "s": ["a", None]}
    back = codec.loads(codec.dumps(state))
    assert back["n"] == 3 and list(back["a"]) == [0, 1, 2, 3] and back["t"] == (1, "x") and back["k"] == {1: "int key"}
    with pytest.raises(codec.CodecError):
        codec.dumps(_Boom())
    with pytest.raises(codec.CodecError):
        codec.loads(pickle.dumps(_Boom()))
    # a planted partial in a killed fit's output is recomputed, never unpickled
    out = tmp_path / "fit"
    run_stage(LengthCentered(), [docs], out, engine=ENGINE)
    expected = Dataset(out).read().column("length_centered").to_pylist()
    manifest = json.loads((out / "_manifest.json").read_text())
    (out / "_manifest.json").unlink()
    (out / "_artifacts" / ".fit-done").unlink()
    (out / "_lease.json").write_text(json.dumps({"fingerprint": manifest["fingerprint"], "pid": 2 ** 22 + 3,
                                                 "host": os.uname().nodename, "producer": manifest["producer"]}))
    for part in (out / "_fit").glob("part-*.state"):
        part.write_bytes(pickle.dumps(_Boom()))
    run_stage(LengthCentered(), [docs], out, engine=ENGINE)
    assert not Path("/tmp/assay-pwned-by-pickle").exists()
    assert Dataset(out).read().column("length_centered").to_pylist() == expected
