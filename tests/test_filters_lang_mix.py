"""filter.lang_mix: lines in another language are measured; a foreign term inside a line, short lines
and empty text are natural; annotate first, reject with --drop."""
from __future__ import annotations

import pyarrow as pa

from assay.filters.lang_mix import LangMix, segments

ZH = ["今天我们讨论了明年的预算，委员会最后批准了新的图书馆建设计划。",
      "图书馆将在明年春天开放，市民可以免费借阅各种书籍和杂志。",
      "很多家长表示，孩子们终于有了一个安静的学习环境。"]
FR = ["Le conseil municipal a voté hier soir le budget de l'année prochaine après un long débat.",
      "La nouvelle bibliothèque ouvrira ses portes au printemps dans le centre de la ville."]
RU = ["Городской совет вчера вечером утвердил бюджет на следующий год после долгих споров.",
      "Новая библиотека откроется весной в самом центре города для всех жителей."]
COOKIES = ["We use cookies to improve your experience on our website. By continuing you agree to our use of cookies.",
           "Subscribe to our newsletter to receive the latest news and special offers in your inbox every week."]
DOCS = {
    "pure_zh": "\n".join(ZH),
    "switch_zh": "\n".join(ln + "（deadline）" for ln in ZH),  # a term inside a line: natural
    "short_zh": "\n".join(ZH + ["Home | News", "John Smith"]),  # a menu and a name: not judged
    "boiler_zh": "\n".join(ZH + COOKIES),
    "concat_fr_ru": "\n".join(FR + RU),
    "empty": "",
}


def run(params=None):
    names = list(DOCS)
    out = LangMix(params or {}).process(pa.table({"id": names, "text": list(DOCS.values())}))
    return names, out


def test_mixing_is_measured_and_natural_switching_kept():
    names, out = run()
    mix = dict(zip(names, out.column("lang_mix").to_pylist()))
    for name in ("pure_zh", "switch_zh", "short_zh", "empty"):
        assert mix[name] == 0, (name, mix[name])
    assert mix["boiler_zh"] > 0.3 and 0.3 < mix["concat_fr_ru"] < 0.7
    main = dict(zip(names, out.column("lang_main").to_pylist()))
    other = dict(zip(names, out.column("lang_other").to_pylist()))
    assert (main["boiler_zh"], other["boiler_zh"]) == ("zh", "en") and other["pure_zh"] is None
    assert main["empty"] is None
    assert out.column("reject_reason").null_count == len(names)


def test_drop_rejects_mixed_rows_with_reason():
    names, out = run({"drop": True})
    reasons = dict(zip(names, out.column("reject_reason").to_pylist()))
    assert {n for n, r in reasons.items() if r} == {"boiler_zh", "concat_fr_ru"}
    assert reasons["boiler_zh"] == "lang_mixed"
    assert dict(zip(names, out.column("reject_detail").to_pylist()))["boiler_zh"].startswith("zh+en ")


def test_long_lines_are_cut_at_sentences():
    line = " ".join(["This is one sentence of the text."] * 30)
    assert len(segments(line, 100)) > 5 and all(len(s) <= 140 for s in segments(line, 100))
