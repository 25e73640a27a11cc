"""What the trainer reads back cannot run code or silently lie (issue #28 items 5, 9, 13): checkpoints
load weights-only, a truncated token shard is an error, a truncated last checkpoint falls back."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from assay.pipeline.errors import UserError  # noqa: E402
from assay.trainer.bytes import write_byte_dataset  # noqa: E402
from assay.trainer.config import parse_train_config  # noqa: E402
from assay.trainer.train import train  # noqa: E402

MARK = Path("/tmp/assay-pwned-by-checkpoint")


def _data(root: Path) -> dict:
    docs = [{"text": f"document {i}: the quick brown fox jumps over the lazy dog " * 4, "source": "s",
             "doc_id": f"d{i}"} for i in range(40)]
    held = [{"text": f"held {i}: a slow green turtle walks under the busy bridge " * 4, "source": "h",
             "doc_id": f"h{i}"} for i in range(6)]
    return {"train": write_byte_dataset(docs, root / "train", seq_len=65, shards=2),
            "eval": write_byte_dataset(held, root / "eval", seq_len=65)}


def _cfg(data, **over):
    raw = {"name": "t", "tokens": 6 * 4 * 64, "threads": 1, "checkpoint_every": 2, "keep_checkpoints": 3,
           "model": {"d_model": 32, "n_layers": 1, "n_heads": 2},
           "moe": {"num_experts": 2, "top_k": 1, "expert_hidden": 32},
           "data": {"train": str(data["train"]), "batch_size": 4}, "eval": {"sets": {"held": str(data["eval"])}}}
    raw.update(over)
    return parse_train_config(raw)


class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {MARK}",))


def test_a_crafted_checkpoint_runs_no_code(tmp_path):
    MARK.unlink(missing_ok=True)
    evil = tmp_path / "run" / "checkpoints" / "step-00000009.pt"
    evil.parent.mkdir(parents=True)
    torch.save({"model": _Boom()}, evil)
    res = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "eval", str(evil), "--data",
                          f"held={_data(tmp_path)['eval']}"], capture_output=True, text=True, timeout=300)
    assert not MARK.exists()
    assert res.returncode == 2 and "not a readable checkpoint" in res.stderr and res.stderr.count("\n") == 1


def test_a_truncated_token_shard_is_an_error_not_half_the_data(tmp_path):
    data = _data(tmp_path)
    shard = data["train"] / "part-00001.tokens"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(UserError, match=r"part-00001.tokens: .* bytes where its commit recorded"):
        train(_cfg(data), tmp_path / "run", log=lambda m: None, report=False)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_truncated_last_checkpoint_falls_back_to_the_one_before(tmp_path):
    data = _data(tmp_path)
    cfg = _cfg(data)
    full = train(cfg, tmp_path / "full", log=lambda m: None, report=False)
    # a run killed after step 4's checkpoint was half-written (disk full): resume from step 2
    run = tmp_path / "cut"
    from test_trainer_loop import killed_run

    trainer = killed_run(cfg, run)
    for _ in range(4):
        trainer.step()
        if trainer.state["step"] % 2 == 0:
            trainer.save()
    last = sorted((run / "checkpoints").glob("*.pt"))[-1]
    last.write_bytes(last.read_bytes()[:1000])
    said = []
    resumed = train(cfg, run, log=said.append, report=False)
    assert any("not a readable checkpoint" in m and "trying the checkpoint before it" in m for m in said), said
    assert any("resuming from step-00000002.pt" in m for m in said), said
    assert resumed["eval"]["held"]["bpb"] == full["eval"]["held"]["bpb"]


def test_held_out_text_that_also_trains_is_refused_whatever_its_ids(tmp_path):
    """Row ids name where a row was read from; a held-out document whose text is also in the training
    set is found by its content, even with another id."""
    data = _data(tmp_path)
    leaked = [{"text": "document 3: the quick brown fox jumps over the lazy dog " * 4, "source": "h",
               "doc_id": "another-id"}]
    write_byte_dataset(leaked, tmp_path / "leaky", seq_len=65)
    cfg = _cfg(data, eval={"sets": {"held": str(tmp_path / "leaky")}})
    with pytest.raises(UserError, match="1 documents also occur in data.train"):
        train(cfg, tmp_path / "run", log=lambda m: None, report=False)
