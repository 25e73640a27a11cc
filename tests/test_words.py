"""Word segmentation (filters/words.py) and the MinHash option that shingles words of every script."""
from __future__ import annotations

import numpy as np
import pytest
import pyarrow as pa

from assay.dedup.minhash import MinHasher
from assay.dedup.near import MinHashDedup
from assay.dedup.shingles import jaccard, shingle_sets, shingle_texts
from assay.dedup.verify import pairs_jaccard
from assay.filters.words import spaced, words
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

ZH = "我们在北京大学学习自然语言处理。今天天气很好，我们明天去上海看朋友。"
JA = "私は東京大学で自然言語処理を勉強しています。明日は京都へ行きます。"
TH = "ผมเรียนภาษาไทยที่มหาวิทยาลัยในกรุงเทพ"


def test_each_script_gets_its_dictionary_words():
    assert "北京大学" in words(ZH) and "自然语言" in words(ZH)
    assert {"東京", "大学", "勉強"} <= set(words(JA)) and "私" in words(JA)
    assert {"ภาษาไทย", "มหาวิทยาลัย", "กรุงเทพ"} <= set(words(TH))
    # elsewhere: Unicode word runs, punctuation dropped, nothing split inside a word
    assert words("Grüße, naïve café—déjà vu!") == ["Grüße", "naïve", "café", "déjà", "vu"]
    assert words("Привет, мир") == ["Привет", "мир"]
    assert words("나는 학교에 갑니다") == ["나는", "학교에", "갑니다"]  # Korean is spaced already


@pytest.mark.slow  # Kiwi's model takes seconds to load
def test_korean_morphemes_when_asked():
    assert words("나는 학교에 갑니다", korean=True) == ["나", "는", "학교", "에", "갑"]


def test_han_without_kana_is_chinese_and_lang_overrides():
    assert words("北京大学") == ["北京大学"]  # the Chinese dictionary's word
    assert words("北京大学", lang="ja") == ["北京", "大学"]  # UniDic's two


def test_spaced_leaves_other_rows_alone():
    latin = pa.array(["plain text, nothing to do", None])
    assert spaced(latin).to_pylist() == ["plain text, nothing to do", ""]
    mixed = pa.array(["Hello", ZH, "Ünïcode"])
    out = spaced(mixed).to_pylist()
    assert out[0] == "Hello" and out[2] == "Ünïcode"
    assert out[1].split() [:4] == ["我们", "在", "北京大学", "学习"]
    assert out[1].replace(" ", "") == ZH  # only spaces are added


def test_segmented_shingles_count_words_and_kernels_agree():
    texts = pa.array([ZH, ZH.replace("很好", "不好"), JA, "The quick brown fox jumps over the lazy dog"])
    chars = shingle_texts(texts, 5).counts()
    segmented = shingle_texts(texts, 5, segmented=True).counts()
    assert segmented[0] < chars[0] and segmented[2] < chars[2]  # words, not characters
    assert segmented[3] == chars[3]  # Latin text is unchanged
    sets = shingle_sets(texts, 5, segmented=True)
    exact = jaccard(sets[0], sets[1])
    assert np.isclose(pairs_jaccard(texts, np.array([0]), np.array([1]), 5, segmented=True)[0], exact)
    hasher = MinHasher()
    sig, counts = hasher.text_signatures(texts, 5, segmented=True)
    assert (counts == segmented).all()
    assert (sig == hasher.signatures(shingle_texts(texts, 5, segmented=True))).all()


def test_minhash_segment_option_finds_a_chinese_copy(tmp_path):
    base = ("北京是中华人民共和国的首都，也是全国的政治中心和文化中心。这座城市有三千多年的历史，"
            "保存着大量的古代建筑，比如故宫、天坛和长城。每年都有很多游客来这里参观和学习。"
            "北京的交通非常方便，地铁线路覆盖了城市的大部分地区。这里的大学和研究机构也很多，"
            "吸引了来自世界各地的学生和学者。冬天比较寒冷干燥，夏天炎热多雨，秋天是最好的季节。")
    copy = base.replace("最好", "最美")
    other = "上海位于长江入海口，是中国最大的经济中心城市之一，港口的货物吞吐量多年位居世界前列。"
    write_table(make_docs([{"text": t} for t in (base, copy, other)]), tmp_path / "in", 1)
    stage = MinHashDedup({"segment": True})
    run_stage(stage, [tmp_path / "in"], tmp_path / "out", engine="local")
    groups = Dataset(tmp_path / "out").read(columns=["dup_group"]).column("dup_group").to_pylist()
    assert groups[0] == groups[1] != groups[2]
    assert MinHashDedup({"segment": True}).params_json() != MinHashDedup({}).params_json()
