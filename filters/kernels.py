"""Compiled per-document passes where Arrow compute would need one regex match per character or a
sequential scan: Gopher's n-gram repetition (the duplicate n-gram count skips past each repeat), one
numba pass over the batch's word codes; and character-class counts (letters, numbers, upper case,
spaces), one pass over the batch's UTF-8 bytes instead of a regex count per class."""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
from numba import njit

TOP_NS = (2, 3, 4)
DUP_NS = (5, 6, 7, 8, 9, 10)
_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as int64: multiplicative hash mixing


@njit(cache=True)
def _slot(table_keys, table_gen, gen, mask, h):
    """Open addressing: the slot of hash h (claimed for this generation when new) and whether it was new."""
    s = (h ^ (h >> 31)) & mask
    while True:
        if table_gen[s] != gen:
            table_gen[s] = gen
            table_keys[s] = h
            return s, True
        if table_keys[s] == h:
            return s, False
        s = (s + 1) & mask


@njit(cache=True)
def ngram_repetition(codes, lengths, offsets, top_ns, dup_ns):
    """For every document (tokens offsets[d]:offsets[d+1]):

    top[d, k]: characters covered by the most frequent top_ns[k]-gram (its length with single spaces
    between words, times its count; ties go to the n-gram seen first);
    dup[d, k]: characters of dup_ns[k]-grams that repeat an earlier one, scanning left to right and
    jumping past each repeat so no character counts twice (words joined without spaces).

    N-gram hashes grow one word at a time (the n-gram hash extends the (n-1)-gram hash), and counts
    live in an open-addressing table reused across documents (a generation stamp clears it)."""
    n_docs = len(offsets) - 1
    top = np.zeros((n_docs, len(top_ns)), dtype=np.float64)
    dup = np.zeros((n_docs, len(dup_ns)), dtype=np.float64)
    longest = 1
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    size = 1
    while size < 2 * longest:
        size *= 2
    mask = np.int64(size - 1)
    keys = np.zeros(size, dtype=np.int64)
    gens = np.zeros(size, dtype=np.int64)
    count = np.zeros(size, dtype=np.int64)
    first = np.zeros(size, dtype=np.int64)
    seen = np.zeros(size, dtype=np.bool_)
    slots = np.empty(longest, dtype=np.int64)
    h = np.empty(longest, dtype=np.int64)
    max_n = 0
    for k in range(len(top_ns)):
        max_n = max(max_n, top_ns[k])
    for k in range(len(dup_ns)):
        max_n = max(max_n, dup_ns[k])
    gen = 0
    for d in range(n_docs):
        start = offsets[d]
        m = offsets[d + 1] - start
        for i in range(m):
            h[i] = _MIX
        for n in range(1, max_n + 1):
            c = m - n + 1
            if c <= 0:
                break
            for i in range(c):  # extend every (n-1)-gram hash by its next word
                x = (h[i] ^ codes[start + i + n - 1]) * _MIX
                h[i] = x ^ (x >> 29)
            kt = -1
            for k in range(len(top_ns)):
                if top_ns[k] == n:
                    kt = k
            kd = -1
            for k in range(len(dup_ns)):
                if dup_ns[k] == n:
                    kd = k
            if kt < 0 and kd < 0:
                continue
            gen += 1
            for i in range(c):
                s, new = _slot(keys, gens, gen, mask, h[i])
                slots[i] = s
                if new:
                    count[s] = 0
                    first[s] = i
                    seen[s] = False
                count[s] += 1
            if kt >= 0:
                best_count, best_first = 0, 0
                for i in range(c):
                    s = slots[i]
                    if count[s] > best_count or (count[s] == best_count and first[s] < best_first):
                        best_count, best_first = count[s], first[s]
                chars = n - 1
                for j in range(n):
                    chars += lengths[start + best_first + j]
                top[d, kt] = best_count * chars
            if kd >= 0:
                i = 0
                total = 0
                while i < c:
                    s = slots[i]
                    if seen[s]:
                        for j in range(n):
                            total += lengths[start + i + j]
                        i += n
                    else:
                        seen[s] = True
                        i += 1
                dup[d, kd] = total
    return top, dup


# Character classes as RE2 sees them: \pL letters, \pN numbers, \p{Lu} upper case, \pM marks, and
# \s = [\t\n\f\r ] (ASCII only in RE2).
LETTER, NUMBER, UPPER, SPACE, MARK = 1, 2, 4, 8, 16


_CLASS_OF = {**{c: LETTER for c in ("Ll", "Lt", "Lm", "Lo")}, "Lu": LETTER | UPPER, "Nd": NUMBER, "Nl": NUMBER,
             "No": NUMBER, "Mn": MARK, "Mc": MARK, "Me": MARK}
TABLE_END = 0x32400  # past the last assigned letters (CJK extension H): only marks, symbols, private use


@functools.cache
def class_table() -> np.ndarray:
    """One byte of class flags per Unicode code point below TABLE_END (built in about 0.1 s)."""
    import unicodedata

    table = np.fromiter((_CLASS_OF.get(unicodedata.category(chr(cp)), 0) for cp in range(TABLE_END)),
                        dtype=np.uint8, count=TABLE_END)
    for c in "\t\n\f\r ":
        table[ord(c)] = SPACE
    return table


def utf8_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets[n + 1] into them) of an Arrow string array, without copying the text."""
    if pa.types.is_string(text.type):
        width = np.int32
    elif pa.types.is_large_string(text.type):
        width = np.int64
    else:
        raise TypeError(f"expected a string array, got {text.type}")
    _, off_buf, data_buf = text.buffers()
    offsets = np.frombuffer(off_buf, dtype=width)[text.offset:text.offset + len(text) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets


@njit(cache=True, inline="always")
def _decode(data, i):
    """(code point, bytes) of the UTF-8 sequence at data[i] (Arrow strings are valid UTF-8)."""
    b = data[i]
    if b < 0x80:
        return np.int64(b), 1
    if b < 0xE0:
        return ((np.int64(b) & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((np.int64(b) & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return (((np.int64(b) & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
            | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)), 4


@njit(cache=True)
def _class_counts(data, offsets, table):
    n = len(offsets) - 1
    out = np.zeros((n, 5), dtype=np.float64)  # letters, numbers, upper, spaces, marks
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        letters = numbers = upper = spaces = marks = 0
        while i < end:
            cp, k = _decode(data, i)
            i += k
            f = table[cp] if cp < len(table) else 0
            if f & 1:
                letters += 1
                if f & 4:
                    upper += 1
            elif f & 2:
                numbers += 1
            elif f & 8:
                spaces += 1
            elif f & 16:
                marks += 1
        out[d, 0] = letters
        out[d, 1] = numbers
        out[d, 2] = upper
        out[d, 3] = spaces
        out[d, 4] = marks
    return out


def class_counts(text: pa.Array) -> dict[str, np.ndarray]:
    """Per document: counts of \\pL, \\pN, \\p{Lu}, \\s and \\pM characters, in one pass over the bytes."""
    data, offsets = utf8_buffers(text)
    out = _class_counts(data, offsets, class_table())
    return {"letters": out[:, 0], "numbers": out[:, 1], "upper": out[:, 2], "spaces": out[:, 3], "marks": out[:, 4]}


@njit(cache=True, inline="always")
def _put_newline(out, pos, started):
    """Write the `_nl_` token (after a space unless it opens the document); the new position."""
    if started:
        out[pos] = 32
        pos += 1
    out[pos] = 95  # _
    out[pos + 1] = 110  # n
    out[pos + 2] = 108  # l
    out[pos + 3] = 95
    return pos + 4


@functools.cache
def lower_table() -> np.ndarray:
    """Arrow's utf8_lower as a code point map below TABLE_END (int32), taken from Arrow itself so the
    kernels below lower-case exactly as pc.utf8_lower does (one code point to one, as utf8proc maps)."""
    import pyarrow.compute as pc

    cps = np.arange(TABLE_END, dtype=np.uint32)
    cps[0xD800:0xE000] = 32  # surrogates are not text: mapped to themselves below
    lowered = pc.utf8_lower(pa.array([cps.tobytes().decode("utf-32-le")])).to_pylist()[0]
    out = np.frombuffer(lowered.encode("utf-32-le"), dtype=np.uint32).astype(np.int32)
    if len(out) != TABLE_END:
        raise RuntimeError("utf8_lower did not map code points one to one")
    out[0xD800:0xE000] = np.arange(0xD800, 0xE000)
    return out


# fastText token kinds of a (lower-cased) code point
SYMBOL, WORD, GAP, BREAK, DELETED = 0, 1, 2, 3, 4
APOSTROPHES = "'\u2019\u02bc"  # deleted: "don't" and "don’t" are the word "dont"
# Separators that carry no sign of quality: commas, quotes and brackets of every script (Unicode Ps,
# Pe, Pi, Pf) end a word like a space and are no token; they were a fifth of all tokens.
_SEPARATOR_CATEGORIES = ("Ps", "Pe", "Pi", "Pf")
_SEPARATORS = ',"`\u060c\u3001\uff0c\u055d\u1363\ua60d\ufe50\ufe51'


@functools.cache
def token_kinds(lean: bool = True) -> np.ndarray:
    """The fastText token kind of every code point below TABLE_END (uint8): a word character (letters,
    numbers, combining marks), a symbol (its own token), a gap (whitespace; BREAK for a line feed), or
    deleted (apostrophes). Not `lean`: separators and apostrophes are symbols too (the reference LM
    reads word order by them).

    Scripts written without spaces (Chinese, Japanese, Thai) stay runs between punctuation: one token a
    character was tried and lost on the contrast check (its 18 CJK test pages: 54% of junk in the bottom
    two tiers against 91% with runs), and made those documents 8 times the tokens."""
    import unicodedata

    table = class_table()
    kind = np.where(table & (LETTER | NUMBER | MARK), WORD, np.where(table & SPACE, GAP, SYMBOL)).astype(np.uint8)
    kind[11] = GAP  # \v, which fastText splits on too
    kind[10] = BREAK
    for cp in range(0x2000, 0x2070):  # typographic spaces that are category Zs but not RE2 \s
        if unicodedata.category(chr(cp)) == "Zs":
            kind[cp] = GAP
    kind[[0xA0, 0x1680, 0x3000]] = GAP
    if lean:
        cats = np.array([_SEPARATOR_CATEGORIES.count(unicodedata.category(chr(cp))) for cp in range(0x10000)], dtype=bool)
        kind[:0x10000][cats] = GAP
        for c in _SEPARATORS:
            kind[ord(c)] = GAP
        for c in APOSTROPHES:
            kind[ord(c)] = DELETED
    return kind


@functools.cache
def ascii_lower() -> np.ndarray:
    low = np.arange(128, dtype=np.uint8)
    low[ord("A"):ord("Z") + 1] += 32
    return low


@njit(cache=True, inline="always")
def _encode(out, pos, cp):
    """Write code point cp as UTF-8 at out[pos]; the new position."""
    if cp < 0x80:
        out[pos] = cp
        return pos + 1
    if cp < 0x800:
        out[pos] = 0xC0 | (cp >> 6)
        out[pos + 1] = 0x80 | (cp & 0x3F)
        return pos + 2
    if cp < 0x10000:
        out[pos] = 0xE0 | (cp >> 12)
        out[pos + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[pos + 2] = 0x80 | (cp & 0x3F)
        return pos + 3
    out[pos] = 0xF0 | (cp >> 18)
    out[pos + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[pos + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[pos + 3] = 0x80 | (cp & 0x3F)
    return pos + 4


@njit(cache=True, inline="always")
def _worst_bytes(n_bytes, max_chars):
    """The most output a document of n_bytes can give: a space before every character (lower-casing
    grows only 2-byte characters, by one byte) and ' _nl_' for a line feed; at most 4 bytes a
    character count before the cut."""
    return 5 * min(n_bytes, 4 * max_chars) + 8


@njit(cache=True, nogil=True)
def _fasttext_tokens(data, offsets, kinds, lower, low, max_chars, out_offsets, out):
    """fastText's view of a text: its first max_chars code points lower-cased (`lower`: code point map,
    `low`: the same for ASCII bytes), words of letters, numbers and marks, every symbol a token of its
    own, separators and whitespace between tokens, apostrophes deleted (`kinds`: see token_kinds), a
    run of gaps holding a line break the token `_nl_`, tokens joined by single spaces, written to `out`
    while the next document surely fits (see _worst_bytes); returns (documents done, bytes used).
    Lower-casing, the cut and the tokens in one pass, the GIL released."""
    pos = 0
    done = 0
    for d in range(len(offsets) - 1):
        if pos + _worst_bytes(offsets[d + 1] - offsets[d], max_chars) > len(out):
            break
        done += 1
        out_offsets[d] = pos
        i = offsets[d]
        end = offsets[d + 1]
        if end - i > max_chars:  # bytes >= code points: only then can the cut fall inside
            j = i
            left = max_chars
            while j < end and left > 0:
                b = data[j]
                j += 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
                left -= 1
            end = j
        started = False
        gap = False  # a gap since the last token
        newline = False  # ... holding a line break
        last_symbol = False
        while i < end:
            b = data[i]
            if b < 0x80:
                cp, k = np.int64(low[b]), 1
            else:
                cp, k = _decode(data, i)
                if cp < len(lower):
                    cp = np.int64(lower[cp])
            c = kinds[cp] if cp < len(kinds) else SYMBOL
            if c >= GAP:
                i += k
                if c == DELETED:
                    continue
                gap = True
                if c == BREAK:
                    newline = True
                continue
            word = c == WORD
            if newline:
                pos = _put_newline(out, pos, started)
                started = True
                gap = True
            if started and (gap or not word or last_symbol):
                out[pos] = 32
                pos += 1
            pos = _encode(out, pos, cp)
            i += k
            started = True
            gap = False
            newline = False
            last_symbol = not word
            if word:  # the rest of an ASCII word in a tight loop
                while i < end:
                    b = data[i]
                    if b >= 0x80 or kinds[b] != WORD:
                        break
                    out[pos] = low[b]
                    pos += 1
                    i += 1
        if newline:
            pos = _put_newline(out, pos, started)
    out_offsets[done] = pos
    return done, pos


def fasttext_tokens(text: pa.Array, max_chars: int | None = None, lean: bool = True) -> pa.Array:
    """The lower-cased text (first `max_chars` code points when given) as fastText tokens (see
    _fasttext_tokens; `lean`: see token_kinds), as an Arrow string array; runs without the GIL, so
    threads can share a batch."""
    data, offsets = utf8_buffers(text)
    limit = _limit(offsets, max_chars)
    worst = 5 * np.minimum(np.diff(offsets), 4 * limit) + 8  # _worst_bytes of every document
    out = np.empty(int(worst.sum()) + 8, dtype=np.uint8)  # virtual: only the bytes written are touched
    out_offsets = np.zeros(len(offsets), dtype=np.int64)
    done, used = _fasttext_tokens(data, offsets, token_kinds(lean), lower_table(), ascii_lower(), limit, out_offsets, out)
    assert done == len(text)
    return pa.LargeStringArray.from_buffers(len(text), pa.py_buffer(out_offsets), pa.py_buffer(out[:used]))


def _limit(offsets: np.ndarray, max_chars: int | None) -> int:
    return int(offsets[-1] - offsets[0]) + 1 if max_chars is None else max(int(max_chars), 0)


def fasttext_token_lists(text: pa.Array, max_chars: int | None, scratch: np.ndarray) -> tuple[list[str], np.ndarray]:
    """fasttext_tokens as a list of str, written through `scratch` (reused, and replaced by a larger
    one when a document needs more; the one to keep is returned): a fresh buffer for every batch costs
    page faults that serialise threads."""
    data, offsets = utf8_buffers(text)
    limit = _limit(offsets, max_chars)
    kinds, lower, low = token_kinds(True), lower_table(), ascii_lower()
    out_offsets = np.zeros(len(offsets), dtype=np.int64)
    result: list[str] = []
    start = 0
    while start < len(text):
        need = _worst_bytes(int(offsets[start + 1] - offsets[start]), limit)
        if need > len(scratch):
            scratch = np.empty(need, dtype=np.uint8)
        done, used = _fasttext_tokens(data, offsets[start:], kinds, lower, low, limit, out_offsets, scratch)
        result += pa.LargeStringArray.from_buffers(done, pa.py_buffer(out_offsets[:done + 1]),
                                                   pa.py_buffer(scratch[:used])).to_pylist()
        start += done
    return result, scratch
