"""Mixture-of-experts FFN: a top-k router with aux-loss-free bias balancing, fine-grained routed
experts computed in groups, and always-on shared experts (DeepSeek-V3 / Step 3.5 shape).

    y = shared(x) + sum_k routed_scaling * g_k * expert_k(x)

* The router scores in fp32 (softmax or sigmoid). The per-expert bias only changes *which* experts
  are picked; gates come from the unbiased scores, so the bias steers load without distorting outputs.
* The bias moves by `rate * sign(mean_load - load)` after each optimizer step, on the load counted over
  the whole accumulated batch (all non-pad tokens, loss-masked ones too: they still cost compute).
  Load and telemetry are counted in training mode only: evaluation never moves the router.
* Expert compute sorts token-slots by expert and runs each projection as one batched matmul over
  [experts, capacity, d] (capacity = the busiest expert's count, so nothing is dropped), or as
  `torch._grouped_mm` on CUDA where that kernel exists and agrees with the padded path. The loop over
  experts with index gathers is kept as the baseline the benchmark and tests compare against.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn


class SwiGLU(nn.Module):
    """Dense SwiGLU FFN (shared experts, leading dense layers, the dense control)."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.gate_up = nn.Linear(d, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Router(nn.Module):
    def __init__(self, d: int, n_experts: int, top_k: int, score: str, normalize: bool, scaling: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_experts, d))
        self.top_k, self.score, self.normalize, self.scaling = top_k, score, normalize, scaling
        # Selection-only bias (aux-loss-free balancing); a persistent buffer so checkpoints carry it.
        self.register_buffer("expert_bias", torch.zeros(n_experts, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [N, d] -> (expert ids [N, k], gates [N, k] fp32, scores [N, E], logits [N, E])."""
        with torch.autocast(x.device.type, enabled=False):  # routing decisions stay fp32 under bf16
            logits = F.linear(x.float(), self.weight.float())
        scores = logits.softmax(-1) if self.score == "softmax" else logits.sigmoid()
        with torch.no_grad():
            ids = torch.topk(scores + self.expert_bias, self.top_k, dim=-1).indices
        gates = scores.gather(-1, ids)
        if self.normalize:
            gates = gates / (gates.sum(-1, keepdim=True) + 1e-20)
        return ids, gates * self.scaling, scores, logits


class Experts(nn.Module):
    """E SwiGLU experts as stacked weights: gate|up [E, d, 2h], down [E, h, d]."""

    def __init__(self, n_experts: int, d: int, hidden: int, act_clip: float | None = None, impl: str = "auto"):
        super().__init__()
        self.n_experts, self.hidden, self.act_clip, self.impl = n_experts, hidden, act_clip, impl
        self.w_gate_up = nn.Parameter(torch.empty(n_experts, d, 2 * hidden))
        self.w_down = nn.Parameter(torch.empty(n_experts, hidden, d))
        self._grouped_mm_ok: bool | None = None
        # Per-expert sum of squared intermediate activations and slot counts since the last read. Kept
        # on the device (non-persistent buffers) so telemetry costs no host sync per forward.
        self.register_buffer("act_sq", torch.zeros(n_experts, dtype=torch.float64), persistent=False)
        self.register_buffer("act_n", torch.zeros(n_experts, dtype=torch.float64), persistent=False)

    def _act(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, dim=-1)
        h = F.silu(gate) * up
        if self.act_clip is not None:  # Step 3.5 §4.1.3: clip before the down projection
            h = h.clamp(-self.act_clip, self.act_clip)
        return h

    def _note(self, sq: torch.Tensor, n: torch.Tensor) -> None:
        if not self.training:  # telemetry describes training; evaluation leaves it alone
            return
        self.act_sq += sq.detach().double()
        self.act_n += n.detach().double() * self.hidden

    # -- the baseline: loop over experts, gather each one's tokens, scatter-add back ----------------
    def forward_loop(self, x: torch.Tensor, ids: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        sq = torch.zeros(self.n_experts, device=x.device)
        n = torch.zeros(self.n_experts, device=x.device)
        for e in range(self.n_experts):
            tok, slot = torch.where(ids == e)
            if tok.numel() == 0:
                continue
            h = self._act(x[tok] @ self.w_gate_up[e])
            sq[e], n[e] = h.detach().float().pow(2).sum(), tok.numel()
            out.index_add_(0, tok, (h @ self.w_down[e]) * gates[tok, slot, None].to(x.dtype))
        self._note(sq, n)
        return out

    # -- batched: sort slots by expert, one matmul per projection --------------------------------
    def forward(self, x: torch.Tensor, ids: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        if self.impl == "loop":
            return self.forward_loop(x, ids, gates)
        n_tok, k = ids.shape
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)  # slot order grouped by expert, stable = deterministic
        sorted_e = flat[order]
        # scatter_add, not bincount: a fixed output shape, so torch.compile keeps the layer in one graph
        counts = torch.zeros(self.n_experts, dtype=torch.long, device=flat.device).scatter_add_(0, flat, torch.ones_like(flat))
        xs = x[order // k]  # each slot's token, in expert order
        if self._use_grouped_mm(x):
            hs = self._grouped_mm(xs, counts, sorted_e)
        else:
            hs = self._padded(xs, sorted_e, counts)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        # Back to (token, k) order and a weighted sum over k: no scatter-add, so deterministic on GPU too.
        per_slot = hs[inverse].view(n_tok, k, -1)
        return (per_slot * gates.unsqueeze(-1).to(per_slot.dtype)).sum(1)

    def _padded(self, xs: torch.Tensor, sorted_e: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        E, d = self.n_experts, xs.shape[-1]
        cap = int(counts.max())  # dropless: capacity is the busiest expert's load
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.arange(xs.shape[0], device=xs.device) - starts[sorted_e]
        slot = sorted_e * cap + pos
        buf = xs.new_zeros(E * cap, d).index_copy(0, slot, xs).view(E, cap, d)
        h = self._act(torch.bmm(buf, self.w_gate_up.to(buf.dtype)))  # padding rows stay exactly zero
        self._note(h.detach().float().pow(2).sum((1, 2)), counts)
        out = torch.bmm(h, self.w_down.to(h.dtype))
        return out.reshape(E * cap, d)[slot]

    def _grouped_mm(self, xs: torch.Tensor, counts: torch.Tensor, sorted_e: torch.Tensor) -> torch.Tensor:
        offs = torch.cumsum(counts, 0).to(torch.int32)
        wgu, wd = self.w_gate_up.to(torch.bfloat16), self.w_down.to(torch.bfloat16)
        h = self._act(torch._grouped_mm(xs.to(torch.bfloat16), wgu, offs=offs))
        # per-expert sums keyed by each slot's expert (no repeat_interleave: that would sync the host)
        sums = torch.zeros(self.n_experts, device=xs.device).index_add_(0, sorted_e, h.detach().float().pow(2).sum(-1))
        self._note(sums, counts)
        return torch._grouped_mm(h, wd, offs=offs).to(xs.dtype)

    def _use_grouped_mm(self, x: torch.Tensor) -> bool:
        """grouped_mm only on CUDA (bf16, Hopper+), and only after it matched the padded path once."""
        if self.impl == "padded" or not x.is_cuda or not hasattr(torch, "_grouped_mm"):
            return False
        if self._grouped_mm_ok is None:
            self._grouped_mm_ok = self._check_grouped_mm(x)
        return self._grouped_mm_ok

    def _check_grouped_mm(self, x: torch.Tensor) -> bool:
        """Forward and backward once on random slots; the stats buffers are restored afterwards."""
        saved = self.act_sq.clone(), self.act_n.clone()
        try:
            g = torch.Generator(device=x.device).manual_seed(0)
            xs = torch.randn(64, self.w_gate_up.shape[1], device=x.device, generator=g)
            e = torch.sort(torch.randint(0, self.n_experts, (64,), device=x.device, generator=g)).values
            counts = torch.bincount(e, minlength=self.n_experts)
            xa = xs.clone().requires_grad_()
            with torch.enable_grad():  # the first call may come from evaluation, under no_grad
                a = self._grouped_mm(xa, counts, e).float()
                a.sum().backward()  # the kernel must have a backward here too
            self.w_gate_up.grad = self.w_down.grad = None
            with torch.no_grad():
                b = self._padded(xs.bfloat16(), e, counts).float()
            ok = bool(torch.allclose(a.detach(), b, rtol=5e-2, atol=5e-2)) and xa.grad is not None
        except (RuntimeError, TypeError, NotImplementedError) as exc:  # no kernel for this GPU or shape
            self.act_sq.copy_(saved[0])
            self.act_n.copy_(saved[1])
            warnings.warn(f"torch._grouped_mm unusable here ({exc}); using padded batched matmuls")
            return False
        self.act_sq.copy_(saved[0])
        self.act_n.copy_(saved[1])
        if not ok:
            warnings.warn("torch._grouped_mm disagreed with the padded path; using padded batched matmuls")
        return ok

    def read_act_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-expert RMS of the intermediate activation, slot counts) since the last read; resets."""
        rms = (self.act_sq / self.act_n.clamp(min=1)).sqrt().cpu()
        n = (self.act_n / self.hidden).cpu()
        self.act_sq.zero_()
        self.act_n.zero_()
        return rms, n


class MoE(nn.Module):
    def __init__(self, d: int, cfg) -> None:
        super().__init__()
        normalize = cfg.normalize_gates if cfg.normalize_gates is not None else cfg.score == "sigmoid"
        self.n_experts, self.top_k = cfg.num_experts, cfg.top_k
        self.router = Router(d, cfg.num_experts, cfg.top_k, cfg.score, normalize, cfg.scaling)
        self.experts = Experts(cfg.num_experts, d, cfg.expert_hidden, cfg.act_clip, cfg.impl)
        shared = cfg.n_shared * (cfg.shared_hidden or cfg.expert_hidden)
        self.shared = SwiGLU(d, shared) if shared else None
        self.seq_balance_coef, self.z_loss_coef = cfg.seq_balance_coef, cfg.z_loss_coef
        # Load over the current optimizer step (drives the bias), and the telemetry window: load per
        # expert, then entropy, confidence, z, aux loss, |shared|^2, |routed|^2, calls. Device buffers.
        self.register_buffer("step_load", torch.zeros(cfg.num_experts, dtype=torch.float64), persistent=False)
        self.register_buffer("win_load", torch.zeros(cfg.num_experts, dtype=torch.float64), persistent=False)
        self.register_buffer("win", torch.zeros(7, dtype=torch.float64), persistent=False)

    def reset_window(self) -> None:
        self.win_load.zero_()
        self.win.zero_()

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, T, d], valid [B, T] (False on padding) -> (y [B, T, d], auxiliary loss scalar)."""
        B, T, d = x.shape
        flat = x.reshape(-1, d)
        ids, gates, scores, logits = self.router(flat)
        routed = self.experts(flat, ids, gates).view(B, T, d)
        y = routed
        shared = None
        if self.shared is not None:
            shared = self.shared(x)
            y = y + shared
        v = torch.ones(B * T, dtype=torch.bool, device=x.device) if valid is None else valid.reshape(-1)
        vf = v.float()
        aux = x.new_zeros((), dtype=torch.float32)
        if self.z_loss_coef:
            z = torch.logsumexp(logits, -1).pow(2)
            aux = aux + self.z_loss_coef * (z * vf).sum() / vf.sum().clamp(min=1)
        if self.seq_balance_coef:
            aux = aux + self.seq_balance_coef * self._seq_balance(ids, scores, vf, B, T)
        if self.training:  # held-out text must not steer the next bias update
            self._record(ids, scores, logits, v, shared, routed, aux)
        return y, aux

    def _seq_balance(self, ids, scores, vf, B, T) -> torch.Tensor:
        """DeepSeek-V3 sequence-wise loss: sum_i f_i P_i per sequence, averaged over sequences."""
        E, k = self.n_experts, self.top_k
        vf = vf.view(B, T)
        n = vf.sum(1).clamp(min=1)
        picked = F.one_hot(ids, E).sum(1).float().view(B, T, E) * vf.unsqueeze(-1)
        f = picked.sum(1) * E / (k * n.unsqueeze(-1))
        s = scores / scores.sum(-1, keepdim=True)
        p = (s.view(B, T, E) * vf.unsqueeze(-1)).sum(1) / n.unsqueeze(-1)
        return (f * p).sum(-1).mean()

    @torch.no_grad()
    def _record(self, ids, scores, logits, v, shared, routed, aux) -> None:
        vv = v.to(scores.dtype)
        load = torch.zeros(self.n_experts, dtype=torch.float64, device=ids.device)
        load.index_add_(0, ids.reshape(-1), vv.double().repeat_interleave(self.top_k))
        self.step_load += load
        self.win_load += load
        probs = scores / scores.sum(-1, keepdim=True)
        nv = vv.sum().clamp(min=1)
        entropy = (-(probs * probs.clamp(min=1e-20).log()).sum(-1) * vv).sum() / nv
        conf = (probs.gather(-1, ids).sum(-1) * vv).sum() / nv  # routing confidence (S35 §5.2.1)
        z = (torch.logsumexp(logits, -1).pow(2) * vv).sum() / nv
        shared_sq = shared.float().pow(2).sum() if shared is not None else torch.zeros((), device=ids.device)
        row = torch.stack([entropy, conf, z, aux.detach().float(), shared_sq.float(),
                           routed.float().pow(2).sum(), torch.ones((), device=ids.device)])
        self.win += row.double()

    @torch.no_grad()
    def update_bias(self, rate: float) -> None:
        """After an optimizer step: nudge under-loaded experts up and over-loaded ones down."""
        load = self.step_load
        if rate > 0:  # (an all-zero load gives sign 0: no move)
            self.router.expert_bias += rate * torch.sign(load.mean() - load).float()
        self.step_load.zero_()

    @torch.no_grad()
    def telemetry(self, blowup_ratio: float, dead_ratio: float) -> dict:
        """Window statistics (since the last call): load, bias, expert activation RMS, router health."""
        entropy, conf, z, bal, shared_sq, routed_sq, calls = self.win.tolist()
        calls = max(calls, 1.0)
        load = self.win_load.cpu()
        frac = (load / load.sum().clamp(min=1)).tolist()
        mean = float(load.mean()) or 1.0
        rms, _ = self.experts.read_act_stats()
        active = rms[rms > 0]
        med = float(active.median()) if active.numel() else 0.0
        bias = self.router.expert_bias.float().cpu()
        out = {
            "load": [round(f, 4) for f in frac],
            "load_max_mean": round(float(load.max()) / mean, 4),
            "load_min_mean": round(float(load.min()) / mean, 4),
            "experts_without_tokens": int((load == 0).sum()),
            "bias_min": round(float(bias.min()), 5), "bias_mean": round(float(bias.mean()), 5),
            "bias_max": round(float(bias.max()), 5),
            "act_rms": [round(float(r), 5) for r in rms],
            "act_rms_max_median": round(float(rms.max()) / med, 4) if med else None,
            "act_rms_min_median": round(float(rms.min()) / med, 4) if med else None,
            "router_entropy": round(entropy / calls, 4),
            "routing_confidence": round(conf / calls, 4),
            "z": round(z / calls, 4),
            "aux_loss": round(bal / calls, 6),
            "shared_routed_ratio": round((shared_sq / routed_sq) ** 0.5, 4) if routed_sq else None,
        }
        warn = []
        if out["act_rms_max_median"] and out["act_rms_max_median"] > blowup_ratio:
            warn.append("activation blow-up")
        if out["act_rms_min_median"] is not None and out["act_rms_min_median"] < dead_ratio:
            warn.append("dead expert")
        if warn:
            out["warnings"] = warn
        self.reset_window()
        return out
