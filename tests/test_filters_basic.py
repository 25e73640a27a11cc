"""The day-one map stages: unicode normalisation, length and script filters."""
from __future__ import annotations

from assay.filters.basic import LengthFilter, NormalizeUnicode, ScriptFilter
from assay.pipeline.schema import make_docs


def _docs(*texts):
    return make_docs([{"text": t, "source": "t", "url": f"u{i}"} for i, t in enumerate(texts)])


def test_normalize_unicode_composes_strips_controls_and_keeps_other_columns():
    table = _docs("Cafe\u0301\u0000 ok\r\nline\n\n\n\n\nend  \n", "   ")
    table = table.append_column("quality_x", [[0.1, 0.2]])
    out = NormalizeUnicode({}).process(table)
    assert out.column("text")[0].as_py() == "Café ok\nline\n\nend\n"
    assert out.column("reject_reason").to_pylist() == [None, "empty"]
    assert out.column("quality_x").to_pylist() == [0.1, 0.2]  # columns it does not own survive
    assert out.column("id").to_pylist() == table.column("id").to_pylist()


def test_length_filter_reasons_and_details():
    out = LengthFilter({"min_chars": 5, "max_chars": 30, "min_words": 2}).process(
        _docs("ok text here", "tiny", "oneword-but-long-enough", "x" * 40 + " y"))
    assert out.column("reject_reason").to_pylist() == [None, "too_short", "too_short", "too_long"]
    assert out.column("reject_detail").to_pylist()[1] == "4 chars < 5"
    assert out.column("reject_detail").to_pylist()[2] == "1 words < 2"


def test_script_filter_tags_dominant_script_and_rejects_others():
    out = ScriptFilter({"allowed": ["Latin"], "min_fraction": 0.6}).process(
        _docs("The quick brown fox", "Быстрая коричневая лиса", "数学是科学的语言", "12345 !!!", "Fox и лиса и собака"))
    assert out.column("script").to_pylist() == ["Latin", "Cyrillic", "Han", None, "Cyrillic"]
    assert out.column("reject_reason").to_pylist() == [None, "wrong_script", "wrong_script", "no_letters", "wrong_script"]
    ja = ScriptFilter({"allowed": ["Han", "Hiragana", "Katakana"]}).process(_docs("日本語のテキストです"))
    assert ja.column("reject_reason").to_pylist() == [None]
