"""Trainer loop: meta switch, exact resume, eval BPB bookkeeping, configs and CLI errors, run dirs."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from assay.pipeline.errors import UserError  # noqa: E402
from assay.pipeline.tokens import META, TokenDataset  # noqa: E402
from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import ConfigError, load_train_config, parse_train_config  # noqa: E402
from assay.trainer.evaluate import evaluate  # noqa: E402
from assay.trainer.train import Trainer, read_metrics, train  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and a sphinx of black quartz hears my vow").split()


def _docs(n: int, source: str, seed: int, meta: bool = True) -> list[dict]:
    import random

    rng = random.Random(seed)
    return [{"doc_id": f"{source}-{seed}-{i}", "source": source,
             "meta": f"<meta>source={source}</meta>\n" if meta else None,
             "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "."} for i in range(n)]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokens")
    train_docs = _docs(60, "web", 0) + _docs(30, "code", 1)
    held = _docs(10, "web", 2) + _docs(6, "code", 3)
    return {"train": write_byte_dataset(train_docs, root / "train", seq_len=65, shards=2),
            "eval": write_byte_dataset(held, root / "eval", seq_len=65), "held_docs": held}


def _cfg(data, **over) -> object:
    raw = {"name": "t", "seed": 3, "tokens": 8 * 8 * 64, "threads": 1,
           "model": {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2},
           "moe": {"num_experts": 4, "top_k": 2, "expert_hidden": 32, "n_shared": 1, "z_loss_coef": 1e-3,
                   "seq_balance_coef": 1e-4},
           "data": {"train": str(data["train"]), "batch_size": 4, "grad_accum": 2},
           "optim": {"lr": 3e-3}, "log": {"every": 1}}
    for key, value in over.items():
        raw[key] = dict(raw.get(key, {}), **value) if isinstance(value, dict) else value
    return parse_train_config(raw)


def killed_run(cfg, run):
    """A run folder as a killed `train` leaves it (its lease, with the run's fingerprint), and a
    Trainer to play the part of the process that was killed."""
    from assay.pipeline.dataset import Dataset, Lease
    from assay.pipeline.runner import fingerprint, producer
    from assay.trainer.stage import TrainRun

    stage = TrainRun({"config": cfg.model_dump(mode="json")}, stage_id=cfg.name)
    fp = fingerprint(stage, [Dataset(p) for p in stage.inputs()])
    Lease(run, fp, producer(stage, None), owns=stage.owned_names).acquire().release(finished=False)
    return Trainer(cfg, run, fingerprint=fp)


def test_meta_switch_happens_at_the_configured_token(data, tmp_path):
    cfg = _cfg(data, meta={"loss_until_tokens": 3 * 8 * 64})  # three steps of 8 rows x 64 positions
    (tmp_path / "run").mkdir()
    tr = Trainer(cfg, tmp_path / "run")
    assert tr.tokens_per_step == 8 * 64 and tr.meta_switch == 3 * 8 * 64
    flags, trained = [], []
    for _ in range(6):
        before = tr.state["trained"]
        flags.append(tr.step()["meta_loss"])
        trained.append(tr.state["trained"] - before)
    assert flags == [True, True, True, False, False, False]
    # Every row carries META prefixes: training on them adds targets, masking them removes exactly those.
    assert min(trained[:3]) > max(trained[3:])
    ds = TokenDataset(data["train"])
    assert any(((ds.mask(i) & META) != 0).any() for i in ds.shard_indexes())


def test_resume_repeats_the_uninterrupted_run_bit_for_bit(data, tmp_path):
    cfg = _cfg(data, checkpoint_every=3, mtp={"depth": 1}, meta={"loss_until_fraction": 0.5},
               moe={"bias_rate": [{"value": 0.01, "until_fraction": 0.6}, {"value": 0.0}]})
    full = train(cfg, tmp_path / "full", log=lambda m: None, report=False)
    assert full["steps"] == 8
    # The interrupted run: 5 steps (a checkpoint at step 3, then two lost steps), killed, resumed.
    run = tmp_path / "cut"
    tr = killed_run(cfg, run)
    metrics = open(run / "metrics.jsonl", "w")
    for _ in range(5):
        rec = tr.step()
        metrics.write(json.dumps({"kind": "train", "step": tr.state["step"], "loss": round(rec["loss"], 5)}) + "\n")
        if tr.state["step"] == 3:
            tr.save()
    metrics.close()
    del tr
    train(cfg, run, log=lambda m: None, report=False)
    a = [r["loss"] for r in read_metrics(tmp_path / "full") if r["kind"] == "train"]
    b = [r["loss"] for r in read_metrics(run) if r["kind"] == "train"]
    assert [r["step"] for r in read_metrics(run) if r["kind"] == "train"] == list(range(1, 9))
    assert a == b
    ca = torch.load(sorted((tmp_path / "full" / "checkpoints").glob("*.pt"))[-1], weights_only=True)
    cb = torch.load(sorted((run / "checkpoints").glob("*.pt"))[-1], weights_only=True)
    for key, value in ca["model"].items():
        assert torch.equal(value, cb["model"][key]), key
    biases = [k for k in ca["model"] if k.endswith("expert_bias")]
    assert biases and any(ca["model"][k].abs().sum() > 0 for k in biases)
    assert ca["loader"] == cb["loader"] and ca["state"]["trained"] == cb["state"]["trained"]
    # Same config again: complete, nothing retrained.
    assert train(cfg, run, log=lambda m: None, report=False)["steps"] == 8


def test_eval_bits_per_byte_counts_document_bytes_per_source(data):
    torch.manual_seed(0)
    cfg = _cfg(data)
    from assay.trainer.train import build_model

    model = build_model(cfg, 259, 64)
    res = evaluate(model, data["eval"], batch_size=8)
    held = data["held_docs"]
    for source in ("web", "code"):
        r = res["per_source"][source]
        assert r["bytes"] == sum(len(d["text"].encode()) for d in held if d["source"] == source)
        assert r["bpb"] == pytest.approx(r["nats"] / (math.log(2) * r["bytes"]), rel=1e-4)
    assert res["bytes"] == sum(len(d["text"].encode()) for d in held)
    # Untrained: about ln(320) nats per byte token; with the prefix removed the same text is scored.
    assert 7.0 < res["bpb"] < 9.5
    assert "no_prefix" in res and res["no_prefix"]["bytes"] == res["bytes"]
    # Packed rows cut by max_rows: bits over every target of the first rows / the bytes those targets
    # stand for (byte tokens are bytes; BOS, EOS and the prefix are not text).
    import numpy as np

    ds = TokenDataset(data["eval"])
    tok, mask = np.asarray(ds.tokens(0), np.int64)[:5], np.asarray(ds.mask(0))[:5]
    cut = evaluate(model, data["eval"], batch_size=2, max_rows=5, no_prefix=False)
    with torch.no_grad():
        nats = torch.nn.functional.cross_entropy(model.logits(torch.from_numpy(tok[:, :-1])).transpose(1, 2),
                                                 torch.from_numpy(tok[:, 1:]), reduction="none").double().numpy()
    scored = ((mask[:, 1:] & 1) != 0) & ((mask[:, 1:] & META) == 0)
    assert cut["bytes"] == int((tok[:, 1:][scored] < 256).sum()) < res["bytes"]
    assert abs(cut["bpb"] - nats[scored].sum() / math.log(2) / cut["bytes"]) < 1e-6


def test_train_summary_telemetry_and_report(data, tmp_path):
    cfg = _cfg(data, eval={"sets": {"held": str(data["eval"])}}, tokens=4 * 8 * 64)
    summary = train(cfg, tmp_path / "run", log=lambda m: None)
    assert summary["eval"]["held"]["bpb"] > 0 and summary["tokens_trained"] < summary["tokens"]
    recs = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "train"]
    moe = recs[-1]["moe"][0]
    assert len(moe["load"]) == 4 and abs(sum(moe["load"]) - 1) < 1e-3
    for key in ("load_max_mean", "bias_min", "bias_max", "act_rms", "act_rms_max_median", "act_rms_min_median",
                "shared_routed_ratio", "router_entropy"):
        assert key in moe
    assert "tokens_seen" in recs[-1] and "grad_norm" in recs[-1] and "spikes" in recs[-1]
    html = (tmp_path / "run" / "report.html").read_text()
    assert "Training run" in html and "<img" in html
    # `assay eval` rebuilds the model from the last checkpoint and scores the same set identically.
    from assay.trainer.checkpoint import evaluate_checkpoint

    again = evaluate_checkpoint(tmp_path / "run", {"held": str(data["eval"])})
    assert again["held"]["bpb"] == summary["eval"]["held"]["bpb"]
    # an ablation's section shows each arm's expert load and active share (first seed's run)
    import shutil

    from assay.trainer.report import _expert_html

    for arm in ("a", "b"):
        shutil.copytree(tmp_path / "run", tmp_path / "abl" / "runs" / f"{arm}-s0")
    experts = _expert_html(tmp_path / "abl")
    worst = max(layer["load_max_mean"] for layer in recs[-1]["moe"])
    active = summary["params"]["active"] / summary["params"]["total"]
    assert experts.count(f"<td>{worst:.2f}</td>") == 2 and f"<td>{active:.1%}</td>" in experts and "<img" in experts


def test_eval_set_overlapping_training_is_refused(data, tmp_path):
    cfg = _cfg(data, eval={"sets": {"leak": str(data["train"])}})
    with pytest.raises(UserError, match="also occur in data.train"):
        train(cfg, tmp_path / "run", log=lambda m: None)


def test_config_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntokens: 100\ndata: {train: d}\nmoe: {num_expert: 4}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: moe.num_expert: unknown key; did you mean 'num_experts'"):
        load_train_config(bad)
    bad.write_text("name: x\ntokens: 100\ndata: {train: d}\nmoe: {num_experts: 2, top_k: 3}\n")
    with pytest.raises(ConfigError, match="bad.yaml: moe: top_k 3 exceeds num_experts 2"):
        load_train_config(bad)


def test_cli_one_line_errors_and_refuses_foreign_directories(data, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndata: {train: d}\n")
    assay = [sys.executable, "-m", "assay.pipeline.cli"]
    res = subprocess.run(assay + ["train", str(bad)], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "bad.yaml: tokens: required key is missing" in res.stderr
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    cfg = _cfg(data)
    with pytest.raises(UserError, match="refusing"):
        train(cfg, foreign, log=lambda m: None)
    assert (foreign / "notes.txt").read_text() == "keep me"
    with pytest.raises(UserError, match="pass --force to replace it"):
        train(cfg, data["eval"], log=lambda m: None)


def test_evaluation_never_changes_training(data, tmp_path):
    """Issue #27 item 6: evaluating every quarter of the run (held-out text, padded rows) leaves the
    trajectory exactly as a run without evaluation: router load is counted in training mode only."""
    tokens = 8 * 8 * 64
    plain = _cfg(data, tokens=tokens, moe={"bias_rate": 0.01})
    evaluated = _cfg(data, tokens=tokens, moe={"bias_rate": 0.01},
                     eval={"sets": {"held": str(data["eval"])}, "every_tokens": tokens // 4})
    train(plain, tmp_path / "plain", log=lambda m: None, report=False)
    train(evaluated, tmp_path / "eval", log=lambda m: None, report=False)
    assert len([r for r in read_metrics(tmp_path / "eval") if r["kind"] == "eval"]) == 4
    a = torch.load(sorted((tmp_path / "plain" / "checkpoints").glob("*.pt"))[-1], weights_only=True)["model"]
    b = torch.load(sorted((tmp_path / "eval" / "checkpoints").glob("*.pt"))[-1], weights_only=True)["model"]
    assert any(k.endswith("expert_bias") and v.abs().sum() > 0 for k, v in a.items())
    for key, value in a.items():
        assert torch.equal(value, b[key]), key


def test_flat_stream_bpb_with_max_rows_equals_an_independent_count(tmp_path):
    """Issue #27 item 7: a flat `mix.tokenize` stream (metadata prefixes, FIM variants of code) scored
    on its first windows: BPB = bits over exactly the scored tokens / UTF-8 bytes of those tokens."""
    import numpy as np

    from assay.mixer.tokenize import Tokenize
    from assay.mixer.tokenizer import Vocab, train_bpe
    from assay.pipeline.runner import run_stage
    from assay.pipeline.tokens import LOSS
    from mixer_corpus import documents, write_corpus

    docs = documents(n_web=40, n_code=30, n_pr=10, n_chat=10)
    docs = [docs[i] for i in np.random.default_rng(0).permutation(len(docs))]  # code among the first windows
    write_corpus(tmp_path / "docs", docs)
    train_bpe([d["text"] for d in docs], 400).save(str(tmp_path / "tok.json"))
    params = {"tokenizer": str(tmp_path / "tok.json"), "meta_fields": ["content_type", "lang"],
              "fim_content_types": ["code"], "seed": 1}
    run_stage(Tokenize(params, stage_id="tok"), [tmp_path / "docs"], tmp_path / "stream")
    vocab = Vocab.load(tmp_path / "tok.json")
    ds = TokenDataset(tmp_path / "stream")
    assert ds.layout.seq_len == 0
    torch.manual_seed(0)
    from assay.trainer.train import build_model

    T, n_rows = 48, 37
    model = build_model(_cfg({"train": "x"}), vocab.vocab_size, T).eval()
    res = evaluate(model, tmp_path / "stream", batch_size=8, max_rows=n_rows, seq_len=T, no_prefix=False)

    # Independently: stream windows of T + 1 tokens overlap by one, so stream position p is the target
    # of one window; the first `n_rows` windows (batches of 8, as evaluated) score positions
    # 1 .. n_rows * T. A document's text, or its FIM variant, is scored when all its LOSS text tokens are.
    shard = ds.shard_indexes()[0]  # one shard holds the first n_rows windows here
    tok, mask = np.asarray(ds.tokens(shard), np.int64), np.asarray(ds.mask(shard))
    last = n_rows * T
    assert len(tok) > last + 200  # max_rows really cuts the stream
    nats = np.zeros(last + 1)
    for lo in range(0, n_rows, 8):
        windows = np.stack([tok[w * T:w * T + T + 1] for w in range(lo, min(lo + 8, n_rows))])
        with torch.no_grad():
            logits = model.logits(torch.from_numpy(windows[:, :-1]))
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), torch.from_numpy(windows[:, 1:]),
                                                reduction="none").double().numpy()
        nats[lo * T + 1:min(lo + 8, n_rows) * T + 1] = nll.reshape(-1)
    bits, scored_bytes, scored_tokens, fim_scored = 0.0, 0, 0, 0
    for row in ds.docs(shard).to_pylist():
        spans = [(row["start"] + row["prefix_length"], row["start"] + row["length"])]
        if row["fim_start"] >= 0:
            spans.append((row["fim_start"], row["fim_start"] + row["fim_length"]))
        for k, (lo, hi) in enumerate(spans):
            pos = [p for p in range(lo, hi) if mask[p] & LOSS and not mask[p] & META]
            if pos and all(1 <= p <= last for p in pos):
                bits += nats[pos].sum() / math.log(2)
                scored_bytes += len(vocab.tok.decode(tok[pos].tolist(), skip_special_tokens=True).encode("utf-8"))
                scored_tokens += len(pos)
                fim_scored += k
    assert fim_scored > 0
    assert res["tokens"] == scored_tokens and res["bytes"] == scored_bytes
    assert abs(res["bpb"] - bits / scored_bytes) < 1e-6, (res["bpb"], bits / scored_bytes)
