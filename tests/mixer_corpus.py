"""Hand-built documents for the mixer tests: web pages with tiers and cluster weights, code with
code_hits, PR records whose `segments` hold scaffolding, and chats with user/assistant turns."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from assay.pipeline.dataset import write_table
from assay.pipeline.schema import DOC_SCHEMA, doc_id

WORDS = ("data model token train mix code page web corpus stage budget epoch replay prefix mask row "
         "shard pack fill middle tier cluster quality filter dedup source python function return value "
         "naïve café résumé 日本語 données ünïcode 🎉").split()
TIERS = ["High", "Medium-High", "Medium", "Medium-Low", "Low"]
SEGMENT = pa.struct([pa.field("role", pa.string()), pa.field("text", pa.string())])
SCHEMA = pa.schema(list(DOC_SCHEMA) + [
    pa.field("tier", pa.string()), pa.field("code_hits", pa.int64()), pa.field("cluster_weight", pa.float64()),
    pa.field("segments", pa.list_(SEGMENT)),
])


def _words(rng: np.random.Generator, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(lo, hi))))


def documents(n_web: int = 200, n_code: int = 80, n_pr: int = 60, n_chat: int = 60, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_web):
        docs.append({"text": f"{_words(rng, 10, 25).capitalize()}.\n\n{_words(rng, 10, 40)}.", "source": "crawl",
                     "content_type": "web", "lang": "en", "domain": f"site{i % 7}.example", "tier": TIERS[i % 5],
                     "cluster_weight": [0.5, 1.0, 2.0][i % 3]})
    for i in range(n_code):
        body = "\n".join(f"    x{j} = {_words(rng, 1, 4)!r}" for j in range(int(rng.integers(2, 8))))
        docs.append({"text": f"def f{i}(x):\n{body}\n    return x\n", "source": "repo", "content_type": "code",
                     "lang": "en", "code_hits": i % 11})
    for i in range(n_pr):
        parts = [("scaffold", "### Issue\n"), ("context", _words(rng, 8, 30)), ("scaffold", "\n### Fix\n"),
                 ("context", _words(rng, 5, 25))]
        docs.append(_with_segments(parts, "prs", "pr"))
    for i in range(n_chat):
        parts = [("system", "You help.\n"), ("user", _words(rng, 4, 15) + "?\n"), ("assistant", _words(rng, 8, 30) + "\n"),
                 ("user", _words(rng, 3, 10) + "?\n"), ("assistant", _words(rng, 5, 20))]
        docs.append(_with_segments(parts, "chats", "synthetic"))
    for k, d in enumerate(docs):
        d["url"] = f"https://{d['source']}.example/{k}"
        d["id"] = doc_id(d["text"], d["source"], d["url"])
    return docs


def _with_segments(parts: list[tuple[str, str]], source: str, content_type: str) -> dict:
    return {"text": "".join(t for _, t in parts), "source": source, "content_type": content_type, "lang": "en",
            "segments": [{"role": r, "text": t} for r, t in parts]}


def write_corpus(path, docs: list[dict], shards: int = 2):
    columns = {f.name: [d.get(f.name) for d in docs] for f in SCHEMA}
    columns["meta"] = ["{}"] * len(docs)
    return write_table(pa.table(columns, schema=SCHEMA), path, shards=shards)


def mixture_data(corpus_path, tokenizer_path, **stage_overrides) -> dict:
    """A three-stage mixture over the corpus: broad with tiers/code hits/FIM, an anneal with replay,
    cluster rebalance and scaffolding masked, then chat with user turns masked and no prefix."""
    src = lambda **kw: {"path": str(corpus_path), **kw}  # noqa: E731
    stages = [
        {"id": "broad", "tokens": 30000, "seq_len": 256, "mix": {"web": 3, "code": 2, "pr": 1},
         "tiers": {"web": ["High", "Medium-High", "Medium"]}, "code_max_hits": 6, "fim_rate": 0.5},
        {"id": "anneal", "tokens": 20000, "seq_len": 512, "mix": {"pr": 1, "chat": 1}, "mask_roles": ["scaffold"],
         "replay": {"share": 0.25, "from": ["broad"]}, "cluster_rebalance": True},
        {"id": "chat", "tokens": 12000, "seq_len": 512, "mix": {"chat": 1}, "mask_roles": ["user"], "meta": False,
         "replay": {"share": 0.2, "from": ["anneal"]}},
    ]
    for stage in stages:
        stage.update(stage_overrides.get(stage["id"], {}))
    return {
        "name": "test-mix", "seed": 3, "max_epochs": 4, "lookahead": 64, "shard_tokens": 8192,
        "tokenizer": {"path": str(tokenizer_path)},
        "meta": {"fields": ["content_type", "lang", "domain"]},
        "sources": {"web": src(content_types=["web"]), "code": src(content_types=["code"]),
                    "pr": src(content_types=["pr"]), "chat": src(content_types=["synthetic"])},
        "stages": stages,
    }


def shard_files(out) -> dict[str, bytes]:
    """Every shard file (tokens, masks, doc indexes, rejects) of every dataset in a built mixture."""
    files = sorted(out.glob("*/part-*")) + sorted(out.glob("*/_rejects/*"))
    return {str(p.relative_to(out)): p.read_bytes() for p in files}
