"""Scoring a model on a task suite: the likelihood of each choice, and metrics that work at small scale.

For every item, each continuation (prompts.py) is scored by the summed log-probability, in nats, of
its tokens after its context, with the model's own tokenizer (tokenizer.py): context = BOS + the
prompt's tokens, continuation = its tokens, encoded separately. Per item (OLMES's definitions):

* `acc`: the choice with the highest summed log-probability is the gold one; `acc_per_token` divides
  each choice's log-probability by its token count first, `acc_per_char` by its characters (those of
  the scored continuation string, leading space included). Cloze and generation items have
  `greedy` instead: every gold token is the model's most likely next token (a separate name, so the
  macro `acc` averages multiple-choice tasks only).
* `p_correct`: the probability of the gold choice among the choices, softmax of their summed
  log-probabilities (= P(gold) / sum of P(choice)); `p_correct_per_token` and `p_correct_per_char`
  take the softmax of the per-token and per-character normalised log-probabilities instead.
* `bpb`: bits per byte of the gold continuation: its nats / (ln 2 x UTF-8 bytes of the scored gold
  continuation string). The one metric every kind has; lower is better.

Accuracy and p_correct are multiple-choice only. A choice repeated
in an item (CommonsenseQA has a few) gets its first copy's score, and a tie goes to the first choice. A task's figure is
the mean over its items, with a 95% interval over items from the normal approximation (mean ± 1.96
sd/sqrt(n)); the suite's macro average is the mean of the task means over the tasks that have the
metric, its interval from their standard errors (se = sqrt(sum se_k^2) / K).

Context. A model of context T sees at most T tokens before a target. An item's context is cut from
the left to the T + 1 - (longest continuation) tokens that fit, but not below T/2 tokens when it is
longer; so all choices of an item see the same context. A continuation that still does not fit is
scored in windows of T + 1 tokens, each starting with the tokens before it, moving T/2 at a time (so
every token has at least T/2 tokens of context). Both are counted per task (`truncated`, `rolled`).

Speed. An item's choices share its context: they go in one row, the context once, each choice
attending only to the context and to itself at the positions it would have alone (a block mask;
model.GPT.hidden). The output layer runs only where a target is predicted. Rows are sorted by width
and batched up to `batch_tokens` row positions (length bucketing); a batch of single-continuation
rows takes the plain causal path.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from .prompts import Request, request
from .tasks import Suite, load_suite
from .tokenizer import ModelTokenizer

MC_METRICS = ("acc", "acc_per_token", "acc_per_char", "p_correct", "p_correct_per_token", "p_correct_per_char", "bpb")
GEN_METRICS = ("greedy", "bpb")
METRICS = (*MC_METRICS, "greedy")
LOWER_IS_BETTER = {"bpb"}


@dataclass
class _Window:
    item: int  # index into the flat request list
    choice: int
    prefix: np.ndarray  # context tokens (not scored)
    branch: np.ndarray  # scored tokens, each predicted from everything before it in prefix + branch


@dataclass
class _Row:
    prefix: np.ndarray
    windows: list[_Window] = field(default_factory=list)

    @property
    def width(self) -> int:
        return len(self.prefix) + sum(len(w.branch) - 1 for w in self.windows)


def _windows(item: int, choice: int, ctx: np.ndarray, cont: np.ndarray, keep: int, T: int) -> list[_Window]:
    seq = np.concatenate([ctx[len(ctx) - keep:], cont])
    if len(seq) <= T + 1:
        return [_Window(item, choice, seq[:keep], seq[keep:])]
    out = [_Window(item, choice, seq[:keep], seq[keep:T + 1])]
    stride = max(1, T // 2)
    t = T + 1
    while t < len(seq):
        e = min(len(seq) - 1, t + stride - 1)
        out.append(_Window(item, choice, seq[e - T:t], seq[t:e + 1]))
        t = e + 1
    return out


def _rows(windows: list[_Window], max_width: int, share: bool = True) -> list[_Row]:
    """First windows of one item that share a prefix go in one row (split where it would be wider
    than max_width); every other window is a row of its own (every window, with `share` off)."""
    groups: dict[tuple, _Row] = {}
    rows: list[_Row] = []
    for w in windows:
        key = (w.item, w.prefix.tobytes()) if share else (w.item, w.choice, len(rows))
        row = groups.get(key)
        if row is None or row.width + len(w.branch) - 1 > max_width:
            row = groups[key] = _Row(w.prefix)
            rows.append(row)
        row.windows.append(w)
    return rows


def _batch_arrays(rows: list[_Row]):
    """idx, positions, segments [B, W]; and per scored token: row, predicting position, target id,
    (item, choice) it belongs to."""
    W = max(r.width for r in rows)
    idx = np.zeros((len(rows), W), np.int64)
    pos = np.zeros((len(rows), W), np.int64)
    seg = np.full((len(rows), W), -1, np.int64)
    at_row, at_pos, target, owner = [], [], [], []
    for b, row in enumerate(rows):
        P = len(row.prefix)
        idx[b, :P], pos[b, :P], seg[b, :P] = row.prefix, np.arange(P), 0
        col = P
        for s, w in enumerate(row.windows, 1):
            L = len(w.branch)
            idx[b, col:col + L - 1] = w.branch[:-1]
            pos[b, col:col + L - 1] = np.arange(P, P + L - 1)
            seg[b, col:col + L - 1] = s
            at_row.append(np.full(L, b))
            at_pos.append(np.concatenate([[P - 1], np.arange(col, col + L - 1)]))
            target.append(w.branch)
            owner.append(np.full(L, len(owner)))
            col += L - 1
    cat = np.concatenate
    return idx, pos, seg, cat(at_row), cat(at_pos), cat(target), cat(owner)


@torch.no_grad()
def _score_rows(model, rows: list[_Row], device, autocast) -> list[tuple[float, int, bool]]:
    """(summed log-prob, tokens, every token greedy) of each window of `rows`, in row order."""
    idx, pos, seg, at_row, at_pos, target, owner = _batch_arrays(rows)
    to = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    tree = any(len(r.windows) > 1 for r in rows)
    with autocast or nullcontext():
        if tree:
            s = to(seg)
            causal = torch.ones(idx.shape[1], idx.shape[1], dtype=torch.bool, device=device).tril()
            mask = causal & ((s[:, None, :] == 0) | (s[:, None, :] == s[:, :, None]))
            h, _ = model.hidden(to(idx), positions=to(pos), mask=mask.unsqueeze(1))
        else:  # one continuation a row: positions are 0..W-1 and the mask is causal
            h, _ = model.hidden(to(idx))
        logits = model.head(model.norm(h[to(at_row), to(at_pos)])).float()
    logp = torch.log_softmax(logits, -1)
    tgt = to(target)
    lp = logp.gather(1, tgt[:, None])[:, 0].double().cpu().numpy()
    greedy = (logits.argmax(-1) == tgt).cpu().numpy()
    n = owner.max() + 1
    sums = np.bincount(owner, weights=lp, minlength=n)
    counts = np.bincount(owner, minlength=n)
    misses = np.bincount(owner, weights=~greedy, minlength=n)
    return [(float(sums[i]), int(counts[i]), bool(misses[i] == 0)) for i in range(n)]


def score_requests(model, tokenizer: ModelTokenizer, requests: list[Request], context: int, device="cpu",
                   autocast=None, batch_tokens: int = 16384, share_context: bool = True) -> tuple[list[dict], dict]:
    """Per request: `lp` (summed nats per continuation), `tokens`, `greedy`; and counts of items whose
    context was cut and continuations scored in several windows. `share_context=False` gives every
    continuation a row of its own (the same figures, slower: the benchmark's baseline)."""
    T = context
    flat_ctx = [c for r in requests for c in r.contexts]
    flat_cont = [c for r in requests for c in r.continuations]
    enc_ctx, enc_cont = _encode_unique(tokenizer, flat_ctx), _encode_unique(tokenizer, flat_cont)
    bos = [] if tokenizer.bos_id is None else [tokenizer.bos_id]
    windows: list[_Window] = []
    alias: dict[tuple[int, int], tuple[int, int]] = {}
    truncated = rolled = 0
    k = 0
    for i, r in enumerate(requests):
        ctxs = [np.concatenate([bos, enc_ctx[k + j]]).astype(np.int64) for j in range(len(r.contexts))]
        conts = [enc_cont[k + j] for j in range(len(r.continuations))]
        k += len(r.contexts)
        if min(len(c) for c in ctxs) == 0:
            raise ValueError("a context of no tokens (a tokenizer without BOS and an empty prompt) predicts nothing")
        longest = max(len(c) for c in conts)
        cut = False
        seen: dict[tuple[str, str], int] = {}
        for j, (ctx, cont) in enumerate(zip(ctxs, conts)):
            first = seen.setdefault((r.contexts[j], r.continuations[j]), j)
            if first != j:  # a repeated choice (CSQA has some) scores exactly as its first copy
                alias[(i, j)] = (i, first)
                continue
            keep = min(len(ctx), max(T + 1 - longest, T // 2))
            cut |= keep < len(ctx)
            ws = _windows(i, j, ctx, cont, keep, T)
            rolled += len(ws) > 1
            windows += ws
        truncated += cut
    rows = _rows(windows, max(2 * (T + 1), 8), share_context)
    rows.sort(key=lambda r: (len(r.windows) > 1, r.width))
    results: dict[tuple[int, int], list] = defaultdict(lambda: [0.0, 0, True])
    start = 0
    was_training = model.training
    model.eval()
    try:
        while start < len(rows):
            tree = len(rows[start].windows) > 1
            end = start + 1
            while end < len(rows) and (len(rows[end].windows) > 1) == tree and \
                    (end - start + 1) * rows[end].width <= batch_tokens:
                end += 1
            batch = rows[start:end]
            scored = _score_rows(model, batch, device, autocast)
            for w, (lp, n, greedy) in zip((w for r in batch for w in r.windows), scored):
                acc = results[(w.item, w.choice)]
                acc[0] += lp
                acc[1] += n
                acc[2] &= greedy
            start = end
    finally:
        model.train(was_training)
    out = []
    for i, r in enumerate(requests):
        got = [results[alias.get((i, j), (i, j))] for j in range(len(r.continuations))]
        out.append({"lp": np.array([g[0] for g in got]), "tokens": np.array([g[1] for g in got]),
                    "greedy": [g[2] for g in got]})
    return out, {"truncated": truncated, "rolled": rolled, "rows": len(rows),
                 "positions": int(sum(r.width for r in rows))}


def _encode_unique(tokenizer: ModelTokenizer, texts: list[str]) -> list[np.ndarray]:
    unique = list(dict.fromkeys(texts))
    enc = dict(zip(unique, tokenizer.encode(unique)))
    return [enc[t] for t in texts]


def _softmax_at(scores: np.ndarray, j: int) -> float:
    z = scores - scores.max()
    return float(np.exp(z[j]) / np.exp(z).sum())


def item_metrics(req: Request, scored: dict) -> dict[str, float]:
    """The metrics of one item (module docstring) from its continuations' log-probabilities."""
    lp, ntok, g = scored["lp"], scored["tokens"], req.gold
    gold_bytes = len(req.continuations[g].encode("utf-8"))
    out = {"bpb": -lp[g] / (math.log(2) * gold_bytes) if gold_bytes else float("nan")}
    if req.kind != "multiple_choice":
        out["greedy"] = float(scored["greedy"][g])
        return out
    nchar = np.array([max(len(c), 1) for c in req.continuations], float)
    for name, s in (("", lp), ("_per_token", lp / np.maximum(ntok, 1)), ("_per_char", lp / nchar)):
        out["acc" + name] = float(int(np.argmax(s)) == g)
        out["p_correct" + name] = _softmax_at(s, g)
    return out


def _interval(values: list[float]) -> dict:
    v = np.asarray([x for x in values if not math.isnan(x)], float)
    if len(v) == 0:
        return {"mean": None, "se": None, "ci95": None, "n": 0}
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
    m = float(v.mean())
    return {"mean": m, "se": se, "ci95": [m - 1.96 * se, m + 1.96 * se], "n": len(v)}


def macro(tasks: dict[str, dict]) -> dict[str, dict]:
    """Mean of the task means per metric, over the tasks that have it, with its 95% interval."""
    out = {}
    for m in METRICS:
        have = [t["metrics"][m] for t in tasks.values() if t["metrics"].get(m, {}).get("mean") is not None]
        if not have:
            continue
        mean = float(np.mean([h["mean"] for h in have]))
        se = math.sqrt(sum(h["se"] ** 2 for h in have)) / len(have)
        out[m] = {"mean": mean, "se": se, "ci95": [mean - 1.96 * se, mean + 1.96 * se], "tasks": len(have)}
    return out


def score_suite(model, tokenizer: ModelTokenizer, suite: Suite, context: int, fmt: str = "cf", device="cpu",
                autocast=None, batch_tokens: int = 16384, per_item: bool = False, share_context: bool = True) -> dict:
    """Score `model` on every task of `suite`. The result (JSON-ready):

        {"suite", "format", "context", "items_cap", "tokenizer": {kind, sha256}, "cpu_seconds", "positions",
         "tasks": {task: {"kind", "items", "total", "source", "chance", "truncated", "rolled",
                          "metrics": {metric: {"mean", "se", "ci95": [lo, hi], "n"}},
                          "per_item"?: {"ids": [...], metric: [...]}}},
         "macro": {metric: {"mean", "se", "ci95", "tasks"}}}

    Metrics: acc, acc_per_token, acc_per_char, p_correct, p_correct_per_token, p_correct_per_char
    (multiple choice), greedy (cloze, generation) and bpb (every kind). Deterministic for a given model and suite."""
    t0 = time.process_time()
    tasks, positions = {}, 0
    for task in suite.tasks:
        reqs = [request(it, fmt) for it in task.items]
        scored, counts = score_requests(model, tokenizer, reqs, context, device, autocast, batch_tokens, share_context)
        positions += counts["positions"]
        per = defaultdict(list)
        for req, s in zip(reqs, scored):
            for m, v in item_metrics(req, s).items():
                per[m].append(v)
        mc = [it for it in task.items if it.kind == "multiple_choice"]
        entry = {"kind": task.kind, "items": len(task.items), "total": task.total, "source": task.source,
                 "chance": float(np.mean([1 / len(it.choices) for it in mc])) if mc else None,
                 "truncated": counts["truncated"], "rolled": counts["rolled"],
                 "metrics": {m: _interval(per[m]) for m in METRICS if m in per}}
        if task.excluded:
            entry["excluded"] = task.excluded
        if per_item:
            entry["per_item"] = {"ids": [it.id for it in task.items], **{m: per[m] for m in per}}
        tasks[task.name] = entry
    return {"suite": suite.name, "format": fmt, "context": context, "items_cap": suite.items,
            "tokenizer": {"kind": tokenizer.kind, "sha256": tokenizer.sha256}, "tasks": tasks, "macro": macro(tasks),
            "positions": positions, "cpu_seconds": round(time.process_time() - t0, 2)}


def score_checkpoint(path, tasks="default", items: int | None = None, fmt: str = "cf", tokenizer: str | None = None,
                     device: str | None = None, batch_tokens: int = 16384, per_item: bool = False) -> dict:
    """Load a checkpoint (a .pt file or a run directory, a path or URL) and score it on `tasks` (a
    suite name, comma list, spec file, or a loaded Suite); `tokenizer` overrides the one it carries."""
    from .checkpoint import load_model
    from .tokenizer import for_checkpoint
    from .train import autocast_for

    model, cfg, ckpt = load_model(path, device=device)
    tok = for_checkpoint(ckpt, tokenizer, str(path))
    suite = tasks if isinstance(tasks, Suite) else load_suite(tasks, items)
    dev = next(model.parameters()).device
    out = score_suite(model, tok, suite, ckpt["context"], fmt, dev, autocast_for(cfg, dev), batch_tokens, per_item)
    return {"checkpoint": str(path), **out}


def across_seeds(results: list[dict]) -> dict:
    """Several runs' suite results (one arm, one per seed) in one: per task and metric the mean, std
    and values over seeds; the macro the same, with a 95% interval over items and seeds: the seed
    variance of the macro / seeds + the mean over seeds of its item variance (se^2). The item part is
    slightly conservative: it is each seed's own item variance, not that of the seed-averaged items."""
    def spread(vals: list[float]) -> dict:
        vals = [float(v) for v in vals]
        return {"mean": float(np.mean(vals)), "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0,
                "values": vals}

    first = results[0]
    per_task = {}
    for task, entry in first["tasks"].items():
        per_task[task] = {m: spread([r["tasks"][task]["metrics"][m]["mean"] for r in results])
                          for m in entry["metrics"] if entry["metrics"][m]["mean"] is not None}
    mac = {}
    for m in first["macro"]:
        vals = [r["macro"][m]["mean"] for r in results]
        s = spread(vals)
        var = (s["std"] ** 2) / len(vals) + float(np.mean([r["macro"][m]["se"] ** 2 for r in results]))
        s["ci95"] = [s["mean"] - 1.96 * math.sqrt(var), s["mean"] + 1.96 * math.sqrt(var)]
        s["tasks"] = first["macro"][m]["tasks"]
        mac[m] = s
    return {"per_task": per_task, "macro": mac}
