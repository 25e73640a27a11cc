"""Heuristic signals and rules: each rule on a document that should and one that should not trigger it."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from assay.filters.rules import Rules
from assay.filters.signals import Signals, compute_signals
from assay.pipeline.schema import make_docs

PROSE = ("The history of the river is long and it has been studied by many people over the years. "
         "Farmers relied on it to water their fields, and the towns that grew along its banks traded with each other. "
         "In the spring the water rose and covered the low meadows, which made the soil rich. "
         "Scholars have written that the river shaped the language of the region as much as its economy. "
         "Today the river is protected, and visitors come to walk the paths that follow it to the sea.")


def _hits(text: str, content_type: str = "web", **params) -> set[str]:
    table = make_docs([{"text": text, "source": "t", "content_type": content_type}])
    out = Rules(params).process(Signals().process(table))
    return set(out.column("rules_hit").to_pylist()[0])


def test_clean_prose_hits_nothing():
    assert _hits(PROSE) == set()


@pytest.mark.parametrize("rule,text", [
    ("gopher_short_doc", "A short note. It has few words. Very few indeed. Done now. The end."),
    ("gopher_long_words", " ".join(["Pneumonoultramicroscopic"] * 80) + "."),
    ("gopher_hashes", PROSE + " #tag" * 40),
    ("gopher_ellipsis", PROSE + " and then..." * 40),
    ("gopher_bullets", "\n".join(f"- item number {i} of the list with the and of" for i in range(60))),
    ("gopher_end_ellipsis", "\n".join(f"The story goes on and on for line {i} of the text..." for i in range(60))),
    ("gopher_alpha", PROSE + " " + " ".join(str(i) for i in range(400))),
    ("gopher_stop_words", " ".join(f"Alpha{i} beta gamma delta." for i in range(40))),
    ("rep_line", "\n".join(["Click here to subscribe to our newsletter today."] * 20 + [PROSE])),
    ("rep_para", "\n\n".join(["Same paragraph repeated on the page again and again."] * 8 + [PROSE])),
    ("rep_top_2gram", PROSE[:200] + " best deal" * 150),
    ("rep_dup_10gram", (PROSE[:400] + " ") * 4),
    ("c4_lorem_ipsum", PROSE + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit."),
    ("c4_curly_bracket", PROSE + "\nThe config is {a: 1} and it works fine."),
    ("c4_few_sentences", "one two three four five six seven eight nine ten " * 20),
    ("fw_line_punct", "\n".join(f"Menu entry {i} for the and of section" for i in range(60))),
    ("fw_short_lines", PROSE + "\n" + "\n".join(f"Link {i}" for i in range(80))),
    ("fw_char_dups", PROSE + "\nShare this article with the friends.\nShare this article with the friends."),
    ("fw_list_ratio", "\n".join(f"the {i}" for i in range(200))),
    ("word_order", " ".join(reversed(PROSE.split())).lower().replace(".", ". x")),
])
def test_each_rule_fires_on_its_pattern(rule, text):
    assert rule in _hits(text)


def test_math_page_bypasses_rules_that_misfire_on_formulas():
    math = ("We solve the equation $x^2 + y^2 = z^2$ and find \\frac{a}{b} = \\sqrt{c}.\n"
            "$$\\int_0^1 f(x) dx = F(1) - F(0)$$\n") * 30
    without = _hits(math, bypass={})
    assert without & {"c4_curly_bracket", "gopher_alpha"}
    assert not _hits(math) & {"c4_curly_bracket", "gopher_alpha"}
    assert _hits(PROSE + " #x" * 60, content_type="code") == set()  # code pages skip web rules entirely


def test_thresholds_are_a_separate_cheap_step():
    table = Signals().process(make_docs([{"text": PROSE, "source": "t"}]))
    strict = Rules({"thresholds": {"gopher_short_doc": 1000}}).process(table)
    assert strict.column("rules_hit").to_pylist()[0] == ["gopher_short_doc"]
    off = Rules({"families": ["fineweb"]}).process(table)
    assert off.column("quality_heuristics").to_pylist()[0] == 1.0
    dropped = Rules({"thresholds": {"gopher_short_doc": 1000}, "drop": True}).process(table)
    assert dropped.column("reject_reason").to_pylist() == ["heuristic"]


def test_signals_agree_with_plain_python_definitions():
    texts = [PROSE, "a b a b a b a b\n\nx\n\nx", "Line one.\nLine one.\n\n- bullet...\n", ""]
    sig = compute_signals(pa.array(texts))
    for i, t in enumerate(texts):
        lines = [l for l in t.split("\n") if l.strip()]
        punct = sum(l.endswith((".", "!", "?", '"', "'")) for l in lines) / len(lines) if lines else 0
        assert sig["fw_line_punct"][i] == pytest.approx(punct)
        splitlines = t.splitlines()
        bullets = sum(l.lstrip().startswith(("•", "-")) for l in splitlines) / len(splitlines) if splitlines else 0
        assert sig["gopher_bullet_lines"][i] == pytest.approx(bullets)
    # top 2-gram "a b" x4 = 3 chars * 4 over 30 characters
    assert sig["rep_top_2gram"][1] == pytest.approx(12 / len(texts[1]))
    assert np.all(np.isfinite(np.stack(list(sig.values()))))


def _top_ngram_chars(words: list[str], n: int) -> int:
    """Datatrove's definition, in plain Python: the most frequent n-gram's characters times its count."""
    grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0
    counts: dict[str, int] = {}
    for g in grams:
        counts[g] = counts.get(g, 0) + 1
    best = max(counts, key=lambda g: (counts[g], -grams.index(g)))
    return len(best) * counts[best]


def _dup_ngram_chars(words: list[str], n: int) -> int:
    seen, total, i = set(), 0, 0
    while i < len(words) - n + 1:
        gram = "".join(words[i:i + n])
        if gram in seen:
            total += len(gram)
            i += n
        else:
            seen.add(gram)
            i += 1
    return total


def test_ngram_repetition_kernel_matches_plain_python():
    from assay.filters.kernels import DUP_NS, TOP_NS, ngram_repetition

    rng = np.random.default_rng(0)
    vocab = ["a", "bb", "ccc", "dddd", "river", "the", "of"]
    docs = [list(rng.choice(vocab, size=int(rng.integers(0, 60)))) for _ in range(40)]
    docs.append(["x", "y", "z"] * 30)  # a loop: every long n-gram repeats
    flat = [w for d in docs for w in d]
    codes = np.array([vocab.index(w) if w in vocab else len(vocab) + "xyz".index(w) for w in flat], np.int64)
    offsets = np.concatenate(([0], np.cumsum([len(d) for d in docs]))).astype(np.int64)
    lengths = np.array([len(w) for w in flat], np.int64)
    top, dup = ngram_repetition(codes, lengths, offsets, np.array(TOP_NS), np.array(DUP_NS))
    for i, d in enumerate(docs):
        assert top[i].tolist() == [_top_ngram_chars(d, n) for n in TOP_NS], i
        assert dup[i].tolist() == [_dup_ngram_chars(d, n) for n in DUP_NS], i
    assert dup[-1].min() > 0


def test_character_classes_count_like_the_regexes():
    from assay.filters import textops as T
    from assay.filters.kernels import class_counts

    texts = [PROSE, "", "ÀÉÎ õü Straße 42 ١٢٣ 𝐀𝐛 𝟏 中文 e\u0301\u00a0x\ty\u000bz\r\n", "ABC def\f\n"]
    for arr in (pa.array(texts), pa.array(texts, pa.large_string()).slice(1)):
        got = class_counts(arr)
        for key, pattern in (("letters", r"\pL"), ("numbers", r"\pN"), ("upper", r"\p{Lu}"), ("spaces", r"\s")):
            assert got[key].tolist() == T.count(arr, pattern).tolist(), key


def test_fasttext_tokens_match_the_regex_definition():
    """The compiled preprocessing (lower-casing, the cut at max_chars and the tokens in one pass) gives
    the tokens of the Arrow chain it replaced: utf8_slice_codeunits, utf8_lower, then the regexes."""
    import pyarrow.compute as pc

    from assay.filters.kernels import TABLE_END, fasttext_tokens
    from assay.quality.ftmodel import prepare

    # every BMP code point (where RE2's Unicode tables and Python's agree) but \v, which the kernel
    # treats as the space fastText splits on (RE2's \s has no \v)
    # (U+0CF3 and U+0ECE, marks since Unicode 15, are not marks to this RE2)
    every = "".join(chr(c) for c in range(1, 0x10000) if not 0xD800 <= c < 0xE000 and c not in (11, 0xCF3, 0xECE))
    texts = [PROSE, "", "\n", " (x) ", "a\n\n  b\t\tc \r\n", "naïve café, 3.5%...", "a\u00a0b — «c»", "x\n", "Ünïcode 𝐀1 中文!",
             "Don't say \u201cwon\u2019t\u201d [sic], (a,b)", "हिन्दी ภาษาไทย 日本語のテキスト",
             "İSTANBUL \u212a ȺȾ ΣΑΣ\u000cX", "É" * 40 + "\nab", every, every.upper()]

    def reference(arr, max_chars):
        arr = pc.utf8_lower(pc.utf8_slice_codeunits(arr, 0, max_chars))
        arr = pc.replace_substring_regex(arr, "['\u2019\u02bc]", "")  # apostrophes: deleted
        # separators (quotes, brackets, commas) and Unicode spaces: a gap
        arr = pc.replace_substring_regex(arr, r"[\p{Ps}\p{Pe}\p{Pi}\p{Pf}\p{Zs}\v,\"`\x{60c}\x{3001}\x{ff0c}\x{55d}\x{1363}\x{a60d}\x{fe50}\x{fe51}]", " ")
        spaced = pc.replace_substring_regex(arr, r"([^\pL\pN\pM\s])", r" \1 ")  # symbols: a token of their own
        spaced = pc.replace_substring_regex(spaced, r"[ \t\r\f\v]*\n\s*", " _nl_ ")
        return [t.split(" ") if t else [] for t in pc.utf8_trim(pc.replace_substring_regex(spaced, r"\s+", " "), " ").to_pylist()]

    for arr in (pa.array(texts), pa.array(texts, pa.large_string()).slice(2)):
        for max_chars in (None, 1, 7, 41, 30_000):
            expected = reference(arr, max_chars or 10**9)
            assert [t.split(" ") if t else [] for t in fasttext_tokens(arr, max_chars).to_pylist()] == expected
        # a long batch is prepared in slices on several threads: the same list
        many = pa.concat_arrays([arr] * 400)
        assert prepare(many, 41) == [" ".join(t) for t in reference(arr, 41)] * 400
    got = [t.split(" ") if t else [] for t in fasttext_tokens(pa.array(texts)).to_pylist()]
    assert got[4] == ["a", "_nl_", "b", "c", "_nl_"]
    assert got[9] == ["dont", "say", "wont", "sic", "a", "b"]  # separators are gaps, apostrophes go
    assert got[10] == ["हिन्दी", "ภาษาไทย", "日本語のテキスト"]  # marks join words
    assert got[11][:4] == ["istanbul", "k", "ⱥⱦ", "σασ"]  # Arrow's per-code-point lower case, grown bytes too
    # and beyond the BMP: each character alone is its own token, lower-cased as utf8_lower does
    astral = pa.array([chr(c) for c in range(0x10000, TABLE_END + 50)])
    assert fasttext_tokens(astral).to_pylist() == pc.utf8_lower(astral).to_pylist()
