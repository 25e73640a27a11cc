"""Synthesis benchmarks, side by side with plain baselines in one run.

1. client: chat-completion requests/s against a server with a fixed latency (the scripted server, in
   its own process, asyncio, so it is never the limit) at concurrency 1, 8 and 64:
   - Assay's OpenAIClient (one keep-alive connection per thread), N threads;
   - a synth.solve stage end to end (run_stage: request cache, verification, Parquet), concurrency N;
   - baselines: a plain sequential urllib loop, and urllib from N threads (a new connection per request).
   `ideal` is N / latency; `efficiency` = measured / ideal. On a shared machine requests/s follow
   the CPU the processes get, so each variant's CPU time per request (this process; the server's
   for the client run) is recorded too: it is what the client costs, whatever the load.
2. local_model: tokens/s of the local SmolLM2-135M: Assay's batched decoder with 8 concurrent
   requests, the same with batches of 1, and transformers' own `generate` called sequentially.
3. sandbox: executions/s of a small Python program: isolated (namespaces, new root, limits),
   sequential and from 2 threads, limits-only, and a plain `subprocess.run` as the baseline.

Run:  python benchmarks/synth.py [--only client,local_model,sandbox]
Results are merged into benchmarks/results/synth.json (other synth benchmarks keep their keys).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "synth.json"
LATENCY_S = 0.02
REQUEST = {"model": "bench", "messages": [{"role": "user", "content": "What is 3 + 4?"}], "max_tokens": 16}


def _serve(latency: float, port_queue) -> None:
    from assay.synth.llm.scripted import ScriptedServer

    server = ScriptedServer(lambda r: "3 + 4 = 7\nAnswer: 7", latency_s=latency)
    port_queue.put(server.url)
    while True:
        time.sleep(3600)


def _rate(n: int, fn) -> float:
    started = time.perf_counter()
    fn()
    return n / (time.perf_counter() - started)


def _rate_cpu(n: int, fn, server_pid: int | None = None) -> tuple[float, float, float | None]:
    """(requests/s, this process's CPU microseconds per request, the server's or None)."""
    import psutil

    server = psutil.Process(server_pid) if server_pid else None
    server_cpu = sum(server.cpu_times()[:2]) if server else 0.0
    cpu = time.process_time()
    rate = _rate(n, fn)
    cpu = (time.process_time() - cpu) / n * 1e6
    return rate, cpu, (sum(server.cpu_times()[:2]) - server_cpu) / n * 1e6 if server else None


def bench_client(args) -> dict:
    from assay.pipeline.dataset import write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.synth.llm.client import OpenAIClient
    from assay.synth.solve import Solve

    ctx = mp.get_context("spawn")
    urls = ctx.Queue()
    server = ctx.Process(target=_serve, args=(LATENCY_S, urls), daemon=True)
    server.start()
    url = urls.get(timeout=60)
    body = json.dumps(REQUEST).encode()

    def urllib_call(i):
        req = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def solve_stage(n: int, conc: int) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            items = write_table(make_docs([{"text": f"q{i}", "source": "b", "meta": {
                "question": f"q{i}: what is 3 + 4?", "answer": "7", "answer_kind": "integer"}} for i in range(n)]),
                Path(tmp) / "items")
            stage = Solve({"url": url, "candidates": 1, "concurrency": conc, "cache_dir": f"{tmp}/cache",
                           "min_pass_rate": 0.0, "max_pass_rate": 1.0, "model": "bench"})
            stage.batch_rows = n  # one batch: the stage's concurrency, not the batch size, is measured
            return _rate_cpu(n, lambda: run_stage(stage, [items], Path(tmp) / "out", options={"workers": 1}))

    out: dict = {"latency_s": LATENCY_S, "by_concurrency": {}}
    client = OpenAIClient(url, timeout_s=30)
    try:
        solve_stage(4, 4)  # lazy imports (the answer checker's sympy, Parquet writing) are not timed
        for conc in (1, 8, 64):
            n = {1: 150, 8: 800, 64: 3000}[conc]
            requests = [dict(REQUEST, seed=i) for i in range(n)]
            with ThreadPoolExecutor(conc) as pool:
                list(pool.map(client.chat, requests[: conc * 2]))  # warm the connections
                assay, assay_cpu, server_cpu = _rate_cpu(n, lambda: list(pool.map(client.chat, requests)), server.pid)
            with ThreadPoolExecutor(conc) as pool:
                plain, plain_cpu, _ = _rate_cpu(n, lambda: list(pool.map(urllib_call, range(n))))
            staged, staged_cpu, _ = solve_stage(n, conc)
            ideal = conc / LATENCY_S
            out["by_concurrency"][str(conc)] = {
                "requests": n, "ideal_rps": round(ideal, 1),
                "assay_client_rps": round(assay, 1), "assay_client_efficiency": round(assay / ideal, 3),
                "synth_solve_stage_rps": round(staged, 1), "synth_solve_stage_efficiency": round(staged / ideal, 3),
                "urllib_threads_rps": round(plain, 1), "assay_vs_urllib_threads": round(assay / plain, 2),
                "cpu_us_per_request": {"assay_client": round(assay_cpu), "synth_solve_stage": round(staged_cpu),
                                       "urllib_threads": round(plain_cpu), "server_during_assay_client": round(server_cpu)},
            }
            print(f"client c={conc}: assay {assay:.0f} rps, stage {staged:.0f}, urllib threads {plain:.0f}, "
                  f"ideal {ideal:.0f}; CPU us/request: assay {assay_cpu:.0f}, stage {staged_cpu:.0f}, "
                  f"urllib threads {plain_cpu:.0f}, server {server_cpu:.0f}", flush=True)
        sequential = _rate(150, lambda: [urllib_call(i) for i in range(150)])
        out["urllib_sequential_rps"] = round(sequential, 1)
        out["assay_c64_vs_urllib_sequential"] = round(out["by_concurrency"]["64"]["assay_client_rps"] / sequential, 1)
    finally:
        client.close()
        server.terminate()
    return out


def bench_local_model(args) -> dict:
    import torch

    from assay.synth.llm.local import LocalChatModel

    threads = args.threads
    prompts = ["Write a short story about a robot.", "Explain what a hash table is.", "Describe the water cycle.",
               "Give three tips for learning to cook.", "What is a prime number? Explain.",
               "Describe a sunny day at the beach.", "Explain how a bicycle works.", "Write a poem about autumn."]
    requests = [{"messages": [{"role": "user", "content": p}], "max_tokens": args.tokens, "temperature": 0.7,
                 "seed": i} for i, p in enumerate(prompts)]
    out: dict = {"model": "SmolLM2-135M-Instruct (float32)", "threads": threads, "requests": len(requests),
                 "max_tokens": args.tokens}
    for label, batch in (("assay_batched_8", 8), ("assay_batch_1", 1)):
        model = LocalChatModel(threads=threads, max_batch=batch)
        model.chat(dict(requests[0], max_tokens=4))  # warm-up
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(model.chat, requests))
        elapsed = time.perf_counter() - started
        tokens = sum(a["usage"]["completion_tokens"] for a in answers)
        out[label] = {"tokens": tokens, "seconds": round(elapsed, 2), "tokens_per_s": round(tokens / elapsed, 1)}
        print(f"local {label}: {tokens / elapsed:.1f} tokens/s", flush=True)
        model.close()
    hf, tok = model.model, model.tokenizer
    started, tokens = time.perf_counter(), 0
    for r in requests:  # the baseline: transformers' generate, one request after another
        ids = tok.apply_chat_template(r["messages"], add_generation_prompt=True, return_tensors="pt", return_dict=True)
        torch.manual_seed(r["seed"])
        gen = hf.generate(**dict(ids), max_new_tokens=args.tokens, do_sample=True, temperature=0.7)
        tokens += gen.shape[1] - ids["input_ids"].shape[1]
    elapsed = time.perf_counter() - started
    out["transformers_generate_sequential"] = {"tokens": int(tokens), "seconds": round(elapsed, 2),
                                               "tokens_per_s": round(tokens / elapsed, 1)}
    out["batched_vs_generate"] = round(out["assay_batched_8"]["tokens_per_s"] / (tokens / elapsed), 2)
    print(f"local transformers generate: {tokens / elapsed:.1f} tokens/s", flush=True)
    return out


PROGRAM = "import json, math\nprint(json.dumps({'x': math.factorial(20)}))\n"


def bench_sandbox(args) -> dict:
    from assay.synth import sandbox

    n = args.runs
    ok = lambda r: r.verdict == "ok"  # noqa: E731
    isolated, why = sandbox.isolation_available()
    out: dict = {"runs": n, "isolation": "namespaces" if isolated else f"none ({why})"}
    rate = _rate(n, lambda: all(ok(sandbox.run_python(PROGRAM)) for _ in range(n)))
    out["isolated_sequential_per_s"] = round(rate, 1)
    with ThreadPoolExecutor(2) as pool:
        rate2 = _rate(n, lambda: all(pool.map(lambda _: ok(sandbox.run_python(PROGRAM)), range(n))))
    out["isolated_2_threads_per_s"] = round(rate2, 1)
    limits_only = _rate(n, lambda: all(ok(sandbox.run_python(PROGRAM, isolation="off")) for _ in range(n)))
    out["limits_only_per_s"] = round(limits_only, 1)
    plain = _rate(n, lambda: all(subprocess.run([sys.executable, "-E", "-s", "-c", PROGRAM], capture_output=True).returncode == 0
                                 for _ in range(n)))
    out["plain_subprocess_per_s"] = round(plain, 1)
    out["isolation_cost_vs_plain"] = round(plain / rate, 2)
    print(f"sandbox: isolated {rate:.1f}/s (2 threads {rate2:.1f}/s), limits only {limits_only:.1f}/s, "
          f"plain subprocess {plain:.1f}/s", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="client,local_model,sandbox")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for the local model")
    parser.add_argument("--tokens", type=int, default=64, help="max_tokens per local request")
    parser.add_argument("--runs", type=int, default=40, help="sandbox executions per variant")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for name in args.only.split(","):
        load = os.getloadavg()[0]
        results[name] = {**{"client": bench_client, "local_model": bench_local_model,
                            "sandbox": bench_sandbox}[name](args),
                         "load_avg_1m_before": round(load, 2), "cores": os.cpu_count(), "machine": platform.machine(),
                         "date": time.strftime("%Y-%m-%d %H:%M")}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
