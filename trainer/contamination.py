"""Does an arm's training data hold the task suite's items? The ablation's closing of the loop.

The arm's token dataset is read back as text (tokenizer.py: bytes, or the BPE file the dataset
carries), one document per doc id (a document split across rows is joined again, each later chunk's
one token of overlap dropped), and scanned with the decontamination stage's own matcher
(semantic/decontam: 13-token windows with digits masked, an item found when at least a third of
its windows occur in one document, an item shorter than a window when all of it does; the stage's
defaults) against the suite's items as scored. An item is looked for in three forms, any of which
flags it: its context alone (a quiz page's question with lettered options between the choices, a
short question, a reading passage), its context followed by the gold continuation (the source text a
HellaSwag or LAMBADA item was cut from), and the registry's form, context and options one a line
(tasks.Item.text). Checking the items themselves rather than the registry covers a user's own tasks
too; the registry (`assay decontam`) is where the training data should have been cleaned before.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator

import numpy as np

from assay.pipeline.errors import UserError

from .tasks import Suite, suite_items

EXAMPLES = 5


def documents(path: str) -> Iterator[tuple[str, str]]:
    """(doc id, text) of every document in a token dataset, in index order."""
    from .data import open_tokens
    from .tokenizer import for_dataset

    ds = open_tokens(path)
    layout = ds.layout.to_json()
    tok = for_dataset(path, layout)
    if tok is None:
        raise UserError(f"{path}: names no tokenizer file, so its text cannot be read back to check it")
    drop = np.array(sorted(tok.specials()), np.int64)
    for shard in ds.shard_indexes():
        tokens = np.asarray(ds.tokens(shard))
        docs = ds.docs(shard)
        if not docs.num_rows:
            continue
        rows = docs.column("row").to_numpy() if "row" in docs.column_names else np.zeros(docs.num_rows, np.int64)
        starts, lengths = docs.column("start").to_numpy(), docs.column("length").to_numpy()
        ids = docs.column("doc_id").to_pylist()
        current, parts = None, []
        for r, s, n, doc in zip(rows, starts, lengths, ids):
            piece = tokens[r, s:s + n] if tokens.ndim == 2 else tokens[s:s + n]
            if doc == current:
                piece = piece[1:]  # a continuation chunk starts with the previous chunk's last token
            elif parts:
                yield current, _text(tok, parts, drop)
                parts = []
            current = doc
            parts.append(piece)
        if parts:
            yield current, _text(tok, parts, drop)


def _text(tok, parts: list[np.ndarray], drop: np.ndarray) -> str:
    ids = np.concatenate(parts).astype(np.int64)
    return tok.decode(ids[~np.isin(ids, drop)])


def check(path: str, suite: Suite, batch: int = 2048) -> dict:
    """The suite items found in the token dataset at `path`: documents checked and flagged, items found
    per task, and a few examples (task, item, doc id, overlap)."""
    import pyarrow as pa

    from assay.semantic.decontam.index import NgramIndex, items_csr
    from assay.semantic.decontam.registry import Items
    from assay.semantic.decontam.stage import Decontam

    stage = Decontam({}, stage_id="contamination")  # its defaults: the matcher `assay decontam` uses
    p = stage.params
    items = Items()
    for task, it in suite_items(suite):
        for text in dict.fromkeys([it.context, f"{it.context} {it.choices[it.gold]}", it.text()]):
            items.add(task, it.id, text)
    hashes, offsets = items_csr(items.texts, items.token_hashes)
    stage.items = items
    stage.index = NgramIndex(hashes, offsets, p.ngram, p.min_tokens, p.max_items_per_gram, p.min_word_share)
    stage.matcher = None
    found: dict[str, set[str]] = defaultdict(set)
    examples, n_docs, flagged = [], 0, 0
    ids, texts = [], []

    def scan() -> None:
        nonlocal flagged
        for doc, hits in zip(ids, stage.find(pa.array(texts, pa.string()))):
            if not hits:
                continue
            flagged += 1
            for h in hits:
                found[h["benchmark"]].add(h["item"])
                if len(examples) < EXAMPLES:
                    examples.append({"task": h["benchmark"], "item": h["item"], "doc_id": doc, "kind": h["kind"],
                                     "overlap": h["overlap"]})
        ids.clear()
        texts.clear()

    for doc, text in documents(path):
        ids.append(doc)
        texts.append(text)
        n_docs += 1
        if len(texts) >= batch:
            scan()
    if texts:
        scan()
    return {"documents": n_docs, "contaminated_documents": flagged,
            "items": {task: len(v) for task, v in sorted(found.items())}, "examples": examples,
            "flagged": bool(flagged), "ngram": p.ngram, "min_overlap": p.min_overlap}
