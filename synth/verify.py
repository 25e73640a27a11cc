"""Verifiers: every generation is checked, and a failed check is a reject with a reason.

Rule checks (any generation): truncation, repetition, language mixing, wrong format (required
sections), claims of browsing or of running code the model cannot have done, too short.
Task checks: the final answer against a reference (exact integers, symbolic/numeric math
equivalence, orderings, knight/knave assignments, grids, entity sets); code run against its tests in
the sandbox; references (file paths, identifiers, quoted code) grounded in the source record;
QA answers grounded in the source text.

Each check returns a `Check(ok, reason, detail)`; `reason` is the reject code counted in the stage's
statistics as `reject.<reason>` and per verifier as `verify.<name>.pass|fail`.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import regex


@dataclass(frozen=True)
class Check:
    ok: bool
    reason: str | None = None
    detail: str = ""


PASS = Check(True)


def fail(reason: str, detail: str = "") -> Check:
    return Check(False, reason, detail[:300])


# ---- rule checks ---------------------------------------------------------------------------------

def truncation(text: str, finish_reason: str = "stop") -> Check:
    if finish_reason == "length":
        return fail("truncated", "the generation hit max_tokens")
    if text.count("```") % 2:
        return fail("truncated", "a code block is not closed")
    return PASS


def repetition(text: str, max_share: float = 0.3, max_line_repeats: int = 3) -> Check:
    """Share of word 4-grams that repeat an earlier one, and lines said more than `max_line_repeats` times."""
    words = text.lower().split()
    grams = [tuple(words[i:i + 4]) for i in range(len(words) - 3)]
    if len(grams) >= 12:
        repeated = len(grams) - len(set(grams))
        if repeated / len(grams) > max_share:
            return fail("repetition", f"{repeated}/{len(grams)} word 4-grams repeat")
    lines = Counter(line.strip() for line in text.splitlines() if len(line.strip()) >= 20)
    worst = lines.most_common(1)
    if worst and worst[0][1] > max_line_repeats:
        return fail("repetition", f"line repeated {worst[0][1]} times: {worst[0][0][:80]}")
    return PASS


# Scripts that legitimately share a text: Japanese mixes Han and kana, Korean Han and Hangul.
_SCRIPTS = ("Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Thai", "Hangul", "Hiragana",
            "Katakana", "Han")
_COMPATIBLE = {"Han": {"Han", "Hiragana", "Katakana", "Hangul"}, "Hiragana": {"Han", "Hiragana", "Katakana"},
               "Katakana": {"Han", "Hiragana", "Katakana"}, "Hangul": {"Hangul", "Han"}}
_SCRIPT_RE = {name: regex.compile(rf"\p{{Script={name}}}") for name in _SCRIPTS}
_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
_NOT_ASCII_LETTERS = bytes(c for c in range(128) if not chr(c).isalpha())


def script_counts(text: str) -> Counter:
    if "```" in text:
        text = _CODE_BLOCK.sub(" ", text)  # code and identifiers are not prose
    if text.isascii():  # the common case, without eleven regex passes: count the letters in C
        letters = len(text.encode("ascii").translate(None, _NOT_ASCII_LETTERS))
        return Counter({"Latin": letters}) if letters else Counter()
    return Counter({name: len(pattern.findall(text)) for name, pattern in _SCRIPT_RE.items()}) + Counter()


def dominant_script(text: str) -> str | None:
    counts = script_counts(text)
    return counts.most_common(1)[0][0] if counts else None


def language_mixing(text: str, expected: str | None = None, min_share: float = 0.9) -> Check:
    counts = script_counts(text)
    total = sum(counts.values())
    if total < 20:
        return PASS
    main = expected or counts.most_common(1)[0][0]
    share = sum(n for name, n in counts.items() if name in _COMPATIBLE.get(main, {main})) / total
    if share < min_share:
        others = ", ".join(f"{k} {v}" for k, v in counts.most_common() if k not in _COMPATIBLE.get(main, {main}))
        return fail("language_mixing", f"{share:.0%} {main}; also {others}")
    return PASS


_BROWSING = regex.compile(
    r"\b(?:I|we)\s+(?:have\s+|just\s+)?(?:searched|googled|browsed|looked\s+(?:it\s+)?up|visited|checked|consulted|"
    r"found|read)\b[^.\n]{0,60}?\b(?:web|internet|online|google|bing|website|web\s*site|url|link|web\s*page|"
    r"stack\s*overflow|reddit|wikipedia)\b"
    r"|\baccording\s+to\s+(?:my|a\s+quick|the\s+latest|recent)\s+(?:web\s+)?(?:search|browsing|googling)"
    r"|\b(?:after|upon|by)\s+(?:searching|browsing|googling)\b"
    r"|\b(?:do|did|use|used|run|ran|perform|performed|make|made)\s+(?:a\s+|an\s+)?(?:quick\s+)?(?:internet|web|online|"
    r"google)\s+search"
    r"|\bI\s+(?:can\s+see|see)\s+(?:on|from)\s+(?:the\s+)?(?:website|web\s*page|internet)",
    regex.I)
_EXECUTION = regex.compile(
    r"\b(?:I|we)\s+(?:have\s+|just\s+)?(?:ran|run|executed|tested|compiled)\b[^.\n]{0,40}?"
    r"(?:\blocally\b|\bon\s+my\s+machine\b|\band\s+(?:it|they|all|everything)\s+(?:\w+\s+)?(?:works?|worked|"
    r"pass(?:es|ed)?|succeed(?:s|ed)?|print(?:s|ed)|return(?:s|ed)|output))", regex.I)


def unverifiable_claims(text: str) -> Check:
    """The model cannot browse or run anything; saying it did is a hallucination."""
    m = _BROWSING.search(text)
    if m:
        return fail("browsing_claim", m.group(0))
    m = _EXECUTION.search(text)
    if m:
        return fail("execution_claim", m.group(0))
    return PASS


def sections(text: str, required: list[str]) -> Check:
    """Each required section appears as a heading ('## Name', '**Name**', 'Name:'), in order."""
    at = 0
    for name in required:
        pattern = re.compile(rf"^\s*(?:#+\s*|\*\*\s*|\d+[.)]\s*)?{re.escape(name)}\s*(?:\*\*)?\s*:?", re.I | re.M)
        m = pattern.search(text, at)
        if not m:
            found = pattern.search(text)
            return fail("wrong_format", f"section {name!r} " + ("out of order" if found else "missing"))
        at = m.end()
    return PASS


def min_length(text: str, chars: int) -> Check:
    return PASS if len(text.strip()) >= chars else fail("too_short", f"{len(text.strip())} < {chars} characters")


RULES: dict[str, Callable[..., Check]] = {
    "truncation": truncation, "repetition": repetition, "language": language_mixing,
    "claims": unverifiable_claims,
}


# ---- answers ------------------------------------------------------------------------------------

_ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?answer\W*?[:：]\s*(.+?)\s*$", re.I | re.M)


def _boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


_ANSWER_IS = re.compile(r"\b(?:the\s+)?(?:final\s+)?answer\s+is\s*[:：]?\s*([^\n]+?)\s*(?:\.(?:\s|$)|\n|$)", re.I)


def final_answer(text: str) -> str | None:
    """The last `Answer: ...` line, else the last \\boxed{...}, else the last "the answer is ..."; quotes
    and markdown emphasis stripped."""
    lines = _ANSWER_LINE.findall(text)
    found = lines[-1] if lines else _boxed(text)
    if found is None:
        said = _ANSWER_IS.findall(text)
        found = said[-1] if said else None
    if found is None:
        return None
    previous = None
    while previous != found:  # "**42**." -> "42"
        previous, found = found, found.strip().strip("*_`\"'“”").rstrip(".")
    return found


def _norm(s: str) -> str:
    return re.sub(r"[^\w]+", " ", s.lower()).strip()


def _names(s: str) -> list[str]:
    parts = re.split(r"\s*(?:,|;|->|→|>|\bthen\b|\band\b)\s*", s)
    return [_norm(p) for p in parts if _norm(p)]


def _assignment(s: str) -> dict[str, str]:
    pairs = re.findall(r"([A-Za-z][\w ]*?)\s*(?::|=|\bis\s+an?\b|\bis\b)\s*(knight|knave)", s, re.I)
    return {_norm(name): role.lower() for name, role in pairs}


def answer_matches(got: str, reference: str, kind: str) -> bool:
    from .mathcheck import equivalent

    if kind == "integer":
        digits = re.sub(r"[\s,_]", "", got)
        if re.fullmatch(r"[-+]?\d+", digits):
            return int(digits) == int(reference)
        return equivalent(got, reference)  # "2 + 3 = 5", "x = 5": the value after the last '='

    if kind in ("number", "expression"):
        return equivalent(got, reference)
    if kind == "sequence":
        return _names(got) == _names(reference)
    if kind == "assignment":
        want = _assignment(reference)
        return bool(want) and _assignment(got) == want
    if kind == "grid":
        return re.sub(r"\D", "", got) == re.sub(r"\D", "", reference)
    if kind == "entity_set":
        return set(_names(got)) == set(_names(reference))
    return _norm(got) == _norm(reference)


def answer(text: str, reference: str, kind: str) -> Check:
    got = final_answer(text)
    if got is None:
        return fail("no_answer", "no 'Answer:' line or \\boxed{}")
    if not answer_matches(got, reference, kind):
        return fail("wrong_answer", f"got {got[:80]!r}")
    return PASS


# ---- code ---------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.S)


def extract_code(text: str, language: str = "python") -> str | None:
    """The last fenced block in `language` (or unlabelled)."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    chosen = [body for lang, body in blocks if lang in (language, "py" if language == "python" else language, "")]
    return chosen[-1] if chosen else None


def code_tests(text: str, tests: str, limits=None, isolation: str = "auto") -> tuple[Check, dict | None]:
    """Run `tests` against the candidate's code (importable as `solution`) in the sandbox, each in a
    process of its own: the solution cannot pass by exiting early, by what it prints, or by returning
    objects that answer the tests' comparisons (see sandbox_harness.py)."""
    from . import sandbox

    code = extract_code(text)
    if code is None:
        return fail("no_code", "no ```python block"), None
    result = sandbox.run_tests(code, tests, limits=limits, isolation=isolation)
    verdict = result.to_json()
    if result.ok:
        return PASS, verdict
    tail = (result.stderr_tail or result.stdout_tail).strip().splitlines()[-1:] or [""]
    return fail(f"code_{result.verdict}", f"{result.limit or result.hint or ''} {tail[0]}".strip()), verdict


# ---- grounding ----------------------------------------------------------------------------------

_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyx|pyi|js|ts|tsx|jsx|java|kt|go|rs|c|h|cc|cpp|hpp|cs|rb|"
                   r"php|swift|scala|sh|toml|cfg|ini|yaml|yml|json|md|rst|txt))\b")
_TICKED = re.compile(r"`([^`\n]{2,80})`")


def grounded_references(text: str, source: str, min_known: float = 0.75) -> Check:
    """File paths the text names must occur in the source; most `quoted` identifiers must too."""
    known = source
    outside = _CODE_BLOCK.sub(" ", text)
    for path in set(_PATH.findall(outside)):
        if path not in known and path.rsplit("/", 1)[-1] not in known:
            return fail("hallucinated_reference", f"file {path!r} is not in the record")
    ticked = {t.strip().rstrip("()") for t in _TICKED.findall(outside)}
    ticked = {t for t in ticked if re.search(r"[A-Za-z_]", t)}
    if ticked:
        missing = sorted(t for t in ticked if t not in known)
        if len(missing) > (1 - min_known) * len(ticked):
            return fail("hallucinated_reference", f"{len(missing)}/{len(ticked)} quoted names are not in the record: "
                                                  + ", ".join(missing[:5]))
    return PASS


def quoted_code(text: str, source: str, min_chars: int = 8) -> Check:
    """Code the text quotes must be code of the record (diff or files), not invented code."""
    have = {re.sub(r"\s+", "", line.lstrip("+- ")) for line in source.splitlines()}
    for _, body in _FENCE.findall(text):
        for line in body.splitlines():
            squeezed = re.sub(r"\s+", "", line.lstrip("+- "))
            if len(squeezed) >= min_chars and squeezed not in have:
                return fail("code_mismatch", f"quoted code not in the record: {line.strip()[:80]}")
    return PASS


_STOP = set("the a an of to in and or is are was were be been for on at by with as it this that these those from "
            "which who what when where why how not no yes do does did can could should would will".split())


def grounded_answer(answer_text: str, source: str, min_share: float = 0.6) -> Check:
    """Most content words of an answer must occur in the source document."""
    words = [w for w in re.findall(r"[a-z0-9]+", answer_text.lower()) if w not in _STOP and len(w) > 2]
    if not words:
        return fail("empty_answer")
    have = set(re.findall(r"[a-z0-9]+", source.lower()))
    share = sum(w in have for w in words) / len(words)
    return PASS if share >= min_share else fail("ungrounded_answer", f"only {share:.0%} of its words are in the source")
