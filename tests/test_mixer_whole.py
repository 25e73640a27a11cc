"""Packing keeps documents whole (issue #46): every document of a real mixture (news, forum, code and
math texts from tests/fixtures) reassembles from its pieces in the shards, a document that fits a row
is never split, no metadata prefix crosses a row, a split document's pieces are long, and every token
a stage drew is in a row or counted as cropped."""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from assay.mixer.build import build
from assay.mixer.recipe import parse_mixture
from assay.mixer.tokenizer import Vocab, train_bpe
from assay.pipeline.dataset import write_table
from assay.pipeline.schema import make_docs
from assay.pipeline.tokens import LOSS, META, PAD, TokenDataset

from conftest import load_real_texts

MIN_PIECE = 32  # the shortest piece a split document may have (pack.MIN_PIECE), for rows of 128+ tokens
KINDS = {"aeb": ("news", "web"), "magic-html-article": ("news", "web"), "magic-html-forum": ("forum", "web"),
         "code": ("code", "code"), "math": ("math", "web"), "gsm8k": ("math", "web")}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("whole")
    taken: dict[str, int] = defaultdict(int)
    rows = []
    for k, (source, text) in enumerate(load_real_texts()):
        name, ctype = KINDS[source]
        if taken[name] >= {"code": 90, "math": 260}.get(name, 100):
            continue
        taken[name] += 1
        rows.append({"text": text, "source": name, "content_type": ctype, "lang": "en",
                     "url": f"https://{name}.example/{k}", "domain": f"{name}.example"})
    write_table(make_docs(rows), root / "docs", shards=2)
    train_bpe([r["text"] for r in rows], 1000).save(str(root / "tok.json"))
    src = lambda **kw: {"path": str(root / "docs"), **kw}  # noqa: E731
    data = {
        "name": "whole", "seed": 11, "max_epochs": 2, "lookahead": 128, "shard_tokens": 16384,
        "tokenizer": {"path": str(root / "tok.json")}, "meta": {"fields": ["content_type", "source", "domain"]},
        "sources": {"news": src(sources=["news"]), "forum": src(sources=["forum"]), "code": src(sources=["code"]),
                    "math": src(sources=["math"])},
        "stages": [
            {"id": "short", "tokens": 60000, "seq_len": 257, "mix": {"news": 3, "forum": 1, "code": 2, "math": 2},
             "fim_rate": 0.3},
            {"id": "wide", "tokens": 50000, "seq_len": 1024, "mix": {"news": 2, "code": 1, "math": 1}, "meta": False,
             "replay": {"share": 0.2, "from": ["short"]}},
            {"id": "cropped", "tokens": 20000, "seq_len": 128, "mix": {"news": 1, "math": 1}, "long_docs": "crop"},
            # a share smaller than the news articles it draws: the one it starts is cut where it ends
            {"id": "small", "tokens": 2000, "seq_len": 257, "mix": {"news": 1, "math": 3}},
        ],
    }
    mixture = parse_mixture(data, root / "mix.yaml")
    build(mixture, root / "out", log=lambda *_: None)
    return mixture, root / "out"


def _sequences(out) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """doc_id -> (prefix, text, FIM variant or None) tokens, from the tokenized stream."""
    ds = TokenDataset(next(p for p in out.iterdir() if p.name.startswith("tokenized-")))
    seqs = {}
    for index in ds.shard_indexes():
        stream = np.asarray(ds.tokens(index))
        for r in ds.docs(index).to_pylist():
            s, p = r["start"], r["prefix_length"]
            fim = stream[r["fim_start"]:r["fim_start"] + r["fim_length"]] if r["fim_start"] >= 0 else None
            seqs[r["doc_id"]] = (stream[s:s + p], stream[s + p:s + r["length"]], fim)
    return seqs


def _pieces(out, stage: str):
    ds = TokenDataset(out / stage)
    for index in ds.shard_indexes():
        tokens, mask = np.asarray(ds.tokens(index)), np.asarray(ds.mask(index))
        for row in ds.docs(index).to_pylist():
            span = slice(row["start"], row["start"] + row["length"])
            yield tokens[row["row"], span], mask[row["row"], span], row


def reassemble(out, stage, seqs, bos: int, eos: int) -> tuple[dict, list[str]]:
    """Check every piece of a stage against its document and chain each drawn copy of a document
    from its first piece to its EOS (or to a piece that records the rest as cropped). Returns the
    figures the stage's ledger must agree with and what broke the rules, by kind."""
    spec = json.loads((out / stage.id / "_manifest.json").read_text())["mix"]
    seq_len, meta = stage.seq_len, stage.meta
    groups: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    figures: dict[str, int] = defaultdict(int)
    problems: dict[str, list[str]] = defaultdict(list)
    for tokens, mask, row in _pieces(out, stage.id):
        key = (row["doc_id"], row["mix_source"], row["replay_of"], row["epoch"], row["fim"])
        groups[key][row["offset"]].append((tokens, mask, row))
        figures["all_pieces"] += 1
        figures["all_short_pieces"] += row["length"] < 32
    for (doc, _, _, _, fim), by_offset in groups.items():
        prefix, text, variant = seqs[doc]
        prefix = prefix if meta else prefix[:0]
        whole = np.concatenate([[bos], prefix, variant if fim else text, [eos]])
        p = len(prefix)
        for _ in range(len(by_offset.get(0, []))):
            offset, chain = 0, []
            while by_offset.get(offset):
                tokens, mask, row = by_offset[offset].pop()
                n = len(tokens)
                chain.append(n)
                if not np.array_equal(tokens, whole[offset:offset + n]):
                    problems["piece differs from its span of the document"].append(f"{doc}@{offset}")
                if offset == 0 and not (row["prefix_length"] == p and np.all(mask[1:1 + p] & META) and n > 1 + p):
                    problems["first piece without its whole prefix and a text token"].append(f"{doc} {n}")
                if offset and (row["prefix_length"] or np.any(mask & META)):
                    problems["prefix split across rows"].append(f"{doc}@{offset}")
                if offset:
                    figures["overlap"] += 1
                    if mask[0] & LOSS:
                        problems["overlap token trained on twice"].append(f"{doc}@{offset}")
                end = offset + n
                if end == len(whole) or row["cropped"]:
                    if row["cropped"] != len(whole) - end:
                        problems["cropped does not count the missing tail"].append(
                            f"{doc}: {end} of {len(whole)}, cropped {row['cropped']}")
                    figures["cropped"] += len(whole) - end
                    break
                offset = end - 1
            else:
                problems["tail missing, cropped 0"].append(f"{doc}: {offset + 1} of {len(whole)}")
                figures["cropped"] += len(whole) - offset - 1
            figures["documents"] += 1
            figures["tokens"] += len(whole)
            figures["pieces"] += len(chain)
            if stage.long_docs == "crop" or len(whole) <= seq_len:
                if len(chain) > 1:
                    problems["split though it fits a row"].append(f"{doc}: {len(whole)} tokens as {chain}")
                continue
            figures["split"] += 1
            # a split document: its middle pieces fill rows, its first nearly, none is under MIN_PIECE;
            # one cut where its slot's share ended may stop at any piece (of MIN_PIECE or more)
            cut = row["cropped"] > 0
            whole_pieces = chain[:-1] if cut else chain
            if not (all(n == seq_len for n in whole_pieces[1:-1]) and min(chain) >= MIN_PIECE
                    and (len(whole_pieces) < 2 or whole_pieces[0] >= seq_len - MIN_PIECE)):
                problems["split into short pieces"].append(f"{doc}: {chain}")
    left = [k[0] for k, v in groups.items() for pieces in v.values() for _ in pieces]
    if left:
        problems["pieces that chain to no first piece"] += left
    return figures, problems


def test_every_document_of_a_real_mixture_reassembles_from_its_pieces(built):
    mixture, out = built
    vocab = Vocab.load(out / "tokenizer.json")
    seqs = _sequences(out)
    for stage in mixture.stages:
        got, problems = reassemble(out, stage, seqs, vocab.ids["bos"], vocab.ids["eos"])
        fit = json.loads((out / stage.id / "_manifest.json").read_text())["mix"]["packing"]["best_fit"]
        print(stage.id, dict(got), {k: len(v) for k, v in problems.items()}, fit)
        assert not problems, (stage.id, {k: (len(v), v[:3]) for k, v in problems.items()})
        # the ledger sees every token drawn: in a row (once, overlap aside) or cropped
        assert fit["document_tokens"] == got["tokens"], (stage.id, fit, dict(got))
        assert fit["cropped_tokens"] + fit["cut_tokens"] == got["cropped"], (stage.id, fit, dict(got))
        assert fit["overlap_tokens"] == got["overlap"]
        assert fit["rows"] * stage.seq_len - fit["padded_tokens"] == got["tokens"] - got["cropped"] + got["overlap"]
        assert fit["padded_fraction"] <= 0.02 or stage.id == "small", (stage.id, fit)
        if stage.id == "small":
            assert got["cropped"] == fit["cut_tokens"] > 0 and fit["padded_fraction"] <= 0.05, (stage.id, fit)
        elif stage.long_docs == "split":
            assert got["split"] > 5 and fit["kept_fraction"] >= 0.99, (stage.id, fit)
