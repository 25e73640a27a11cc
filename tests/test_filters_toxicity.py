"""filter.toxicity: the English model and the word lists score the toxic share of a document,
words match whole (segmented for Chinese), annotate first, reject with --drop."""
from __future__ import annotations

import pyarrow as pa

from assay.filters.toxicity import Toxicity, chunks

CLEAN = ("The committee met on Tuesday to discuss the budget for next year. After a long debate the members "
         "approved the plan, and the new library will open in the spring.")
TEXTS = {
    "abuse_en": "You are a fucking idiot. Shut up, you worthless piece of shit.",
    "clean_en": CLEAN,
    "one_word_en": CLEAN + " Sexual reproduction in plants needs pollen. " + CLEAN,  # one listed word in a long text
    "abuse_de": "Du bist ein dummes Arschloch.\nVerpiss dich, du Wichser.",
    "clean_de": "Die Analyse der Daten ergab keinen Unterschied zwischen den Gruppen.",
    "abuse_zh": "你这个傻逼，操你妈。他妈的，你就是个贱人。",
    "clean_zh": "乳制品是钙的重要来源，医生建议每天喝牛奶。",  # 乳 is listed; 乳制品 (dairy) is one word
}
LANGS = {"en": "en", "de": "de", "zh": "zh"}


def table(names):
    return pa.table({"id": names, "text": [TEXTS[n] for n in names], "lang": [LANGS[n.split("_")[-1]] for n in names]})


def test_scores_toxic_share_per_language():
    names = list(TEXTS)
    out = Toxicity({}).process(table(names))
    score = dict(zip(names, out.column("toxicity").to_pylist()))
    for name in names:
        assert (score[name] >= 0.4) == name.startswith("abuse"), (name, score[name])
    words = dict(zip(names, out.column("toxic_words").to_pylist()))
    assert words["clean_zh"] == 0 and words["abuse_zh"] >= 2 and words["one_word_en"] == 1
    assert out.column("reject_reason").null_count == len(names)  # annotates only


def test_drop_rejects_with_reason_and_user_lists(tmp_path):
    lists = tmp_path / "words.txt"
    lists.write_text("# ours\nthe budget\nlibrary\n")
    t = table(["clean_en", "clean_de"])
    assert Toxicity({"drop": True}).process(t).column("reject_reason").to_pylist() == [None, None]
    out = Toxicity({"drop": True, "lists": [str(lists)], "model": False, "shipped_lists": False,
                    "threshold": 0.3}).process(t)
    assert out.column("reject_reason").to_pylist() == ["toxic", None]
    assert out.column("toxic_words").to_pylist() == [2, 0]
    assert float(out.column("reject_detail").to_pylist()[0]) >= 0.3


def test_no_lang_column_and_empty_text():
    t = pa.table({"id": ["a", "b", "c"], "text": ["", None, TEXTS["abuse_en"]]})
    out = Toxicity({}).process(t)
    assert out.column("toxicity").to_pylist()[:2] == [0.0, 0.0] and out.column("toxicity").to_pylist()[2] >= 0.4


def test_chunks_pack_sentences():
    text = "One. Two!\nThree? " + "word " * 100
    assert chunks(text, 20)[0] == "One. Two! Three?" and all(c.strip() for c in chunks(text, 20))
