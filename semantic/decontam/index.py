"""The n-gram index of benchmark items and the compiled scan of documents against it.

Keys. Every window of `n` normalised tokens of an item is a key; an item shorter than `n` (but at
least `min_tokens` long) is one key: its whole token sequence. A window's key is a polynomial over
its token hashes (read off a prefix array, so every window length costs O(1) per position) mixed
with its length, so a short item never aliases an n-gram.

Memory. The index is a sorted table of distinct keys, each with its holders (the item or two, when at
most two items hold it: nearly always), a CSR list of the items holding each key (int32), blocked Bloom
filters (1-2 bytes per key, three bits in one word) that reject almost every document window with one
read of a filter that stays in the L2 cache, and a bucket directory over the top bits of the sorted
keys (about 8 bytes per key), so a lookup that passes the filter scans a bucket of ~2 keys. About 30
bytes per key all told. Keys shared by more than `max_items_per_gram` items are boilerplate ("which
of the following is ...") and dropped, as GPT-3's decontamination did.

Scan. One compiled pass per batch: for each document, tokenise, build the prefix array, and at each
position look up the n-gram there (one read of the n-gram filter) and the anchor there: the
raw key of the next `min_tokens` tokens, which every short item (min_tokens..n-1 tokens) starts
with. The anchors are few, so their filter stays in L1; only where one matches (rarely) are the
lengths of the short items behind it looked up. So a position costs two probes however many short
item lengths there are (it was one probe per length: 3.5x slower with the shipped registry). Then
per item the number of distinct keys matched and the byte span from the first to the last match
(what `mask` removes).
"""
from __future__ import annotations

from assay.pipeline.codec import plain_data

import numpy as np
from numba import njit

from .normalize import masked, mix64, tokenize

_U = np.uint64
_BASE = _U(0x9E3779B97F4A7C15)  # odd: the polynomial base of a window's key
_LEN_MULT = _U(0xD6E8FEB86659FD93)
_WHOLE = 1 << 32  # added to the length of a whole-document key, so it never equals a window key
_RAW = 1 << 33  # added to the length of a raw (digits kept) key


def powers(n: int) -> np.ndarray:
    """_BASE^k for k <= n, wrapping mod 2^64."""
    return np.array([pow(int(_BASE), k, 1 << 64) for k in range(n + 1)], np.uint64)


@njit(cache=True)
def _prefix(hashes, m, out, raw, info):
    """Polynomial prefixes of the masked and the raw token hashes, and the running count of
    informative tokens: any window's key and informativeness in O(1)."""
    out[0] = _U(0)
    raw[0] = _U(0)
    info[0] = 0
    for i in range(m):
        out[i + 1] = out[i] * _BASE + masked(hashes[i])
        raw[i + 1] = raw[i] * _BASE + hashes[i]
        info[i + 1] = info[i] + np.int64(hashes[i] & _U(1))


@njit(cache=True, inline="always")
def _key(prefix, raw, info, i, length, pw, min_info, salt):
    """The key of the window [i, i+length): masked when it is a full n-gram with enough informative
    tokens; raw (digits kept) when it has fewer, or is a whole short item ("Compute $\\dbinom{8}{6}$"
    and "Compute $\\dbinom{31}{28}$" are different problems, not one with its numbers changed); 0 (no
    key) when it has no informative token at all. `salt` sets whole-document keys apart."""
    have = info[i + length] - info[i]
    if have >= min_info[length] and length == pw.shape[0] - 1:
        return mix64((prefix[i + length] - prefix[i] * pw[length]) ^ (_U(length + salt) * _LEN_MULT))
    if have == 0:
        return _U(0)
    return mix64((raw[i + length] - raw[i] * pw[length]) ^ (_U(length + salt + _RAW) * _LEN_MULT))


@njit(cache=True)
def item_keys(hashes, offsets, n, min_tokens, pw, min_info):
    """(item index, key, is an n-gram) for every window of every item (a CSR of token hashes).
    An item shorter than min_tokens gets one whole-document key: it matches only a document that is
    nothing but that item (a query, a forum title), since a window that short is everywhere."""
    total = 0
    for it in range(len(offsets) - 1):
        m = offsets[it + 1] - offsets[it]
        total += (m - n + 1) if m >= n else (1 if m > 0 else 0)
    owner = np.empty(total, np.int64)
    keys = np.empty(total, np.uint64)
    full = np.empty(total, np.bool_)
    longest = int(np.max(np.diff(offsets))) + 1 if len(offsets) > 1 else 1
    prefix = np.empty(longest, np.uint64)
    raw = np.empty(longest, np.uint64)
    info = np.empty(longest, np.int64)
    k = 0
    for it in range(len(offsets) - 1):
        s = offsets[it]
        m = offsets[it + 1] - s
        if m == 0:
            continue
        _prefix(hashes[s:s + m], m, prefix, raw, info)
        whole = m < min_tokens
        length = m if m < n else n
        for i in range(m - length + 1):
            key = _key(prefix, raw, info, i, length, pw, min_info, _WHOLE if whole else 0)
            if key != _U(0):
                owner[k] = it
                keys[k] = key
                full[k] = length == n
                k += 1
    return owner[:k], keys[:k], full[:k]


@njit(cache=True)
def anchor_keys(hashes, offsets, n, min_tokens, pw):
    """(anchor, item length) for every item of min_tokens..n-1 tokens: the anchor is the raw key of
    its first min_tokens tokens, so a document position is probed once for all short items, and only
    where an anchor matches are the items' own lengths tried."""
    total = 0
    for it in range(len(offsets) - 1):
        m = offsets[it + 1] - offsets[it]
        if min_tokens <= m < n:
            total += 1
    anchors = np.empty(total, np.uint64)
    lengths = np.empty(total, np.int64)
    raw = np.empty(n + 1, np.uint64)
    k = 0
    for it in range(len(offsets) - 1):
        s = offsets[it]
        m = offsets[it + 1] - s
        if min_tokens <= m < n:
            raw[0] = _U(0)
            for i in range(min_tokens):
                raw[i + 1] = raw[i] * _BASE + hashes[s + i]
            anchors[k] = _anchor(raw, 0, min_tokens, pw)
            lengths[k] = m
            k += 1
    return anchors, lengths


@njit(cache=True, inline="always")
def _anchor(raw, i, a, pw):
    return mix64((raw[i + a] - raw[i] * pw[a]) ^ (_U(a) * _LEN_MULT))


@njit(cache=True)
def _room(rows, n):
    """`rows` with room for row n: the same array, or a longer one holding the same rows."""
    if n < rows.shape[0]:
        return rows
    out = np.empty((max(2 * rows.shape[0], n + 1), rows.shape[1]), rows.dtype)
    out[:rows.shape[0]] = rows
    return out


@njit(cache=True)
def _find(key, bitmap, bitmask, dirs, dir_shift, slots):
    """Row of `key` in the sorted `slots`, or -1."""
    if not _maybe(key, bitmap, bitmask):
        return -1
    bucket = key >> dir_shift
    for j in range(dirs[bucket], dirs[bucket + 1]):
        if slots[j, 0] == key:
            return j
    return -1


@njit(cache=True, inline="always")
def _maybe(key, bitmap, bitmask):
    """1 when `key` may be in the set behind `bitmap` (0 is never a key), else 0: a Bloom filter with
    its three bits in one 64-bit word, so a probe is one memory read."""
    want = _bloom_bits(key)
    return np.uint8((bitmap[key & bitmask] & want) == want and key != _U(0))


@njit(cache=True, inline="always")
def _bloom_bits(key):
    """Three bit positions from the key's high bits (its low bits choose the word)."""
    return (_U(1) << ((key >> _U(40)) & _U(63))) | (_U(1) << ((key >> _U(46)) & _U(63))) | \
        (_U(1) << ((key >> _U(52)) & _U(63)))


_ONE = np.int64(0xFFFFFFFF)  # the high half of a slot's holders when one item holds the key


@njit(cache=True)
def _add(matches, nm, j, holders, lo, hi, key_off, key_items):
    """Append (item, key j, byte start, byte end) for every item holding key j. `holders` is the
    key's slot value: one or two items packed in 32-bit halves, or -1 when more hold it (then the
    CSR lists them)."""
    if holders == -1:
        for p in range(key_off[j], key_off[j + 1]):
            matches = _room(matches, nm)
            matches[nm, 0], matches[nm, 1], matches[nm, 2], matches[nm, 3] = key_items[p], j, lo, hi
            nm += 1
        return matches, nm
    matches = _room(matches, nm + 1)
    matches[nm, 0], matches[nm, 1], matches[nm, 2], matches[nm, 3] = holders & _ONE, j, lo, hi
    nm += 1
    if (holders >> 32) & _ONE != _ONE:
        matches[nm, 0], matches[nm, 1], matches[nm, 2], matches[nm, 3] = (holders >> 32) & _ONE, j, lo, hi
        nm += 1
    return matches, nm


@njit(cache=True)
def scan(data, offsets, anchor_len, anchors, anchor_lengths, anchor_bits, anchor_mask, whole_max, pw, min_info, grams,
         grams_mask, shorts, shorts_mask, dirs, dir_shift, slots, key_off, key_items, n_items):
    """Per (document, item) with at least one matched key: distinct keys matched and the byte span
    [start, end) from the first matched window to the last. Documents are data[offsets[d]:offsets[d+1]];
    windows of length n are filtered by the n-gram bitmap; short items by their anchors (sorted
    (anchor, item length) pairs) and then the short items' bitmap."""
    n_docs = len(offsets) - 1
    longest = 1
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    hashes = np.empty(longest, np.uint64)
    starts = np.empty(longest, np.int64)
    ends = np.empty(longest, np.int64)
    prefix = np.empty(longest + 1, np.uint64)
    raw = np.empty(longest + 1, np.uint64)
    info = np.empty(longest + 1, np.int64)
    gram_at = np.empty(longest + 1, np.uint64)
    anchor_at = np.empty(longest + 1, np.uint64)
    passed = np.empty(longest + 1, np.uint8)
    at_pos = np.empty(longest + 1, np.int64)  # the positions whose n-gram passed the bitmap
    bucket_lo = np.empty(longest + 1, np.int64)
    key_at = np.empty(longest + 1, np.int64)
    holder_at = np.empty(longest + 1, np.int64)
    n_keys = slots.shape[0]
    n = pw.shape[0] - 1
    has_anchors = len(anchors) > 0
    matches = np.empty((64, 4), np.int64)  # per document: item, key, byte start, byte end
    seen = np.empty(0, np.int64)
    found = np.empty((0, 4), np.int64)
    item_state = np.full((n_items, 2), -1, np.int64)  # the document an item was last found in, its row in `found`
    out = np.empty((64, 5), np.int64)  # doc, item, distinct keys, byte start, byte end
    n_out = 0
    for d in range(n_docs):
        m = tokenize(data, offsets[d], offsets[d + 1], hashes, starts, ends)
        _prefix(hashes, m, prefix, raw, info)
        base = offsets[d]
        nm = 0
        # Passes of simple loops whose memory reads do not depend on each other, so that the CPU keeps
        # many cache misses in flight: every position's keys; the bitmap reads (3x faster than probing
        # key by key); for the n-grams that passed, their directory buckets, then their slots (key and
        # sole holder on one cache line), then the matches; a verbatim copy of an item passes at every
        # position, and this is 4x faster there than one lookup at a time. Last, the short items
        # behind the few anchors that passed.
        for i in range(m):
            gram_at[i] = _key(prefix, raw, info, i, n, pw, min_info, 0) if i + n <= m else _U(0)
            anchor_at[i] = _anchor(raw, i, anchor_len, pw) if i + anchor_len <= m else _U(0)
        n_pass = 0
        for i in range(m):
            passed[i] = _maybe(gram_at[i], grams, grams_mask) | (np.uint8(2) if has_anchors and _maybe(
                anchor_at[i], anchor_bits, anchor_mask) else np.uint8(0))
            at_pos[n_pass] = i
            n_pass += passed[i] & 1
        for k in range(n_pass):
            bucket_lo[k] = dirs[gram_at[at_pos[k]] >> dir_shift]
        for k in range(n_pass):
            key = gram_at[at_pos[k]]
            j = bucket_lo[k]
            while j < n_keys and slots[j, 0] < key:  # a bucket holds ~2 keys; it ends at the next larger key
                j += 1
            hit = j < n_keys and slots[j, 0] == key
            key_at[k] = j if hit else -1
            holder_at[k] = np.int64(slots[j, 1]) if hit else 0
        matches = _room(matches, 2 * n_pass)
        shared = 0
        for k in range(n_pass):  # a row per match and holder, the holders read off the key's slot: no call
            j = key_at[k]
            if j < 0:
                continue
            i = at_pos[k]
            holders = holder_at[k]
            lo, hi = starts[i] - base, ends[i + n - 1] - base
            matches[nm, 0], matches[nm, 1], matches[nm, 2], matches[nm, 3] = holders & _ONE, j, lo, hi
            nm += 1
            if holders == -1:  # three or more holders (rare): expanded below
                matches[nm - 1, 0] = -1
                shared += 1
            elif (holders >> 32) & _ONE != _ONE:  # two: a text in two benchmarks (SWE-bench Lite and Verified)
                matches[nm, 0], matches[nm, 1], matches[nm, 2], matches[nm, 3] = (holders >> 32) & _ONE, j, lo, hi
                nm += 1
        if shared:
            rows = nm
            for e in range(rows):
                if matches[e, 0] == -1:
                    matches, nm = _add(matches, nm, matches[e, 1], np.int64(-1), matches[e, 2], matches[e, 3], key_off,
                                       key_items)
        for i in range(m):
            if passed[i] & 2:  # a short item may start here: try the lengths behind this anchor
                a = anchor_at[i]
                at = np.searchsorted(anchors, a)
                while at < len(anchors) and anchors[at] == a:
                    length = anchor_lengths[at]
                    at += 1
                    if i + length > m:
                        continue
                    key = _key(prefix, raw, info, i, length, pw, min_info, 0)
                    j = _find(key, shorts, shorts_mask, dirs, dir_shift, slots) if key != _U(0) else -1
                    if j >= 0:
                        matches, nm = _add(matches, nm, j, np.int64(slots[j, 1]), starts[i] - base,
                                           ends[i + length - 1] - base, key_off, key_items)
        if 0 < m <= whole_max:  # the document as a whole may be one short item
            key = _key(prefix, raw, info, 0, m, pw, min_info, _WHOLE)
            j = _find(key, shorts, shorts_mask, dirs, dir_shift, slots) if key != _U(0) else -1
            if j >= 0:
                matches, nm = _add(matches, nm, j, np.int64(slots[j, 1]), starts[0] - base, ends[m - 1] - base,
                                   key_off, key_items)
        if nm == 0:
            continue
        # per item: the distinct keys (a small open-addressing set of (item, key) codes, in cache: 3x
        # faster than sorting them) and the widest span
        size = 64
        while size < 2 * nm:
            size *= 2
        if seen.shape[0] < size:
            seen = np.empty(size, np.int64)
            found = np.empty((size, 4), np.int64)  # item, distinct keys, byte start, byte end
        seen[:size] = -1
        mask = _U(size - 1)
        nf = 0
        for e in range(nm):
            item = matches[e, 0]
            if item < 0:  # a shared key's row, replaced by a row per holder above
                continue
            if item_state[item, 0] != d:
                item_state[item, 0], item_state[item, 1] = d, nf
                found[nf, 0], found[nf, 1], found[nf, 2], found[nf, 3] = item, 0, matches[e, 2], matches[e, 3]
                nf += 1
            f = item_state[item, 1]
            found[f, 2] = min(found[f, 2], matches[e, 2])
            found[f, 3] = max(found[f, 3], matches[e, 3])
            code = item * n_keys + matches[e, 1]
            h = mix64(_U(code)) & mask
            while seen[h] != -1 and seen[h] != code:
                h = (h + _U(1)) & mask
            if seen[h] == -1:
                seen[h] = code
                found[f, 1] += 1
        for f in np.argsort(found[:nf, 0]):
            out = _room(out, n_out)
            out[n_out, 0], out[n_out, 1], out[n_out, 2] = d, found[f, 0], found[f, 1]
            out[n_out, 3], out[n_out, 4] = found[f, 2], found[f, 3]
            n_out += 1
    return out[:n_out, 0].copy(), out[:n_out, 1].copy(), out[:n_out, 2].copy(), out[:n_out, 3].copy(), out[:n_out, 4].copy()


@njit(cache=True)
def tokenize_all(data, offsets):
    """Token hashes of many strings as a CSR (hashes, offsets)."""
    out = np.empty(max(len(data), 1), np.uint64)
    out_off = np.zeros(len(offsets), np.int64)
    starts = np.empty(max(len(data), 1), np.int64)
    ends = np.empty(max(len(data), 1), np.int64)
    n = 0
    for d in range(len(offsets) - 1):
        k = tokenize(data, offsets[d], offsets[d + 1], out[n:], starts[n:], ends[n:])
        n += k
        out_off[d + 1] = n
    return out[:n].copy(), out_off


@plain_data  # shared with workers through the output's scratch folder (pipeline/codec.py)
class NgramIndex:
    """Benchmark items' n-gram keys, ready to scan documents. Build once per worker (setup)."""

    def __init__(self, hashes: np.ndarray, offsets: np.ndarray, n: int = 13, min_tokens: int = 6,
                 max_items_per_gram: int = 20, min_word_share: float = 0.34):
        if n < 1 or min_tokens < 1:
            raise ValueError("n and min_tokens must be positive")
        self.n, self.min_tokens = n, min(min_tokens, n)
        self.pw = powers(n)
        # informative tokens a window of each length needs (at least one)
        self.min_info = np.maximum(1, np.ceil(np.arange(n + 1) * min_word_share - 1e-9)).astype(np.int64)
        n_items = len(offsets) - 1
        owner, keys, full = item_keys(hashes, offsets.astype(np.int64), n, self.min_tokens, self.pw, self.min_info)
        # distinct (key, item) pairs, sorted by key
        order = np.lexsort((owner, keys))
        keys, owner, full = keys[order], owner[order], full[order]
        distinct = np.ones(len(keys), bool)
        distinct[1:] = (keys[1:] != keys[:-1]) | (owner[1:] != owner[:-1])
        keys, owner, full = keys[distinct], owner[distinct], full[distinct]
        uniq, first, per_key = np.unique(keys, return_index=True, return_counts=True)
        common = per_key > max_items_per_gram
        self.dropped_keys = int(common.sum())
        keep_pair = np.repeat(~common, per_key)
        keys, owner = keys[keep_pair], owner[keep_pair]
        uniq, per_key, full = uniq[~common], per_key[~common], full[first][~common]
        self.keys = uniq
        self.key_off = np.concatenate([[0], np.cumsum(per_key)]).astype(np.int64)
        self.key_items = owner.astype(np.int32)
        self.item_nkeys = np.bincount(owner, minlength=n_items).astype(np.int64)
        self.unindexed = int(np.count_nonzero(self.item_nkeys == 0))  # empty, or only boilerplate grams
        anchors, anchor_lengths = anchor_keys(hashes, offsets.astype(np.int64), n, self.min_tokens, self.pw)
        # distinct (anchor, item length) pairs, sorted by anchor: the lengths to try where one matches
        pairs = np.unique(np.stack([anchors, anchor_lengths.astype(np.uint64)]), axis=1)
        self.anchors, self.anchor_lengths = pairs[0].copy(), pairs[1].astype(np.int64)
        self.anchor_bits, self.anchor_mask = _bitmap(np.unique(self.anchors))
        self.whole_max = int(self.min_tokens - 1)
        self._build_lookup(full)

    def _build_lookup(self, full: np.ndarray) -> None:
        """Bitmaps of ~32 bits per key (n-gram keys; the short items' keys) and the bucket directory."""
        self.grams, self.grams_mask = _bitmap(self.keys[full])
        self.shorts, self.shorts_mask = _bitmap(self.keys[~full])
        n_keys = max(len(self.keys), 1)
        dir_bits = max(1, int(np.ceil(np.log2(n_keys))))
        self.dir_shift = _U(64 - dir_bits)
        bucket_starts = (np.arange((1 << dir_bits) + 1, dtype=np.uint64) << self.dir_shift) if dir_bits < 64 else None
        dirs = np.searchsorted(self.keys, bucket_starts[:-1]).astype(np.int64)
        self.dirs = np.concatenate([dirs, [len(self.keys)]])
        # each key with its holders on the cache line of the key: one or two items in 32-bit halves
        # (a text in two benchmarks, as SWE-bench Lite in Verified), or all ones when more hold it
        per_key = np.diff(self.key_off)
        first = self.key_items[self.key_off[:-1]].astype(np.uint64)
        second = np.where(per_key >= 2, self.key_items[np.minimum(self.key_off[:-1] + 1, len(self.key_items) - 1)],
                          0xFFFFFFFF).astype(np.uint64)
        holders = np.where(per_key <= 2, first | (second << np.uint64(32)), np.uint64(0xFFFFFFFFFFFFFFFF))
        self.slots = np.stack([self.keys, holders], axis=1)
        self.keys = self.slots[:, 0]  # a view: the keys are stored once

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.slots, self.key_off, self.key_items, self.item_nkeys, self.grams, self.shorts,
                                      self.dirs, self.anchors, self.anchor_lengths, self.anchor_bits))

    def scan(self, data: np.ndarray, offsets: np.ndarray):
        """(doc, item, distinct keys matched, byte start, byte end) arrays for a batch of UTF-8 texts."""
        return scan(data, offsets.astype(np.int64), self.min_tokens, self.anchors, self.anchor_lengths, self.anchor_bits,
                    self.anchor_mask, self.whole_max, self.pw, self.min_info, self.grams, self.grams_mask, self.shorts,
                    self.shorts_mask, self.dirs, self.dir_shift, self.slots, self.key_off, self.key_items,
                    len(self.item_nkeys))


def _bitmap(keys: np.ndarray) -> tuple[np.ndarray, np.uint64]:
    """A blocked Bloom filter of the keys, three bits in one word per key, 8-16 bits per key (a power
    of two of 64-bit words), and its word mask. Against one bit per key at 32 bits per key, as
    before: a similar false-positive rate (about 3%) in a quarter of the memory, which keeps the
    n-gram filter of the shipped registry in the L2 cache (1 MB): the scan of clean text, nearly all
    misses, is mostly these probes."""
    words = 1 << max(0, int(np.ceil(np.log2(max(len(keys), 1) / 8))))
    bitmap = np.zeros(words, np.uint64)
    _fill_bloom(bitmap, keys.astype(np.uint64), _U(words - 1))
    return bitmap, _U(words - 1)


@njit(cache=True)
def _fill_bloom(bitmap, keys, mask):
    for key in keys:
        bitmap[key & mask] |= _bloom_bits(key)


def items_csr(texts: list[str | None], hashed: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Token hashes of every item as one CSR: texts tokenised here, hash-only items as shipped."""
    encoded = [(t or "").encode("utf-8", "surrogatepass") for t in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
    hashes, token_off = tokenize_all(data, offsets)
    if not hashed:
        return hashes, token_off
    parts = [hashed[i] if i in hashed else hashes[token_off[i]:token_off[i + 1]] for i in range(len(texts))]
    return (np.concatenate(parts).astype(np.uint64) if parts else np.zeros(0, np.uint64),
            np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64))
