"""Assay on a real object store (SeaweedFS's S3 API, tests/s3server.py): the demo's core with inputs
and outputs on S3 gives the same bytes as on local disk; a run killed with SIGKILL while writing to S3
leaves no object a reader would take for data, and its rerun gives the same bytes; a prefix Assay did
not write is refused untouched; leases hold there; credentials never reach what Assay writes or says."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.pipeline import storage
from assay.pipeline.dataset import Lease, OutputBusy, OutputRefused, write_table
from assay.pipeline.recipe import load_recipe
from assay.pipeline.runner import run_recipe
from assay.pipeline.stage import MapStage

from conftest import DEMO_CORE_UNTIL, DEMO_RECIPE, LOCAL_OPTIONS, SAMPLE

BIN = Path(sys.executable).parent
# The demo's sources (web pages, WARC, PDFs, code, GitHub issues) and every stage up to exact dedup:
# map stages and two global (shuffle-bound) stages. The synthesis and model stages after it add
# minutes, not storage paths.
INPUT_FOLDERS = ("warc", "html", "pdf", "code", "issues", "history")  # history: a bare git repository
KILL_UNTIL = "lang"  # the kill test's run: the sources and two map stages (killed among them)


def upload(fs, local: Path, url: str) -> None:
    for path in sorted(local.rglob("*")):
        if path.is_file():
            fs.put_file(str(path), f"{url}/{path.relative_to(local).as_posix()}")


def objects(fs, prefix: str) -> dict[str, bytes]:
    """Every object below `prefix`, by key relative to it."""
    out = {}
    for key, info in fs.find(prefix, detail=True).items():
        if info.get("type") != "directory":
            out[key[len(prefix) + 1:]] = fs.cat_file(key)
    return out


def local_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def data_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """Shards and rejects (what readers read), without manifests, markers and run logs (timings)."""
    return {k: v for k, v in files.items() if k.rsplit("/", 1)[-1].startswith("part-") and k.endswith(".parquet")}


def s3_recipe(tmp_path: Path, sample_url: str) -> Path:
    """The demo recipe with its sample inputs on S3, the git repository included (read from a local
    copy per content); other relative paths made absolute."""
    text = DEMO_RECIPE.read_text().replace("../sample/", f"{sample_url}/")
    text = text.replace("../", f"{DEMO_RECIPE.parent.parent}/")
    path = tmp_path / "demo-s3.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def local_core(tmp_path_factory):
    """The demo's core on local disk: the reference every S3 run must match byte for byte."""
    workdir = tmp_path_factory.mktemp("core-local")
    run_recipe(load_recipe(DEMO_RECIPE), workdir=workdir, engine="local", options=LOCAL_OPTIONS,
               until=DEMO_CORE_UNTIL, log=lambda *_: None)
    return workdir


@pytest.fixture
def sample_on_s3(s3):
    fs = s3.filesystem()
    url = f"s3://{s3.current_bucket}/sample"
    for folder in INPUT_FOLDERS:
        upload(fs, SAMPLE / folder, f"{url}/{folder}")
    return url


def assay(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "assay"), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def test_demo_core_on_s3_same_bytes_as_local_disk(s3, sample_on_s3, local_core, tmp_path):
    fs = s3.filesystem()
    workdir = f"s3://{s3.current_bucket}/runs/demo"
    recipe = s3_recipe(tmp_path, sample_on_s3)
    result = assay("run", str(recipe), "--workdir", workdir, "--until", DEMO_CORE_UNTIL, "--workers", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    stored = objects(fs, f"{s3.current_bucket}/runs/demo")
    report = stored.pop("report.html").decode()  # rendered from the manifests on S3, uploaded beside them
    assert "Assay report: demo" in report and workdir in report and "exact_dedup" in report
    ours, ref = data_files(stored), data_files(local_files(local_core))
    assert sorted(ours) == sorted(ref)
    assert [k for k in ref if ours[k] != ref[k]] == []
    manifest = json.loads(stored[f"{DEMO_CORE_UNTIL}/_manifest.json"])
    assert manifest["counts"]["rows_in"] > 0
    assert not [k for k in stored if ".tmp-" in k or k.endswith("_lease.json")]
    # A second run reads the manifests on S3 and skips every stage.
    again = assay("run", str(recipe), "--workdir", workdir, "--no-report", "--until", DEMO_CORE_UNTIL)
    assert again.returncode == 0 and again.stdout.count("skipped (unchanged)") >= 6, again.stdout
    said = (result.stdout + result.stderr + again.stdout + again.stderr).encode()
    for data in (said, report.encode(), *stored.values()):  # every object on S3, the report; what it printed
        assert s3.secret_key.encode() not in data and s3.access_key.encode() not in data


@pytest.mark.slow
def test_whole_demo_on_s3_same_bytes_as_local_disk(s3, sample_on_s3, local_demo, tmp_path):
    """Every stage of the demo (sources, map, global, fit-then-apply, side datasets, synthesis) with
    its inputs and outputs on S3, against the session's local-disk run of it."""
    fs = s3.filesystem()
    workdir = f"s3://{s3.current_bucket}/runs/whole"
    result = assay("run", str(s3_recipe(tmp_path, sample_on_s3)), "--workdir", workdir, "--no-report",
                   "--workers", "2", timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    _, local_dir, _ = local_demo
    stored = objects(fs, f"{s3.current_bucket}/runs/whole")
    ours, ref = data_files(stored), data_files(local_files(Path(local_dir)))
    assert sorted(ours) == sorted(ref)
    assert [k for k in ref if ours[k] != ref[k]] == []
    for data in (result.stdout.encode(), result.stderr.encode(), *stored.values()):
        assert s3.secret_key.encode() not in data


def test_kill_9_while_writing_to_s3_then_rerun(s3, sample_on_s3, local_core, tmp_path):
    fs = s3.filesystem()
    prefix = f"{s3.current_bucket}/runs/killed"
    recipe = s3_recipe(tmp_path, sample_on_s3)
    cmd = [str(BIN / "assay"), "run", str(recipe), "--workdir", f"s3://{prefix}", "--no-report",
           "--until", KILL_UNTIL, "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 300
    try:  # kill once some shards are committed and the run is still going
        while time.time() < deadline and proc.poll() is None:
            markers = [k for k in fs.find(prefix) if "/_shards/" in k]
            if len(markers) >= 3:
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    left = objects(fs, prefix)
    assert left and not [k for k in left if ".tmp-" in k]
    for key, data in left.items():  # every object is whole: a PUT is all or nothing
        if key.endswith(".parquet"):
            import io

            import pyarrow.parquet as pq

            pq.read_table(io.BytesIO(data))
        elif key.endswith(".json"):
            json.loads(data)
    assert not [k for k in left if k.endswith("_manifest.json") and k.startswith(KILL_UNTIL + "/")]
    rerun = assay("run", str(recipe), "--workdir", f"s3://{prefix}", "--no-report", "--until", KILL_UNTIL,
                  "--workers", "2")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "resumed" in rerun.stdout or "skipped" in rerun.stdout, rerun.stdout
    stored = objects(fs, prefix)
    ran = {k.split("/", 1)[0] for k in stored}
    ours = data_files(stored)
    ref = {k: v for k, v in data_files(local_files(local_core)).items() if k.split("/", 1)[0] in ran}
    assert sorted(ours) == sorted(ref)  # no shard object beyond the committed ones
    assert [k for k in ref if ours[k] != ref[k]] == []
    assert not [k for k in stored if ".tmp-" in k or k.endswith("_lease.json")]


def test_foreign_prefix_on_s3_is_refused_untouched(s3, tmp_path):
    fs = s3.filesystem()
    prefix = f"{s3.current_bucket}/theirs"
    fs.pipe_file(f"{prefix}/notes.txt", b"not Assay's")
    fs.pipe_file(f"{prefix}/sub/data.bin", b"\x00\x01")
    before = objects(fs, prefix)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"text": f"document number {i} " * 20}) for i in range(30)) + "\n")
    result = assay("read", "jsonl", str(docs), f"s3://{prefix}")
    assert result.returncode == 2
    assert "refusing" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    workdir = assay("run", str(DEMO_RECIPE), "--workdir", f"s3://{prefix}", "--no-report", "--until", "web_html")
    assert workdir.returncode == 2 and "not an Assay run directory" in workdir.stderr, workdir.stderr
    assert objects(fs, prefix) == before
    # An Assay dataset on S3 made by another stage is not replaced without --force either.
    ours = f"s3://{s3.current_bucket}/ours"
    first = assay("read", "jsonl", str(docs), ours)
    assert first.returncode == 0, first.stderr
    other = assay("filter", "length", ours, ours + "-len")
    assert other.returncode == 0, other.stderr
    replace = assay("read", "text", str(docs), ours + "-len")
    assert replace.returncode == 2 and "--force" in replace.stderr, replace.stderr


def test_lease_on_s3_one_writer_and_stale_takeover(s3, monkeypatch):
    root = storage.as_path(f"s3://{s3.current_bucket}/leased")
    first = Lease(root, "fp-1").acquire()
    try:
        with pytest.raises(OutputBusy, match="another Assay run is writing it"):
            Lease(root, "fp-2").acquire()
        # Two writers that read the same lease object: exactly one conditional write wins (each writes
        # its own token, so the object changes; an ETag is the content's hash).
        data, etag = storage.read_with_tag(root / "_lease.json")
        race = root.parent / "race" / "_lease.json"
        storage.put_bytes(race, data)
        storage.put_if(race, data.replace(b'"token": "', b'"token": "x'), etag)
        with pytest.raises(storage.Conflict):
            storage.put_if(race, data.replace(b'"token": "', b'"token": "y'), etag)
        assert b'"token": "x' in storage.read_bytes(race)
        with pytest.raises(storage.Conflict):
            storage.put_if(root / "_lease.json", data, None)  # create-only: it exists
    finally:
        first.release(finished=False)
    # A lease whose writer is gone (here: released after a failure) is taken over, and says which
    # fingerprint its shards belong to.
    second = Lease(root, "fp-2").acquire()
    assert second.previous_fingerprint() == "fp-1" and second.ours()
    second.release()
    assert not storage.exists(root / "_lease.json")


def test_lease_without_conditional_writes(s3, monkeypatch):
    """Stores that ignore conditional headers: write, wait, read back; still one writer at a time."""
    monkeypatch.setenv("ASSAY_S3_CONDITIONAL", "0")
    monkeypatch.setattr(Lease, "VERIFY_S", 0.2)
    root = storage.as_path(f"s3://{s3.current_bucket}/leased-plain")
    first = Lease(root, "a").acquire()
    with pytest.raises(OutputBusy):
        Lease(root, "b").acquire()
    assert first.ours()
    first.release()
    assert not storage.exists(root / "_lease.json")


def test_map_stage_and_export_on_s3(s3, tmp_path):
    """A stage reading a dataset on S3 and writing to S3 gives the local run's bytes; `assay export`
    reads it there and writes its file there (not over an existing one)."""
    import pyarrow as pa

    table = pa.table({"id": [f"d{i}" for i in range(40)], "text": [f"text {i} " * (i + 1) for i in range(40)]})
    remote_in = f"s3://{s3.current_bucket}/input"
    write_table(table, remote_in, shards=3)
    write_table(table, tmp_path / "input", shards=3)
    ok = assay("filter", "length", remote_in, f"s3://{s3.current_bucket}/out", "--min-chars", "50")
    assert ok.returncode == 0, ok.stderr
    local = assay("filter", "length", str(tmp_path / "input"), str(tmp_path / "out"), "--min-chars", "50")
    assert local.returncode == 0, local.stderr
    fs = s3.filesystem()
    assert data_files(objects(fs, f"{s3.current_bucket}/out")) == data_files(local_files(tmp_path / "out"))
    exported = assay("export", f"s3://{s3.current_bucket}/out", f"s3://{s3.current_bucket}/export/out.jsonl")
    assert exported.returncode == 0, exported.stderr
    assert assay("export", str(tmp_path / "out"), str(tmp_path / "out.jsonl")).returncode == 0
    assert fs.cat_file(f"{s3.current_bucket}/export/out.jsonl") == (tmp_path / "out.jsonl").read_bytes()
    again = assay("export", f"s3://{s3.current_bucket}/out", f"s3://{s3.current_bucket}/export/out.jsonl")
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr
    refused = assay("filter", "length", remote_in, remote_in + "/nested")
    assert refused.returncode == 2 and "inside the input" in refused.stderr, refused.stderr
    with pytest.raises(OutputRefused):
        from assay.pipeline.dataset import check_output

        fs.pipe_file(f"{s3.current_bucket}/input/stray.txt", b"x")
        check_output(remote_in)


def test_mixture_and_training_run_on_s3(s3, tmp_path):
    """`mix build` reading its sources from S3 and writing OUT there gives the local build's token
    shards byte for byte; a training run reads that mixture through the local cache and writes its
    checkpoints, metrics and summary to S3."""
    from assay.mixer.build import build
    from assay.mixer.recipe import parse_mixture
    from assay.mixer.tokenizer import train_bpe

    from mixer_corpus import documents, mixture_data, write_corpus

    fs = s3.filesystem()
    docs = documents()
    train_bpe([d["text"] for d in docs], 600).save(str(tmp_path / "tokenizer.json"))
    write_corpus(tmp_path / "docs", docs)
    remote_docs = f"s3://{s3.current_bucket}/docs"
    write_corpus(remote_docs, docs)
    local_mix = parse_mixture(mixture_data(tmp_path / "docs", tmp_path / "tokenizer.json"), tmp_path / "mix.yaml")
    remote_mix = parse_mixture(mixture_data(remote_docs, tmp_path / "tokenizer.json"), tmp_path / "mix.yaml")
    # In-process (one worker): a forkserver another test started holds the environment from before the
    # store's credentials were set, which no real run has.
    build(local_mix, tmp_path / "mix", options={"workers": 1}, log=lambda *_: None)
    build(remote_mix, f"s3://{s3.current_bucket}/mix", options={"workers": 1}, log=lambda *_: None)
    stored = objects(fs, f"{s3.current_bucket}/mix")
    local = local_files(tmp_path / "mix")
    stage_files = [k for k in local if k.split("/", 1)[0] in {s.id for s in local_mix.stages}
                   and k.rsplit("/", 1)[-1].startswith("part-") and not k.endswith(".json")]  # data, not markers
    assert stage_files and {k: stored.get(k) for k in stage_files} == {k: local[k] for k in stage_files}
    # A training run reading the S3 mixture (through the local cache) and writing to S3 trains exactly
    # as the local one does.
    from assay.trainer.config import parse_train_config
    from assay.trainer.train import train

    stage = local_mix.stages[0].id
    summaries = {}
    for where, data, out in (("local", tmp_path / "mix" / stage, tmp_path / "run"),
                             ("s3", f"s3://{s3.current_bucket}/mix/{stage}", f"s3://{s3.current_bucket}/run")):
        cfg = parse_train_config({
            "name": "s3-run", "seed": 1, "tokens": 4 * 2 * 256, "threads": 1, "checkpoint_every": 2,
            "model": {"d_model": 32, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2},
            "moe": {"num_experts": 2, "top_k": 1, "expert_hidden": 32, "n_shared": 1},
            "data": {"train": str(data), "batch_size": 2}, "optim": {"lr": 3e-3}, "log": {"every": 1}})
        summaries[where] = train(cfg, out, log=lambda *_: None, report=False)
    assert summaries["s3"]["final_loss"] == summaries["local"]["final_loss"] is not None
    run = objects(fs, f"{s3.current_bucket}/run")
    assert [k for k in run if k.startswith("checkpoints/step-")] and "summary.json" in run
    assert len(run["metrics.jsonl"].splitlines()) == len((tmp_path / "run" / "metrics.jsonl").read_bytes().splitlines())


def test_request_cache_on_s3_shared_between_processes(s3, tmp_path, monkeypatch):
    """A request cache on S3: answers one process stored are hits in another (another host, with its
    own local mirror)."""
    root = f"s3://{s3.current_bucket}/cache"
    writer = subprocess.run([sys.executable, "-c", (
        "import sys; from assay.pipeline.service import RequestCache\n"
        "c = RequestCache(sys.argv[1])\n"
        "for i in range(20): c.put(c.key({'q': i}), {'q': i}, {'a': i * i})\n"
        "c.flush()\n"), root], capture_output=True, text=True, env=dict(os.environ, ASSAY_CACHE=str(tmp_path / "a")))
    assert writer.returncode == 0, writer.stderr
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "b"))  # another host's local mirror
    from assay.pipeline.service import RequestCache

    cache = RequestCache(root)
    assert [cache.get(cache.key({"q": i})) for i in range(20)] == [{"a": i * i} for i in range(20)]
    assert cache.get(cache.key({"q": 99})) is None
    fs = s3.filesystem()
    journal = fs.find(f"{s3.current_bucket}/cache/journal")[0]
    assert not [k for k in fs.find(f"{s3.current_bucket}/cache") if s3.secret_key in fs.cat_file(k).decode()]
    assert journal.endswith(".jsonl")


def test_shared_values_go_through_the_store(s3):
    """What prepare() builds on the driver is published in the output's scratch folder on S3 and
    loaded by a worker's copy of the stage from there (no shared disk needed)."""
    import pickle

    stage = Shares()
    scratch = storage.as_path(f"s3://{s3.current_bucket}/out/_scratch")
    stage.share(scratch)
    assert storage.exists(scratch / "shared-test.shares.npz")
    worker = pickle.loads(pickle.dumps(stage))
    assert worker.vocab is None
    worker.ensure_setup()
    assert worker.vocab == {"alpha": 1, "beta": 2}


class Shares(MapStage):
    """A stage whose driver builds a value that every worker loads (like semantic.decontam's index)."""

    name = "test.shares"
    shared = ("vocab",)
    vocab = None

    def prepare(self) -> None:
        self.vocab = {"alpha": 1, "beta": 2}


def test_rows_do_not_depend_on_where_the_corpus_lies(tmp_path):
    """The same files in two places give the same rows (ids, meta paths, reject details): rows name
    a file by its path below the folder holding the stage's input folders."""
    import shutil

    from assay.pipeline.dataset import Dataset
    from assay.pipeline.readers import ReadJsonl
    from assay.pipeline.runner import run_stage

    tables = []
    for place in ("a/deep/folder", "b"):
        corpus = tmp_path / place / "issues"
        shutil.copytree(SAMPLE / "issues", corpus)
        (corpus / "broken.jsonl").write_text('{"text": "fine"}\nnot json\n')
        run_stage(ReadJsonl({"paths": [f"{corpus}/*.jsonl*"]}), [], tmp_path / f"out-{place.replace('/', '-')}",
                  options={"workers": 1})
        ds = Dataset(tmp_path / f"out-{place.replace('/', '-')}")
        tables.append((ds.read().to_pylist(), ds.read_rejects().to_pylist()))
    assert tables[0] == tables[1]
    assert [r["reject_detail"] for r in tables[0][1]] and "issues/broken.jsonl:2" in json.dumps(tables[0][1])


def test_calibration_and_inventory_files_read_from_the_store(s3, tmp_path):
    """quality.tiers' calibration and semantic.mine's inventory may lie on the store like any input."""
    from assay.quality.tiers import SHIPPED_CALIBRATION, load_calibration
    from assay.semantic.mine import read_inventory

    fs = s3.filesystem()
    prefix = f"{s3.current_bucket}/params"
    fs.pipe_file(f"{prefix}/calibration.json", SHIPPED_CALIBRATION.read_bytes())
    fs.pipe_file(f"{prefix}/inventory.txt", b"# kinds\nconcept: tide pools\nentity: soldering iron\n")
    assert load_calibration(f"s3://{prefix}/calibration.json") == load_calibration("default")
    assert read_inventory(f"s3://{prefix}/inventory.txt") == [("concept", "tide pools"), ("entity", "soldering iron")]
