"""The core v2 stage contract: cardinalities, output kinds, fit-then-apply, statistics, resources and
lifecycle, on every engine."""
from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from assay.pipeline.dataset import Dataset, LedgerError, ShardWriter, write_table
from assay.pipeline.engines import get_engine
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import DOC_SCHEMA, make_docs
from assay.pipeline.stats import Stats, merge_stats, quantile
from assay.pipeline.tokens import LOSS, PAD, TokenDataset

from conftest import LOCAL_OPTIONS, RAY_OPTIONS, SPARK_OPTIONS
from stages_for_tests import (ByteTokens, CharCounts, LengthCentered, Lifecycle, Resample, Sentences,
                              TreeLengthCentered)

ENGINES = [
    pytest.param("local", LOCAL_OPTIONS, id="local"),
    pytest.param("spark", SPARK_OPTIONS, marks=pytest.mark.spark, id="spark"),
    pytest.param("ray", RAY_OPTIONS, marks=pytest.mark.ray, id="ray"),
]


def _docs(n: int = 60):
    texts = []
    for i in range(n):
        words = " ".join(f"w{(i * 7 + k) % 23}" for k in range(3 + i % 9))
        texts.append(f"Doc {i} says {words}. Second part {i}. Third {'reject' if i % 11 == 0 else 'fine'}")
    return make_docs([{"text": t, "source": f"s{i % 3}", "content_type": "web"} for i, t in enumerate(texts)])


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    return write_table(_docs(), tmp_path_factory.mktemp("docs") / "in", shards=4)


def _rows(path, rejects=False):
    ds = Dataset(path)
    table = ds.read_rejects() if rejects else ds.read()
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _engine(name, options, request):
    if name != "local":
        request.getfixturevalue(f"{name}_engine")
    return get_engine(name, options)


@pytest.mark.parametrize("engine, options", ENGINES)
def test_fit_states_of_many_shards_are_combined_on_the_workers(engine, options, tmp_path, request):
    """#31: a fit-then-apply stage reduced every shard's state on the driver in one step, so the
    driver held as many states as there were shards. A stage that can combine states is reduced as a
    tree on the workers: 40 shards give the driver's reduce 3 states (groups of runner.TREE_FAN_IN),
    with the artifact and the rows of one flat reduce, on every engine."""
    from assay.pipeline import runner

    many = write_table(_docs(120), tmp_path / "in", shards=40)
    eng = _engine(engine, options, request)
    tree = run_stage(TreeLengthCentered(), [many], tmp_path / "tree", engine=eng)
    flat = run_stage(LengthCentered(), [many], tmp_path / "flat", engine=get_engine("local", {"workers": 1}))
    assert runner.TREE_FAN_IN == 16 and tree.manifest["counts"]["rows_in"] == 120
    artifact = json.loads((tmp_path / "tree" / "_artifacts" / "fit.json").read_text())
    assert artifact.pop("states_reduced") == 3  # 40 -> groups of 16, 16, 8
    assert artifact == json.loads((tmp_path / "flat" / "_artifacts" / "fit.json").read_text())
    assert _rows(tmp_path / "tree") == _rows(tmp_path / "flat")
    assert sorted(p.name for p in (tmp_path / "tree" / "_fit" / "_tree" / "level-0").iterdir()) == \
        [f"group-{g:05d}.state" for g in range(3)]


def test_a_damaged_fit_state_is_fitted_again_under_the_tree(tmp_path):
    """Under the tree a damaged partial state (a worker reads it now, not the driver) still means that
    shard is fitted again, and the artifact is the undamaged run's."""
    many = write_table(_docs(120), tmp_path / "in", shards=40)
    out = tmp_path / "tree"
    run_stage(TreeLengthCentered(), [many], out, engine=get_engine("local", LOCAL_OPTIONS))
    good = (out / "_artifacts" / "fit.json").read_text()
    manifest = json.loads((out / "_manifest.json").read_text())
    (out / "_manifest.json").unlink()  # as a run killed after its fit's states were written
    (out / "_artifacts" / ".fit-done").unlink()
    (out / "_artifacts" / "fit.json").unlink()
    (out / "_lease.json").write_text(json.dumps({"fingerprint": manifest["fingerprint"], "pid": 2 ** 22 + 3,
                                                 "host": os.uname().nodename, "producer": manifest["producer"]}))
    (out / "_fit" / "part-00007.state").write_bytes(b"not a state")
    run_stage(TreeLengthCentered(), [many], out, engine=get_engine("local", LOCAL_OPTIONS))
    assert (out / "_artifacts" / "fit.json").read_text() == good


@pytest.mark.parametrize("engine, options", ENGINES)
def test_cardinalities_give_identical_output_and_balanced_ledgers(engine, options, docs, tmp_path, request):
    eng = _engine(engine, options, request)
    results = {}
    for stage in (Sentences(), Resample(), LengthCentered()):
        out = tmp_path / type(stage).__name__
        result = run_stage(stage, [docs], out, engine=eng)
        results[type(stage).__name__] = result
        for marker in (out / "_shards").glob("*.json"):  # checked per shard at commit
            counts = json.loads(marker.read_text())
            assert counts["rows_in"] == counts.get("rows_parent", counts["rows_out"]) + counts["rows_rejected"]
    one_to_many = results["Sentences"].manifest["counts"]
    assert one_to_many["rows_in"] == 60 and one_to_many["rows_rejected"] == 6  # 0, 11, 22, 33, 44, 55
    assert one_to_many["rows_parent"] == 54 and one_to_many["rows_out"] == one_to_many["rows_created"] == 54 * 3
    kept = Dataset(tmp_path / "Sentences").read()
    assert set(Counter(kept.column("parent_id").to_pylist()).values()) == {3}
    resample = results["Resample"].manifest["counts"]
    assert resample["rows_in"] == resample["rows_parent"] + resample["rows_rejected"]
    assert resample["rows_out"] > resample["rows_parent"] > 0  # repeats and merges create rows
    assert set(resample["rejected"]) == {"not_sampled"}
    if engine != "local":  # identical to the local engine, rows and rejects
        ref = tmp_path.parent / "ref"
        for stage in (Sentences(), Resample(), LengthCentered()):
            name = type(stage).__name__
            run_stage(stage, [docs], ref / name, engine=get_engine("local", LOCAL_OPTIONS))
            assert _rows(tmp_path / name) == _rows(ref / name), name
            assert _rows(tmp_path / name, rejects=True) == _rows(ref / name, rejects=True), name
            assert (Dataset(tmp_path / name).manifest.get("statistics")
                    == Dataset(ref / name).manifest.get("statistics")), name


def test_a_lost_row_fails_the_shard_not_the_end(tmp_path):
    writer = ShardWriter(tmp_path, 0, DOC_SCHEMA.append(pa.field("parent_id", pa.string())), "x", "one_to_many")
    table = _docs(3)
    writer.note_inputs(table)
    child = table.slice(0, 1).append_column("parent_id", table.slice(0, 1).column("id"))
    writer.write(child)
    with pytest.raises(LedgerError, match="neither rejected nor the parent"):
        writer.commit()
    assert not list(tmp_path.glob("part-*"))


def test_undeclared_column_is_an_error(tmp_path):
    writer = ShardWriter(tmp_path, 0, DOC_SCHEMA, "x")
    with pytest.raises(LedgerError, match="undeclared column"):
        writer.write(_docs(2).append_column("surprise", pa.array([1, 2])))


def test_fit_apply_artifact_and_statistics_equal_one_pass(docs, tmp_path):
    result = run_stage(LengthCentered(), [docs], tmp_path / "fit", engine=get_engine("local", LOCAL_OPTIONS))
    table = _docs()
    lengths = np.array([len(t) for t in table.column("text").to_pylist()], dtype=float)
    artifact = json.loads((tmp_path / "fit" / "_artifacts" / "fit.json").read_text())
    assert artifact["n"] == 60 and artifact["mean"] == pytest.approx(lengths.mean())
    out = Dataset(tmp_path / "fit").read()
    assert np.allclose(sorted(out.column("length_centered").to_pylist()), sorted(lengths - lengths.mean()))
    # statistics merged from 4 shards equal a single pass over the whole dataset
    single = Stats()
    single.sketch("length", lengths)
    single.histogram("length", lengths, [0, 10, 20, 40, 80, 1000])
    merged = result.manifest["statistics"]
    assert merged == merge_stats([single.to_json()])
    sketch = merged["sketches"]["length"]
    for q in (0.1, 0.5, 0.9):
        assert quantile(sketch, q) == pytest.approx(np.quantile(lengths, q, method="lower"), rel=0.03)


def test_weighted_sketch_gives_token_weighted_quantiles_and_merges_exactly():
    rng = np.random.default_rng(3)
    scores = rng.random(5000)
    tokens = rng.integers(1, 400, size=5000)
    tokens[scores > 0.8] *= 10  # long documents score high: token weighting must move the quantiles up
    whole, parts = Stats(), []
    whole.sketch("score", scores, weights=tokens)
    whole.histogram("score", scores, np.linspace(0, 1, 11), weights=tokens)
    for chunk in np.array_split(np.arange(5000), 7):
        part = Stats()
        part.sketch("score", scores[chunk], weights=tokens[chunk])
        part.histogram("score", scores[chunk], np.linspace(0, 1, 11), weights=tokens[chunk])
        parts.append(part.to_json())
    merged = merge_stats(parts)
    assert merged == merge_stats([whole.to_json()])
    assert sum(merged["histograms"]["score"]["counts"]) == merged["sketches"]["score"]["n"] == int(tokens.sum())
    repeated = np.repeat(scores, tokens)
    for q in (0.2, 0.5, 0.8):
        expected = np.quantile(repeated, q, method="lower")
        assert quantile(merged["sketches"]["score"], q) == pytest.approx(expected, rel=0.03)
    assert quantile(merged["sketches"]["score"], 0.5) > np.quantile(scores, 0.5) + 0.1
    with pytest.raises(ValueError, match="non-negative integers"):
        Stats().sketch("x", [1.0, 2.0], weights=[0.5, 1.5])


def killed_while_writing(out):
    """What a run killed before its manifest leaves: its lease (a dead pid on this host) naming the
    fingerprint its shards belong to."""
    import json
    import socket

    manifest = json.loads((out / "_manifest.json").read_text())
    (out / "_lease.json").write_text(json.dumps({"fingerprint": manifest["fingerprint"], "host": socket.gethostname(),
                                                 "pid": 2 ** 22 + 17, "producer": manifest.get("producer", {})}))
    (out / "_manifest.json").unlink()


def test_token_shards_round_trip_and_resume(docs, tmp_path):
    out = tmp_path / "tokens"
    result = run_stage(ByteTokens(), [docs], out, engine=get_engine("local", LOCAL_OPTIONS))
    assert result.manifest["output_kind"] == "tokens"
    tokens = TokenDataset(out)
    texts = {}
    for shard in tokens.shard_indexes():
        flat, mask = tokens.tokens(shard).reshape(-1), tokens.mask(shard).reshape(-1)
        assert tokens.tokens(shard).shape[1] == 16 and flat.dtype == np.uint16
        for d in tokens.docs(shard).to_pylist():
            start = d["row"] * 16 + d["start"]
            piece = flat[start:start + d["length"]]
            assert piece[0] == 256 and (mask[start:start + d["length"]] == LOSS).all()
            texts[d["doc_id"]] = bytes(piece[1:].astype(np.uint8)).decode()
        assert ((flat == 257) == ((mask & PAD) > 0)).all()
    source = {r["id"]: r["text"] for r in _docs().to_pylist()}
    assert texts == {i: t for i, t in source.items() if "reject" not in t}
    counts = result.manifest["counts"]
    assert counts["rows_rejected"] == 6 and counts["rows_parent"] == 54
    assert Dataset(out).read_rejects().num_rows == 6
    # a killed run: drop one committed shard; the rerun rebuilds exactly that one, byte for byte
    before = {p.name: p.read_bytes() for p in out.glob("part-*")}
    killed_while_writing(out)
    (out / "_shards" / "part-00002.json").unlink()
    (out / "part-00002.tokens").unlink()
    again = run_stage(ByteTokens(), [docs], out, engine=get_engine("local", LOCAL_OPTIONS))
    assert again.manifest["resumed_shards"] == 3
    assert {p.name: p.read_bytes() for p in out.glob("part-*")} == before


def test_side_dataset_joins_back_by_id(docs, tmp_path):
    result = run_stage(CharCounts(), [docs], tmp_path / "side", engine=get_engine("local", LOCAL_OPTIONS))
    side = Dataset(tmp_path / "side")
    assert side.schema.names == ["id", "n_chars"] and result.manifest["output_kind"] == "side"
    joined = Dataset(docs).read().join(side.read(), "id")
    assert joined.num_rows == 60
    assert all(r["n_chars"] == len(r["text"]) for r in joined.to_pylist())


@pytest.mark.parametrize("engine, options", [ENGINES[0], ENGINES[2]])
def test_workers_and_teardown_per_stage(engine, options, docs, tmp_path, request):
    """`workers: 1` runs in one process while the next stage uses every worker; teardown() runs once
    per worker per stage; the first stage's model is gone before the second starts."""
    eng = _engine(engine, options, request)
    log = tmp_path / "lifecycle.log"
    one = Lifecycle({"log": str(log)}, stage_id="one", workers=1)
    run_stage(one, [docs], tmp_path / "one", engine=eng)
    two = Lifecycle({"log": str(log)}, stage_id="two")
    run_stage(two, [tmp_path / "one"], tmp_path / "two", engine=eng)
    lines = [line.split() for line in log.read_text().splitlines()]
    for stage_id, workers in (("one", 1), ("two", 2)):
        setups = Counter(pid for kind, pid, sid in lines if kind == "setup" and sid == stage_id)
        teardowns = Counter(pid for kind, pid, sid in lines if kind == "teardown" and sid == stage_id)
        assert len(setups) == workers, (stage_id, setups)
        assert setups == teardowns and set(teardowns.values()) == {1}, (stage_id, teardowns)
    # every "one" teardown happened before any "two" setup; no worker still held stage one's model
    last_one = max(i for i, (kind, _, sid) in enumerate(lines) if sid == "one")
    first_two = min(i for i, (kind, _, sid) in enumerate(lines) if sid == "two")
    assert last_one < first_two
    assert set(Dataset(tmp_path / "two").read().column("live_before").to_pylist()) == {0}


@pytest.mark.parametrize("engine, options", ENGINES)
def test_fused_chain_matches_stage_by_stage(engine, options, docs, tmp_path, request):
    from assay.filters.basic import LengthFilter
    from assay.pipeline.runner import run_fused
    from stages_for_tests import SlowUpper

    eng = _engine(engine, options, request)
    chain = lambda: [SlowUpper({"seconds_per_batch": 0}, stage_id="upper"),  # noqa: E731
                     LengthFilter({"min_words": 13}, stage_id="long")]
    a, b = chain()
    run_stage(a, [docs], tmp_path / "seq" / "upper", engine=get_engine("local", LOCAL_OPTIONS))
    run_stage(b, [tmp_path / "seq" / "upper"], tmp_path / "seq" / "long", engine=get_engine("local", LOCAL_OPTIONS))
    results = run_fused(chain(), [docs], [tmp_path / "fused" / "upper", tmp_path / "fused" / "long"], engine=eng)
    assert [r.manifest["counts"] for r in results] == [
        Dataset(tmp_path / "seq" / s).manifest["counts"] for s in ("upper", "long")]
    assert results[0].manifest["counts"]["rows_rejected"] > 0 and results[1].manifest["counts"]["rows_rejected"] > 0
    assert _rows(tmp_path / "fused" / "long") == _rows(tmp_path / "seq" / "long")
    for s in ("upper", "long"):
        assert _rows(tmp_path / "fused" / s, rejects=True) == _rows(tmp_path / "seq" / s, rejects=True)


@pytest.mark.spark
def test_a_second_spark_master_is_refused_not_ignored(spark_engine):
    from assay.pipeline.engines.spark import get_spark
    from assay.pipeline.errors import UserError

    assert get_spark(SPARK_OPTIONS["spark_master"]) is spark_engine.spark  # same settings: reused
    with pytest.raises(UserError, match="asked for 'spark://127.0.0.1:7077'"):
        get_spark("spark://127.0.0.1:7077")
    with pytest.raises(UserError, match="spark.sql.shuffle.partitions"):
        get_spark(SPARK_OPTIONS["spark_master"], {"spark.sql.shuffle.partitions": "3"})


@pytest.mark.parametrize("stage_name, params", [("quality.calibrate", {"ensemble": "mean"}),
                                                ("semantic.rebalance", {})])
def test_real_fit_stages_reduce_the_same_as_a_tree(stage_name, params, tmp_path, monkeypatch):
    """The stages that combine (quality calibration, semantic rebalancing) give the same artifact and
    rows whether 40 shards' states are folded as a tree or handed to one reduce."""
    from assay.pipeline import runner
    from assay.pipeline.stage import resolve_stage

    rng = np.random.default_rng(4)
    table = _docs(400)
    for name in ("quality_alpha", "quality_beta"):
        table = table.append_column(name, pa.array(np.where(rng.random(400) < 0.1, np.nan, rng.random(400))))
    table = table.append_column("cluster", pa.array(rng.integers(0, 12, 400), pa.int32()))
    many = write_table(table, tmp_path / "in", shards=40)
    one = get_engine("local", {"workers": 1})
    run_stage(resolve_stage(stage_name)(params), [many], tmp_path / "tree", engine=one)
    monkeypatch.setattr(runner, "TREE_FAN_IN", 10_000)
    run_stage(resolve_stage(stage_name)(params), [many], tmp_path / "flat", engine=one)
    assert (tmp_path / "tree" / "_fit" / "_tree").is_dir() and not (tmp_path / "flat" / "_fit" / "_tree").exists()
    artifacts = [sorted(p.name for p in (tmp_path / k / "_artifacts").iterdir()) for k in ("tree", "flat")]
    assert artifacts[0] == artifacts[1]
    for name in artifacts[0]:
        if not name.startswith("."):
            assert (tmp_path / "tree" / "_artifacts" / name).read_bytes() == (tmp_path / "flat" / "_artifacts" / name).read_bytes(), name
    as_text = [[json.dumps(r, sort_keys=True, default=str) for r in _rows(tmp_path / k)] for k in ("tree", "flat")]
    assert as_text[0] == as_text[1]  # (NaN scores compare as text)
