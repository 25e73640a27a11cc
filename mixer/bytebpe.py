"""A faster, exact encoder for byte-level BPE tokenizers (GPT-2 style, the kind `train_bpe` makes).

Profiling `mix.tokenize` (issue #32) showed the HF tokenizer spending most of its time before the BPE
model runs: splitting text with its regex and building Encoding objects. For a tokenizer with no
normalizer and a ByteLevel pre-tokenizer (regex on, no prefix space), the ids of a text are the ids
of its regex pieces, back to back, and a piece's ids never depend on its neighbours. So the text is
split with the same pattern in the `regex` module, and each distinct piece goes through the HF BPE
model once and is remembered: ~3x less CPU per token than `encode_batch`, and the same ids.

Same ids rests on two engines agreeing on `\\p{L}`, `\\p{N}` and `\\s` for every code point. They
differ on characters newer Unicode versions assigned (the `regex` module's tables are newer than
the Oniguruma ones in `tokenizers`), so a text holding any character this Python's `unicodedata`
calls unassigned goes to the HF encoder instead; tests/test_mixer_bytebpe.py checks every other code
point against the HF pre-tokenizer. Every other tokenizer shape keeps the HF path (`for_tokenizer`
returns None).
"""
from __future__ import annotations

import unicodedata
from itertools import chain

import numpy as np
import regex

# The GPT-2 split the HF ByteLevel pre-tokenizer applies (tokenizers' byte_level.rs:
# 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+), with words and numbers
# tried first (~12% faster): no text can match both them and a contraction at one position.
SPLIT = regex.compile(r""" ?\p{L}+| ?\p{N}+|'(?:[stmd]|re|ve|ll)| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
MAX_CACHED = 1 << 18        # distinct pieces remembered (~40 MB at most); the cache starts over when full
MAX_CACHED_CHARS = 64       # longer pieces (runs of symbols, long numbers) are encoded each time


def _byte_chars() -> str:
    """The printable character GPT-2's byte-level alphabet uses for each byte 0..255."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {b: chr(b) for b in kept}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return "".join(chars[b] for b in range(256))


BYTE_TABLE = str.maketrans({i: c for i, c in enumerate(_byte_chars())})


KNOWN = set(map(chr, range(128)))  # characters seen to be assigned in `unicodedata` (grows)


def has_unassigned(text: str) -> bool:
    """Does `text` hold a character `unicodedata` does not know? (its distinct characters only)"""
    if text.isascii():
        return False
    new = set(text) - KNOWN
    if any(unicodedata.category(c) == "Cn" for c in new):
        return True
    KNOWN.update(new)
    return False


class PieceIds(dict):
    """piece -> tuple of ids, filled by the HF BPE model on first sight."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def __missing__(self, piece: str) -> tuple[int, ...]:
        # bytes as latin-1 code points, then GPT-2's byte alphabet: what the ByteLevel step hands the model
        mapped = piece.encode("utf-8").decode("latin-1").translate(BYTE_TABLE)
        ids = tuple(t.id for t in self.model.tokenize(mapped))
        if len(piece) <= MAX_CACHED_CHARS:
            if len(self) >= MAX_CACHED:
                self.clear()
            self[piece] = ids
        return ids


class ByteBPE:
    """Encodes like `tok.encode_batch(..., add_special_tokens=False)` for a byte-level BPE."""

    def __init__(self, tok):
        self.tok = tok
        self.pieces = PieceIds(tok.model)

    def __setstate__(self, state: dict) -> None:
        # a pickled HF Tokenizer comes back with encode_special_tokens off (tokenizers 0.23)
        self.__dict__.update(state)
        self.tok.encode_special_tokens = True

    @classmethod
    def for_tokenizer(cls, tok) -> "ByteBPE | None":
        """The fast encoder when `tok` has the shape it reproduces exactly, else None. Read from the
        tokenizer's parts, not its JSON: serialising and parsing the whole vocabulary cost more CPU
        than tokenizing a small dataset (issue #46)."""
        from tokenizers import models, pre_tokenizers

        pre = tok.pre_tokenizer
        plain_pre = (isinstance(pre, pre_tokenizers.ByteLevel) and pre.use_regex and not pre.add_prefix_space)
        # added tokens are only left inside text when they are special and encode_special_tokens is on
        added_inert = all(a.special for a in tok.get_added_tokens_decoder().values()) and tok.encode_special_tokens
        if (tok.normalizer is None and plain_pre and isinstance(tok.model, models.BPE)
                and not tok.model.dropout and added_inert):
            return cls(tok)
        return None

    def encode(self, texts: list[str]) -> list[list[int]]:
        get, split = self.pieces.__getitem__, SPLIT.findall
        out = [list(chain.from_iterable(map(get, split(t)))) for t in texts]
        newer = [i for i, t in enumerate(texts) if has_unassigned(t)]
        if newer:  # characters the two regex engines may class differently: the HF encoder decides
            for i, e in zip(newer, self.tok.encode_batch_fast([texts[i] for i in newer], add_special_tokens=False)):
                out[i] = e.ids
        return out

    def encode_flat(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids in one int32 array, and each text's token count."""
        ids = self.encode(texts)
        lengths = np.fromiter(map(len, ids), np.int64, count=len(ids))
        return np.fromiter(chain.from_iterable(ids), np.int32, count=int(lengths.sum())), lengths
