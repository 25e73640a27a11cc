"""One runner for every result (issue #27): re-curating a source re-runs exactly the mixture stages,
training runs and ablation arms that read it, and the ablation then reports the new BPB."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from assay.mixer.build import build  # noqa: E402
from assay.mixer.recipe import parse_mixture  # noqa: E402
from assay.mixer.tokenizer import train_bpe  # noqa: E402
from assay.trainer.ablate import run_ablation  # noqa: E402
from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import AblationSpec  # noqa: E402

from mixer_corpus import documents, mixture_data, write_corpus  # noqa: E402


def _stamps(out, pattern="runs/*"):
    """When each stage's manifest was written (a skipped stage leaves it as it was)."""
    return {m.parent.name: m.stat().st_mtime_ns for m in out.glob(f"{pattern}/_manifest.json")}


def _state(results):
    return {r.stage_id: r.skipped for r in results}


def test_recurating_one_source_rebuilds_only_what_reads_it(tmp_path):
    docs = documents(n_web=80, n_code=30, n_pr=20, n_chat=20)
    web_code = [d for d in docs if d["source"] in ("crawl", "repo")]
    talk = [d for d in docs if d["source"] in ("prs", "chats")]
    write_corpus(tmp_path / "a", web_code)
    write_corpus(tmp_path / "b", talk)
    train_bpe([d["text"] for d in docs], 500).save(str(tmp_path / "tok.json"))
    data = mixture_data(tmp_path / "a", tmp_path / "tok.json",
                        broad={"tokens": 6000, "mix": {"web": 3, "code": 2}},
                        anneal={"tokens": 4000, "mix": {"pr": 1, "chat": 1}, "replay": None},
                        chat={"tokens": 3000, "replay": None})
    for name in ("pr", "chat"):
        data["sources"][name]["path"] = str(tmp_path / "b")
    mixture = parse_mixture(data, tmp_path / "mix.yaml")
    out = tmp_path / "mix"
    first = _state(build(mixture, out, log=lambda *_: None))
    assert not any(first.values())
    stamps = _stamps(out, "*")
    assert all(_state(build(mixture, out, log=lambda *_: None)).values())  # nothing changed: all skipped
    assert _stamps(out, "*") == stamps

    talk[0] = dict(talk[0], text=talk[0]["text"] + " re-curated", segments=None)  # one document of b changes
    write_corpus(tmp_path / "b", talk)
    again = {r.stage_id: r for r in build(mixture, out, log=lambda *_: None)}
    after = _stamps(out, "*")
    changed = sorted(name for name in after if after[name] != stamps[name])
    assert changed == sorted(["anneal", "chat", *[n for n in after if n.startswith("tokenized-b-")]]), changed
    assert again["anneal"].manifest["ran_because"] == "upstream changed"


def _arm(path, seed_text: str, n: int = 60):
    docs = [{"text": f"{seed_text} number {i} says the quick brown fox jumps over the lazy dog " * 3,
             "source": "s", "doc_id": f"{seed_text[:9]}-{i}"} for i in range(n)]
    return write_byte_dataset(docs, path, seq_len=65)




def test_changing_an_arms_data_retrains_only_its_runs_and_ablate_reports_the_new_bpb(tmp_path):
    held = write_byte_dataset([{"text": "the quick brown fox jumps over the lazy dog, held out " * 4,
                                "source": "held", "doc_id": f"held-{i}"} for i in range(8)], tmp_path / "held", seq_len=65)
    _arm(tmp_path / "a", "alpha")
    _arm(tmp_path / "b", "beta")
    raw = {"name": "tiny", "tokens": 4 * 8 * 64, "threads": 1,
           "model": {"d_model": 32, "n_layers": 1, "n_heads": 2},
           "moe": {"num_experts": 2, "top_k": 1, "expert_hidden": 32},
           "data": {"train": str(tmp_path / "a"), "batch_size": 8}, "eval": {"sets": {"held": str(held)}}}
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(raw))
    spec = AblationSpec(name="abl", config=str(cfg), seeds=[0, 1], dense_check=False,
                        arms={"a": str(tmp_path / "a"), "b": str(tmp_path / "b")})
    out = tmp_path / "abl"
    first = run_ablation(spec, raw, out, log=lambda m: None)
    stamps = _stamps(out)
    again = run_ablation(spec, raw, out, log=lambda m: None)
    assert again["arms"] == first["arms"]
    assert _stamps(out) == stamps  # every run skipped

    _arm(tmp_path / "b", "a different text for arm b altogether, with other words")
    third = run_ablation(spec, raw, out, log=lambda m: None)
    after = _stamps(out)
    assert after["a-s0"] == stamps["a-s0"] and after["a-s1"] == stamps["a-s1"]  # arm a: untouched
    assert after["b-s0"] != stamps["b-s0"] and after["b-s1"] != stamps["b-s1"]  # arm b: retrained
    assert third["arms"]["a"] == first["arms"]["a"]
    assert third["arms"]["b"]["values"] != first["arms"]["b"]["values"]
    reported = json.loads((out / "ablation.json").read_text())
    assert reported["arms"]["b"]["values"] == third["arms"]["b"]["values"]
