"""Packing: best fit against greedy on realistic lengths, the waste accounting, and the CLI around it."""
from __future__ import annotations

import numpy as np
import pytest

from assay.mixer.pack import MIN_PIECE, Greedy, Waste, best_fit, chunked_length, chunks, min_piece
from assay.pipeline.cli import main

from mixer_corpus import documents, write_corpus


def _lengths(n: int, seed: int = 0) -> list[int]:
    # web-like document lengths in tokens: log-normal, median ~450, a long tail past the row length
    rng = np.random.default_rng(seed)
    return [int(x) + 2 for x in rng.lognormal(np.log(450), 1.1, n)]


def _pieces(lengths: list[int], seq_len: int) -> list[int]:
    return [n for length in lengths for _, n in chunks(length, seq_len)]


@pytest.mark.parametrize("seq_len", [1024, 2048])
def test_best_fit_wastes_less_than_greedy(seq_len):
    """Cropping long documents to a row (long_docs: crop), best fit packs the rest whole and pads
    less than greedy crops and pads."""
    lengths = _lengths(20_000)
    fit = Waste()
    rows = list(best_fit([min(n, seq_len) for n in lengths], seq_len, 512, lambda n: n, fit))
    greedy = Greedy(seq_len)
    for n in lengths:
        greedy.add(n)
    g = greedy.finish()
    assert sum(len(r) for r in rows) == len(lengths)
    assert all(sum(t for _, t in r) <= seq_len for r in rows)
    assert sum(t for r in rows for _, t in r) + fit.padded == len(rows) * seq_len == fit.rows * seq_len
    cropped = sum(max(0, n - seq_len) for n in lengths)  # BOS-aligned rows must crop these tails
    assert cropped + fit.padded < 0.8 * (g.cropped + g.padded)
    assert fit.padded < 0.01 * len(rows) * seq_len


@pytest.mark.parametrize("seq_len", [257, 4097])
def test_pieces_keep_every_token_and_fit_whole(seq_len):
    """Documents longer than a row become whole rows and a rest (one token of overlap each); every
    piece goes into a row whole, no document that fits a row is split, little is padded."""
    lengths = _lengths(5_000)
    pieces = _pieces(lengths, seq_len)
    fit = Waste()
    rows = list(best_fit(pieces, seq_len, 512, lambda n: n, fit))
    assert sorted(t for r in rows for _, t in r) == sorted(pieces)  # each piece whole, once
    assert len(pieces) - len(lengths) == sum(max(0, -(-(n - seq_len) // (seq_len - 1))) for n in lengths)
    assert sum(pieces) == sum(lengths) + len(pieces) - len(lengths)
    assert fit.padded / (fit.rows * seq_len) < 0.01
    assert min(pieces) >= 3 and sum(n < MIN_PIECE for n in pieces) == sum(n < MIN_PIECE for n in lengths)


def test_chunks_fill_rows_and_give_the_last_piece_its_minimum():
    for length in range(1, 2000):
        for seq_len, head in ((16, 1), (128, 1), (257, 30), (257, 250)):
            parts = chunks(length, seq_len, head)
            assert parts[0][0] == 0 and parts[-1][0] + parts[-1][1] == length
            assert all(b[0] == a[0] + a[1] - 1 for a, b in zip(parts, parts[1:]))  # one token of overlap
            assert sum(n for _, n in parts) == chunked_length(length, seq_len)
            if len(parts) == 1:
                assert length <= seq_len
                continue
            assert all(n == seq_len for _, n in parts[1:-1]) and parts[0][1] >= head
            if seq_len - min_piece(seq_len) >= head:
                assert min(n for _, n in parts) >= min_piece(seq_len), (length, seq_len, parts)
    assert chunks(300, 257) == [(0, 257), (256, 44)]
    assert chunks(260, 257) == [(0, 229), (228, 32)]  # a 4-token rest would be too short: the first gives 28


def test_best_fit_is_deterministic_and_tops_up_the_last_rows():
    rows = list(best_fit([5, 3, 8, 2, 6, 1], 10, 10, lambda n: n))
    assert rows == list(best_fit([5, 3, 8, 2, 6, 1], 10, 10, lambda n: n))
    assert [[n for n, _ in r] for r in rows] == [[8, 2], [6, 3, 1], [5]]  # longest first, each into the tightest row
    offered = iter([4, 1])
    waste = Waste()
    rows = list(best_fit([5, 3, 8, 2, 6, 1], 10, 10, lambda n: n, waste, lambda room: next(offered, None)))
    assert [[n for n, _ in r] for r in rows] == [[8, 2], [6, 3, 1], [5, 4, 1]] and waste.padded == 0
    with pytest.raises(ValueError, match="cannot go into rows of 10"):
        list(best_fit([11], 10, 10, lambda n: n))


def test_tokenizer_train_and_inspect_commands(tmp_path, capsys):
    docs = documents(n_web=30, n_code=10, n_pr=10, n_chat=10)
    write_corpus(tmp_path / "docs", docs, shards=1)
    tok = tmp_path / "tok.json"
    main(["tokenizer", "train", str(tmp_path / "docs"), "--out", str(tok), "--vocab-size", "400"])
    assert "byte-level BPE, vocab 400" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:  # never overwrite a file without --force
        main(["tokenizer", "train", str(tmp_path / "docs"), "--out", str(tok)])
    assert exit_.value.code == 2
    mix = tmp_path / "mix.yaml"
    mix.write_text(f"""
name: cli
tokenizer: {{path: {tok}}}
meta: null
max_epochs: 5
sources: {{all: {{path: {tmp_path / 'docs'}}}}}
stages:
  - {{id: only, tokens: 3000, seq_len: 128, mix: {{all: 1}}, mask_roles: [user]}}
""")
    main(["mix", "build", str(mix), str(tmp_path / "out")])
    capsys.readouterr()
    main(["mix", "inspect", str(tmp_path / "out"), "-n", "1"])
    shown = capsys.readouterr().out
    assert "only: 1 shard(s)" in shown and "realized" in shown and "row 0" in shown and "<|bos|>" in shown
    assert (tmp_path / "out" / "report.html").read_text().count("<h2>Mixtures</h2>") == 1
