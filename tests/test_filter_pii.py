"""filter.pii on code, documentation and manuals (issue 46): what a pattern matcher took for PII
(getpass.getpass(), GCC 2.7.2.2, section 8.6.4.1., big integers, x@self.weight, git remotes) stays;
the labelled dev set (tests/fixtures/pii/) has at most 1 false positive per 100 documents with every
kind's recall at least what it was; code is read by its own rules; masked examples reach the
statistics and the report, and no raw value does."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assay.filters.pii import Pii
from assay.pipeline.dataset import write_table
from assay.pipeline.report import write_report
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs
from assay.pipeline.stats import merge_stats

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pii"
PLACEHOLDER = re.compile(r"<(?:EMAIL|PHONE|IP|CARD|API_KEY|SECRET|PRIVATE_KEY)>")

NOT_PII = [
    ("code", ".py", 'import getpass\n\npassword = getpass.getpass("Password: ")\nsecret_key = settings.SECRET_KEY\n'),
    ("text", None, "This release was built with GCC 2.7.2.2 on Linux 2.0.36, with glibc 2.3.4.1."),
    ("text", None, "8.6.4.1. Unicode Objects\n\nSee section 3.2.1.4 for the encodings; OID 1.3.6.1.4.1.2021."),
    ("text", None, "(%i1) factorial(20);\n(%o1) 2432902008176640000\n(%i2) 4111111111111111 + 2^64;\n"
                   "(%o2) 4111111111111111 + 18446744073709551616"),
    ("code", ".py", "def forward(self, x):\n    return x@self.weight + self.bias\n"),
    ("text", None, "Clone it with git clone git@github.com:acme/widgets.git and run make."),
    ("text", None, "Output:\n128 256 512 1024\n2048 4096 8192 16384"),
]


def _run(rows, **params):
    stage = Pii(params)
    out = stage.process(make_docs(rows))
    return out, stage


@pytest.mark.parametrize("content_type,suffix,text", NOT_PII)
def test_code_versions_sections_and_big_integers_are_not_pii(content_type, suffix, text):
    row = {"text": text, "source": "t", "content_type": content_type}
    if suffix:
        row["meta"] = {"suffix": suffix}
    out, _ = _run([row])
    assert out.column("text").to_pylist() == [text]
    assert out.column("pii_total").to_pylist() == [0]


def _labelled(split: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{split}.jsonl").open(encoding="utf-8")]


# Recall per kind on the dev set of filter.pii before issue 46 (benchmarks/pii.py, "before"):
BEFORE_RECALL = {"email": 1.0, "phone": 0.375, "ip": 1.0, "card": 1.0, "api_key": 1.0, "secret": 0.1842,
                 "private_key": 1.0}


def test_on_the_labelled_set_false_positives_stay_under_one_per_100_documents_and_recall_holds():
    """Through the stage: a labelled value is found when it is gone from the output; every
    placeholder beyond the labelled values a document lost is a false positive."""
    rows = _labelled("dev")
    docs = [{"id": r["id"], "text": r["text"], "source": "t", "content_type": r["content_type"],
             "meta": {"suffix": r["suffix"]} if r.get("suffix") else None} for r in rows]
    out, _ = _run(docs)
    found = {k: [0, 0] for k in BEFORE_RECALL}
    false_positives = 0
    for r, text in zip(rows, out.column("text").to_pylist()):
        gone = 0
        for kind, value in r["pii"]:
            found[kind][1] += 1
            if value not in text:
                found[kind][0] += 1
                gone += r["text"].count(value)
        false_positives += max(0, len(PLACEHOLDER.findall(text)) - gone)
    assert 100 * false_positives / len(rows) <= 1.0, false_positives
    for kind, (hit, total) in found.items():
        assert hit / total >= BEFORE_RECALL[kind], (kind, hit, total)


CODE = '''"""Checkout helpers. Maintainer: Ana Silva <ana.silva@gmail.com>"""
card = 4539148803436467  # test fixture
STRIPE_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
password = os.environ["SHOP_PASSWORD"]
DB = {"PASSWORD": "Tr0ub4dor&3x"}
'''


def test_code_is_read_by_its_own_rules_and_can_be_spared():
    row = {"text": CODE, "source": "t", "content_type": "code", "meta": {"suffix": ".py"}}
    strings = _run([row])[0].column("text").to_pylist()[0]
    assert "<EMAIL>" in strings and "<API_KEY>" in strings and '"PASSWORD": "<SECRET>"' in strings
    assert "card = 4539148803436467" in strings  # an integer in code, not a string or a comment
    assert 'os.environ["SHOP_PASSWORD"]' in strings
    as_text = _run([row], code="text")[0].column("text").to_pylist()[0]
    assert "card = <CARD>" in as_text
    assert _run([row], code="skip")[0].column("text").to_pylist()[0] == CODE


def test_masked_examples_reach_the_statistics_merge_in_order_and_hold_no_value():
    rows = [{"text": f"Write to person{i}@gmail.com or call (415) 555-01{i:02d}.", "source": "t"} for i in range(5)]
    _, stage = _run(rows, examples=2)
    stats = stage.stats.to_json()
    emails = stats["samples"]["pii.email"]
    assert emails["limit"] == 2 and len(emails["items"]) == 2
    first = emails["items"][0]
    assert first["after"] == "Write to <EMAIL> or call <PHONE>."
    assert first["before"] == "Write to xxxxxx0@xxxxx.xxx or call <PHONE>."
    assert "person0" not in json.dumps(stats) and "555" not in json.dumps(stats)
    merged = merge_stats([stats, stats])
    assert merged["samples"]["pii.email"]["items"] == emails["items"]  # the first two, not four


def test_the_report_shows_the_examples_and_no_raw_value(tmp_path):
    rows = [{"text": "Contact jane.roe@outlook.com, server 203.0.113.7, built with GCC 2.7.2.2.", "source": "t"},
            {"text": "Nothing personal; see section 8.6.4.1.", "source": "t"}]
    src = write_table(make_docs(rows), tmp_path / "run" / "in")
    run_stage(Pii({}), [src], tmp_path / "run" / "pii")
    page = write_report(tmp_path / "run").read_text()
    assert "PII examples" in page and "xxxx.xxx@xxxxxxx.xxx" in page and "&lt;EMAIL&gt;" in page
    assert "jane.roe" not in page and "203.0.113.7" not in page
