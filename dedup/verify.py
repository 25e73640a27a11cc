"""Exact Jaccard of candidate pairs, for `verify_threshold`: the pairs' shingle sets rebuilt from
their texts by the compiled kernel (kernels.pair_jaccard), so only candidate documents are shingled
again and no shingle is stored between passes."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .hashing import single_array, string_buffers
from .kernels import pair_jaccard
from .tokens import lower, segment, tables


def pairs_jaccard(texts: pa.Array, ia: np.ndarray, ib: np.ndarray, ngram: int, segmented: bool = False) -> np.ndarray:
    """float64[m]: exact Jaccard of the shingle sets of texts[ia[i]] and texts[ib[i]], equal to
    `shingles.jaccard` over `shingles.shingle_sets`. Pairs sorted by ib run fastest (a document in
    consecutive pairs is shingled once)."""
    ia, ib = np.asarray(ia, np.int64), np.asarray(ib, np.int64)
    texts = single_array(texts)
    if segmented:  # only the documents in pairs are segmented
        docs, inverse = np.unique(np.concatenate([ia, ib]), return_inverse=True)
        texts, ia, ib = segment(texts.take(pa.array(docs)), True), inverse[: len(ia)], inverse[len(ia) :]
    tables_ = tables(segmented)
    offsets, data = string_buffers(texts)
    jac, compat = pair_jaccard(data, offsets, *tables_, ngram, ia, ib)
    redo = np.flatnonzero(compat[ia] | compat[ib]) if len(ia) else ia
    if len(redo):  # pairs with a text holding code points NFKC changes: normalised, as in
        # text_signatures, and shingled again (lower-casing first changes nothing for the others)
        docs, inverse = np.unique(np.concatenate([ia[redo], ib[redo]]), return_inverse=True)
        offsets, data = string_buffers(lower(texts.take(pa.array(docs)), np.flatnonzero(compat[docs])))
        jac[redo], _ = pair_jaccard(data, offsets, *tables_, ngram, inverse[: len(redo)], inverse[len(redo) :])
    return jac
