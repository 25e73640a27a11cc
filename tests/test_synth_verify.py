"""The verifiers on their own: rule checks, answer extraction and comparison, math equivalence (with
untrusted input), grounding."""
from __future__ import annotations

import pytest

from assay.synth import verify
from assay.synth.mathcheck import equivalent


@pytest.mark.parametrize("answer,reference,same", [
    ("1/2", "0.5", True), ("\\frac{1}{2}", "2/4", True), ("x^2+2x+1", "(x+1)^2", True), ("2x", "x*2", True),
    ("1,234,567", "1234567", True), ("x = 5", "5", True), ("\\sqrt{8}", "2\\sqrt{2}", True),
    ("sin(x)^2+cos(x)^2", "1", True), ("3.14", "\\pi", False), ("x+1", "x+2", False), ("y", "x", False),
    ("2^100000", "1", False), ("__import__('os').system('id')", "0", False), ("1/0", "1", False),
])
def test_math_equivalence(answer, reference, same):
    assert equivalent(answer, reference) is same


def test_final_answer_and_kinds():
    assert verify.final_answer("work...\nAnswer: **42**.") == "42"
    assert verify.final_answer("so \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert verify.final_answer('The answer is "2 + 3 = 5."') == "2 + 3 = 5"
    assert verify.answer("Answer: 163,888,584,498", "163888584498", "integer").ok
    assert verify.answer("Answer: 163888584499", "163888584498", "integer").reason == "wrong_answer"
    assert verify.answer("no idea", "5", "integer").reason == "no_answer"
    assert verify.answer("Answer: Bob, Alice, Carol", "Bob, Alice, Carol", "sequence").ok
    assert not verify.answer("Answer: Alice, Bob, Carol", "Bob, Alice, Carol", "sequence").ok
    assert verify.answer("Answer: Bob is a knave, Alice is a knight", "Alice: knight, Bob: knave", "assignment").ok
    assert verify.answer("Answer: 1234/3412/2143/4321", "1234 / 3412 / 2143 / 4321", "grid").ok
    assert verify.answer("Answer: Selwen and Raros", "Raros, Selwen", "entity_set").ok


def test_rule_checks():
    assert verify.truncation("fine", "length").reason == "truncated"
    assert verify.truncation("```python\nx = 1\n", "stop").reason == "truncated"
    assert verify.repetition("the cat sat on the mat " * 20).reason == "repetition"
    assert verify.repetition("A varied sentence about pagination, then another one about ceilings and floors.").ok
    mixed = "The function returns the page count. 这个函数返回页数并且处理最后一页的问题以及其他所有的边界情况和错误。"
    assert verify.language_mixing(mixed, "Latin").reason == "language_mixing"
    assert verify.language_mixing("日本語の文章です。漢字とひらがなが混ざっています。問題ありません。").ok
    assert verify.unverifiable_claims("I searched the web and found that this is a known bug.").reason == "browsing_claim"
    assert verify.unverifiable_claims("According to my search, the API changed.").reason == "browsing_claim"
    assert verify.unverifiable_claims("I ran the tests and they pass.").reason == "execution_claim"
    assert verify.unverifiable_claims("Run the tests to confirm the fix; search the code for other callers.").ok
    assert verify.sections("## Root cause\nx\n## Problem analysis\ny", ["Problem analysis", "Root cause"]).reason == "wrong_format"
    assert verify.sections("**Problem analysis**: y\nRoot cause: x", ["Problem analysis", "Root cause"]).ok


def test_grounding():
    source = "--- a/widgets/pages.py\n+    count = -(-len(items) // size)\n paginate(items, size)"
    assert verify.grounded_references("`paginate` in widgets/pages.py", source).ok
    assert verify.grounded_references("see widgets/cache.py", source).reason == "hallucinated_reference"
    assert verify.quoted_code("```python\ncount = -(-len(items) // size)\n```", source).ok
    assert verify.quoted_code("```python\nreturn math.ceil(n / size)\n```", source).reason == "code_mismatch"
    assert verify.grounded_answer("ceiling division of the items", "Use ceiling division on items.").ok
    assert verify.grounded_answer("quantum entanglement", "Use ceiling division on items.").reason == "ungrounded_answer"
