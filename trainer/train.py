"""The training loop: token budget, accumulation, schedules, checkpoint/resume, telemetry, evaluation.

A run is a stage of the one runner (trainer/stage.py): its folder holds `config.json`, `metrics.jsonl`
(one record per logged step and per evaluation), `checkpoints/`, `summary.json`, `report.html` and the
manifest, written last.

Exact resume: a checkpoint carries the model (expert biases included: they are buffers), optimizer
states, the step and token counters (the LR, MTP, bias-rate and meta schedules are functions of them),
the loader's epoch and cursor, the spike detector, the RNG state and the fingerprint of the run it
belongs to. Checkpoints load with `weights_only=True`: reading one runs no code. On CPU a resumed run
repeats the uninterrupted run's losses bit for bit (tested).
"""
from __future__ import annotations

import json
import math
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import torch

from assay.pipeline import storage
from assay.pipeline.dataset import atomic_write_text
from assay.pipeline.errors import UserError

from .config import TrainConfig, schedule_value
from .data import Loader, TokenRows, make_batch, open_tokens
from .evaluate import evaluate
from .model import GPT, IGNORE
from .optim import build_optimizers, lr_factor

SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
CKPT_DIR = "checkpoints"
# Dense bf16 peaks (FLOP/s) for MFU; anything else needs log.peak_tflops.
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12, "A10": 125e12}


# ---- run directory -------------------------------------------------------------------------------

def checkpoints(out: Path) -> list[Path]:
    """The run's checkpoints, newest first."""
    return storage.glob(storage.as_path(out) / CKPT_DIR, "step-*.pt")[::-1]


def latest_checkpoint(out: Path) -> Path | None:
    found = checkpoints(out)
    return found[0] if found else None


def read_checkpoint(path: Path, device: str | torch.device = "cpu") -> dict:
    """A checkpoint's contents, loaded without running code (weights_only)."""
    try:
        import io

        source = io.BytesIO(storage.read_bytes(path)) if storage.is_remote(path) else path
        return torch.load(source, map_location=device, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - truncated, damaged, or not a weights-only file
        said = (str(exc).splitlines() or ["empty file" if isinstance(exc, EOFError) else "no detail"])[0][:160]
        raise UserError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {said})") from None


def usable_checkpoint(out: Path, fingerprint: str | None, log: Callable[[str], None]) -> tuple[Path, dict] | None:
    """The newest checkpoint that reads back and belongs to this run (a truncated last one, e.g. from
    a full disk, falls back to the one before it, with a warning)."""
    for path in checkpoints(out):
        try:
            ckpt = read_checkpoint(path)
        except UserError as exc:
            log(f"warning: {exc}; trying the checkpoint before it")
            continue
        if fingerprint and ckpt.get("fingerprint") not in (None, fingerprint):
            raise UserError(f"{path}: belongs to a run of other inputs (fingerprint {ckpt.get('fingerprint')}); "
                            "refusing to resume from it")
        return path, ckpt
    return None


def _save(obj, path: Path) -> None:
    import io

    from assay.pipeline.dataset import atomic_write_bytes

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())  # flushed to disk before it is renamed into place


# ---- model construction (shared with eval) -------------------------------------------------------

def build_model(cfg: TrainConfig, vocab_size: int, max_len: int) -> GPT:
    return GPT(cfg.model, cfg.moe, vocab_size, max_len, cfg.mtp.depth)


def resolve_device(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("device: cuda requested but torch sees no CUDA device")
        return torch.device("cuda")
    return torch.device("cpu")


def autocast_for(cfg: TrainConfig, device: torch.device):
    bf16 = cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def _check_eval_sets(cfg: TrainConfig, train_rows: TokenRows) -> None:
    layout = train_rows.layout
    train_ids: set[str] | None = None
    for name, path in cfg.eval.sets.items():
        ev = open_tokens(path)
        if ev.layout.vocab_size != layout.vocab_size or (
                ev.layout.tokenizer_sha256 and layout.tokenizer_sha256
                and ev.layout.tokenizer_sha256 != layout.tokenizer_sha256):
            raise UserError(f"eval.sets.{name}: {path} uses another tokenizer than data.train")
        if cfg.eval.allow_overlap:
            continue
        if train_ids is None:
            train_ids = _doc_ids(train_rows.dataset)
        shared = train_ids & _doc_ids(ev)
        if shared:
            raise UserError(f"eval.sets.{name}: {len(shared)} documents also occur in data.train "
                            f"(e.g. {sorted(shared)[0]!r}); held-out sets must be disjoint (or set eval.allow_overlap)")


def _doc_ids(ds) -> set[str]:
    """What identifies a document's content in a token dataset's index: its content hash (row ids say
    where a row came from, so the same text read from two files has two ids), else its doc id."""
    ids: set[str] = set()
    for shard in ds.shard_indexes():
        docs = ds.docs(shard)
        key = "content_hash" if "content_hash" in docs.column_names else "doc_id"
        if key in docs.column_names:
            ids.update(x for x in docs.column(key).to_pylist() if x)
    return ids


# ---- the loop ------------------------------------------------------------------------------------

class Trainer:
    def __init__(self, cfg: TrainConfig, out: Path, log: Callable[[str], None] = print, fingerprint: str = ""):
        self.cfg, self.out, self.log, self.fingerprint = cfg, storage.as_path(out), log, fingerprint
        # Metrics are appended to a local file; a run on a store uploads it whole with each checkpoint.
        self._staging = storage.staging_dir("assay-run-") if storage.is_remote(self.out) else None
        self.metrics_path = self._staging / METRICS if self._staging else self.out / METRICS
        self.device = resolve_device(cfg)
        if cfg.threads and self.device.type == "cpu":
            torch.set_num_threads(cfg.threads)
        self.rows = TokenRows(cfg.data.train, cfg.data.seq_len)
        _check_eval_sets(cfg, self.rows)
        from .tokenizer import checkpoint_record

        # Checkpoints carry the tokenizer file, so one scores text (tasks) on its own, moved anywhere.
        self.tokenizer = checkpoint_record(cfg.data.train, self.rows.layout.to_json())
        self.suite = self._task_suite()
        self.T = self.rows.context
        self.tokens_per_step = cfg.data.batch_size * cfg.data.grad_accum * self.T
        self.total_steps = max(1, math.ceil(cfg.tokens / self.tokens_per_step))
        self.total_tokens = self.total_steps * self.tokens_per_step
        self.meta_switch = cfg.meta.switch_tokens(self.total_tokens)
        torch.manual_seed(cfg.seed)
        eval_len = max([self.T] + [TokenRows(p, cfg.data.seq_len).context for p in cfg.eval.sets.values()])
        self.model = build_model(cfg, self.rows.layout.vocab_size, eval_len).to(self.device)
        self.forward = torch.compile(self.model) if cfg.compile else self.model
        self.optimizers = build_optimizers(self.model, cfg.optim, fused=self.device.type == "cuda")
        order = cfg.seed if cfg.data.order_seed is None else cfg.data.order_seed
        self.loader = Loader(self.rows, cfg.data.batch_size, order, cfg.data.shuffle)
        self.autocast = autocast_for(cfg, self.device)
        self.state = {"step": 0, "tokens": 0, "seen": 0, "trained": 0, "spikes": 0, "loss_ema": None,
                      "seconds": 0.0, "next_eval": cfg.eval.every_tokens}
        counts = self.model.param_counts()
        self.flops_per_token = self.model.flops_per_token(self.T)
        self.peak = self._peak_flops()
        self.info = {"params": counts, "context": self.T, "tokens_per_step": self.tokens_per_step,
                     "total_steps": self.total_steps, "total_tokens": self.total_tokens,
                     "meta_switch_tokens": self.meta_switch, "device": str(self.device),
                     "flops_per_token": self.flops_per_token}

    def _task_suite(self):
        """The eval section's task suite, loaded (and its tokenizer checked) before training starts."""
        if self.cfg.eval.tasks is None:
            return None
        from .tasks import load_suite
        from .tokenizer import ModelTokenizer

        if self.tokenizer is None:
            raise UserError(f"eval.tasks: {self.cfg.data.train} names no tokenizer file, so task text cannot be "
                            "encoded as the model reads it")
        self.task_tokenizer = ModelTokenizer.from_text(self.tokenizer["text"], self.rows.layout.to_json())
        return load_suite(self.cfg.eval.tasks, self.cfg.eval.task_items)

    def _peak_flops(self) -> float | None:
        if self.cfg.log.peak_tflops:
            return self.cfg.log.peak_tflops * 1e12
        if self.device.type != "cuda":
            return None
        name = torch.cuda.get_device_name(self.device)
        return next((v for k, v in PEAK_FLOPS.items() if k in name), None)

    # -- checkpoints ------------------------------------------------------------------------------
    def save(self) -> Path:
        path = self.out / CKPT_DIR / f"step-{self.state['step']:08d}.pt"
        _save({"model": self.model.state_dict(), "optimizers": [o.state_dict() for o in self.optimizers],
               "loader": self.loader.state_dict(), "state": dict(self.state), "rng": torch.get_rng_state(),
               "config": self.cfg.model_dump(mode="json"), "vocab_size": self.rows.layout.vocab_size,
               "context": self.T, "layout": self.rows.layout.to_json(), "fingerprint": self.fingerprint,
               "tokenizer": self.tokenizer}, path)
        for old in storage.glob(self.out / CKPT_DIR, "step-*.pt")[: -self.cfg.keep_checkpoints]:
            storage.remove(old)
        self._publish_metrics()
        return path

    def _publish_metrics(self) -> None:
        """A run on a store: its metrics so far, uploaded whole (a store has no append)."""
        if self._staging is not None and self.metrics_path.exists():
            storage.put_file(self.metrics_path, self.out / METRICS)

    def load(self, path: Path, ckpt: dict | None = None) -> None:
        ckpt = ckpt if ckpt is not None else read_checkpoint(path, self.device)
        self.model.load_state_dict(ckpt["model"])
        for opt, sd in zip(self.optimizers, ckpt["optimizers"]):
            opt.load_state_dict(sd)
        self.loader.load_state_dict(ckpt["loader"])
        self.state = dict(ckpt["state"])
        torch.set_rng_state(ckpt["rng"])
        if self._staging is not None and storage.exists(self.out / METRICS):
            self.metrics_path.write_bytes(storage.read_bytes(self.out / METRICS))
        _truncate_metrics(self.metrics_path, self.state["step"])

    # -- one optimizer step -----------------------------------------------------------------------
    def step(self) -> dict:
        cfg, st = self.cfg, self.state
        meta_loss = st["tokens"] < self.meta_switch
        frozen = cfg.moe.freeze_router_after_tokens is not None and st["tokens"] >= cfg.moe.freeze_router_after_tokens
        factor = lr_factor(st["step"], self.total_steps, cfg.optim)
        router = 0.0 if frozen else self.router_lr_scale()
        for opt in self.optimizers:
            for g in opt.param_groups:
                g["lr"] = g["base_lr"] * factor * (router if g.get("name") == "router" else 1.0)
        batches = [make_batch(*self.loader.next(), meta_loss, self.device) for _ in range(cfg.data.grad_accum)]
        # Normalise by the whole accumulated batch's target count, so accumulation equals one big batch.
        n_targets = sum(b.n_targets for b in batches)
        denom = max(n_targets, 1)
        mtp_w = schedule_value(cfg.mtp.weight, st["tokens"], self.total_tokens) if cfg.mtp.depth else 0.0
        mtp_denom = max(sum(int((b.targets[:, 1:] != IGNORE).sum()) for b in batches), 1) if mtp_w else 1
        ce_total = torch.zeros((), device=self.device)
        for b in batches:
            with self.autocast:
                out = self.forward(b.idx, b.targets, b.valid, b.next_tokens if mtp_w else None)
            loss = out.ce_sum / denom + out.aux / cfg.data.grad_accum
            if out.mtp_sum is not None:
                loss = loss + mtp_w * out.mtp_sum / mtp_denom
            loss.backward()
            ce_total += out.ce_sum.detach()
        params = [p for p in self.model.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.optim.clip or float("inf"))
        for opt in self.optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        rate = 0.0 if frozen else schedule_value(cfg.moe.bias_rate, st["tokens"], self.total_tokens)
        for moe in self.model.moe_layers():
            moe.update_bias(rate)
        loss_value = float(ce_total) / denom
        st["step"] += 1
        st["tokens"] += self.tokens_per_step
        st["seen"] += sum(b.n_seen for b in batches)
        st["trained"] += n_targets
        spike = self._spike(loss_value)
        return {"loss": loss_value, "grad_norm": float(grad_norm), "lr": self.cfg.optim.lr * factor,
                "meta_loss": meta_loss, "bias_rate": rate, "mtp_weight": mtp_w, "router_frozen": frozen,
                "router_lr_scale": router,
                "spike": spike}

    def router_lr_scale(self) -> float:
        """The router's LR multiplier at this step: `moe.router_lr_scale`, ramped up linearly from 0
        over `moe.router_warmup_fraction` of the steps."""
        moe, step = self.cfg.moe, self.state["step"]
        scale = schedule_value(moe.router_lr_scale, self.state["tokens"], self.total_tokens)
        warm = int(moe.router_warmup_fraction * self.total_steps)
        return scale * min(1.0, (step + 1) / warm) if warm else scale

    def _spike(self, loss: float) -> bool:
        st = self.state
        ema = st["loss_ema"]
        spike = ema is not None and st["step"] > 20 and loss > self.cfg.log.spike_ratio * ema
        st["spikes"] += int(spike)
        st["loss_ema"] = loss if ema is None else 0.9 * ema + 0.1 * loss
        return spike

    # -- evaluation -------------------------------------------------------------------------------
    def evaluate(self) -> dict:
        cfg = self.cfg
        return {name: evaluate(self.model, path, cfg.eval.batch_size, cfg.eval.max_rows, cfg.eval.no_prefix,
                               cfg.data.seq_len, self.device, self.autocast)
                for name, path in cfg.eval.sets.items()}

    # -- the run ------------------------------------------------------------------------------------
    def run(self) -> dict:
        cfg, st = self.cfg, self.state
        metrics = open(self.metrics_path, "a")
        window_start, window_tokens = time.perf_counter(), 0
        last_eval = None
        try:
            while st["step"] < self.total_steps:
                rec = self.step()
                window_tokens += self.tokens_per_step
                last = st["step"] == self.total_steps
                if st["step"] % cfg.log.every == 0 or last or st["step"] == 1:
                    if self.device.type == "cuda":
                        torch.cuda.synchronize()
                    now = time.perf_counter()
                    seconds = now - window_start
                    st["seconds"] += seconds
                    metrics.write(json.dumps(self._record(rec, window_tokens / max(seconds, 1e-9))) + "\n")
                    metrics.flush()
                    window_start, window_tokens = time.perf_counter(), 0
                if st["next_eval"] and st["tokens"] >= st["next_eval"] and not last:
                    st["next_eval"] += cfg.eval.every_tokens
                    last_eval = self._eval_record(metrics)
                    window_start = time.perf_counter()
                if cfg.checkpoint_every and st["step"] % cfg.checkpoint_every == 0 and not last:
                    self.save()
                    window_start = time.perf_counter()
            final_eval = self._eval_record(metrics) if cfg.eval.sets else last_eval
            tasks = self._tasks_record(metrics) if self.suite is not None else None
        finally:
            metrics.close()
        self.save()
        summary = dict(self.info, name=cfg.name, seed=cfg.seed, steps=st["step"], tokens=st["tokens"],
                       tokens_seen=st["seen"], tokens_trained=st["trained"], spikes=st["spikes"],
                       train_seconds=round(st["seconds"], 2),
                       tokens_per_s=round(st["tokens"] / max(st["seconds"], 1e-9), 1),
                       final_loss=_last_loss(self.metrics_path), eval=final_eval or {})
        if tasks is not None:
            summary["tasks"] = tasks
        atomic_write_text(self.out / SUMMARY, json.dumps(summary, indent=1))
        if self._staging is not None:
            import shutil

            shutil.rmtree(self._staging, ignore_errors=True)
        return summary

    def _eval_record(self, metrics) -> dict:
        result = self.evaluate()
        metrics.write(json.dumps({"kind": "eval", "step": self.state["step"], "tokens": self.state["tokens"],
                                  "eval": result}) + "\n")
        metrics.flush()
        return result

    def _tasks_record(self, metrics) -> dict:
        """The final evaluation's task-suite scores (trainer/downstream.py), logged and returned."""
        from .downstream import score_suite

        result = score_suite(self.model, self.task_tokenizer, self.suite, self.T, self.cfg.eval.task_format,
                             self.device, self.autocast)
        metrics.write(json.dumps({"kind": "tasks", "step": self.state["step"], "tokens": self.state["tokens"],
                                  "tasks": result}) + "\n")
        metrics.flush()
        return result

    def _record(self, rec: dict, tok_s: float) -> dict:
        st = self.state
        out = {"kind": "train", "step": st["step"], "tokens": st["tokens"], "tokens_seen": st["seen"],
               "tokens_trained": st["trained"], "loss": round(rec["loss"], 5), "lr": rec["lr"],
               "grad_norm": round(rec["grad_norm"], 4), "tokens_per_s": round(tok_s, 1),
               "meta_loss": rec["meta_loss"], "bias_rate": rec["bias_rate"], "spikes": st["spikes"]}
        if self.model.moe_layers():
            out["router_lr_scale"] = round(rec["router_lr_scale"], 5)
        if self.cfg.mtp.depth:
            out["mtp_weight"] = rec["mtp_weight"]
        if rec["router_frozen"]:
            out["router_frozen"] = True
        if self.peak:
            out["mfu"] = round(self.flops_per_token * tok_s / self.peak, 4)
        layers = []
        for i, moe in enumerate(self.model.moe_layers()):
            layers.append(dict(layer=i, **moe.telemetry(self.cfg.log.blowup_ratio, self.cfg.log.dead_ratio)))
        if layers:
            out["moe"] = layers
            warns = sorted({f"layer {m['layer']}: {w}" for m in layers for w in m.get("warnings", [])})
            if warns:
                out["warnings"] = warns
        return out


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop records a killed run logged after its last checkpoint: they are replayed on resume."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if line and json.loads(line).get("step", 0) <= step]
    atomic_write_text(path, "".join(line + "\n" for line in keep))


def _last_loss(path: Path) -> float | None:
    losses = [json.loads(x)["loss"] for x in path.read_text().splitlines() if '"kind": "train"' in x]
    return losses[-1] if losses else None


def read_metrics(run_dir: Path) -> list[dict]:
    path = storage.as_path(run_dir) / METRICS
    return [json.loads(x) for x in path.read_text().splitlines() if x] if path.exists() else []


def train(cfg: TrainConfig, out: str | Path, log: Callable[[str], None] = print, force: bool = False,
          report: bool = True) -> dict:
    """Train `cfg` into the run folder `out` (a stage of the one runner, see stage.py): trained afresh,
    resumed from its last checkpoint, or (nothing it reads changed) returned as it is."""
    from .stage import run_training

    return run_training(cfg, out, log=log, force=force, report=report)
