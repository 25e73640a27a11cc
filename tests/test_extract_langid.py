"""Language ID with lid.176 and the script fallback."""
import pyarrow as pa
import pytest

from assay.extractors.langid import LanguageId, script_language

SENTENCES = {
    "en": "The committee published its annual report on water quality in the northern rivers.",
    "de": "Der Ausschuss hat seinen Jahresbericht über die Wasserqualität der Flüsse veröffentlicht.",
    "fr": "Le comité a publié son rapport annuel sur la qualité de l'eau des rivières du nord.",
    "es": "El comité publicó su informe anual sobre la calidad del agua de los ríos del norte.",
    "ru": "Комитет опубликовал ежегодный доклад о качестве воды в северных реках.",
    "zh": "委员会发布了关于北方河流水质的年度报告。",
    "ja": "委員会は北部の河川の水質に関する年次報告書を発表しました。",
    "ar": "نشرت اللجنة تقريرها السنوي عن جودة المياه في الأنهار الشمالية.",
}


@pytest.fixture(scope="module")
def stage():
    s = LanguageId({})
    s.ensure_setup()
    return s


def test_sentences(stage):
    table = pa.table({"id": list(SENTENCES), "text": list(SENTENCES.values()), "other": list(range(len(SENTENCES)))})
    out = stage.process(table)
    assert out.column("lang").to_pylist() == list(SENTENCES)
    assert min(out.column("lang_score").to_pylist()) > 0.5
    assert out.column("other").to_pylist() == list(range(len(SENTENCES)))  # columns it does not own pass
    assert out.column("reject_reason").null_count == len(SENTENCES)


@pytest.mark.parametrize("text, lang", [("こんにちは", "ja"), ("東京タワー", "ja"), ("안녕하세요", "ko"),
                                        ("你好世界", "zh"), ("สวัสดีครับ", "th"), ("Καλημέρα", "el"), ("שלום", "he")])
def test_short_texts_use_script(stage, text, lang):
    assert stage.identify(text)[0] == lang


def test_empty_and_filters():
    s = LanguageId({"keep_langs": ["en"], "min_score": 0.3})
    table = pa.table({"text": [SENTENCES["en"], SENTENCES["de"], "", None]})
    out = s.process(table)
    assert out.column("lang").to_pylist()[2:] == ["und", "und"]
    assert out.column("reject_reason").to_pylist() == [None, "lang_filtered", "low_lang_score", "low_lang_score"]


def test_script_language():
    assert script_language("abc def") == (None, 0.0)
    assert script_language("カタカナとひらがなと漢字")[0] == "ja"
