"""semantic.decontam --segment: windows of words for Chinese, Japanese and Thai; matches map back to
the document's own offsets; text without those scripts hashes as before."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from assay.semantic.decontam.normalize import token_hashes
from assay.semantic.decontam.segment import for_matching, to_original
from assay.semantic.decontam.stage import Decontam

ZH = "一列火车每小时行驶八十公里，从甲地到乙地需要三个小时，请问两地相距多少公里？"
# Thai has no spaces between words: read a character run a token, the whole item is one token
TH = "นักเรียนทุกคนต้องอ่านหนังสือเล่มนี้ให้จบก่อนวันสอบปลายภาค"
EN = "A train travels eighty kilometres an hour and needs three hours between the two towns."


def stage(tmp_path, segment):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": i, "q": t}, ensure_ascii=False) + "\n" for i, t in enumerate([ZH, TH, EN])),
                     encoding="utf-8")
    (tmp_path / "reg.yaml").write_text(f"benchmarks:\n  - {{name: mine, paths: [{items}], fields: [q], id_field: id}}\n")
    s = Decontam({"benchmarks": str(tmp_path / "reg.yaml"), "segment": segment, "mode": "mask", "mask_with": "[X]"})
    s.setup()
    return s


def test_thai_and_chinese_items_found_over_words_and_masked_in_place(tmp_path):
    docs = ["今天的练习题：" + ZH.replace("，", " , ") + " 答案是二百四十公里。",
            "ข่าววันนี้ ครูบอกว่า " + TH + " แล้วทุกคนก็กลับบ้าน",
            "Homework: " + EN + " Answer: 240 km.", "火车很快。"]
    chars, words = stage(tmp_path, False), stage(tmp_path, True)
    before = [[h["item"] for h in hs or []] for hs in chars.find(pa.array(docs))]
    after = words.find(pa.array(docs))
    assert before[1] == [] and [[h["item"] for h in hs or []] for hs in after] == [["0"], ["1"], ["2"], []]
    assert docs[0][after[0][0]["start"]:after[0][0]["end"]].startswith("一列火车")
    assert docs[1][after[1][0]["start"]:after[1][0]["end"]] == TH
    out = words.process(pa.table({"id": ["a", "b", "c", "d"], "text": docs}))
    assert out.column("text").to_pylist()[1] == "ข่าววันนี้ ครูบอกว่า [X] แล้วทุกคนก็กลับบ้าน"
    assert words.index.item_nkeys[0] < chars.index.item_nkeys[0]  # 13 words, not 13 characters


def test_rewriting_keeps_other_text_and_maps_offsets():
    texts, changed = for_matching(pa.array([EN, ZH, None]))
    assert texts[0] == EN and texts[2] == "" and changed.tolist() == [False, True, False]
    assert np.array_equal(token_hashes(texts[0])[0], token_hashes(EN)[0])
    back = to_original(ZH, texts[1])
    assert back[0] == 0 and back[-1] == len(ZH)
    assert len(token_hashes(texts[1])[0]) < len(token_hashes(ZH)[0])  # words, not characters
