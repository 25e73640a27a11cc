"""A known-order control pair for validating the proxy: clean text vs the same text with junk injected.

Clean text ships with every Python: the language reference topics behind `help()` (`pydoc_data`,
source "reference") and the docstrings of standard-library modules (source "docstrings"). Documents
are ~2 KB chunks cut at paragraph breaks; every 8th chunk (by a hash of its id) is held out for
evaluation, so the eval set is disjoint from both arms. The junk arm is the same clean training set
plus injected junk worth `junk_fraction` of its bytes: half clean documents with each sentence's words
shuffled (characters, in scripts that do not space words), a quarter keyword spam in the documents'
own script, a quarter web boilerplate (navigation, cookie and footer lines). At one token budget the clean arm must
win held-out BPB; a proxy that misranks this pair is not fit for data decisions (trainer-notes §8.5).
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import random
import re
import string
from collections import Counter
from pathlib import Path

from .bytes import write_byte_dataset

STDLIB_MODULES = ("argparse", "collections", "functools", "itertools", "json", "logging", "pathlib", "re",
                  "string", "textwrap", "datetime", "decimal", "fractions", "statistics", "random", "heapq",
                  "bisect", "enum", "dataclasses", "typing", "contextlib", "shutil", "tempfile", "csv",
                  "configparser", "difflib", "pprint", "unittest", "threading", "subprocess", "socket",
                  "email", "http.client", "urllib.parse", "zipfile", "tarfile", "gzip", "sqlite3",
                  "asyncio", "inspect", "ast", "dis", "pickle", "copy", "weakref", "abc", "numbers",
                  "operator", "calendar", "locale", "gettext", "codecs", "unicodedata", "struct", "array",
                  "queue", "sched", "selectors", "signal", "mmap", "hashlib", "hmac", "secrets", "uuid",
                  "ipaddress", "html.parser", "xml.dom.minidom", "optparse", "getopt", "doctest", "trace",
                  "timeit", "cProfile", "pdb", "warnings", "traceback", "gc", "site", "sysconfig", "zlib")

BOILERPLATE = [
    "Home | About Us | Products | Blog | Contact | Login | Register",
    "We use cookies to improve your experience on our website. By continuing you accept our cookie policy.",
    "Accept all cookies   Reject non-essential   Manage preferences",
    "Subscribe to our newsletter and get 10% off your first order!",
    "Share this article: Facebook Twitter LinkedIn Email Print",
    "Copyright (c) {year} {company}. All rights reserved. Privacy Policy | Terms of Service | Sitemap",
    "Posted by admin on {month} {day}, {year} | {n} comments",
    "Related posts: Top {n} tips you need to know | Click here to read more",
    "Skip to main content  Menu  Search  Cart ({n})",
    "Free shipping on orders over ${n}. Limited time offer. Shop now!",
]
COMPANIES = ["Example Corp", "Acme Inc", "Widget World", "Best Deals Ltd", "SiteName Media"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def _chunks(text: str, size: int = 2000) -> list[str]:
    out, cur = [], ""
    for para in text.split("\n\n"):
        if cur and len(cur) + len(para) > size:
            out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    if cur.strip():
        out.append(cur)
    return [c for c in out if len(c) >= 200]


def clean_documents() -> list[dict]:
    """Real English text available offline, as documents with ids and sources; a stable order."""
    import pydoc_data.topics as topics

    docs = []
    for key in sorted(topics.topics):
        for i, chunk in enumerate(_chunks(topics.topics[key])):
            docs.append({"doc_id": f"reference/{key}/{i}", "source": "reference", "text": chunk})
    for name in STDLIB_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # a platform without the module loses only its docstrings
            continue
        parts = [inspect.getdoc(module) or ""]
        for attr in sorted(vars(module)):
            obj = getattr(module, attr)
            if not attr.startswith("_") and getattr(obj, "__module__", None) == module.__name__:
                doc = inspect.getdoc(obj)
                if doc and len(doc) > 80:
                    parts.append(f"{attr}\n{doc}")
        for i, chunk in enumerate(_chunks("\n\n".join(p for p in parts if p))):
            docs.append({"doc_id": f"docstrings/{name}/{i}", "source": "docstrings", "text": chunk})
    return docs


def is_held_out(doc_id: str, every: int = 8) -> bool:
    return int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16) % every == 0


def _boilerplate(rng: random.Random, size: int) -> str:
    lines = []
    while sum(len(x) + 1 for x in lines) < size:
        lines.append(rng.choice(BOILERPLATE).format(year=rng.randint(2005, 2024), company=rng.choice(COMPANIES),
                                                   month=rng.choice(MONTHS), day=rng.randint(1, 28),
                                                   n=rng.randint(2, 99)))
    return "\n".join(lines)


SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f\u061f\u0964])\s*")  # . ! ? and the CJK, Arabic, Devanagari marks
KEYWORD_SEPARATORS = (" ", ", ", " | ", " - ", " / ")


def _spaced(text: str) -> bool:
    """Whether words are separated by spaces: at least one space per 20 characters (English has one
    per 5 or 6; Chinese and Japanese have next to none)."""
    return text.count(" ") * 20 >= len(text)


def _shuffled(rng: random.Random, text: str) -> str:
    """The text with the units of each sentence shuffled: words where the script separates them with
    spaces, characters where it does not (so a Chinese or Japanese sentence is as scrambled as an
    English one; shuffling at spaces left such text nearly intact)."""
    spaced, lines = _spaced(text), []
    for line in text.split("\n"):
        out = []
        for sentence in filter(None, SENTENCE_END.split(line)):
            units = sentence.split() if spaced else list(sentence)
            rng.shuffle(units)
            out.append((" " if spaced else "").join(units))
        lines.append((" " if spaced else "").join(out))
    return "\n".join(lines)


def _keywords(text: str, n: int = 8) -> list[str]:
    """The document's most frequent words of three or more letters, or where words are not spaced,
    its most frequent two-letter character pairs: keywords in the document's own script."""
    if _spaced(text):
        words = (w.strip(string.punctuation + "\u201c\u201d\u00ab\u00bb\u0964").lower() for w in text.split())
        units = [w for w in words if len(w) >= 3 and any(c.isalpha() for c in w)]
    else:
        letters = [c for c in text if c.isalpha()]
        units = ["".join(p) for p in zip(letters, letters[1:])]
    return [u for u, _ in Counter(units).most_common(n)] or text.split()[:1] or [text[:8]]


def _keyword_spam(rng: random.Random, text: str, size: int) -> str:
    """Lines of a document's keywords repeated with separators (SEO spam), in the document's script."""
    keys, lines = _keywords(text), []
    joiner = " " if _spaced(text) else ""
    while sum(len(x) + 1 for x in lines) < size:
        sep = rng.choice(KEYWORD_SEPARATORS)
        lines.append(sep.join(rng.choice(keys) for _ in range(rng.randint(3, 10))) + joiner)
    return "\n".join(line.rstrip() for line in lines)


def junk_documents(clean: list[dict], fraction: float, seed: int = 0) -> list[dict]:
    """Junk worth `fraction` of the result's bytes: half clean documents with the words (characters,
    in scripts without spaces) of each sentence shuffled, a quarter keyword spam in a clean document's
    own script, a quarter web boilerplate (navigation, cookie and footer lines)."""
    rng = random.Random(seed)
    clean_bytes = sum(len(d["text"].encode()) for d in clean)
    target = fraction / (1 - fraction) * clean_bytes
    junk, made = [], 0
    while made < target:
        origin = rng.choice(clean)
        doc = origin["text"]
        if len(junk) % 2 == 1:
            text, source = _shuffled(rng, doc), "shuffled"
        elif len(junk) % 4 == 0:
            text, source = _keyword_spam(rng, doc, rng.randint(800, 2500)), "keywords"
        else:
            text, source = _boilerplate(rng, rng.randint(800, 2500)), "boilerplate"
        # `from`: the document it was made from (a crawl's domain label would follow that page)
        junk.append({"doc_id": f"junk/{len(junk)}", "source": source, "text": text, "from": origin.get("doc_id")})
        made += len(text.encode())
    return junk


def duplicate_documents(clean: list[dict], fraction: float, seed: int = 0) -> list[dict]:
    """Exact copies worth `fraction` of the result's bytes, drawn from a twentieth of the documents:
    the duplicate-heavy arm (a crawl that was never deduplicated)."""
    rng = random.Random(seed + 7)
    popular = rng.sample(clean, max(1, len(clean) // 20))
    target = fraction / (1 - fraction) * sum(len(d["text"].encode()) for d in clean)
    out, made = [], 0
    while made < target:
        d = rng.choice(popular)
        out.append(dict(d, doc_id=f"dup/{len(out)}/{d['doc_id']}"))
        made += len(d["text"].encode())
    return out


def build_arms(out: str | Path, documents: list[dict], arms: dict[str, tuple[str, float]], seq_len: int = 129,
               seed: int = 0, train_bytes: int | None = None) -> dict[str, Path]:
    """Byte-level token datasets of a graded known-order series over `documents`: the held-out
    every-8th documents as `eval`, and per arm (kind, fraction) with kind "junk" (boilerplate and
    shuffled words added) or "dup" (exact copies added); fraction 0 is the clean pool itself."""
    out = Path(out)
    train = [d for d in documents if not is_held_out(d["doc_id"])]
    if train_bytes is not None:
        random.Random(seed + 2).shuffle(train)
        total, kept = 0, []
        for d in train:
            if total >= train_bytes:
                break
            kept.append(d)
            total += len(d["text"].encode())
        train = kept
    held = [d for d in documents if is_held_out(d["doc_id"])]
    random.Random(seed + 1).shuffle(held)  # sources interleaved, so any first rows hold both
    paths = {"eval": write_byte_dataset(held, out / "eval", seq_len)}
    for name, (kind, fraction) in arms.items():
        extra = {"junk": junk_documents, "dup": duplicate_documents}[kind](train, fraction, seed) if fraction else []
        mixed = train + extra
        random.Random(seed).shuffle(mixed)  # junk spread through the stream (the loader shuffles rows too)
        paths[name] = write_byte_dataset(mixed if extra else train, out / name, seq_len)
    return paths


def build_known_order(out: str | Path, junk_fraction: float = 0.3, seq_len: int = 129, seed: int = 0,
                      train_bytes: int | None = None, documents: list[dict] | None = None) -> dict[str, Path]:
    """Write the three token datasets (clean, junk, eval) under `out`; returns their paths.

    `documents`: the corpus (None: the stdlib text above, the one the protocol was chosen on).
    `train_bytes` caps the clean training set at a seeded sample of documents (None: all of it)."""
    return build_arms(out, clean_documents() if documents is None else documents,
                      {"clean": ("junk", 0.0), "junk": ("junk", junk_fraction)}, seq_len, seed, train_bytes)


def known_order_config(paths: dict[str, Path], tokens: int | None = None) -> dict:
    """The tiny proxy and protocol every known-order arm trains with: d64, 2 layers, a dense SwiGLU FFN
    of the MoE's active width (256), the Muon optimizer, many small steps (16 rows of 128 tokens), 3M
    tokens (1,464 steps; about 100 CPU s a run, so a pair of arms at 3 seeds fits 10 CPU minutes),
    scored on the whole held-out set. Seeds vary only the initialisation (`order_seed` fixed),
    so arms compare paired.

    Measured on the stdlib corpus (the one this protocol is tuned on; docs/trainer.md, issue #32), 1M
    tokens, 3 seeds: clean text's seed-to-seed std of held-out BPB was 0.050 with AdamW and the 4-expert
    MoE (clean 2.66, 2.67, 2.58), 0.026 with Muon and the MoE (1.933, 1.889, 1.888), 0.0055 with Muon
    and this dense FFN (1.935, 1.931, 1.942), where junk30 loses every seed by 0.084 = 17 seed std
    (paired p 0.004). Why the MoE splits seeds: in the first 25 steps every seed's router sends ~3x the
    mean load to one expert; the balancing bias then forces the load even, and in some seeds a layer's
    router keeps preferring the expert the bias forbids (router entropy 0.45-0.7, the chosen expert's
    gate ~0.27, bias spread ~0.9 for the whole run), so that layer's routed experts get mostly
    unwanted tokens at small gates and the run ends no better than dense; in the others it recovers
    (entropy ~1.0, gate ~0.47) and ends 0.045 BPB better. Which one a seed gets is the noise. A wider
    bias rate, a decaying one, 8 experts top-2 and sigmoid scores did not change it (benchmarks/
    results/trainer.json, "noise"). Issue #42: a router LR warm-up stops the early collapse, yet seed 0
    still ends at the dense level and seed 1 0.045 below: the split is whether layer 0's routed experts ever
    pass at more than gates of ~0.3; routed scaling num_experts / top_k (now the MoE's default)
    scales them up (seed std 0.016 over 5 seeds at 1M, 1.33x dense's 0.012): one seed
    still collapses early and is fought by the bias for the run. The MoE stays the trainer's default model; data decisions use this dense proxy
    (`AblationSpec.dense_check` re-runs MoE ablations dense).

    At 1M tokens this protocol still spread seeds by 0.017-0.020 BPB on corpora it was not tuned on
    (news, package READMEs), so 10% junk was not detected at 3 std; the budget went to 3M tokens at the
    same batch (more steps wash out the initialisation; issue #32's second pass, docs/trainer.md)."""
    return {"name": "known-order", "tokens": tokens or 3_000_000, "threads": 1,
            "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2},
            "moe": {"num_experts": 1, "expert_hidden": 128, "n_shared": 1},
            "data": {"train": str(paths["clean"]), "batch_size": 16, "order_seed": 0},
            "optim": {"name": "muon", "lr": 1.2e-2, "warmup_fraction": 0.05},
            "eval": {"sets": {"held_out": str(paths["eval"])}, "batch_size": 64},
            "log": {"every": 25}}
