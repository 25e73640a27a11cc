"""The proxy model: a decoder-only transformer with RMSNorm, RoPE, grouped-query attention, SwiGLU,
optional MoE FFNs (moe.py) after `n_dense_layers` dense ones, and an optional DeepSeek-V3-style
multi-token-prediction module. `num_experts=1` swaps every MoE for a dense SwiGLU of the MoE's active
width (top_k x expert_hidden + shared), which is the dense control at equal active parameters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig, MoEConfig
from .moe import MoE, SwiGLU

IGNORE = -100  # target id for positions that are not trained on


@dataclass
class ModelOutput:
    ce_sum: torch.Tensor  # summed nats over trained-on targets (fp32)
    aux: torch.Tensor  # router z-loss + sequence balance loss (already weighted)
    mtp_sum: torch.Tensor | None = None  # summed nats of the MTP head over its trained-on targets


def rope_tables(head_dim: int, length: int, theta: float, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, H, T, hd]; rotates pairs (first half, second half) of each head by position angles."""
    a, b = x.float().chunk(2, dim=-1)
    if cos.dim() == 2:  # a table by position; [B, 1, T, hd/2] tables are per-row positions already
        cos, sin = cos[: x.shape[2]], sin[: x.shape[2]]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv = cfg.n_heads, cfg.n_kv_heads or cfg.n_heads
        self.head_dim = cfg.d_model // cfg.n_heads
        self.q = nn.Linear(cfg.d_model, self.n_heads * self.head_dim, bias=False)
        self.kv = nn.Linear(cfg.d_model, 2 * self.n_kv * self.head_dim, bias=False)
        self.out = nn.Linear(self.n_heads * self.head_dim, cfg.d_model, bias=False)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [B, T, d] -> q, k, v [B, H, T, hd]: normed, rotated, K/V repeated per query head."""
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(B, T, 2, self.n_kv, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.n_kv != self.n_heads:  # GQA: each K/V head serves n_heads/n_kv query heads
            rep = self.n_heads // self.n_kv
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return q, k, v

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        y = F.scaled_dot_product_attention(*self.project(x, cos, sin), attn_mask=mask, is_causal=mask is None)
        return self.out(y.transpose(1, 2).reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, ffn: nn.Module):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.ffn = ffn

    def forward(self, x, cos, sin, valid=None, mask=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = x + self.attn(self.norm1(x), cos, sin, mask)
        if isinstance(self.ffn, MoE):
            y, aux = self.ffn(self.norm2(x), valid)
            return x + y, aux
        return x + self.ffn(self.norm2(x)), None


class MTP(nn.Module):
    """One sequential MTP module: h'_i = W [norm(h_i); norm(emb(t_{i+1}))] -> block -> shared head."""

    def __init__(self, cfg: ModelConfig, ffn: nn.Module):
        super().__init__()
        self.norm_h = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.norm_e = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.proj = nn.Linear(2 * cfg.d_model, cfg.d_model, bias=False)
        self.block = Block(cfg, ffn)
        self.norm_out = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig, moe: MoEConfig, vocab_size: int, max_len: int, mtp_depth: int = 0):
        super().__init__()
        self.cfg, self.moe_cfg, self.vocab_size = cfg, moe, vocab_size
        self.padded_vocab = -(-vocab_size // 64) * 64  # matmul-friendly; extra rows are never targets
        self.embed = nn.Embedding(self.padded_vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, self._ffn(i)) for i in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, self.padded_vocab, bias=False)
        self.mtp = MTP(cfg, self._ffn(cfg.n_layers)) if mtp_depth else None
        cos, sin = rope_tables(cfg.d_model // cfg.n_heads, max_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self._init()

    def _ffn(self, layer: int) -> nn.Module:
        d = self.cfg.d_model
        if layer < self.cfg.n_dense_layers:
            return SwiGLU(d, self.cfg.dense_hidden or self.moe_cfg.active_hidden)
        if self.moe_cfg.num_experts == 1:
            return SwiGLU(d, self.moe_cfg.active_hidden)
        return MoE(d, self.moe_cfg)

    def _init(self) -> None:
        std = self.cfg.init_std
        out_std = std / math.sqrt(2 * self.cfg.n_layers)  # residual projections shrink with depth
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue  # norm weights keep ones
            is_out = name.endswith(("attn.out.weight", "down.weight", "w_down"))
            nn.init.normal_(p, std=out_std if is_out else std)

    # -- bookkeeping ---------------------------------------------------------------------------
    def moe_layers(self) -> list[MoE]:
        layers = [b.ffn for b in self.blocks]
        if self.mtp is not None:
            layers.append(self.mtp.block.ffn)
        return [m for m in layers if isinstance(m, MoE)]

    def param_counts(self) -> dict[str, int]:
        """Total and active parameters (routed experts count top_k/E), embeddings and head apart."""
        total = sum(p.numel() for p in self.parameters())
        routed = sum(m.experts.w_gate_up.numel() + m.experts.w_down.numel() for m in self.moe_layers())
        active_routed = sum((m.experts.w_gate_up.numel() + m.experts.w_down.numel()) * m.top_k // m.n_experts
                            for m in self.moe_layers())
        embed = self.embed.weight.numel()
        return {"total": total, "active": total - routed + active_routed, "embedding": embed,
                "active_non_embedding": total - routed + active_routed - embed}

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token: 6 x active matmul params + attention scores (nanoGPT's estimate)."""
        n = self.param_counts()["active_non_embedding"]
        layers = self.cfg.n_layers + (1 if self.mtp is not None else 0)
        return 6 * n + 12 * layers * self.cfg.d_model * seq_len

    # -- forward -------------------------------------------------------------------------------
    def hidden(self, idx: torch.Tensor, valid: torch.Tensor | None = None, positions: torch.Tensor | None = None,
               mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Final hidden states [B, T, d] and the aux loss. `positions` [B, T] and `mask` [B, 1, T, T]
        (True: may attend) let one row hold a shared context and several continuations of it, each
        seeing only the context and itself, at the positions it would have alone (task scoring)."""
        x = self.embed(idx)
        aux = torch.zeros((), device=idx.device)
        cos, sin = self.rope_cos, self.rope_sin
        if positions is not None:
            cos, sin = cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)
        for block in self.blocks:
            x, a = block(x, cos, sin, valid, mask)
            if a is not None:
                aux = aux + a
        return x, aux

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        x, _ = self.hidden(idx)
        return self.head(self.norm(x)).float()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor | None = None,
                next_tokens: torch.Tensor | None = None) -> ModelOutput:
        """idx, targets [B, T]; targets hold IGNORE where no loss is taken. `next_tokens` (the raw,
        unmasked next tokens) feeds the MTP module, whose target at i is targets[i + 1]."""
        h, aux = self.hidden(idx, valid)
        ce = self._ce(self.head(self.norm(h)), targets)
        mtp = None
        if self.mtp is not None and next_tokens is not None and idx.shape[1] > 1:
            m = self.mtp
            e = self.embed(next_tokens[:, :-1])
            x = m.proj(torch.cat([m.norm_h(h[:, :-1]), m.norm_e(e)], dim=-1))
            x, a = m.block(x, self.rope_cos, self.rope_sin, None if valid is None else valid[:, :-1])
            if a is not None:
                aux = aux + a
            mtp = self._ce(self.head(m.norm_out(x)), targets[:, 1:])
        return ModelOutput(ce, aux, mtp)

    def _ce(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # ignore_index drops masked targets outright: exactly zero loss and zero gradient there.
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=IGNORE, reduction="sum")

    @torch.no_grad()
    def token_nats(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-position NLL in nats [B, T] (0 where the target is IGNORE), for evaluation."""
        h, _ = self.hidden(idx)
        logits = self.head(self.norm(h)).float()
        nats = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=IGNORE, reduction="none")
        return nats.view(targets.shape)
