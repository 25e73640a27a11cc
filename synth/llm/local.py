"""A local chat model (transformers) that answers OpenAI chat-completions requests.

Requests arriving from many threads (a stage's concurrency, or `assay serve`'s connections) are
gathered into batches: one worker thread takes whatever is waiting (up to `max_batch` sequences),
left-pads the prompts and decodes them together with one KV cache. Each sequence samples with its own
`torch.Generator` seeded from the request's `seed`, so a request's sampling does not depend on which
others shared its batch. CUDA is used when present.
"""
from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass


GATHER_S = 0.03


class BadRequest(ValueError):
    """The request itself is wrong (HTTP 400; a permanent failure for a stage)."""


@dataclass
class _Seq:
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: list[str]
    future: Future
    index: int  # choice index within its request
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0


def _sampling(request: dict, key: str, default, kind, lo=None, hi=None):
    value = request.get(key, default)
    if value is None:
        value = default
    try:
        value = kind(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{key!r} must be a {kind.__name__}") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise BadRequest(f"{key!r} = {value} is out of range [{lo}, {hi}]")
    return value


class LocalChatModel:
    def __init__(self, model_path: str | None = None, name: str = "smollm2-135m-instruct", device: str = "auto",
                 max_batch: int = 8, threads: int | None = None, max_new_tokens_cap: int = 2048):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .weights import resolve_model

        transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar in a run's log

        if threads:
            torch.set_num_threads(threads)
        path = resolve_model(model_path)
        self.name = name
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(self.device).eval()
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.max_batch = max_batch
        self.cap = max_new_tokens_cap
        stop_ids = {self.tokenizer.eos_token_id}
        for token in ("<|im_end|>", "<|endoftext|>"):
            tid = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != self.tokenizer.unk_token_id:
                stop_ids.add(tid)
        self.stop_ids = {t for t in stop_ids if t is not None}
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.stop_ids)
        self._queue: queue.Queue[_Seq | None] = queue.Queue()
        self._worker = threading.Thread(target=self._serve_batches, name="assay-local-llm", daemon=True)
        self._worker.start()
        self.generated_tokens = 0
        self.batch_sizes: list[int] = []  # sequences per decoded batch, for statistics

    # ---- the OpenAI-shaped entry point ---------------------------------------------------------

    def chat(self, request: dict) -> dict:
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) and m.get("role") in
                ("system", "user", "assistant") for m in messages):
            raise BadRequest("'messages' must be a non-empty list of {role: system|user|assistant, content: str}")
        n = _sampling(request, "n", 1, int, 1, 16)
        max_tokens = _sampling(request, "max_tokens", request.get("max_completion_tokens", 256), int, 1, self.cap)
        temperature = _sampling(request, "temperature", 1.0, float, 0.0, 5.0)
        top_p = _sampling(request, "top_p", 1.0, float, 0.0, 1.0)
        frequency = _sampling(request, "frequency_penalty", 0.0, float, -2.0, 2.0)
        presence = _sampling(request, "presence_penalty", 0.0, float, -2.0, 2.0)
        seed = request.get("seed")
        if seed is not None and not isinstance(seed, int):
            raise BadRequest("'seed' must be an integer")
        stop = request.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise BadRequest("'stop' must be a string or a list of strings")
        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                    return_dict=True)["input_ids"]
        if len(prompt) + max_tokens > self.context:
            raise BadRequest(f"prompt ({len(prompt)} tokens) + max_tokens ({max_tokens}) exceeds the context "
                             f"length {self.context}")
        base = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        seqs = [_Seq(prompt, max_tokens, temperature, top_p, base + i, stop, Future(), i, frequency, presence)
                for i in range(n)]
        for seq in seqs:
            self._queue.put(seq)
        outputs = [seq.future.result() for seq in seqs]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
                        for i, (text, reason, _) in enumerate(outputs)],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": sum(o[2] for o in outputs),
                      "total_tokens": len(prompt) + sum(o[2] for o in outputs)},
        }

    def close(self, wait_s: float = 30.0) -> None:
        """Stop the decoding thread after the batch in hand, and wait for it (up to `wait_s`): a process
        that exits while that thread still holds torch's thread-local state can abort at exit
        ("terminate called without an active exception", seen once on SIGTERM under load)."""
        self._queue.put(None)
        if self._worker.is_alive() and threading.current_thread() is not self._worker:
            self._worker.join(wait_s)

    # ---- batching and decoding -----------------------------------------------------------------

    def _serve_batches(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            # Callers that are still preparing their prompts (templating and tokenising hold the GIL, a
            # few ms each) join while they keep arriving less than GATHER_S apart: a batch decodes for
            # seconds, so waiting a little for a fuller one pays.
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get(timeout=GATHER_S)
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
            try:
                results = self._decode(batch)
            except Exception as exc:  # noqa: BLE001 - every waiting caller gets the error
                for seq in batch:
                    seq.future.set_exception(exc)
                continue
            self.batch_sizes.append(len(batch))
            for seq, result in zip(batch, results):
                seq.future.set_result(result)

    def _decode(self, batch: list[_Seq]) -> list[tuple[str, str, int]]:
        import torch

        rows, longest = len(batch), max(len(s.prompt) for s in batch)
        ids = torch.full((rows, longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((rows, longest), dtype=torch.long)
        for r, seq in enumerate(batch):  # left padding: every row's next token sits in the last column
            ids[r, longest - len(seq.prompt):] = torch.tensor(seq.prompt)
            mask[r, longest - len(seq.prompt):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        gens = []
        for seq in batch:
            g = torch.Generator(device=self.device)
            g.manual_seed(seq.seed % (2 ** 63))
            gens.append(g)
        out: list[list[int]] = [[] for _ in batch]
        reason = [None] * rows
        steps = max(s.max_tokens for s in batch)
        past = None
        step_ids, positions = ids, (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            for _ in range(steps):
                result = self.model(input_ids=step_ids, attention_mask=mask, position_ids=positions,
                                    past_key_values=past, use_cache=True, logits_to_keep=1)  # not the prompt's
                past = result.past_key_values
                logits = result.logits[:, -1, :].float()
                nxt = []
                for r, seq in enumerate(batch):
                    if reason[r] is not None:
                        nxt.append(self.pad_id)
                        continue
                    row = logits[r]
                    if (seq.frequency_penalty or seq.presence_penalty) and out[r]:  # OpenAI semantics
                        seen, counts = torch.unique(torch.tensor(out[r], device=row.device), return_counts=True)
                        row = row.clone()
                        row[seen] -= seq.frequency_penalty * counts.to(row.dtype) + seq.presence_penalty
                    token = self._pick(row, seq, gens[r])
                    if token in self.stop_ids:
                        reason[r] = "stop"
                    else:
                        out[r].append(token)
                        if seq.stop and self._hit_stop(out[r], seq.stop):
                            reason[r] = "stop"
                        elif len(out[r]) >= seq.max_tokens:
                            reason[r] = "length"
                    nxt.append(token)
                if all(x is not None for x in reason):
                    break
                step_ids = torch.tensor(nxt, device=self.device).unsqueeze(1)
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype, device=self.device)], dim=1)
                positions = positions[:, -1:] + 1
        results = []
        for r, seq in enumerate(batch):
            text = self.tokenizer.decode(out[r], skip_special_tokens=True)
            for s in seq.stop:  # OpenAI semantics: the stop string itself is not returned
                cut = text.find(s)
                if cut >= 0:
                    text = text[:cut]
            self.generated_tokens += len(out[r])
            results.append((text, reason[r] or "length", len(out[r])))
        return results

    @staticmethod
    def _pick(logits, seq: _Seq, gen) -> int:
        import torch

        if seq.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / seq.temperature, dim=-1)
        if seq.top_p < 1.0:
            # The nucleus is a prefix of the sorted probabilities: when the top 256 already reach top_p it
            # lies among them, and sorting those is enough (the full vocabulary's sort costs ~7 ms).
            sorted_p, order = torch.topk(probs, min(256, probs.numel()))
            if float(sorted_p.sum()) < seq.top_p and sorted_p.numel() < probs.numel():
                sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < seq.top_p  # the smallest set reaching top_p
            sorted_p = torch.where(keep, sorted_p, torch.zeros_like(sorted_p))
            choice = torch.multinomial(sorted_p / sorted_p.sum(), 1, generator=gen)
            return int(order[choice])
        return int(torch.multinomial(probs, 1, generator=gen))

    def _hit_stop(self, tokens: list[int], stops: list[str]) -> bool:
        tail = self.tokenizer.decode(tokens[-16:], skip_special_tokens=True)
        return any(s in tail for s in stops)

