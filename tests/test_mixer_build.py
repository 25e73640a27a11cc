"""A three-stage mixture over hand-built documents: shares, epochs, replay, round trip, masks, ledger."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from assay.mixer.build import build, plan, tokenizer_path
from assay.mixer.plan import PlanError
from assay.mixer.recipe import parse_mixture
from assay.mixer.tokenize import _fim_pieces
from assay.mixer.tokenizer import Vocab, train_bpe
from assay.pipeline.dataset import Dataset
from assay.pipeline.schema import doc_id
from assay.pipeline.tokens import LOSS, META, PAD, TokenDataset, loss_targets

from mixer_corpus import documents, mixture_data, shard_files, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixer")
    docs = documents()
    write_corpus(root / "docs", docs)
    tok = train_bpe([d["text"] for d in docs], 600)
    tok.save(str(root / "tokenizer.json"))
    return root, {d["id"]: d for d in docs}


@pytest.fixture(scope="module")
def built(corpus):
    root, docs = corpus
    data = mixture_data(root / "docs", root / "tokenizer.json")
    mixture = parse_mixture(data, root / "mix.yaml")
    out = root / "out"
    notes = []
    build(mixture, out, log=notes.append)
    return mixture, out, docs, notes


def _manifest(out, stage):
    return json.loads((out / stage / "_manifest.json").read_text())


def _pieces(out, stage):
    """(tokens, mask, doc index row) of every piece of a stage."""
    ds = TokenDataset(out / stage)
    for index in ds.shard_indexes():
        tokens, mask = ds.tokens(index), ds.mask(index)
        for row in ds.docs(index).to_pylist():
            span = slice(row["start"], row["start"] + row["length"])
            yield np.asarray(tokens[row["row"], span]), np.asarray(mask[row["row"], span]), row


def test_shares_within_one_percent_and_epochs_within_caps(built):
    mixture, out, _, notes = built
    assert not [n for n in notes if n.startswith("note:")]  # the planner saw no reason to miss 1%
    for stage in mixture.stages:
        mix = _manifest(out, stage.id)["mix"]
        assert mix["tokens"] >= stage.tokens
        assert abs(sum(s["share"] for s in mix["slots"]) - 1) < 1e-9
        for slot in mix["slots"]:
            assert abs(slot["realized_share"] - slot["share"]) <= 0.01, (stage.id, slot)
            assert slot["realized_epochs"] <= slot["max_epochs"] + 1e-9
        assert sum(s["realized_epochs"] > 1 for s in mix["slots"]) >= (1 if stage.id == "broad" else 0)


def test_replay_draws_only_from_earlier_stages_sources(built):
    mixture, out, docs, _ = built
    for stage in mixture.stages:
        allowed = set(stage.replay.from_) if stage.replay else set()
        replayed = 0
        for _, _, row in _pieces(out, stage.id):
            origin = row["replay_of"]
            if origin is None:
                assert row["mix_source"] in stage.mix
                continue
            replayed += 1
            assert origin in allowed
            earlier = mixture.stage(origin)
            assert row["mix_source"] in earlier.mix
            doc = docs[row["doc_id"]]
            # drawn under the replayed stage's rules: broad keeps top web tiers and code_hits <= 6
            if origin == "broad":
                assert doc.get("tier") in (None, "High", "Medium-High", "Medium")
                assert (doc.get("code_hits") or 0) <= 6
        assert (replayed > 0) == bool(allowed)


def _sequences(out) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """doc_id -> (prefix tokens, text tokens, FIM variant or None), read back from the tokenized stream."""
    tokenized = next(p for p in out.iterdir() if p.name.startswith("tokenized-"))
    ds = TokenDataset(tokenized)
    seqs = {}
    for index in ds.shard_indexes():
        stream = np.asarray(ds.tokens(index))
        for r in ds.docs(index).to_pylist():
            s, p = r["start"], r["prefix_length"]
            fim = stream[r["fim_start"]:r["fim_start"] + r["fim_length"]] if r["fim_start"] >= 0 else None
            seqs[r["doc_id"]] = (stream[s:s + p], stream[s + p:s + r["length"]], fim)
    return seqs


def test_round_trip_gives_back_the_documents(built):
    mixture, out, docs, _ = built
    seed = mixture.seed
    vocab = Vocab.load(tokenizer_path(out))
    sp = {v: k for k, v in vocab.ids.items()}
    seqs = _sequences(out)
    seen_fim = seen_plain = seen_chunks = 0
    for stage in ("broad", "anneal", "chat"):
        meta = mixture.stage(stage).meta
        for tokens, mask, row in _pieces(out, stage):
            doc = docs[row["doc_id"]]
            prefix, text, fim = seqs[row["doc_id"]]
            # every piece is exactly its span of the document's sequence BOS, prefix, text or FIM, EOS
            whole = np.concatenate([[vocab.ids["bos"]], prefix if meta else [], fim if row["fim"] else text,
                                    [vocab.ids["eos"]]])
            assert np.array_equal(tokens, whole[row["offset"]:row["offset"] + row["length"]]) and not row["cropped"]
            if row["offset"] or row["length"] < len(whole):  # a chunk: the overlap token is context only
                seen_chunks += 1
                assert not row["offset"] or not mask[0] & LOSS
                continue
            assert sp.get(int(tokens[0])) == "bos"
            p = row["prefix_length"]
            if p:
                prefix = vocab.decode(tokens[1:1 + p])
                assert prefix.startswith("<|meta|>content_type: ") and prefix.endswith("<|/meta|>")
                assert f"lang: {doc['lang']}" in prefix
            assert sp.get(int(tokens[-1])) == "eos"
            text = vocab.decode(tokens[1 + p:-1])
            expected = doc["text"]
            if row["fim"]:  # prefix-suffix-middle, split where (seed, id) says
                pre, mid, suf = _fim_pieces(doc["text"], doc["id"], seed)
                assert pre + mid + suf == doc["text"]
                expected = f"<|fim_prefix|>{pre}<|fim_suffix|>{suf}<|fim_middle|>{mid}"
                seen_fim += 1
            else:
                seen_plain += 1
            assert text == expected
            assert row["bytes"] == len(doc["text"].encode())
    assert seen_fim > 10 and seen_plain > 100 and seen_chunks == 0  # every document here fits a row: none is split


def test_a_long_document_reassembles_from_its_chunks(corpus, tmp_path):
    """Issue #32: a document longer than a row continues across rows; its chunks (each recording its
    offset) give back every token, the text and its bytes; cropping is still there when asked for."""
    root, docs = corpus
    rng = np.random.default_rng(5)
    long = [{"text": " ".join(rng.choice(["alpha", "beta", "données", "日本語", "x=1;", "\n"], 900)) + f" end {i}",
             "source": "books", "content_type": "book", "lang": "en"} for i in range(3)]
    for k, d in enumerate(long):
        d["url"] = f"https://books.example/{k}"
        d["id"] = doc_id(d["text"], d["source"], d["url"])
    write_corpus(tmp_path / "docs", long + list(docs.values())[:150], shards=1)
    data = mixture_data(tmp_path / "docs", root / "tokenizer.json")
    data["sources"] = {"books": {"path": str(tmp_path / "docs"), "content_types": ["book"]},
                       "web": {"path": str(tmp_path / "docs"), "content_types": ["web"]}}
    data["max_epochs"] = 1
    stage = {"id": "one", "tokens": 12000, "seq_len": 512, "mix": {"books": 1, "web": 1}}
    data["stages"] = [stage, dict(stage, id="cropped", long_docs="crop", tokens=2000, seq_len=128,
                                  mix={"books": 0.15, "web": 1})]
    mixture = parse_mixture(data, tmp_path / "mix.yaml")
    build(mixture, tmp_path / "out", log=lambda *_: None)
    vocab = Vocab.load(tmp_path / "out" / "tokenizer.json")
    seqs = _sequences(tmp_path / "out")
    chunks: dict[str, list] = {}
    for tokens, mask, row in _pieces(tmp_path / "out", "one"):
        chunks.setdefault(row["doc_id"], []).append((row["offset"], tokens, mask, row["bytes"], row["cropped"]))
    finished = cut = 0
    for d in (d for d in long if d["id"] in chunks):
        parts = sorted(chunks[d["id"]], key=lambda c: c[0])
        assert len(parts) >= 2 and parts[0][0] == 0
        prefix, text, _ = seqs[d["id"]]
        whole = np.concatenate([[vocab.ids["bos"]], prefix, text, [vocab.ids["eos"]]])
        end = parts[-1][0] + len(parts[-1][1])
        assert parts[-1][4] == len(whole) - end and not any(c[4] for c in parts[:-1])
        if end < len(whole):  # the stage's budget ended inside this book: its last piece counts the rest as cropped
            cut += parts[-1][4]
            continue
        finished += 1
        rebuilt = np.full(len(whole), -1)
        for offset, tokens, mask, _, _ in parts:
            if offset:  # one token of overlap, the same token, never a target here
                assert rebuilt[offset] == tokens[0] and not mask[0] & LOSS
            rebuilt[offset:offset + len(tokens)] = tokens
        assert np.array_equal(rebuilt, whole)
        assert vocab.decode(rebuilt[1 + len(prefix):-1]) == d["text"]
        assert sum(c[3] for c in parts) == len(d["text"].encode())
    assert finished >= 1
    fit = _manifest(tmp_path / "out", "one")["mix"]["packing"]["best_fit"]
    assert fit["cut_tokens"] == cut > 0 and fit["cropped_tokens"] == 0, fit  # the ledger sees the cut
    assert fit["in_rows_fraction"] == 1 - cut / fit["document_tokens"]
    # whole documents of 68-112 tokens here: the last rows keep rooms smaller than any of them
    assert fit["padded_fraction"] < 0.04 and fit["padded_tokens"] < 512, fit
    crop = _manifest(tmp_path / "out", "cropped")["mix"]["packing"]["best_fit"]
    assert crop["cropped_tokens"] > 0
    assert all(not row["offset"] for _, _, row in _pieces(tmp_path / "out", "cropped"))


def test_masks_cover_exactly_prefix_scaffold_and_user_turns(built):
    _, out, docs, _ = built
    vocab = Vocab.load(tokenizer_path(out))
    checked = {"anneal": 0, "chat": 0}
    for stage, masked, meta in (("anneal", {"scaffold"}, True), ("chat", {"user"}, False)):
        for tokens, mask, row in _pieces(out, stage):
            doc = docs[row["doc_id"]]
            whole = not row["offset"] and int(tokens[-1]) == vocab.ids["eos"]  # not a chunk
            if not doc.get("segments") or not whole or row["fim"]:
                continue
            p = row["prefix_length"]
            assert (p > 0) == meta
            assert mask[0] == 0  # BOS is never a target
            assert np.all(mask[1:1 + p] == META | LOSS)
            # one set of shards, two phases: loss on the prefix, or the prefix kept in context only
            assert loss_targets(mask)[1:1 + p].all() and not loss_targets(mask, meta_loss=False)[1:1 + p].any()
            expected = [np.full(len(ids), 0 if seg["role"] in masked else LOSS, np.uint8)
                        for seg, ids in zip(doc["segments"], vocab.encode([s["text"] for s in doc["segments"]]))]
            assert np.array_equal(mask[1 + p:-1], np.concatenate(expected))
            assert mask[-1] == LOSS  # EOS
            checked[stage] += 1
        ds = TokenDataset(out / stage)
        for index in ds.shard_indexes():
            tokens, mask = np.asarray(ds.tokens(index)), np.asarray(ds.mask(index))
            assert np.all(tokens[(mask & PAD) > 0] == ds.layout.pad_id)
            assert not np.any((mask & PAD) & (mask & (LOSS | META)))
    assert checked["anneal"] > 5 and checked["chat"] > 5
    assert _manifest(out, "chat")["mix"]["masks"]["meta_fraction"] == 0
    assert _manifest(out, "anneal")["mix"]["masks"]["role_masked_fraction"] > 0


def test_ledger_names_why_each_document_was_left_out(built):
    mixture, out, docs, _ = built
    manifest = _manifest(out, "broad")
    counts = manifest["counts"]
    assert counts["rows_in"] == len(docs) == counts["rows_parent"] + counts["rows_rejected"]
    reasons = set(counts["rejected"])
    assert {"tier_excluded", "code_hits", "not_in_mix"} <= reasons
    rejects = Dataset(out / "broad").read_rejects()
    assert rejects.num_rows == counts["rows_rejected"]
    for row in rejects.to_pylist():
        doc = docs[row["id"]]
        if row["reject_reason"] == "tier_excluded":
            assert doc["tier"] in ("Medium-Low", "Low")
        if row["reject_reason"] == "code_hits":
            assert doc["code_hits"] > 6
        if row["reject_reason"] == "not_in_mix":
            assert doc["content_type"] == "synthetic"
    layout = manifest["tokens"]
    assert layout["seq_len"] == 256 and layout["tokenizer_sha256"] == manifest["mix"]["tokenizer_sha256"]
    assert (out / "broad" / layout["tokenizer"]).exists()


def test_same_seed_same_bytes_other_seed_other_order_and_rebuild_skips(built, tmp_path):
    mixture, out, _, _ = built
    assert all(r.skipped for r in build(mixture, out, log=lambda *_: None))
    build(mixture, tmp_path / "again", log=lambda *_: None)
    first, again = shard_files(out), shard_files(tmp_path / "again")
    assert first == again and any(name.endswith(".tokens") for name in first)
    other = mixture.model_copy(update={"seed": mixture.seed + 1})
    build(other, tmp_path / "other", log=lambda *_: None)
    assert shard_files(tmp_path / "other")["broad/part-00000.tokens"] != first["broad/part-00000.tokens"]


def test_cluster_weights_repeat_or_drop_documents_per_pass(built):
    mixture, out, docs, _ = built
    from assay.mixer.sample import SlotStream
    from assay.mixer.pools import Pool
    from assay.mixer.plan import stage_slots

    tokenized = next(p for p in out.iterdir() if p.name.startswith("tokenized-"))
    pool = Pool.load(tokenized)
    slot = next(s for s in stage_slots(mixture, "anneal", {n: pool for n in mixture.sources})
                if s.source == "web")  # replay of broad's web under anneal's cluster_rebalance
    assert slot.weights is not None and set(np.unique(slot.weights)) == {0.5, 1.0, 2.0}
    stream = SlotStream(slot, 0, 1, 512, True, 0.0)
    seen: dict[int, int] = {}
    while (d := stream.next()) is not None and d.epoch == 0:
        seen[d.doc] = seen.get(d.doc, 0) + 1
    weight = dict(zip(slot.eligible.tolist(), slot.weights.tolist()))
    assert all(seen.get(i, 0) == 2 for i, w in weight.items() if w == 2.0)
    assert all(seen.get(i, 0) == 1 for i, w in weight.items() if w == 1.0)
    halves = [seen.get(i, 0) for i, w in weight.items() if w == 0.5]
    assert set(halves) <= {0, 1} and 0.2 < np.mean(halves) < 0.8


def test_planner_refuses_a_budget_beyond_the_epoch_cap(corpus):
    root, _ = corpus
    data = mixture_data(root / "docs", root / "tokenizer.json", broad={"tokens": 400_000})
    with pytest.raises(PlanError) as err:
        plan(parse_mixture(data, root / "mix.yaml"), root / "out", log=lambda *_: None)
    message = str(err.value)
    assert "\n" not in message and "stage 'broad'" in message and "max_epochs is 4" in message


def test_plan_shows_and_checks_every_source_of_a_stage(corpus, tmp_path, capsys):
    """Issue #46: `assay mix plan` showed and checked only the first source of each stage; a second
    source over its epoch cap passed with exit 0."""
    import yaml

    from assay.pipeline.cli import main

    root, _ = corpus
    data = mixture_data(root / "docs", root / "tokenizer.json")
    data["stages"] = data["stages"][:2]
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(data))
    main(["mix", "plan", str(path), "--out", str(tmp_path / "out")])
    table = capsys.readouterr().out
    for stage, sources in (("broad", ["web", "code", "pr"]), ("anneal", ["pr", "chat", "web (replay of broad)"])):
        rows = [line for line in table.splitlines() if f"{stage} (" in line]
        assert [s for s in sources if any(f" {s} " in r for r in rows)] == sources, table
    data["sources"]["code"]["max_epochs"] = 0.1  # the second source of broad cannot give its share
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit) as exit_:
        main(["mix", "plan", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "stage 'broad': source 'code' would need" in err and "max_epochs is 0.1" in err


def test_a_prefix_longer_than_a_row_is_a_reason_not_a_split_prefix(corpus, tmp_path):
    """Issue #46: no metadata prefix crosses a row; a document whose prefix leaves a row no room
    for text is left out with its reason."""
    root, _ = corpus
    data = mixture_data(root / "docs", root / "tokenizer.json")
    data["meta"] = {"fields": ["content_type", "lang", "domain", "url"]}
    data["stages"] = [{"id": "tiny", "tokens": 2000, "seq_len": 16, "mix": {"web": 1}}]
    with pytest.raises(PlanError) as err:
        plan(parse_mixture(data, tmp_path / "mix.yaml"), tmp_path / "out", log=lambda *_: None)
    assert "source 'web' has no eligible documents" in str(err.value) and "prefix_too_long" in str(err.value)


def test_tokenize_writes_a_flat_stream_token_dataset(built):
    _, out, docs, _ = built
    tokenized = next(p for p in out.iterdir() if p.name.startswith("tokenized-"))
    ds = TokenDataset(tokenized)
    assert ds.layout.seq_len == 0
    index = pq.read_table(tokenized / "part-00000.docs.parquet").to_pylist()
    vocab = Vocab.load(tokenizer_path(out))
    row = next(r for r in index if docs[r["doc_id"]]["content_type"] == "web")
    stream = ds.tokens(0)
    text = stream[row["start"] + row["prefix_length"]:row["start"] + row["length"]]
    assert vocab.decode(text) == docs[row["doc_id"]]["text"]


def test_sources_from_two_datasets_keep_one_ledger(corpus, tmp_path):
    root, docs = corpus
    rows = list(docs.values())
    write_corpus(tmp_path / "a", [d for d in rows if d["content_type"] in ("web", "code")], shards=1)
    write_corpus(tmp_path / "b", [d for d in rows if d["content_type"] not in ("web", "code")], shards=1)
    data = mixture_data(tmp_path / "a", root / "tokenizer.json")
    data["sources"]["pr"]["path"] = data["sources"]["chat"]["path"] = str(tmp_path / "b")
    data["stages"] = [{"id": "one", "tokens": 6000, "seq_len": 256, "mix": {"pr": 1, "code": 1}}]
    build(parse_mixture(data, tmp_path / "mix.yaml"), tmp_path / "out", log=lambda *_: None)
    counts = _manifest(tmp_path / "out", "one")["counts"]
    assert counts["rows_in"] == len(docs) == counts["rows_parent"] + counts["rows_rejected"]
    rejects = {r["id"]: r["reject_reason"] for r in Dataset(tmp_path / "out" / "one").read_rejects().to_pylist()}
    for doc_id, reason in rejects.items():
        kind = docs[doc_id]["content_type"]
        assert reason == ("not_in_mix" if kind in ("web", "synthetic") else "not_selected"), (kind, reason)
    used = {row["doc_id"] for _, _, row in _pieces(tmp_path / "out", "one")}
    assert used.isdisjoint(rejects) and len(used) + len(rejects) == len(docs)


def test_segments_and_chat_messages_from_jsonl_become_masks(corpus, tmp_path):
    """Issue #32: roles from any reader. `segments` and chat `messages` JSONL read by read.jsonl (and
    Parquet by read.parquet) come through as the segments column; a stage masking `user` clears LOSS on
    exactly the user turns; malformed segments are rejects with a reason."""
    import gzip

    import pyarrow as pa

    from assay.pipeline.readers import ReadJsonl, ReadParquet
    from assay.pipeline.runner import run_stage

    root, _ = corpus
    good = [{"segments": [{"role": "system", "text": "Be brief.\n"}, {"role": "user", "text": f"what is {i} plus {i}?\n"},
                          {"role": "assistant", "text": f"{2 * i}, the sum of {i} and {i}."}], "url": f"https://c/{i}"}
            for i in range(40)]
    chats = [{"messages": [{"role": "user", "content": f"name a colour number {i}"},
                           {"role": "assistant", "content": [{"type": "text", "text": f"blue {i}"}]}]} for i in range(40)]
    bad = [{"text": "ab", "segments": [{"role": "user", "text": "a"}, {"role": "assistant", "text": "c"}]},
           {"segments": [{"role": "narrator", "text": "x"}]},
           {"segments": "user: hi"},
           {"messages": [{"role": "robot", "content": "beep"}]},
           {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}]
    path = tmp_path / "chat.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for record in good + chats + bad:
            fh.write(json.dumps(record) + "\n")
    run_stage(ReadJsonl({"paths": [str(path)], "source": "chat", "content_type": "synthetic"}, stage_id="read"),
              [], tmp_path / "read")
    ds = Dataset(tmp_path / "read")
    kept = ds.read().to_pylist()
    assert len(kept) == 80 and all("".join(s["text"] for s in r["segments"]) == r["text"] for r in kept)
    assert kept[40]["segments"] == [{"role": "user", "text": "name a colour number 0\n\n"},
                                    {"role": "assistant", "text": "blue 0"}]
    rejects = ds.read_rejects().to_pylist()
    assert [r["reject_reason"] for r in rejects] == ["bad_segments"] * 5
    details = " | ".join(r["reject_detail"] for r in rejects)
    for why in ("do not concatenate", "unknown role 'narrator'", "non-empty list", "'robot'", "content part"):
        assert why in details
    # the same documents through Parquet keep their segments
    pq.write_table(pa.table({"text": [r["text"] for r in kept], "segments": [r["segments"] for r in kept]}),
                   tmp_path / "chat.parquet")
    run_stage(ReadParquet({"paths": [str(tmp_path / "chat.parquet")], "source": "chat"}, stage_id="pq"), [],
              tmp_path / "pq")
    assert [r["segments"] for r in Dataset(tmp_path / "pq").read().to_pylist()] == [r["segments"] for r in kept]

    data = mixture_data(tmp_path / "read", root / "tokenizer.json")
    data["sources"] = {"chat": {"path": str(tmp_path / "read")}}
    data["stages"] = [{"id": "sft", "tokens": 2000, "seq_len": 128, "mix": {"chat": 1}, "mask_roles": ["user"],
                       "meta": False}]
    build(parse_mixture(data, tmp_path / "mix.yaml"), tmp_path / "out", log=lambda *_: None)
    vocab = Vocab.load(tmp_path / "out" / "tokenizer.json")
    by_id = {r["id"]: r for r in kept}
    checked = 0
    for tokens, mask, row in _pieces(tmp_path / "out", "sft"):
        if row["offset"] or int(tokens[-1]) != vocab.ids["eos"]:
            continue  # whole documents only
        segs = by_id[row["doc_id"]]["segments"]
        ids = vocab.encode([s["text"] for s in segs])
        expected = np.concatenate([np.full(len(t), 0 if s["role"] == "user" else LOSS, np.uint8)
                                   for s, t in zip(segs, ids)])
        assert np.array_equal(mask[1:-1], expected)
        assert (expected == 0).any() and (expected == LOSS).any()
        checked += 1
    assert checked > 10
