"""fastText supervised prediction compiled together with Assay's preprocessing: the text column's UTF-8
bytes in, label probabilities out, in one pass without the GIL and without a Python string per
document.

Calling fastText's `predict` means building a Python `str` per document, which the extension then
re-reads, hashes word by word and looks up in its dictionary. Here the tokens that
kernels.fasttext_tokens writes are hashed and looked up as they are read, the quantized input rows
are decoded from the model's own codebooks, and the output layer and softmax run on the averaged
vector: the same arithmetic as fastText (same hashes, word n-gram buckets, pruning map, product
quantizer, float32 sums), checked against `predict` in the tests. Training stays with fasttext_new.

Reads fastText's binary format (version 12) for supervised softmax models with word n-grams and no
character n-grams (`maxn` 0), quantized (.ftz) or not (.bin): what `assay quality train` makes. Any
other model is refused with a one-line error, and ftmodel falls back to fastText's own predict.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
from numba import njit

from assay.filters.kernels import _fasttext_tokens, _limit, _worst_bytes, ascii_lower, lower_table, token_kinds, utf8_buffers

MAGIC, VERSION = 793712314, 12
SOFTMAX, SUPERVISED = 3, 3
EOS = b"</s>"
KSUB = 256  # centroids per sub-quantizer


class UnsupportedModel(ValueError):
    pass


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple:
        out = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return out

    def array(self, dtype, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos).copy()
        self.pos += out.nbytes
        return out

    def cstring(self) -> bytes:
        end = self.data.index(b"\0", self.pos)
        out = self.data[self.pos:end]
        self.pos = end + 1
        return out


class CompiledModel:
    """A supervised fastText model as arrays for `_predict`."""

    def __init__(self, path: str | Path):
        r = _Reader(Path(path).read_bytes())
        magic, version = r.take("ii")
        if magic != MAGIC or version != VERSION:
            raise UnsupportedModel(f"{path}: not a fastText version-12 model")
        (dim, _ws, _epoch, _min_count, _neg, self.word_ngrams, loss, model, self.bucket, _minn, maxn, _lr_rate,
         _t) = r.take("12id")
        if loss != SOFTMAX or model != SUPERVISED or maxn > 0:
            raise UnsupportedModel(f"{path}: compiled prediction covers supervised softmax models without "
                                   "character n-grams")
        size, self.nwords, nlabels = r.take("iii")
        _ntokens, prune_size = r.take("qq")
        words: list[bytes] = []
        labels: list[str] = []
        for _ in range(size):
            word = r.cstring()
            _count, kind = r.take("qb")
            (words if kind == 0 else labels).append(word if kind == 0 else word.decode())
        if len(words) != self.nwords or len(labels) != nlabels:
            raise UnsupportedModel(f"{path}: words and labels out of order")
        self.labels = labels
        pairs = r.array(np.int32, 2 * prune_size).reshape(-1, 2) if prune_size > 0 else np.zeros((0, 2), np.int32)
        # bucket -> row after nwords, -1: pruned away; no pruning (-1): every bucket is its own row
        self.prune = np.full(self.bucket, -1, dtype=np.int32) if prune_size >= 0 else np.arange(self.bucket, dtype=np.int32)
        self.prune[pairs[:, 0]] = pairs[:, 1]
        (quantized,) = r.take("?")
        if quantized:  # decoded once to 4 bytes a weight (a few MB): rows read without the codebooks
            (qnorm,) = r.take("?")
            rows, _cols = r.take("qq")
            (codesize,) = r.take("i")
            codes = r.array(np.uint8, codesize)
            pq_dim, nsubq, dsub, lastdsub = r.take("iiii")
            centroids = r.array(np.float32, pq_dim * KSUB)
            norm_codes, norm_centroids = np.zeros(0, np.uint8), np.ones(KSUB, np.float32)
            if qnorm:
                norm_codes = r.array(np.uint8, rows)
                norm_dim, _, _, _ = r.take("iiii")
                norm_centroids = r.array(np.float32, norm_dim * KSUB)
            self.dense = _decode_rows(rows, dim, codes, centroids, nsubq, dsub, lastdsub, norm_codes, norm_centroids)
        else:
            rows, cols = r.take("qq")
            self.dense = r.array(np.float32, rows * cols).reshape(rows, cols)
        (qout,) = r.take("?")
        if qout:
            raise UnsupportedModel(f"{path}: a quantized output layer is not covered")
        out_rows, out_cols = r.take("qq")
        self.output = r.array(np.float32, out_rows * out_cols).reshape(out_rows, out_cols)
        self._dictionary(words)

    def _dictionary(self, words: list[bytes]) -> None:
        """Open addressing on the FNV hash (bytes compared on a hit) over the words, "</s>" included."""
        self.word_bytes = np.frombuffer(b"".join(words) or b"\0", dtype=np.uint8)
        self.word_offsets = np.concatenate(([0], np.cumsum([len(w) for w in words]))).astype(np.int64)
        size = 1 << max(4, int(2 * len(words) - 1).bit_length())
        self.table = np.full(size, -1, dtype=np.int32)
        self.table_hash = np.zeros(size, dtype=np.uint32)
        _fill_table(self.word_bytes, self.word_offsets, self.table, self.table_hash)
        eos = np.frombuffer(EOS, dtype=np.uint8)
        self.eos_hash = _fnv1a(eos, 0, len(eos))
        self.eos_id = _word_id(eos, 0, len(eos), self.eos_hash, self.table, self.table_hash, self.word_bytes,
                               self.word_offsets)

    def probabilities(self, text: pa.Array, max_chars: int | None, scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([docs, labels] as fastText's predict with k=-1 reports them: softmax + 1e-5, the scratch
        buffer to keep)."""
        data, offsets = utf8_buffers(text)
        limit = _limit(offsets, max_chars)
        worst = _worst_bytes(int(np.diff(offsets).max(initial=0)), limit)
        if len(scratch) < worst:
            scratch = np.empty(worst, dtype=np.uint8)
        out = np.zeros((len(text), len(self.labels)), dtype=np.float64)
        _predict(data, offsets, token_kinds(True), lower_table(), ascii_lower(), limit, scratch,
                 self.table, self.table_hash, self.word_bytes, self.word_offsets, self.nwords, self.eos_hash, self.eos_id,
                 self.word_ngrams, self.bucket, self.prune, self.dense, self.output, out)
        return out, scratch


@njit(cache=True)
def _decode_rows(rows, dim, codes, centroids, nsubq, dsub, lastdsub, norm_codes, norm_centroids):
    """Every input row of a product-quantized matrix as fastText adds it to a vector: norm * centroid,
    each product rounded to float32."""
    out = np.zeros((rows, dim), dtype=np.float32)
    for row in range(rows):
        norm = norm_centroids[norm_codes[row]] if len(norm_codes) else np.float32(1.0)
        for m in range(nsubq):
            c = np.int64(codes[row * nsubq + m])
            if m == nsubq - 1:
                start, width = m * KSUB * dsub + c * lastdsub, lastdsub
            else:
                start, width = (m * KSUB + c) * dsub, dsub
            for j in range(width):
                out[row, m * dsub + j] = norm * centroids[start + j]
    return out


@njit(cache=True, inline="always")
def _fnv1a(buf, a, b):
    """fastText's word hash of buf[a:b]: 32-bit FNV-1a over the bytes taken as signed chars."""
    h = np.uint64(2166136261)
    for j in range(a, b):
        byte = np.uint64(buf[j])
        if byte >= 128:
            byte |= np.uint64(0xFFFFFF00)
        h = ((h ^ byte) * np.uint64(16777619)) & np.uint64(0xFFFFFFFF)
    return h


@njit(cache=True)
def _fill_table(word_bytes, word_offsets, table, table_hash):
    mask = len(table) - 1
    for wid in range(len(word_offsets) - 1):
        h = _fnv1a(word_bytes, word_offsets[wid], word_offsets[wid + 1])
        slot = np.int64(h & np.uint64(mask))
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = wid
        table_hash[slot] = np.uint32(h)


@njit(cache=True, inline="always")
def _word_id(buf, a, b, h, table, table_hash, word_bytes, word_offsets):
    """The word id of buf[a:b] (FNV hash h), -1 when it is not in the dictionary."""
    mask = len(table) - 1
    slot = np.int64(h & np.uint64(mask))
    while table[slot] >= 0:
        wid = table[slot]
        if np.uint64(table_hash[slot]) == h:
            lo = word_offsets[wid]
            if word_offsets[wid + 1] - lo == b - a:
                same = True
                for j in range(b - a):
                    if word_bytes[lo + j] != buf[a + j]:
                        same = False
                        break
                if same:
                    return wid
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def _predict(data, offsets, kinds, lower, low, max_chars, scratch, table, table_hash, word_bytes, word_offsets, nwords,
             eos_hash, eos_id, word_ngrams, bucket, prune, dense, output, out):
    """Per document: its tokens (kernels._fasttext_tokens into `scratch`) and "</s>", as fastText reads
    a line: in-vocabulary words add their row, every word (known or not) its hash to the word n-grams,
    whose buckets add their row unless pruned; the rows' mean through the output layer and softmax.
    Rows without a single known row stay zero (fastText predicts nothing for them)."""
    dim = output.shape[1]
    n_labels = output.shape[0]
    hidden = np.zeros(dim, dtype=np.float32)
    logits = np.zeros(n_labels, dtype=np.float32)
    ids = np.empty(1024, dtype=np.int64)
    hashes = np.empty(1024, dtype=np.int64)  # fastText keeps word hashes as int32, widened with their sign
    doc_offsets = np.zeros(2, dtype=np.int64)
    for d in range(len(offsets) - 1):
        _fasttext_tokens(data, offsets[d:d + 2], kinds, lower, low, max_chars, doc_offsets, scratch)
        end = doc_offsets[1]
        n = 0
        i = 0
        eos = False
        while not eos:
            if i < end:  # the token scratch[i:j]
                j = i
                while j < end and scratch[j] != 32:
                    j += 1
                h = _fnv1a(scratch, i, j)
                wid = _word_id(scratch, i, j, h, table, table_hash, word_bytes, word_offsets)
                i = j + 1
            else:  # the end of line fastText reads after every text
                h = eos_hash
                wid = eos_id
                eos = True
            if wid >= nwords:  # a label in the text: not a word
                continue
            if n == len(ids):
                ids = np.concatenate((ids, np.empty(n, dtype=np.int64)))
                hashes = np.concatenate((hashes, np.empty(n, dtype=np.int64)))
            ids[n] = wid
            hashes[n] = np.int64(h) - 4294967296 if h >= np.uint64(2147483648) else np.int64(h)
            n += 1
        hidden[:] = 0
        count = 0
        for t in range(n):
            if ids[t] >= 0:
                r = ids[t]
                for k in range(dim):
                    hidden[k] += dense[r, k]
                count += 1
        for a in range(n):  # word n-grams
            g = np.uint64(hashes[a])
            for b in range(a + 1, min(n, a + word_ngrams)):
                g = g * np.uint64(116049371) + np.uint64(hashes[b])
                row = prune[np.int64(g % np.uint64(bucket))]
                if row >= 0:
                    r = nwords + np.int64(row)
                    for k in range(dim):
                        hidden[k] += dense[r, k]
                    count += 1
        if count == 0:
            continue
        scale = np.float32(1.0) / np.float32(count)
        for k in range(dim):
            hidden[k] *= scale
        top = np.float32(-np.inf)
        for lab in range(n_labels):
            s = np.float32(0.0)
            for k in range(dim):
                s += output[lab, k] * hidden[k]
            logits[lab] = s
            top = max(top, s)
        z = np.float32(0.0)
        for lab in range(n_labels):
            logits[lab] = np.exp(logits[lab] - top)
            z += logits[lab]
        for lab in range(n_labels):  # as predict reports it: exp(log(p + 1e-5))
            out[d, lab] = np.exp(np.log(logits[lab] / z + np.float32(1e-5)))
