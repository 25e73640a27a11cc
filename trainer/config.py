"""Train configs and ablation specs: YAML validated by pydantic, one-line errors naming file and key.

Every token count in a config (budget, schedules, the meta switch) counts token *positions processed*:
steps x micro-batches x rows x context. That counter is deterministic, so a switch always lands on
the same step, on resume too.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from assay.pipeline.errors import UserError


class ConfigError(UserError):
    """A mistake in a train config or ablation spec, printed as one line."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Piece(Strict):
    """One piece of a piecewise-constant schedule: `value` until a token count (or run fraction)."""

    value: float
    until_tokens: int | None = Field(None, ge=0)
    until_fraction: float | None = Field(None, ge=0, le=1)


Schedule = float | list[Piece]


def schedule_value(schedule: Schedule, tokens: int, total_tokens: int) -> float:
    """The value of a piecewise schedule at `tokens` processed; the last piece holds forever."""
    if isinstance(schedule, (int, float)):
        return float(schedule)
    for piece in schedule:
        until = piece.until_tokens
        if until is None and piece.until_fraction is not None:
            until = int(piece.until_fraction * total_tokens)
        if until is None or tokens < until:
            return piece.value
    return schedule[-1].value


class ModelConfig(Strict):
    d_model: int = Field(128, ge=8)
    n_layers: int = Field(4, ge=1)
    n_heads: int = Field(4, ge=1)
    n_kv_heads: int | None = Field(None, ge=1, description="grouped-query attention; None = n_heads")
    rope_theta: float = 10_000.0
    qk_norm: bool = True
    n_dense_layers: int = Field(0, ge=0, description="leading layers with a dense FFN instead of MoE")
    dense_hidden: int | None = Field(None, ge=1, description="FFN width of dense layers; None = MoE active width")
    init_std: float = 0.02
    norm_eps: float = 1e-6

    @model_validator(mode="after")
    def _heads(self) -> "ModelConfig":
        kv = self.n_kv_heads or self.n_heads
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % kv:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {kv}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head dimension d_model/n_heads must be even (RoPE)")
        return self


class MoEConfig(Strict):
    num_experts: int = Field(4, ge=1, description="routed experts; 1 = the dense control (no router)")
    top_k: int = Field(1, ge=1)
    expert_hidden: int = Field(256, ge=1)
    n_shared: int = Field(1, ge=0)
    shared_hidden: int | None = Field(None, ge=1, description="per shared expert; None = expert_hidden")
    score: Literal["softmax", "sigmoid"] = "softmax"
    normalize_gates: bool | None = Field(None, description="renormalise the top-k gates; None = only for sigmoid")
    routed_scaling: float | None = Field(None, gt=0, description="explicit routed-vs-shared scaling factor; None = "
                                         "num_experts / top_k for softmax scores (a uniform router passes its "
                                         "experts at a dense expert's scale), 1 for sigmoid")
    bias_rate: Schedule = Field(0.01, description="aux-loss-free bias update rate (schedulable to 0); 0.01 settles "
                                "routing within a proxy's few hundred steps (DeepSeek-V3 uses 0.001 over far more)")
    seq_balance_coef: float = Field(0.0, ge=0, description="sequence-wise balance loss (DeepSeek-V3: 1e-4)")
    z_loss_coef: float = Field(0.0, ge=0, description="router z-loss (OLMoE: 1e-3)")
    act_clip: float | None = Field(None, gt=0, description="element-wise clip of expert intermediate activations")
    freeze_router_after_tokens: int | None = Field(None, ge=0, description="router weights and bias frozen after")
    router_lr_scale: Schedule = Field(1.0, description="multiplier on the router's learning rate (schedulable)")
    router_warmup_fraction: float = Field(0.0, ge=0, le=1, description="the router's LR ramps linearly from 0 to "
                                          "its scale over this fraction of the run (0.2 stops the early collapse "
                                          "onto one expert, but delays layer 0's router: docs/trainer.md)")
    impl: Literal["auto", "padded", "grouped_mm", "loop"] = "auto"

    @model_validator(mode="after")
    def _k(self) -> "MoEConfig":
        if self.num_experts > 1 and self.top_k > self.num_experts:
            raise ValueError(f"top_k {self.top_k} exceeds num_experts {self.num_experts}")
        return self

    @property
    def scaling(self) -> float:
        """The routed-scaling factor in use (see `routed_scaling`)."""
        if self.routed_scaling is not None:
            return self.routed_scaling
        return self.num_experts / self.top_k if self.score == "softmax" else 1.0

    @property
    def active_hidden(self) -> int:
        """FFN width a token passes through: what the dense control gets, for equal active params."""
        return self.top_k * self.expert_hidden + self.n_shared * (self.shared_hidden or self.expert_hidden)


class MTPConfig(Strict):
    depth: Literal[0, 1] = Field(0, description="multi-token prediction modules (DeepSeek-V3 D=1); 0 = off")
    weight: Schedule = Field(default_factory=lambda: [Piece(value=0.3, until_fraction=0.7), Piece(value=0.1)])


class DataConfig(Strict):
    train: str = Field(description="token dataset directory (the mixer's output)")
    seq_len: int | None = Field(None, ge=2, description="window for flat-stream datasets; packed rows keep theirs")
    batch_size: int = Field(8, ge=1, description="rows per micro-batch")
    grad_accum: int = Field(1, ge=1)
    shuffle: bool = True
    order_seed: int | None = Field(None, description="row order seed; None = the run's seed. Fixing it makes "
                                   "seeds vary only the initialisation (a paired ablation design)")


class MetaConfig(Strict):
    """Step 3.5's switch: loss on the META prefix first, then masked while it stays in context."""

    loss_until_tokens: int | None = Field(None, ge=0)
    loss_until_fraction: float | None = Field(None, ge=0, le=1)

    def switch_tokens(self, total: int) -> int:
        if self.loss_until_tokens is not None:
            return self.loss_until_tokens
        return int((self.loss_until_fraction or 0.0) * total)


class OptimConfig(Strict):
    name: Literal["adamw", "muon"] = Field("muon", description="Muon for hidden matrices (AdamW for the rest); "
                                           "a tiny proxy learns ~0.7 BPB more per 1M tokens than with AdamW")
    lr: float = Field(3e-3, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = Field(0.1, ge=0)
    clip: float | None = Field(1.0, gt=0)
    schedule: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_fraction: float = Field(0.05, ge=0, le=1)
    decay_fraction: float = Field(0.2, ge=0, le=1, description="WSD: the final decay's share of the run")
    muon_momentum: float = 0.95


class EvalConfig(Strict):
    sets: dict[str, str] = Field(default_factory=dict, description="name -> held-out token dataset")
    every_tokens: int | None = Field(None, ge=1)
    batch_size: int = Field(16, ge=1)
    max_rows: int | None = Field(None, ge=1, description="use only the first rows of each set (fixed)")
    no_prefix: bool = Field(True, description="also evaluate with the META prefix removed")
    allow_overlap: bool = Field(False, description="permit eval doc_ids that also occur in training")
    tasks: str | list | dict | None = Field(None, description="downstream task suite the final evaluation scores: "
                                            "a suite name, a comma list, a suite file, or a list (trainer/tasks.py)")
    task_items: int | None = Field(None, ge=0, description="cap per task (0 = every item; None: the suite's, "
                                   "else 500)")
    task_format: Literal["cf", "mcf"] = Field("cf", description="prompt formulation (trainer/prompts.py)")


class LogConfig(Strict):
    every: int = Field(10, ge=1, description="steps between telemetry records")
    spike_ratio: float = Field(1.3, gt=1, description="a loss above ratio x its running mean is a spike")
    blowup_ratio: float = Field(10.0, gt=1, description="warn when expert act RMS max/median exceeds this")
    dead_ratio: float = Field(0.1, gt=0, lt=1, description="warn when expert act RMS min/median falls below this")
    peak_tflops: float | None = Field(None, gt=0, description="accelerator peak for MFU; None = known GPUs only")


class TrainConfig(Strict):
    name: str = "train"
    seed: int = 0
    tokens: int = Field(ge=1, description="budget: token positions processed")
    model: ModelConfig = Field(default_factory=ModelConfig)
    moe: MoEConfig = Field(default_factory=MoEConfig)
    mtp: MTPConfig = Field(default_factory=MTPConfig)
    data: DataConfig
    meta: MetaConfig = Field(default_factory=MetaConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["auto", "float32", "bfloat16"] = Field("auto", description="auto: bf16 autocast on CUDA")
    compile: bool = False
    threads: int | None = Field(None, ge=1, description="CPU torch threads")
    checkpoint_every: int = Field(0, ge=0, description="steps; 0 = only at the end")
    keep_checkpoints: int = Field(2, ge=1)

    @model_validator(mode="after")
    def _layers(self) -> "TrainConfig":
        if self.model.n_dense_layers > self.model.n_layers:
            raise ValueError("n_dense_layers exceeds n_layers")
        return self

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


class AblationEval(Strict):
    """An ablation's evaluation: held-out token sets, a downstream task suite, or both."""

    sets: dict[str, str] | None = Field(None, description="name -> held-out token dataset (override the config's)")
    tasks: str | list | dict | None = Field(None, description="task suite every run's final evaluation scores")
    task_items: int | None = Field(None, ge=0, description="cap per task (0 = every item)")
    task_format: Literal["cf", "mcf"] | None = None


class MixTolerance(Strict):
    """How far two arms' token shares of one source (or domain) may differ before the ablation warns
    that a BPB gap may reflect the mix rather than quality: more than `points` apart (absolute), or
    more than `ratio` times apart where the larger share is at least `min_share`."""

    points: float = Field(0.05, gt=0, lt=1)
    ratio: float = Field(2.0, gt=1)
    min_share: float = Field(0.02, ge=0, lt=1)


class AblationSpec(Strict):
    name: str
    config: str = Field(description="train config YAML (relative to the spec)")
    arms: dict[str, str] = Field(description="arm name -> training token dataset (the mixture)")
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    tokens: int | None = Field(None, ge=1, description="the one budget every run gets (overrides the config)")
    eval: AblationEval | None = Field(None, description="{name: path} held-out sets (override the config's), or "
                                      "{sets: {...}, tasks: SUITE, task_items: N}")
    metric_set: str | None = Field(None, description="eval set whose overall BPB decides; None = the first")
    significance: Literal["welch", "paired", "bootstrap"] = "welch"
    alpha: float = Field(0.01, gt=0, lt=1)
    dense_check: bool = True
    dense_seeds: list[int] | None = None
    workers: int = Field(1, ge=1, description="runs trained at once, one CPU thread each (spawned processes)")
    contamination: Literal["flag", "refuse", "off"] = Field(
        "flag", description="arms whose training data holds task-suite items: flag them in the result and report, "
        "refuse to run, or do not check")
    mix_tolerance: MixTolerance = Field(default_factory=MixTolerance)
    match_mix: dict[str, str] = Field(
        default_factory=dict, description="arm -> reference arm: train the arm on a resample of its data that "
        "holds the reference arm's per-source token shares (mixcheck.match_mix)")

    @model_validator(mode="before")
    @classmethod
    def _eval_forms(cls, data: Any) -> Any:
        ev = data.get("eval") if isinstance(data, dict) else None
        if isinstance(ev, dict) and ev and not set(ev) & set(AblationEval.model_fields):
            data = dict(data, eval={"sets": ev})  # today's form: name -> held-out set
        return data

    @model_validator(mode="after")
    def _arms(self) -> "AblationSpec":
        if len(self.arms) < 2:
            raise ValueError("an ablation needs at least two arms")
        for arm, ref in self.match_mix.items():
            for name in (arm, ref):
                if name not in self.arms:
                    raise ValueError(f"match_mix: {name!r} is not an arm ({', '.join(self.arms)})")
            if arm == ref or ref in self.match_mix:
                raise ValueError(f"match_mix: {arm!r} must hold the mix of an arm whose data is its own, not {ref!r}")
        return self


# ---- loading -----------------------------------------------------------------------------------

def _read_yaml(path: Path, what: str) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(f"{path}: {where}invalid YAML: {getattr(exc, 'problem', exc)}") from None


def _validate(model: type[BaseModel], data: Any, path: Path | str) -> Any:
    from assay.pipeline.recipe import _friendly  # the core's one-line error wording

    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        node: Any = model
        for part in err["loc"][:-1]:  # the fields of the sub-model the error sits in
            field = getattr(node, "model_fields", {}).get(part)
            node = getattr(field, "annotation", None) if field else None
        known = list(getattr(node, "model_fields", model.model_fields))
        if err["type"] == "value_error":
            err = dict(err, msg=str(err["msg"]).removeprefix("Value error, "))
        raise ConfigError(f"{path}: {_friendly(err, data, known)}") from None


def _resolve(base: Path, value: str) -> str:
    value = os.path.expanduser(value)
    return value if "://" in value or os.path.isabs(value) else str((base / value).resolve())


def parse_train_config(data: Any, path: Path | str = "<config>", base: Path | None = None) -> TrainConfig:
    cfg = _validate(TrainConfig, data, path)
    base = base or (Path(path).resolve().parent if Path(path).exists() else Path.cwd())
    cfg.data.train = _resolve(base, cfg.data.train)
    cfg.eval.sets = {name: _resolve(base, p) for name, p in cfg.eval.sets.items()}
    if cfg.eval.tasks is not None:
        from .tasks import absolute_spec

        cfg.eval.tasks = absolute_spec(cfg.eval.tasks, base)
    return cfg


def load_train_config(path: str | os.PathLike) -> TrainConfig:
    path = Path(path)
    return parse_train_config(_read_yaml(path, "train config"), path)


def load_ablation_spec(path: str | os.PathLike) -> tuple[AblationSpec, dict[str, Any]]:
    """The spec (paths made absolute) and the raw train config it names."""
    path = Path(path)
    spec = _validate(AblationSpec, _read_yaml(path, "ablation spec"), path)
    base = path.resolve().parent
    spec.config = _resolve(base, spec.config)
    spec.arms = {name: _resolve(base, p) for name, p in spec.arms.items()}
    if spec.eval is not None and spec.eval.sets is not None:
        spec.eval.sets = {name: _resolve(base, p) for name, p in spec.eval.sets.items()}
    if spec.eval is not None and spec.eval.tasks is not None:
        from .tasks import absolute_spec

        spec.eval.tasks = absolute_spec(spec.eval.tasks, base)
    raw = _read_yaml(Path(spec.config), "train config")
    load_train_config(spec.config)  # fail early, naming the config file
    return spec, raw
