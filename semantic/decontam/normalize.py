"""The decontamination normaliser: UTF-8 bytes to a sequence of 64-bit token hashes, compiled.

Benchmark items and corpus documents go through exactly this function, so a match survives every
difference it erases:

* case (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, fullwidth forms) and accents on Latin-1
  letters (`é` -> `e`); combining marks, zero-width characters and soft hyphens vanish;
* whitespace and punctuation of every kind (ASCII, Unicode general punctuation, CJK, math symbols,
  arrows, emoji) only separate tokens, so reflowed lines, changed quotes or added commas do not matter;
* markup: HTML tags (`<p class=x>`, `</b>`) and entities (`&amp;`, `&#8217;`) are skipped;
* digits: every number (`7`, `3,000`, `2.50`) becomes the same token, so an item whose numbers were
  changed still matches (the "digit masking" of Step 3.5's exact path);
* CJK ideographs and kana are one token each (those scripts put no spaces between words).

Each token's hash is FNV-1a over its folded code points (a number's over its digits), finished by
splitmix64, with the two low bits replaced by flags: bit 0 "informative" (a word of two or more
characters, or a CJK character), bit 1 "number". The index reads a window of tokens two ways: masked
(every number the same token, `masked()`), the default, and raw (digits kept), used only for windows
with too few informative tokens to be told apart once masked, like `Simplify $(2-2i)(5+5i)$`.
Windows with no informative token at all (`[1, 2, 3, ...]`) are everywhere in code and tables and
are never keys. Every token also keeps its byte span in the original text, so a match can be masked in place. Pure functions of the
bytes: the same on every engine and batching. Changing anything here changes every hash: bump
NORMALIZER_VERSION so shipped hash files are refused instead of silently never matching.
"""
from __future__ import annotations

import numpy as np
from numba import njit

NORMALIZER_VERSION = 1

_U = np.uint64
_FNV_BASIS = _U(0xCBF29CE484222325)
_FNV_PRIME = _U(0x100000001B3)
_GOLD, _M1, _M2 = _U(0x9E3779B97F4A7C15), _U(0xBF58476D1CE4E5B9), _U(0x94D049BB133111EB)
_S30, _S27, _S31 = _U(30), _U(27), _U(31)
NUM_HASH = _U(0x6E756D6265723A22)  # a masked number's hash (flags: number, not informative)
_NOT_FLAGS = ~_U(3)
NUMBER_BIT = _U(2)

# Character classes.
SEP, WORD, DIGIT, SKIP, SOLO = 0, 1, 2, 3, 4

# Latin-1 letters U+00C0..U+00FF folded to a base ASCII letter (0 = separator: × and ÷).
_LATIN1 = np.array([ord(c) if c != "_" else 0 for c in
                    "aaaaaaaceeeeiiiidnooooo_ouuuuyts" "aaaaaaaceeeeiiiidnooooo_ouuuuyty"], np.int64)


@njit(cache=True, inline="always")
def mix64(x):
    """splitmix64's finaliser: spreads every input bit over the output. Its own copy, not the dedup
    kernel's: the shipped hash files depend on it, under NORMALIZER_VERSION."""
    z = x + _GOLD
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def _decode(data, i, end):
    """(code point, byte length) at data[i]; a malformed sequence is U+FFFD of length 1."""
    b = data[i]
    if b < 0x80:
        return np.int64(b), 1
    if b >= 0xC2 and b < 0xE0 and i + 1 < end:
        return np.int64(((b & 0x1F) << 6) | (data[i + 1] & 0x3F)), 2
    if b >= 0xE0 and b < 0xF0 and i + 2 < end:
        return np.int64(((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)), 3
    if b >= 0xF0 and b < 0xF5 and i + 3 < end:
        return np.int64(((b & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6)
                        | (data[i + 3] & 0x3F)), 4
    return np.int64(0xFFFD), 1


@njit(cache=True)
def _classify(cp):
    """(class, folded code point) of one code point."""
    if cp < 0x80:
        if 0x61 <= cp <= 0x7A or 0x30 <= cp <= 0x39:
            return (DIGIT if cp <= 0x39 else WORD), cp
        if 0x41 <= cp <= 0x5A:
            return WORD, cp + 32
        return SEP, cp
    if cp == 0xAD or 0x300 <= cp <= 0x36F or 0x200B <= cp <= 0x200F or 0x2060 <= cp <= 0x2064 or cp == 0xFEFF:
        return SKIP, cp  # soft hyphen, combining marks, zero-width characters
    if cp == 0xB2 or cp == 0xB3 or cp == 0xB9 or 0x2070 <= cp <= 0x2079 or 0x2080 <= cp <= 0x2089:
        return DIGIT, 0x30  # super- and subscript digits
    if cp < 0xC0:
        return SEP, cp  # C1 controls, Latin-1 punctuation and signs
    if cp <= 0xFF:
        folded = _LATIN1[cp - 0xC0]
        return (WORD, folded) if folded else (SEP, cp)
    if 0x100 <= cp <= 0x17F:
        return WORD, cp | 1  # Latin Extended-A: mostly upper/lower pairs at even/odd
    if 0x391 <= cp <= 0x3A9:
        return WORD, cp + 32  # Greek capitals
    if 0x410 <= cp <= 0x42F:
        return WORD, cp + 32  # Cyrillic capitals
    if 0x400 <= cp <= 0x40F:
        return WORD, cp + 80
    if 0xFF10 <= cp <= 0xFF19:
        return DIGIT, cp - 0xFEE0  # fullwidth digits
    if 0xFF21 <= cp <= 0xFF3A:
        return WORD, cp - 0xFEE0 + 32  # fullwidth capitals
    if 0xFF41 <= cp <= 0xFF5A:
        return WORD, cp - 0xFEE0
    if (0x2000 <= cp <= 0x2BFF or 0x3000 <= cp <= 0x303F or 0xFE10 <= cp <= 0xFE6F or 0xFF00 <= cp <= 0xFF65
            or 0xFFF0 <= cp <= 0xFFFF or 0x1F000 <= cp <= 0x1FAFF):
        return SEP, cp  # punctuation, currency, letterlike, arrows, math, boxes, CJK punctuation, emoji
    if 0x3040 <= cp <= 0x30FF or 0x3400 <= cp <= 0x4DBF or 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF \
            or 0x20000 <= cp <= 0x2FFFF:
        return SOLO, cp
    return WORD, cp


@njit(cache=True, inline="always")
def _is_alpha(b):
    return (0x41 <= b <= 0x5A) or (0x61 <= b <= 0x7A)


@njit(cache=True)
def _markup_end(data, i, end):
    """If data[i] opens an HTML tag or entity, the index just past it; else i."""
    b = data[i]
    if b == 0x3C and i + 1 < end and (_is_alpha(data[i + 1]) or data[i + 1] == 0x2F or data[i + 1] == 0x21):
        j = i + 1
        limit = min(end, i + 512)
        while j < limit:
            if data[j] == 0x3E:
                return j + 1
            if data[j] == 0x3C:
                return i
            j += 1
        return i
    if b == 0x26 and i + 2 < end:
        j = i + 1
        if data[j] == 0x23:  # &#123; or &#x1F;
            j += 1
            if j < end and (data[j] == 0x78 or data[j] == 0x58):
                j += 1
            start = j
            while j < end and j - start < 8 and (0x30 <= data[j] <= 0x39 or _is_alpha(data[j])):
                j += 1
            return j + 1 if j > start and j < end and data[j] == 0x3B else i
        start = j
        while j < end and j - start < 10 and _is_alpha(data[j]):
            j += 1
        return j + 1 if j - start >= 2 and j < end and data[j] == 0x3B else i
    return i


@njit(cache=True, inline="always")
def _finish(kind, h, chars):
    if kind == DIGIT:
        return (mix64(h) & _NOT_FLAGS) | NUMBER_BIT
    return (mix64(h) & _NOT_FLAGS) | _U(1 if (chars >= 2 or kind == SOLO) else 0)


@njit(cache=True, inline="always")
def masked(h):
    """A token hash with its digits masked: every number becomes NUM_HASH."""
    return NUM_HASH if h & NUMBER_BIT else h


def _ascii_tables() -> tuple[np.ndarray, np.ndarray]:
    """_classify's answers for the 128 ASCII bytes, looked up instead of computed: most text is ASCII."""
    cls = np.zeros(128, np.int64)
    fold = np.zeros(128, np.int64)
    for b in range(128):
        c = chr(b)
        cls[b] = DIGIT if c.isdigit() else WORD if ("a" <= c <= "z" or "A" <= c <= "Z") else SEP
        fold[b] = b + 32 if "A" <= c <= "Z" else b
    return cls, fold


_ASCII_CLASS, _ASCII_FOLD = _ascii_tables()


@njit(cache=True)
def tokenize(data, start, end, hashes, starts, ends):
    """Token hashes of data[start:end] into `hashes`, with each token's byte span in `starts`/`ends`
    (absolute offsets). The buffers need end - start slots; returns the token count."""
    n = 0
    i = start
    kind = SEP  # class of the token being built (SEP = none)
    h = _FNV_BASIS
    chars = 0
    tok_start = start
    tok_end = start
    while i < end:
        b = data[i]
        skip_to = _markup_end(data, i, end) if (b == 0x3C or b == 0x26) else i
        if skip_to > i:
            cls, cp, width = SEP, np.int64(0), skip_to - i
        elif b < 0x80:
            cls, cp, width = _ASCII_CLASS[b], _ASCII_FOLD[b], 1
        else:
            cp, width = _decode(data, i, end)
            cls, cp = _classify(cp)
        if cls == SKIP:
            i += width
            continue
        if kind == DIGIT and cls == SEP and (cp == 0x2C or cp == 0x2E) and i + 1 < end and 0x30 <= data[i + 1] <= 0x39:
            i += width  # "3,000" and "2.50" are one number
            continue
        if kind != SEP and (cls != kind or cls == SOLO):  # the current token ends here
            hashes[n] = _finish(kind, h, chars)
            starts[n] = tok_start
            ends[n] = tok_end
            n += 1
            kind = SEP
        if cls == WORD or cls == DIGIT or cls == SOLO:
            if kind == SEP:
                kind = cls
                h = _FNV_BASIS
                chars = 0
                tok_start = i
            h = (h ^ _U(cp)) * _FNV_PRIME
            chars += 1
            tok_end = i + width
        i += width
    if kind != SEP:
        hashes[n] = _finish(kind, h, chars)
        starts[n] = tok_start
        ends[n] = tok_end
        n += 1
    return n


def token_hashes(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hashes, byte starts, byte ends) of one string's tokens; for tests, tools and short inputs."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    size = max(len(data), 1)
    hashes, starts, ends = np.empty(size, np.uint64), np.empty(size, np.int64), np.empty(size, np.int64)
    n = tokenize(data, 0, len(data), hashes, starts, ends)
    return hashes[:n], starts[:n], ends[:n]


def mask_digits(hashes: np.ndarray) -> np.ndarray:
    """`masked()` over an array: what the index compares for full n-grams."""
    return np.where(hashes & NUMBER_BIT, NUM_HASH, hashes)
