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
    out = np.zeros((n, 4), dtype=np.float64)  # letters, numbers, upper, spaces
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        letters = numbers = upper = spaces = 0
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
        out[d, 0] = letters
        out[d, 1] = numbers
        out[d, 2] = upper
        out[d, 3] = spaces
    return out


def class_counts(text: pa.Array) -> dict[str, np.ndarray]:
    """Per document: counts of \\pL, \\pN, \\p{Lu} and \\s characters, in one pass over the bytes."""
    data, offsets = utf8_buffers(text)
    out = _class_counts(data, offsets, class_table())
    return {"letters": out[:, 0], "numbers": out[:, 1], "upper": out[:, 2], "spaces": out[:, 3]}


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


@functools.cache
def ascii_token_tables() -> tuple[np.ndarray, np.ndarray]:
    """For ASCII bytes: the fastText token kind of the lower-cased byte (0 symbol, 1 word, 2 space,
    3 line break) and the lower-cased byte."""
    table = class_table()
    low = np.arange(128, dtype=np.uint8)
    low[ord("A"):ord("Z") + 1] += 32
    kind = np.array([3 if b == 10 else 2 if (table[low[b]] & SPACE) or b == 11 else 1 if table[low[b]] & 3 else 0
                     for b in range(128)], dtype=np.uint8)
    return kind, low


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


@njit(cache=True, nogil=True)
def _fasttext_tokens(data, offsets, table, lower, kind, low, max_chars, out_offsets, out):
    """fastText's view of a text: its first max_chars code points lower-cased (`lower`: code point map;
    `kind` and `low`: the same for ASCII bytes, see ascii_token_tables), words of letters and numbers,
    every other visible character a token of its own, a run of whitespace holding a line break the
    token `_nl_`, tokens joined by single spaces, written to `out` (large enough); returns the bytes
    used. Lower-casing, the cut and the tokens in one pass, the GIL released."""
    pos = 0
    for d in range(len(offsets) - 1):
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
        gap = False  # whitespace since the last token
        newline = False  # ... holding a line break
        last_symbol = False
        while i < end:
            b = data[i]
            if b < 0x80:
                c = kind[b]
                if c >= 2:  # \s and \v
                    gap = True
                    if c == 3:
                        newline = True
                    i += 1
                    continue
                word = c == 1
                cp, k = np.int64(low[b]), 1
            else:
                cp, k = _decode(data, i)
                if cp < len(lower):
                    cp = np.int64(lower[cp])
                f = table[cp] if cp < len(table) else 0
                if f & SPACE:
                    gap = True
                    i += k
                    continue
                word = (f & 3) != 0
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
                    if b >= 0x80 or kind[b] != 1:
                        break
                    out[pos] = low[b]
                    pos += 1
                    i += 1
        if newline:
            pos = _put_newline(out, pos, started)
    out_offsets[len(offsets) - 1] = pos
    return out[:pos]


def fasttext_tokens(text: pa.Array, max_chars: int | None = None) -> pa.Array:
    """The lower-cased text (first `max_chars` code points when given) as fastText tokens (see
    _fasttext_tokens), as an Arrow string array; runs without the GIL, so threads can share a batch."""
    data, offsets = utf8_buffers(text)
    lo, hi = int(offsets[0]), int(offsets[-1])
    out_offsets = np.zeros(len(offsets), dtype=np.int64)
    # at most a space before every character (lower-casing grows a character by at most one byte, and
    # only 2-byte ones) and ' _nl_' for every line break
    out = np.empty(2 * (hi - lo) + 5 * int(np.count_nonzero(data[lo:hi] == 10)) + 16, dtype=np.uint8)
    kind, low = ascii_token_tables()
    limit = hi - lo + 1 if max_chars is None else max(int(max_chars), 0)
    out = _fasttext_tokens(data, offsets, class_table(), lower_table(), kind, low, limit, out_offsets, out)
    return pa.LargeStringArray.from_buffers(len(text), pa.py_buffer(out_offsets), pa.py_buffer(out))
