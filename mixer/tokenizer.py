"""Tokenizers (HF `tokenizers`): load a tokenizer.json or train a byte-level BPE on a sample.

Every mixture tokenizer carries the special tokens the mixer writes: BOS/EOS/PAD, the three FIM
sentinels and the two that bracket the metadata prefix. A loaded tokenizer that lacks some gets them
added, and the tokenizer actually used is saved beside the shards with its sha256.

Special tokens are never matched inside document text (`encode_special_tokens`): a web page that
contains the string "<|eos|>" is encoded as ordinary bytes, so decoding gives the page back.
"""
from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import xxhash
from pydantic import Field

from assay.pipeline.stage import GlobalStage, Params, register

from .bytebpe import ByteBPE

SPECIALS = {
    "bos": "<|bos|>", "eos": "<|eos|>", "pad": "<|pad|>",
    "fim_prefix": "<|fim_prefix|>", "fim_middle": "<|fim_middle|>", "fim_suffix": "<|fim_suffix|>",
    "meta_start": "<|meta|>", "meta_end": "<|/meta|>",
}


def train_bpe(texts: Iterable[str], vocab_size: int, specials: dict[str, str] = SPECIALS):
    """A byte-level BPE (lossless: every string round-trips) trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(dict.fromkeys(specials.values())),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def with_specials(tok, specials: dict[str, str]):
    """Add the special tokens a tokenizer lacks (ids appended after its vocabulary)."""
    from tokenizers import AddedToken

    missing = [t for t in dict.fromkeys(specials.values()) if tok.token_to_id(t) is None]
    if missing:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    return tok


def sample_texts(dataset_paths: Sequence[Path], n: int, seed: int) -> list[str]:
    """The `n` documents with the smallest hash of (seed, id) across the datasets: the same sample
    whatever the shard layout, holding only `n` texts at a time."""
    from assay.pipeline.dataset import Dataset

    heap: list[tuple[int, str, str]] = []  # (-hash, id, text): a max-heap of the n smallest
    for path in sorted(set(map(str, dataset_paths))):
        for batch in Dataset(path).iter_batches(columns=["id", "text"]):
            for doc_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                if not text:
                    continue
                h = xxhash.xxh64_intdigest(doc_id.encode(), seed=seed)
                item = (-h, doc_id, text)
                if len(heap) < n:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)
    return [text for _, _, text in sorted(heap, reverse=True)]


def file_sha256(path: Path) -> str:
    from assay.pipeline.storage import read_bytes

    return hashlib.sha256(read_bytes(path)).hexdigest()


@dataclass
class Vocab:
    """A loaded mixture tokenizer: the HF object, special ids, and UTF-8 bytes per token id."""

    tok: object
    path: Path
    ids: dict[str, int]
    vocab_size: int
    sha256: str
    token_bytes: np.ndarray = field(repr=False)
    fast: ByteBPE | None = field(default=None, repr=False)  # same ids as `tok`, less CPU (bytebpe.py)

    @classmethod
    def load(cls, path: str | Path, specials: dict[str, str] = SPECIALS) -> "Vocab":
        from tokenizers import Tokenizer

        from assay.pipeline.errors import UserError
        from assay.pipeline.storage import cached_copy

        path = cached_copy(path)  # a tokenizer on a store: its local copy
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception for a truncated or foreign file
            raise UserError(f"{path}: not a tokenizer file the tokenizers library can load ({exc}); "
                            "train one with `assay tokenizer train`") from None
        tok.encode_special_tokens = True  # text is text: never turn "<|eos|>" in a document into EOS
        ids = {}
        for name, token in specials.items():
            tid = tok.token_to_id(token)
            if tid is None:
                raise UserError(f"{path}: tokenizer lacks the special token {token!r} ({name})")
            ids[name] = tid
        size = tok.get_vocab_size(with_added_tokens=True)
        return cls(tok, path, ids, size, file_sha256(path), _token_bytes(tok, size), ByteBPE.for_tokenizer(tok))

    def encode(self, texts: list[str]) -> list[list[int]]:
        if self.fast is not None:
            return self.fast.encode(texts)
        # encode_batch_fast skips character offsets, which the mixer never uses.
        return [e.ids for e in self.tok.encode_batch_fast(texts, add_special_tokens=False)]

    def encode_flat(self, texts: list[str], chunk_chars: int = 1 << 18) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids in one int32 array and offsets (len(texts) + 1). Encoded a chunk of about
        `chunk_chars` characters (256K) at a time and turned into numpy at once, so a batch never holds
        its tokens as Python ints (~40 bytes each)."""
        pieces: list[np.ndarray] = []
        lengths = np.zeros(len(texts), np.int64)
        start = 0
        while start < len(texts):
            end, size = start, 0
            while end < len(texts) and (end == start or size + len(texts[end]) <= chunk_chars):
                size += len(texts[end])
                end += 1
            ids = self.encode(texts[start:end])
            lengths[start:end] = [len(x) for x in ids]
            pieces.append(np.fromiter(chain.from_iterable(ids), np.int32, count=int(lengths[start:end].sum())))
            start = end
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return (np.concatenate(pieces) if pieces else np.zeros(0, np.int32)), offsets

    def decode(self, ids: Iterable[int]) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)


def _token_bytes(tok, size: int) -> np.ndarray:
    """UTF-8 bytes each token stands for (0 for special tokens), so a cropped piece's `bytes` is exact
    without decoding it. A byte-level token's string has one character per byte."""
    from tokenizers import decoders

    out = np.zeros(size, np.int64)
    byte_level = isinstance(tok.decoder, decoders.ByteLevel)
    special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    for token, tid in tok.get_vocab(with_added_tokens=True).items():
        if tid in special:
            continue
        out[tid] = len(token) if byte_level else len(tok.decode([tid]).encode())
    return out


def make_tokenizer(spec, sources: Sequence[Path], seed: int):
    """The mixture's tokenizer: a byte-level BPE trained on a sample of `sources`, or the file at
    `spec.path`, with the mixer's special tokens added."""
    from tokenizers import Tokenizer

    specials = dict(SPECIALS, bos=spec.bos, eos=spec.eos, pad=spec.pad)
    if spec.train is not None:
        return train_bpe(sample_texts(sources, spec.train.sample_docs, seed), spec.train.vocab_size, specials)
    src = Path(spec.path)
    if not src.exists():
        from assay.pipeline.errors import UserError

        raise UserError(f"tokenizer {src}: no such file (train one with `assay tokenizer train`)")
    try:
        loaded = Tokenizer.from_file(str(src))
    except Exception as exc:  # a truncated or foreign file
        from assay.pipeline.errors import UserError

        raise UserError(f"tokenizer {src}: not a file the tokenizers library can load ({exc})") from None
    return with_specials(loaded, specials)


class TokenizerParams(Params):
    spec: dict = Field(description="The mixture's `tokenizer:` (path, or train settings; special token names)")
    path: str | None = Field(None, description="The tokenizer.json to load (the spec's path), if any")
    seed: int = Field(0, description="Seeds the training sample")


@register("mix.tokenizer")
class PrepareTokenizer(GlobalStage):
    """The tokenizer every stage of a mixture uses (`_artifacts/tokenizer.json`): trained on a sample of
    the mixture's source datasets (its inputs), or loaded from a file, with the special tokens added.
    Run by `assay mix build`."""

    Params = TokenizerParams
    output_kind = "artifact"
    command = False  # `assay mix build` runs it; `assay tokenizer train` makes one by hand
    reads = {"path": "file"}
    needs_inputs = False  # a loaded tokenizer reads only its file
    requires = ("tokenizers",)

    def output_schema(self, input_schemas=()):
        import pyarrow as pa

        return pa.schema([])

    def run_local(self, ctx) -> int:
        from assay.pipeline.dataset import write_artifact

        from .recipe import TokenizerSpec

        spec = TokenizerSpec.model_validate(dict(self.params.spec, path=self.params.path))
        sources = [ds.path for ds in ctx.inputs]
        write_artifact(ctx.out_root, TOKENIZER_JSON, make_tokenizer(spec, sources, self.params.seed).to_str())
        return 0


TOKENIZER_JSON = "tokenizer.json"
