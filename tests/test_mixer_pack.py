"""Packing: best fit against greedy on realistic lengths, the waste accounting, and the CLI around it."""
from __future__ import annotations

import numpy as np
import pytest

from assay.mixer.pack import Greedy, Waste, best_fit
from assay.pipeline.cli import main

from mixer_corpus import documents, write_corpus


def _lengths(n: int, seed: int = 0) -> list[int]:
    # web-like document lengths in tokens: log-normal, median ~450, a long tail past the row length
    rng = np.random.default_rng(seed)
    return [int(x) + 2 for x in rng.lognormal(np.log(450), 1.1, n)]


@pytest.mark.parametrize("seq_len", [1024, 2048])
def test_best_fit_wastes_less_than_greedy(seq_len):
    lengths = _lengths(20_000)
    fit = Waste()
    rows = list(best_fit(lengths, seq_len, 512, lambda n: n, fit))
    greedy = Greedy(seq_len)
    for n in lengths:
        greedy.add(n)
    g = greedy.finish()
    # every document placed once, every row exactly full once padding is counted
    assert sum(len(r) for r in rows) == len(lengths) == fit.documents
    assert all(sum(t for _, t in r) <= seq_len for r in rows)
    assert sum(t for r in rows for _, t in r) + fit.padded == len(rows) * seq_len == fit.rows * seq_len
    assert fit.tokens == g.tokens == sum(lengths)
    assert fit.cropped + fit.padded < 0.8 * (g.cropped + g.padded)
    unavoidable = sum(max(0, n - seq_len) for n in lengths)  # BOS-aligned rows must crop these tails
    assert fit.cropped >= unavoidable
    print(f"seq_len {seq_len}: best fit {fit.to_json(seq_len)['waste_fraction']:.2%}, "
          f"greedy {g.to_json(seq_len)['waste_fraction']:.2%}")


@pytest.mark.parametrize("seq_len", [257, 4097])
def test_splitting_keeps_every_token_and_pads_only_the_end(seq_len):
    """Documents continue across rows as chunks (one token of overlap each): nothing cropped, and
    padding only where the stream runs out."""
    lengths = _lengths(5_000)
    fit = Waste()
    split = lambda n, k: (k, n - k + 1)  # noqa: E731  (items are lengths here)
    rows = list(best_fit(lengths, seq_len, 512, lambda n: n, fit, split=split))
    assert fit.cropped == 0 and fit.tokens == sum(lengths)
    placed = sum(t for r in rows for _, t in r)
    assert placed == sum(lengths) + fit.overlap and placed + fit.padded == len(rows) * seq_len
    assert all(sum(t for _, t in r) >= seq_len - 1 for r in rows[:-3])  # full but the last few (a room of 1 is padded)
    assert fit.to_json(seq_len)["padded_fraction"] < 0.02 and fit.to_json(seq_len)["kept_fraction"] == 1.0


def test_best_fit_is_deterministic_and_prefers_the_longest_that_fits():
    rows = list(best_fit([5, 3, 8, 2, 6, 1], 10, 10, lambda n: n))
    assert rows == list(best_fit([5, 3, 8, 2, 6, 1], 10, 10, lambda n: n))
    assert [[n for n, _ in r] for r in rows] == [[8, 2], [6, 3, 1], [5]]


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
