"""mixer/bytebpe.py: the fast byte-level BPE path gives exactly the HF tokenizer's ids, and
`mix.tokenize` writes the same bytes with it as without it (issue #32: faster, outputs unchanged)."""
from __future__ import annotations

import hashlib
import pickle
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, normalizers, pre_tokenizers

from assay.mixer.bytebpe import SPLIT, ByteBPE, has_unassigned
from assay.mixer.tokenize import Tokenize
from assay.mixer.tokenizer import SPECIALS, Vocab, train_bpe
from assay.pipeline.runner import run_stage

sys.path.insert(0, str(Path(__file__).parent))
import mixer_corpus  # noqa: E402

# Texts where the split is easy to get wrong: contractions, runs of spaces before words, every kind of
# whitespace (the ASCII separators \x1c-\x1f, NBSP, U+2028, ideographic space), letters without
# spaces between words, digits of other scripts, combining marks, emoji with joiners, the special
# token strings as plain text, long symbol runs (past the piece cache's length) and empty text.
EDGE = [
    "", " ", "  \n\n\t ", "It's they're we've I'm you'll he'd 'S 'T", "a  b   c\t\td\r\ne\x0bf\x0cg",
    "x\x1cy\x1dz\x1e\x1f end", "nbsp\u00a0word\u2028line\u2029para\u3000wide\u200bzero",
    "日本語のテキストです。中文文本。한국어 텍스트", "٣٤٥ ١٢ ४५६ 12.5e-3 1,000,000", "e\u0301 n\u0303 क्षत्रिय",
    "👩‍👩‍👧‍👦 🎉🎉 ✓✗", "<|eos|> <|bos|>text<|pad|><|meta|>x<|/meta|>", "=" * 300 + "-" * 70 + "x" * 200,
    "   leading and trailing   ", "mixed123abc ___init___ `code` {\"json\": [1, 2]}", "\ud7ff\ue000\U0001f600",
    "a\u0558b \u0558\u05581 \U00016ea0x <|eos|>",  # letters Unicode assigned after Python 3.11's tables: the HF path
]


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> Path:
    docs = mixer_corpus.documents(seed=3)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_bpe([d["text"] for d in docs] + EDGE, 600).save(str(path))
    return path


def _hf_ids(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def test_split_agrees_with_the_hf_pre_tokenizer_on_every_code_point():
    """Each code point the fast path splits itself (all but those `unicodedata` does not know), in
    contexts where being a letter, a digit, whitespace or none of them changes the pieces; one
    disagreement anywhere changes the piece list."""
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    table = str.maketrans({i: c for i, c in enumerate(_alphabet())})
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and not has_unassigned(chr(c))]
    for start in range(0, len(points), 1 << 16):
        text = "".join(f"a{c} {c}{c}1 '{c}\n" for c in map(chr, points[start:start + (1 << 16)]))
        ours = [p.encode("utf-8").decode("latin-1").translate(table) for p in SPLIT.findall(text)]
        theirs = [p for p, _ in pre.pre_tokenize_str(text)]
        assert ours == theirs, f"split differs in code points from U+{points[start]:04X}"


def _alphabet() -> str:
    from assay.mixer.bytebpe import _byte_chars

    chars = _byte_chars()
    assert sorted(chars) == sorted(pre_tokenizers.ByteLevel.alphabet())  # GPT-2's byte alphabet, all 256
    return chars


def test_ids_equal_encode_batch(tok_path):
    tok = Tokenizer.from_file(str(tok_path))
    tok.encode_special_tokens = True
    fast = ByteBPE.for_tokenizer(tok)
    assert fast is not None
    texts = EDGE + [d["text"] for d in mixer_corpus.documents(seed=5)]
    expected = _hf_ids(tok, texts)
    assert fast.encode(texts) == expected
    assert fast.encode(texts) == expected  # again, from the piece cache
    flat, lengths = fast.encode_flat(texts)
    assert lengths.tolist() == [len(x) for x in expected]
    assert flat.tolist() == [i for ids in expected for i in ids]
    # pickled (a pickled HF Tokenizer loses encode_special_tokens): the fallback still reads "<|eos|>" as text
    assert pickle.loads(pickle.dumps(fast)).encode(texts) == expected


def test_other_tokenizer_shapes_keep_the_hf_path(tok_path):
    def loaded():
        tok = Tokenizer.from_file(str(tok_path))
        tok.encode_special_tokens = True
        return tok

    tok = loaded()
    tok.normalizer = normalizers.NFKC()
    assert ByteBPE.for_tokenizer(tok) is None
    tok = loaded()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    assert ByteBPE.for_tokenizer(tok) is None
    tok = loaded()
    tok.encode_special_tokens = False  # "<|eos|>" in text would become EOS: not a split-and-look-up
    assert ByteBPE.for_tokenizer(tok) is None
    tok = loaded()
    tok.add_tokens(["wordpiece"])  # a non-special added token is matched inside text
    assert ByteBPE.for_tokenizer(tok) is None
    assert Vocab.load(tok_path, SPECIALS).fast is not None


def _digests(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())
            if p.suffix in (".tokens", ".mask") or p.name.endswith(".docs.parquet")}


def test_tokenize_writes_the_same_bytes_with_and_without_the_fast_path(tok_path, tmp_path, monkeypatch):
    """The token streams, masks and doc indexes of `mix.tokenize` (meta prefixes, FIM variants and
    segments included) hash the same through bytebpe and through the HF encoder alone."""
    docs = mixer_corpus.documents(seed=7)
    docs += [dict(docs[0], text=t, segments=None, url=f"https://edge.example/{k}", id=f"edge-{k}")
             for k, t in enumerate(EDGE)]
    data = mixer_corpus.write_corpus(tmp_path / "docs", docs)
    params = {"tokenizer": str(tok_path), "meta_fields": ["content_type", "lang", "source"],
              "fim_content_types": ["code"], "seed": 1}
    run_stage(Tokenize(params, stage_id="tok"), [data], tmp_path / "fast", options={"workers": 1})
    monkeypatch.setattr(ByteBPE, "for_tokenizer", classmethod(lambda cls, tok: None))
    assert Vocab.load(tok_path, SPECIALS).fast is None
    run_stage(Tokenize(params, stage_id="tok"), [data], tmp_path / "hf", options={"workers": 1})
    fast, hf = _digests(tmp_path / "fast"), _digests(tmp_path / "hf")
    assert len(fast) == 6 and fast == hf
