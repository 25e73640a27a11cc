"""The downstream-proxy task suite (issue #42): loaders for the task schema and the upstream formats,
prompt formats, and every metric against values computed by hand on a model whose log-probabilities
are known (a bigram table), plus the shared-context rows against a plain forward pass of a real GPT."""
from __future__ import annotations

import functools
import http.server
import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from assay.pipeline.errors import UserError  # noqa: E402
from assay.trainer.prompts import request  # noqa: E402
from assay.trainer.tasks import DATA, SHIPPED, SUITES, Item, Suite, Task, cap_items, load_suite, load_task  # noqa: E402

FIX = Path(__file__).resolve().parent / "fixtures" / "tasks"
ORIG = {"arc_easy": "ARC-Easy-Test.jsonl", "boolq": "val.jsonl", "copa": "val.jsonl", "csqa": "dev_rand_split.jsonl",
        "hellaswag": "hellaswag_val_full.txt", "lambada_openai": "lambada_openai.jsonl", "mbpp": "mbpp.jsonl",
        "nq_open": "NQ-open.dev.jsonl", "openbookqa": "test.tsv", "piqa": "valid.jsonl", "siqa": "dev.jsonl",
        "triviaqa": "triviaqa_sm_sub.jsonl", "winogrande": "winogrande.jsonl"}
UPSTREAM_IDS = {"arc_easy", "csqa", "openbookqa", "mbpp"}  # ids from the file; the others number rows


# ---- loaders -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ORIG))
def test_upstream_format_converts_to_the_eval_packs_items(name):
    """Each upstream file format gives the items the eval pack's own normaliser made of the same records
    (expected.jsonl, copied from the pack), detected from the file alone."""
    task = load_task(name, str(FIX / name / ORIG[name]), items=0)
    expected = [json.loads(x) for x in (FIX / name / "expected.jsonl").read_text().splitlines()]
    assert len(task.items) == len(expected) == 4
    for got, want in zip(task.items, expected):
        g = got.to_json()
        for key in ("benchmark", "split", "context", "choices", "gold", "kind"):
            assert g[key] == want[key], (name, key)
        assert g.get("meta", {}) == want.get("meta", {})
        if name in UPSTREAM_IDS:
            assert g["id"] == want["id"]
        else:  # row numbers padded to the digits of the file's own item count
            assert int(g["id"].rsplit("-", 1)[1]) == int(want["id"].rsplit("-", 1)[1])


def test_mmlu_redux_and_hendrycks_csvs():
    """MMLU-Redux CSVs (either delimiter) keep only items whose error_type is ok and count the rest;
    the hendrycks layout (no header, answer letter) gives the same items."""
    task = load_task("mmlu_redux", str(FIX / "mmlu_redux"), items=0)
    assert task.excluded == {"error_type bad question clarity": 1, "error_type wrong groundtruth": 1}
    assert [it.id for it in task.items][:2] == ["abstract_algebra/2", "abstract_algebra/3"]
    anatomy = [it for it in task.items if it.id.startswith("anatomy/")]
    assert anatomy[0].choices == ["Dyslexia", "Epilepsy", "Hydrocephalus", "Narcolepsy"] and anatomy[0].gold == 3
    hendrycks = load_task("mmlu_redux", str(FIX / "mmlu_hendrycks" / "anatomy_test.csv"), items=0).items
    assert [(h.id, h.context, h.choices, h.gold) for h in hendrycks] == \
        [(a.id, a.context, a.choices, a.gold) for a in anatomy]


def test_schema_file_and_one_line_errors(tmp_path):
    good = {"id": "q1", "benchmark": "mine", "split": "test", "context": "2 + 2 =", "choices": ["4", "5"], "gold": 0,
            "kind": "multiple_choice"}
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps(good) + "\n\n" + json.dumps(dict(good, id="q2", gold=1)) + "\n")
    task = load_task("mine", str(f))
    assert [(it.id, it.gold) for it in task.items] == [("q1", 0), ("q2", 1)] and task.source == str(f)
    for bad, words in ((dict(good, gold=2), "gold 2 does not index the 2 choices"),
                       (dict(good, kind="essay"), "kind 'essay'"), ({"context": "x"}, "missing choices, gold")):
        f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(UserError, match=f"mine.jsonl:2: .*{words}"):
            load_task("mine", str(f))
    f.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(UserError, match="item id 'q1' occurs more than once"):
        load_task("mine", str(f))
    (tmp_path / "piqa.jsonl").write_text((FIX / "piqa" / "valid.jsonl").read_text())
    with pytest.raises(UserError, match="no labels file was found"):
        load_task("piqa", str(tmp_path / "piqa.jsonl"))
    with pytest.raises(UserError, match="not a shipped task"):
        load_task("nosuch")


def test_task_from_a_url_over_http(monkeypatch):
    """A task file given as a URL is read through pipeline/storage (a real HTTP server here), labels
    file beside it included, once the user allows http:// (remote schemes are an allow-list)."""
    monkeypatch.setenv("ASSAY_REMOTE_SCHEMES", "http")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(FIX))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for name in ("arc_easy", "piqa"):
            remote = load_task(name, f"{base}/{name}/{ORIG[name]}", items=0)
            local = load_task(name, str(FIX / name / ORIG[name]), items=0)
            assert [it.to_json() for it in remote.items] == [it.to_json() for it in local.items]
    finally:
        server.shutdown()


def test_shipped_suite_loads_without_shared_data():
    suite = load_suite("default")
    assert [t.name for t in suite.tasks] == sorted(SHIPPED) and len(suite.tasks) == 15
    assert all(t.source == "shipped" and len(t.items) == min(500, t.total) for t in suite.tasks)
    assert {t.name: t.kind for t in suite.tasks}["lambada_openai"] == "cloze"
    size = sum(p.stat().st_size for p in DATA.iterdir())
    assert size < 2_000_000, size
    assert set(SUITES["olmes"]) < set(SHIPPED)


def test_cap_takes_the_same_items_whatever_the_order():
    items = load_task("arc_easy", items=0).items
    capped = cap_items(items, 50)
    reordered = cap_items(items[::-1], 50)
    assert {it.id for it in capped} == {it.id for it in reordered} and len(capped) == 50
    assert [it.id for it in capped] == [it.id for it in items if it.id in {c.id for c in capped}]  # file order
    assert [it.id for it in load_task("arc_easy", items=50).items] == [it.id for it in capped]


def test_suite_specs(tmp_path):
    assert [t.name for t in load_suite("copa,piqa", items=5).tasks] == ["copa", "piqa"]
    spec = tmp_path / "suite.yaml"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arc.jsonl").write_text((FIX / "arc_easy" / ORIG["arc_easy"]).read_text())
    spec.write_text("name: mine\nitems: 3\ntasks:\n  - copa\n  - {name: arc_mine, path: data/arc.jsonl, items: 2}\n")
    suite = load_suite(str(spec))
    assert suite.name == "mine" and [(t.name, len(t.items)) for t in suite.tasks] == [("copa", 3), ("arc_mine", 2)]
    assert suite.tasks[1].items[0].benchmark == "arc_mine"
    listed = load_suite(f"arc_local={tmp_path / 'data' / 'arc.jsonl'},copa", items=0)
    assert [len(t.items) for t in listed.tasks] == [4, 100]
    with pytest.raises(UserError, match="not a suite"):
        load_suite("defualt")
    with pytest.raises(UserError, match="listed twice"):
        load_suite("copa,copa")


def test_prompt_formats():
    arc = Item("x", "arc_easy", "test", "Which is a metal?", ["iron", "wood"], 0, "multiple_choice")
    cf, mcf = request(arc, "cf"), request(arc, "mcf")
    assert cf.contexts == ["Question: Which is a metal?\nAnswer:"] * 2 and cf.continuations == [" iron", " wood"]
    assert mcf.contexts[0] == "Question: Which is a metal?\n A. iron\n B. wood\nAnswer:" and mcf.continuations == [" A", " B"]
    wino = load_task("winogrande", str(FIX / "winogrande" / ORIG["winogrande"]), items=0).items[0]
    r = request(wino)
    assert r.contexts == ["Sarah was a much better surgeon than Maria so Sarah", "Sarah was a much better surgeon than Maria so Maria"]
    assert r.continuations == [" always got the easier cases."] * 2 and r.gold == 1
    boolq = request(load_task("boolq", str(FIX / "boolq" / ORIG["boolq"]), items=0).items[0])
    assert boolq.contexts[0].endswith("does ethanol take more energy make that produces?\nAnswer:")
    assert boolq.continuations == [" no", " yes"]
    lam = request(Item("l", "lambada_openai", "test", "He said", ["hello"], 0, "cloze"), "mcf")
    assert lam.contexts == ["He said"] and lam.continuations == [" hello"]  # cloze stays cloze


# ---- metrics on a model whose log-probabilities are known ------------------------------------------

V = 259  # the byte tokenizer: 256 bytes, BOS 256, EOS, PAD


class Bigram(torch.nn.Module):
    """Next-token logits = table[current token]: every log-probability is a table lookup."""

    def __init__(self, table: np.ndarray):
        super().__init__()
        self.norm = torch.nn.Identity()
        self.head = torch.nn.Linear(V, V, bias=False)
        with torch.no_grad():
            self.head.weight.copy_(torch.tensor(table, dtype=torch.float32).T)

    def hidden(self, idx, valid=None, positions=None, mask=None):
        return torch.nn.functional.one_hot(idx, V).float(), None


def _bigram():
    table = np.zeros((V, V))
    table[ord("b"), ord(" ")] = 2.0
    table[ord(" "), ord("d")] = 3.0
    table[ord(" "), 0xC3] = 1.5
    table[0xC3, 0xA9] = 4.0
    table[ord("d"), ord("d")] = 0.5
    return table


def _lp(table, pairs):
    """Summed log-probability of (previous, next) byte pairs, by hand."""
    return sum(table[a, b] - math.log(np.exp(table[a]).sum()) for a, b in pairs)


def _byte_tokenizer():
    from assay.trainer.bytes import TOKENIZER_SPEC
    from assay.trainer.tokenizer import ModelTokenizer

    return ModelTokenizer.from_text(json.dumps(TOKENIZER_SPEC, sort_keys=True))


def test_every_metric_against_hand_computed_values():
    from assay.trainer.downstream import score_suite

    table = _bigram()
    b, sp, d = ord("b"), ord(" "), ord("d")
    # context "ab" (a raw prompt: hellaswag's). " é" is 2 characters but 3 bytes (= byte tokens).
    lp = {"é": _lp(table, [(b, sp), (sp, 0xC3), (0xC3, 0xA9)]), "dd": _lp(table, [(b, sp), (sp, d), (d, d)]),
          "d": _lp(table, [(b, sp), (sp, d)])}
    ntok = {"é": 3, "dd": 3, "d": 2}
    nchar = {"é": 2, "dd": 3, "d": 2}
    items = [Item("i1", "hellaswag", "validation", "ab", ["é", "dd"], 1, "multiple_choice"),
             Item("i2", "hellaswag", "validation", "ab", ["dd", "é", "d"], 0, "multiple_choice")]
    cloze = Item("c1", "lambada_openai", "test", "ab", ["dd"], 0, "cloze")  # every gold token is the argmax
    gen = Item("g1", "nq_open", "validation", "ab", ["é"], 0, "generation")  # prompt "Question: ab\nAnswer:"
    suite = Suite("hand", [Task("mc", items, "test", 2), Task("cl", [cloze, gen], "test", 2)], None)
    res = score_suite(Bigram(table), _byte_tokenizer(), suite, context=32, per_item=True)
    got = res["tasks"]["mc"]["per_item"]

    def soft(s, j):
        return math.exp(s[j]) / sum(math.exp(x) for x in s)

    for k, it in enumerate(items):
        raw = [lp[c] for c in it.choices]
        tok = [lp[c] / ntok[c] for c in it.choices]
        char = [lp[c] / (nchar[c]) for c in it.choices]
        g = it.gold
        assert got["acc"][k] == float(np.argmax(raw) == g)
        assert got["acc_per_token"][k] == float(np.argmax(tok) == g)
        assert got["acc_per_char"][k] == float(np.argmax(char) == g)
        assert got["p_correct"][k] == pytest.approx(soft(raw, g))
        assert got["p_correct_per_token"][k] == pytest.approx(soft(tok, g))
        assert got["p_correct_per_char"][k] == pytest.approx(soft(char, g))
        assert got["bpb"][k] == pytest.approx(-raw[g] / (math.log(2) * len((" " + it.choices[g]).encode())))
    # the table makes the normalisations disagree: unnormalised picks " é" over " dd", per character " dd"
    assert lp["é"] > lp["dd"] and lp["dd"] / 3 > lp["é"] / 2
    assert got["acc"] == [0.0, 0.0] and got["acc_per_char"] == [1.0, 0.0]
    m = res["tasks"]["mc"]["metrics"]
    bpb = got["bpb"]
    se = np.std(bpb, ddof=1) / math.sqrt(2)
    assert m["bpb"]["mean"] == pytest.approx(np.mean(bpb))
    assert m["bpb"]["ci95"] == pytest.approx([np.mean(bpb) - 1.96 * se, np.mean(bpb) + 1.96 * se])
    assert res["tasks"]["mc"]["chance"] == pytest.approx((1 / 2 + 1 / 3) / 2)

    c = res["tasks"]["cl"]["metrics"]
    assert set(c) == {"greedy", "bpb"}
    assert res["tasks"]["cl"]["per_item"]["greedy"] == [1.0, 0.0]  # " dd" is greedy; after "Answer:" " " is not
    lp_gen = _lp(table, [(ord(":"), sp), (sp, 0xC3), (0xC3, 0xA9)])
    assert c["bpb"]["mean"] == pytest.approx(np.mean([-lp["dd"] / (math.log(2) * 3), -lp_gen / (math.log(2) * 3)]))
    mac = res["macro"]
    assert mac["bpb"]["mean"] == pytest.approx((m["bpb"]["mean"] + c["bpb"]["mean"]) / 2) and mac["bpb"]["tasks"] == 2
    assert mac["p_correct"]["tasks"] == mac["acc"]["tasks"] == mac["greedy"]["tasks"] == 1 and mac["p_correct"]["mean"] == pytest.approx(m["p_correct"]["mean"])
    assert mac["bpb"]["se"] == pytest.approx(math.hypot(m["bpb"]["se"], c["bpb"]["se"]) / 2)


def _tiny_gpt(context: int):
    from assay.trainer.config import parse_train_config
    from assay.trainer.train import build_model

    cfg = parse_train_config({"tokens": 1, "data": {"train": "x"}, "model": {"d_model": 32, "n_layers": 2, "n_heads": 4},
                              "moe": {"num_experts": 4, "top_k": 2, "expert_hidden": 16}})
    torch.manual_seed(0)
    return build_model(cfg, V, context).eval()


def _plain_lp(model, seq: list[int], first_target: int) -> float:
    """Summed log-prob of seq[first_target:] given what precedes it, one plain causal forward pass."""
    with torch.no_grad():
        logp = torch.log_softmax(model.logits(torch.tensor([seq[:-1]])), -1)[0]
    return float(sum(logp[p - 1, seq[p]] for p in range(first_target, len(seq))))


def test_shared_context_rows_equal_separate_forward_passes():
    """Choices packed after one context (block mask, own positions) score exactly what each scores
    alone; a context longer than the model's is cut from the left to what fits."""
    from assay.trainer.downstream import score_requests
    from assay.trainer.prompts import Request

    T = 16
    model = _tiny_gpt(T)
    tok = _byte_tokenizer()
    enc = lambda s: list(s.encode())  # noqa: E731
    short = Request(["The cat"] * 3, [" sat", " ran off", " is"], 0, "multiple_choice")
    long_ctx = "x" * 40 + " the end"
    long = Request([long_ctx] * 2, [" ok", " never"], 1, "multiple_choice")
    scored, counts = score_requests(model, tok, [short, long], T)
    for j, cont in enumerate(short.continuations):
        seq = [256] + enc("The cat") + enc(cont)
        assert scored[0]["lp"][j] == pytest.approx(_plain_lp(model, seq, 8), abs=1e-4)
        assert scored[0]["tokens"][j] == len(cont)
    keep = T + 1 - len(" never")  # 11 context tokens: the longest continuation fills the rest
    ctx = ([256] + enc(long_ctx))[-keep:]
    for j, cont in enumerate(long.continuations):
        assert scored[1]["lp"][j] == pytest.approx(_plain_lp(model, ctx + enc(cont), keep), abs=1e-4)
    assert counts["truncated"] == 1 and counts["rolled"] == 0


def test_continuation_longer_than_the_context_is_scored_in_windows():
    from assay.trainer.downstream import score_requests
    from assay.trainer.prompts import Request

    T = 16
    model = _tiny_gpt(T)
    cont = " abcdefghijabcdefghijabcdefghi"  # 30 tokens
    ctx = "0123456789"
    scored, counts = score_requests(model, _byte_tokenizer(), [Request([ctx], [cont], 0, "generation")], T)
    seq = [256] + list(ctx.encode()) + list(cont.encode())  # 41 tokens; context kept: T/2 = 8 (the last 8)
    seq = seq[len(seq) - 30 - 8:]  # 38: 8 context + 30 continuation
    # windows of T + 1 = 17 tokens: [0:17] scores 8..16, then T/2 = 8 new targets each, 8 of context at least
    expect = (_plain_lp(model, seq[0:17], 8) + _plain_lp(model, seq[8:25], 9) + _plain_lp(model, seq[16:33], 9)
              + _plain_lp(model, seq[21:38], 12))
    assert scored[0]["tokens"][0] == 30 and counts["rolled"] == 1
    assert scored[0]["lp"][0] == pytest.approx(expect, abs=1e-4)


def test_macro_interval_over_items_and_seeds():
    """An arm's macro over seeds: mean of the seeds' macros, its interval from the seed variance of the
    macro / seeds plus the mean over seeds of its item variance."""
    from assay.trainer.downstream import across_seeds

    def run(means, ses):
        return {"tasks": {"t": {"metrics": {"p_correct": {"mean": means[0], "se": ses[0]}}}},
                "macro": {"p_correct": {"mean": means[1], "se": ses[1], "tasks": 1}}}

    out = across_seeds([run((0.30, 0.30), (0.02, 0.02)), run((0.34, 0.34), (0.04, 0.04))])
    assert out["per_task"]["t"]["p_correct"]["values"] == [0.30, 0.34]
    mac = out["macro"]["p_correct"]
    std = np.std([0.30, 0.34], ddof=1)
    half = 1.96 * math.sqrt(std ** 2 / 2 + (0.02 ** 2 + 0.04 ** 2) / 2)
    assert mac["mean"] == pytest.approx(0.32) and mac["std"] == pytest.approx(std)
    assert mac["ci95"] == pytest.approx([0.32 - half, 0.32 + half])
