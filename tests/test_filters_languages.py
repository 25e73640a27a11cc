"""Per-language heuristic filtering: the shipped calibration, the calibration itself, the command."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from assay.filters.calibrate import calibrate
from assay.filters.languages import load
from assay.filters.rules import Rules
from assay.filters.signals import STOP_WORDS, Signals, compute_signals
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.schema import make_docs

UDHR = Path(__file__).parent / "fixtures" / "udhr"


def articles(lang: str) -> list[str]:
    return (UDHR / f"{lang}.txt").read_text(encoding="utf-8").split("\n\n\n")


def windows(lang: str, size: int = 5) -> list[str]:
    arts = articles(lang)
    return ["\n\n".join(arts[i:i + size]) for i in range(len(arts) - size + 1)]


def judged(texts: list[str], langs: list[str] | None, **params) -> pa.Table:
    cols = {"id": [str(i) for i in range(len(texts))], "text": texts}
    if langs is not None:
        cols["lang"] = langs
    table = Signals({}).process(pa.table(cols))
    return Rules({"drop": True, **params}).process(table)


def test_shipped_file_covers_the_web_s_largest_languages():
    cal = load()
    assert cal.anchor == "en" and len(cal.languages) >= 50
    for lang in ("en", "ru", "de", "zh", "ja", "es", "fr", "pt", "ar", "hi", "th", "ko", "fa", "tr", "vi"):
        assert lang in cal.languages, lang
    assert cal.languages["en"]["stop_words"] == list(STOP_WORDS)
    assert {"Latin", "Cyrillic", "Han", "Japanese", "Arabic", "Devanagari", "Thai", "Hangul"} <= set(cal.scripts)
    # a script without terminal punctuation or case does not lose its text to those rules
    assert cal.languages["th"]["thresholds"]["fw_line_punct"] is None
    assert cal.languages["zh"]["thresholds"]["gopher_short_words"] < 1.5  # Chinese words are short


def test_english_rows_are_judged_as_before():
    texts = windows("en") + ["short junk line"] * 3
    with_lang = judged(texts, ["en"] * len(texts))
    without = judged(texts, None)
    before = Rules({"drop": True, "languages": False}).process(
        Signals({"languages": False, "segment": False}).process(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})))
    for table in (without, with_lang):
        assert table.column("rules_hit").to_pylist() == before.column("rules_hit").to_pylist()


@pytest.mark.parametrize("lang", ["de", "zh", "ja", "th", "ar"])
def test_good_text_of_other_languages_is_kept_with_their_thresholds(lang):
    texts = windows(lang)
    kept_global = sum(r is None for r in judged(texts, None, languages=False).column("reject_reason").to_pylist())
    kept_own = sum(r is None for r in judged(texts, [lang] * len(texts)).column("reject_reason").to_pylist())
    kept_en = sum(r is None for r in judged(windows("en"), ["en"] * len(windows("en"))).column("reject_reason").to_pylist())
    assert kept_global < len(texts) * 0.5  # English stop words and thresholds reject most of it
    assert kept_own >= kept_en - 0.1 * len(texts)


def test_per_language_stop_words_are_counted():
    sig = compute_signals(pa.array([windows("de")[0], windows("de")[0]]), np.array(["de", "xx"], dtype=object),
                          load().stop_words())
    assert sig["gopher_stop_words"][0] >= 5 and sig["gopher_stop_words"][1] <= 1


def test_uncalibrated_language_takes_its_script_and_no_stop_rule():
    text = windows("de")[0]
    out = judged([text, text], ["xx", "de"], drop=False)
    hits = out.column("rules_hit").to_pylist()
    assert "gopher_stop_words" not in hits[0]


def test_user_thresholds_win_over_the_calibration():
    text = windows("zh")[0]
    out = judged([text], ["zh"], thresholds={"gopher_short_words": 3.0}, drop=False)
    assert "gopher_short_words" in out.column("rules_hit").to_pylist()[0]  # Chinese words are short


def test_rules_count_rows_kept_per_language():
    stage = Rules({"drop": True})
    texts = windows("de")[:3] + ["junk junk junk"]
    stage.process(Signals({}).process(pa.table({"id": list("abcd"), "text": texts, "lang": ["de"] * 3 + ["en"]})))
    counters = stage.stats.counters
    assert counters["lang.de.docs"] == 3 and counters["lang.en.docs"] == 1 and counters["lang.en.kept"] == 0


def test_calibrate_matches_quantiles_and_scales_medians():
    texts, langs = [], []
    for lang in ("en", "de", "zh"):
        for size in (3, 5, 8):
            arts = articles(lang)
            for i in range(len(arts) - size + 1):
                texts.append("\n\n".join(arts[i:i + size]))
                langs.append(lang)
    cal = calibrate(texts, langs, min_docs=20)
    en, de, zh = (cal.languages[x]["thresholds"] for x in ("en", "de", "zh"))
    assert en["gopher_short_words"] == 3 and en["gopher_stop_words"] == 2
    assert zh["gopher_short_words"] < 2 < de["gopher_short_words"] < 5  # Chinese words are short
    assert cal.languages["zh"]["stop_words"][0] in ("的", "和", "或")
    methods = {m.split()[0] for e in cal.languages.values() for m in e["methods"].values()}
    assert {"anchor", "scale"} <= methods and ("quantile" in methods)  # short windows: a share to match
    with pytest.raises(ValueError, match="anchor"):
        calibrate(texts[-30:], langs[-30:], min_docs=20)


def test_calibrate_command(tmp_path):
    from click.testing import CliRunner

    from assay.pipeline.cli import build_cli, populate

    app = build_cli()
    populate(app)
    rows = [{"text": t, "lang": lang} for lang in ("en", "de") for t in windows(lang, 3) + windows(lang, 5)]
    write_table(make_docs(rows), tmp_path / "ds", 1)
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(app, ["filter", "calibrate", str(tmp_path / "ds"), str(out), "--min-docs", "20"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data["languages"]) == {"en", "de"} and data["anchor"] == "en"
    # the file drives the stages
    table = Dataset(tmp_path / "ds").read()
    sig = Signals({"calibration": str(out)}).process(table)
    assert Rules({"calibration": str(out)}).process(sig).num_rows == table.num_rows
    write_table(make_docs([{"text": "x"}]), tmp_path / "nolang", 1)
    bad = CliRunner().invoke(app, ["filter", "calibrate", str(tmp_path / "nolang"), str(out)])
    assert bad.exit_code != 0 and "extract.lang_id" in str(bad.exception)
