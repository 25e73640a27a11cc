"""The task suite in `assay train`, `assay eval` and `assay ablate` (issue #42): a tiny trained checkpoint
scored from the command line, a checkpoint that carries its own tokenizer (and refuses without one),
an ablation whose spec names tasks, and the contamination flag on an arm whose data holds a suite item."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from assay.pipeline.errors import UserError  # noqa: E402
from assay.trainer.bytes import TOKENIZER_SPEC, write_byte_dataset  # noqa: E402
from assay.trainer.config import ConfigError, load_ablation_spec, parse_train_config  # noqa: E402
from assay.trainer.tasks import load_task  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "and a sphinx of black quartz hears my vow").split()
TASKS = "copa,arc_easy"


def _docs(n: int, seed: int) -> list[dict]:
    import random

    rng = random.Random(seed)
    return [{"doc_id": f"d{seed}-{i}", "source": "web",
             "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "."} for i in range(n)]


def _quiz_page(item) -> str:
    """A web page that reprints a benchmark question with its options, as quiz sites do."""
    options = "\n".join(f"{'ABCD'[j]}) {c}" for j, c in enumerate(item.choices))
    return f"Science quiz of the week. Try this one!\n\n{item.context}\n{options}\n\nScroll down for the answer."


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite-data")
    leaked = load_task("arc_easy", items=8).items[3]
    train = _docs(60, 0)
    return {"clean": write_byte_dataset(train, root / "clean", seq_len=65),
            "dirty": write_byte_dataset(train[:55] + [{"doc_id": "quiz", "source": "web", "text": _quiz_page(leaked)}]
                                        + train[55:], root / "dirty", seq_len=65),
            "eval": write_byte_dataset(_docs(8, 1), root / "eval", seq_len=65), "leaked": leaked, "root": root}


def _raw(train: Path, eval_set: Path | None = None, **eval_over) -> dict:
    return {"name": "s", "seed": 0, "tokens": 6 * 4 * 64, "threads": 1,
            "model": {"d_model": 32, "n_layers": 2, "n_heads": 4}, "moe": {"num_experts": 1, "expert_hidden": 32},
            "data": {"train": str(train), "batch_size": 4}, "log": {"every": 2},
            "eval": {"sets": {"held": str(eval_set)}, **eval_over} if eval_set else dict(eval_over)}


@pytest.fixture(scope="module")
def run(data):
    from assay.trainer.train import train

    out = data["root"] / "run"
    cfg = parse_train_config(_raw(data["clean"], data["eval"], tasks=TASKS, task_items=8))
    summary = train(cfg, out, log=lambda m: None)
    return out, summary


def _assay(*args: str):
    """The real program, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "assay.pipeline.cli", *args], capture_output=True, text=True)


def _cli(capsys, *args: str):
    """The same command line in this process (the CLI's own error reporting included), as
    (exit status, stdout, stderr): cheaper than a process, which imports torch again."""
    from assay.pipeline.cli import build_cli, run_cli

    capsys.readouterr()
    code = run_cli(build_cli(), list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_training_run_scores_the_suite_and_eval_cli_agrees(run, tmp_path, capsys):
    from assay.trainer.downstream import score_checkpoint

    out, summary = run
    tasks = summary["tasks"]
    assert list(tasks["tasks"]) == ["copa", "arc_easy"] and tasks["tasks"]["copa"]["items"] == 8
    assert {"acc", "acc_per_token", "acc_per_char", "p_correct", "bpb"} <= set(tasks["macro"])
    res = _assay("eval", str(out), "--tasks", TASKS, "--items", "8", "--json", str(tmp_path / "scores.json"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("copa: acc ") and "p_correct" in lines[0] and "chance 0.50" in lines[0]
    assert lines[-1].startswith("macro (custom, 2 tasks): acc ")
    written = json.loads((tmp_path / "scores.json").read_text())
    for task in ("copa", "arc_easy"):  # the final evaluation scored the checkpoint the CLI reads
        for m, stat in tasks["tasks"][task]["metrics"].items():
            assert written["tasks"][task]["metrics"][m]["mean"] == pytest.approx(stat["mean"], abs=1e-6)
    again = score_checkpoint(out, TASKS, items=8)
    assert again["macro"]["p_correct"]["mean"] == pytest.approx(written["macro"]["p_correct"]["mean"], abs=1e-9)
    code, stdout, err = _cli(capsys, "eval", str(out), "--data", f"held={run[0].parent / 'eval'}", "--tasks", "copa",
                             "--items", "4", "--json", "-")
    assert code == 0, err
    parsed = json.loads(stdout)
    assert parsed["held"]["bpb"] > 0 and parsed["tasks"]["tasks"]["copa"]["items"] == 4
    assert "Downstream tasks" in (out / "report.html").read_text()


def test_checkpoint_carries_its_tokenizer_and_refuses_without_one(data, tmp_path, capsys):
    from assay.trainer.train import latest_checkpoint, train

    moved = tmp_path / "data"
    shutil.copytree(data["clean"], moved)
    train(parse_train_config(dict(_raw(moved), tokens=4 * 4 * 64)), tmp_path / "run", log=lambda m: None)
    ckpt_path = latest_checkpoint(tmp_path / "run")
    shutil.rmtree(moved)  # the training data is gone: the checkpoint alone must do
    alone = tmp_path / "alone.pt"
    shutil.copy(ckpt_path, alone)
    code, ok, err = _cli(capsys, "eval", str(alone), "--tasks", "copa", "--items", "4")
    assert code == 0 and ok.startswith("copa: acc"), err
    ckpt = torch.load(alone, weights_only=True)
    assert ckpt["tokenizer"]["sha256"] == ckpt["layout"]["tokenizer_sha256"]
    del ckpt["tokenizer"]
    torch.save(ckpt, tmp_path / "bare.pt")
    code, _, err = _cli(capsys, "eval", str(tmp_path / "bare.pt"), "--tasks", "copa", "--items", "4")
    assert code == 2 and "Traceback" not in err
    assert "carries no tokenizer" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "other.json").write_text(json.dumps(dict(TOKENIZER_SPEC, bos=1)))
    code, _, err = _cli(capsys, "eval", str(tmp_path / "bare.pt"), "--tasks", "copa", "--items", "4", "--tokenizer",
                        str(tmp_path / "other.json"))
    assert code == 2 and "is not the model's training tokenizer" in err
    (tmp_path / "bytes.json").write_text(json.dumps(TOKENIZER_SPEC, sort_keys=True))
    code, right, err = _cli(capsys, "eval", str(tmp_path / "bare.pt"), "--tasks", "copa", "--items", "4", "--tokenizer",
                            str(tmp_path / "bytes.json"))
    assert code == 0 and right.splitlines()[0] == ok.splitlines()[0], err


def test_bpe_tokenizer_encodes_as_the_mixer_does(tmp_path):
    """Task text through a mixture's BPE tokenizer: the ids the mixer gives the same text, special-token
    strings inside it staying text."""
    from assay.mixer.tokenizer import SPECIALS, Vocab, train_bpe
    from assay.trainer.tokenizer import ModelTokenizer

    texts = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 3
    train_bpe(texts, 320).save(str(tmp_path / "tok.json"))
    vocab = Vocab.load(tmp_path / "tok.json")
    tok = ModelTokenizer.from_text((tmp_path / "tok.json").read_text(), {"bos_id": vocab.ids["bos"]})
    sample = ["Question: which fox jumps?\nAnswer:", " the quick brown fox", f"a {SPECIALS['eos']} in text"]
    assert [list(x) for x in tok.encode(sample)] == vocab.encode(sample)
    assert tok.kind == "bpe" and tok.bos_id == vocab.ids["bos"] and vocab.ids["eos"] not in tok.encode(sample)[2]
    assert tok.decode(tok.encode(sample)[1]) == sample[1]


def test_ablation_scores_tasks_per_arm_and_flags_the_contaminated_arm(data, tmp_path):
    from assay.trainer.ablate import run_ablation

    cfg = tmp_path / "cfg.json"
    raw = _raw(data["clean"])
    cfg.write_text(json.dumps(raw))
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(f"name: t\nconfig: cfg.json\narms: {{clean: {data['clean']}, dirty: {data['dirty']}}}\n"
                         f"seeds: [0, 1]\ndense_check: false\nsignificance: paired\n"
                         f"eval: {{sets: {{held: {data['eval']}}}, tasks: '{TASKS}', task_items: 8}}\n")
    spec, raw_cfg = load_ablation_spec(spec_file)
    assert spec.eval.sets == {"held": str(data["eval"])} and spec.eval.tasks == TASKS
    res = run_ablation(spec, raw_cfg, tmp_path / "out", log=lambda m: None)
    t = res["tasks"]
    copa = t["arms"]["clean"]["per_task"]["copa"]
    assert set(copa) >= {"acc", "p_correct", "bpb"} and len(copa["p_correct"]["values"]) == 2
    mac = t["arms"]["dirty"]["macro"]["p_correct"]
    assert mac["ci95"][0] < mac["mean"] < mac["ci95"][1] and len(mac["values"]) == 2
    pc, bpb = t["pairs"]["p_correct"][0], t["pairs"]["bpb"][0]
    means = {arm: t["arms"][arm]["macro"] for arm in ("clean", "dirty")}
    assert means[pc["a"]]["p_correct"]["mean"] >= means[pc["b"]]["p_correct"]["mean"]  # higher is better
    assert means[bpb["a"]]["bpb"]["mean"] <= means[bpb["b"]]["bpb"]["mean"]  # lower is better
    assert "higher is better" in pc["verdict"] and "lower is better" in bpb["verdict"] and "p_value" in pc
    flags = res["contamination"]
    assert flags["clean"]["flagged"] is False and flags["clean"]["items"] == {}
    assert flags["dirty"]["flagged"] is True and flags["dirty"]["items"] == {"arc_easy": 1}
    assert flags["dirty"]["examples"][0]["item"] == data["leaked"].id and flags["dirty"]["examples"][0]["doc_id"] == "quiz"
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Downstream tasks" in page and "Contamination: dirty" in page and "Contamination: clean" not in page
    assert "macro p_correct" in page and "copa" in page
    # per task, the arm ahead on each continuous metric (higher p_correct, lower bpb), in the table too
    for task in ("copa", "arc_easy"):
        for metric, pick in (("p_correct", max), ("bpb", min)):
            ahead = t["task_pairs"][task][metric]["a"]
            assert ahead == pick(t["arms"], key=lambda arm: t["arms"][arm]["per_task"][task][metric]["mean"])
    assert "<th>ahead on p_correct (p)</th>" in page
    ahead = t["task_pairs"]["copa"]["bpb"]
    assert f"<td>{ahead['a']} ({ahead['p_value']:.2g}" in page

    spec_file.write_text(spec_file.read_text() + "contamination: refuse\n")
    spec, raw_cfg = load_ablation_spec(spec_file)
    with pytest.raises(ConfigError, match=f"arm dirty: 1 training documents hold task-suite items .*arc_easy {data['leaked'].id}"):
        run_ablation(spec, raw_cfg, tmp_path / "refused", log=lambda m: None)
    assert not (tmp_path / "refused" / "runs").exists()  # refused before any training


def test_spec_forms_and_suite_paths_resolve(data, tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(_raw(data["clean"])))
    old = tmp_path / "old.yaml"
    old.write_text(f"name: o\nconfig: cfg.json\narms: {{a: {data['clean']}, b: {data['dirty']}}}\n"
                   f"eval: {{held: {data['eval']}}}\n")
    spec, _ = load_ablation_spec(old)
    assert spec.eval.sets == {"held": str(data["eval"])} and spec.eval.tasks is None  # today's form still works
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "mine.jsonl").write_text(json.dumps(
        {"id": "1", "context": "Two and two make", "choices": ["four", "five"], "gold": 0}) + "\n")
    (tmp_path / "conf" / "suite.yaml").write_text("tasks: [copa, {name: mine, path: mine.jsonl}]\n")
    cfg = parse_train_config(_raw(data["clean"], tasks="suite.yaml"), tmp_path / "conf" / "train.yaml",
                             tmp_path / "conf")
    assert cfg.eval.tasks == str(tmp_path / "conf" / "suite.yaml")
    from assay.trainer.tasks import load_suite, suite_files

    assert [t.name for t in load_suite(cfg.eval.tasks).tasks] == ["copa", "mine"]
    assert str(tmp_path / "conf" / "mine.jsonl") in suite_files(cfg.eval.tasks)
    listed = parse_train_config(_raw(data["clean"], tasks="copa,mine=mine.jsonl"), tmp_path / "conf" / "t.yaml",
                                tmp_path / "conf")
    assert listed.eval.tasks == f"copa,mine={tmp_path / 'conf' / 'mine.jsonl'}"
    with pytest.raises(UserError, match="not a suite"):
        load_suite("nonsense")
