"""Topic and format tags: zero-shot MiniLM on documents with obvious topics, a trained fastText
classifier in its place, and site and category shares in the statistics."""
from __future__ import annotations

import numpy as np
import pytest

from assay.pipeline.schema import make_docs
from assay.quality.topics import FORMATS, TOPICS, Topics, sites

DOCS = [  # (text, url, topic)
    ("Preheat the oven to 180C. Cream the butter and sugar, beat in the eggs, fold in the flour and bake the sponge "
     "for 25 minutes. Let it cool and spread the frosting before serving with fresh strawberries.",
     "https://www.bakeathome.example/sponge", "food_dining"),
    ("The midfielder scored in stoppage time and the visitors won the league title on goal difference. The coach praised "
     "his players after a season in which the team lost only two matches.", "https://sport.example.net/title", "sports_fitness"),
    ("The parliament approved the budget by 210 votes to 190 after the prime minister promised tax cuts; the opposition "
     "party said it would campaign against the plan before the next election.", "http://news.example.org/budget", "politics"),
    ("Asthma causes inflammation of the airways. Symptoms include wheezing and shortness of breath, and doctors treat it "
     "with inhaled corticosteroids; patients should avoid triggers such as smoke and pollen.",
     "https://www.bakeathome.example/health", "health"),
    ("import os\n\ndef list_files(root):\n    for name in sorted(os.listdir(root)):\n        path = os.path.join(root, name)\n"
     "        if os.path.isfile(path):\n            yield path\n", "https://code.example.dev/snippet", "software_dev"),
    ("The Roman Empire reached its greatest extent under Trajan in 117 AD. Its legions built roads and forts across Europe, "
     "and the emperor's campaigns in Dacia are recorded on Trajan's Column.", "https://history.example.edu/rome", "history"),
]


@pytest.fixture(scope="module")
def tagged():
    stage = Topics({})
    table = stage.process(make_docs([{"text": t, "source": "t", "url": u} for t, u, _ in DOCS]))
    return stage, table


def test_taxonomy_has_24_topics_and_24_formats():
    assert len(TOPICS) == 24 and len(FORMATS) == 24


def test_zero_shot_tags_obvious_topics(tagged):
    _, table = tagged
    assert table.column("domain").to_pylist() == [None] * len(DOCS)  # the site column is not the tagger's
    assert table.column("topic").to_pylist() == [topic for _, _, topic in DOCS]
    formats = table.column("format").to_pylist()
    assert set(formats) <= set(FORMATS)
    assert formats[2] == "news_article"


def test_statistics_hold_category_and_site_shares(tagged):
    stage, _ = tagged
    counters = stage.stats.counters
    assert counters["topic_docs.politics"] == 1
    assert sum(v for k, v in counters.items() if k.startswith("format_docs.")) == len(DOCS)
    assert counters["site_docs.bakeathome.example"] == 2  # www. stripped; the other sites are single
    assert counters["site_docs._other"] == len(DOCS) - 2


def test_sites_from_urls():
    table = make_docs([{"text": "x", "source": "t", "url": u} for u in
                       ("https://WWW.Example.com:8080/a?b", "http://user@host.org/x", "ftp://files.example.com", "")])
    assert sites(table).tolist() == ["example.com", "host.org", "files.example.com", ""]


def test_a_trained_fasttext_classifier_replaces_the_zero_shot_tagger(tmp_path):
    from assay.quality.ftmodel import train

    rng = np.random.default_rng(0)
    cooking = "oven flour sugar butter bake recipe whisk eggs dough".split()
    football = "goal striker match league coach stadium referee penalty team".split()
    texts = [" ".join(rng.choice(words, 12)) for words in (cooking, football) for _ in range(60)]
    labels = ["food_dining"] * 60 + ["sports_fitness"] * 60
    model = train(texts, labels, tmp_path / "topics.ftz", epoch=10, quantize=False)
    stage = Topics({"model": str(model), "format_model": str(model)})
    out = stage.process(make_docs([{"text": "bake the dough in the oven with butter", "source": "t"},
                                   {"text": "the striker scored a penalty in the match", "source": "t"}]))
    assert out.column("topic").to_pylist() == ["food_dining", "sports_fitness"]
    assert stage.encoder is None  # no MiniLM loaded when both taggers are trained classifiers


def test_report_section_shows_topic_format_and_site_shares(tagged):
    from assay.quality.report import stage_section

    stage, _ = tagged
    page = stage_section({"dir": "tagged", "stage": "quality.topics", "statistics": {"counters": dict(stage.stats.counters)}})
    assert "Topic shares" in page and "Format shares" in page and "bakeathome.example" in page
    assert "politics" in page and "33.3%" in page  # the site with 2 of 6 documents


def test_tags_from_stored_embeddings_equal_the_encoding_path(tagged, tmp_path):
    """Given `[documents, embeddings]` (semantic.embed, same model), the stage reads the stored vectors
    instead of encoding every document again, and tags as the encoding path does."""
    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.runner import run_stage
    from assay.semantic.embed import Embed

    _, encoded = tagged
    docs = write_table(make_docs([{"text": t, "source": "t", "url": u} for t, u, _ in DOCS]), tmp_path / "docs", shards=2)
    emb = run_stage(Embed({"max_tokens": 128, "pooling": "first"}), [docs], tmp_path / "emb", engine="local",
                    options={"workers": 1}).out
    out = run_stage(Topics({}), [docs, emb], tmp_path / "tagged", engine="local", options={"workers": 1}).out
    table = Dataset(out).read()
    assert "embedding" not in table.column_names
    by_id = dict(zip(table.column("id").to_pylist(), zip(table.column("topic").to_pylist(), table.column("format").to_pylist())))
    expected = dict(zip(encoded.column("id").to_pylist(), zip(encoded.column("topic").to_pylist(), encoded.column("format").to_pylist())))
    assert by_id == expected


OCTAVE_DOC = """-- plot (y)
-- plot (x, y, fmt)
Produce 2-D plots.  Many different combinations of arguments are possible.  The simplest form is plot (y)
where the argument is taken as the set of y coordinates and the x coordinates are taken to be the range
1:numel (y).  If more than one argument is given, they are interpreted as plot (y, property, value, ...).
     x = -10:0.1:10;
     plot (x, sin (x));
See also: axis, box, grid, hold, legend, title, xlabel, ylabel."""
PYTHON_DOC = """os.path.join(path, *paths)
Join one or more path segments intelligently. The return value is the concatenation of path and all members
of *paths, with exactly one directory separator following each non-empty part, except the last.
Parameters
----------
path : str or bytes
Returns
-------
str
Examples
--------
>>> os.path.join("usr", "lib")
'usr/lib'"""
NEVER_FOR_DOCS = {"adult", "fashion_beauty", "travel"}


@pytest.fixture(scope="module")
def held_out_docs():
    """Documentation pages of seven software projects that the shipped seeds never held (their test split)."""
    from assay.quality.corpus import read_jsonl_gz
    from assay.quality.reference import split_of
    from assay.quality.topics import SEEDS

    rows = read_jsonl_gz(SEEDS.parent / "reference.jsonl.gz")
    seeds = {r["page"] for r in read_jsonl_gz(SEEDS)}
    test = sorted((r for r in rows if r["split"] == "test"), key=lambda r: r["page"])[::4][:60]
    assert not seeds & {r["page"] for r in test} and all(split_of(r["page"]) == "test" for r in test)
    return test


def test_documentation_is_tagged_software_never_adult_fashion_or_travel(held_out_docs):
    stage = Topics({})
    texts = [r["text"] for r in held_out_docs] + [OCTAVE_DOC, PYTHON_DOC]
    topics = stage.process(make_docs([{"text": t, "source": "d"} for t in texts])).column("topic").to_pylist()
    assert topics[-2:] == ["software_dev", "software_dev"]
    # one miss is known: the tokenizers README, whose first 128 tokens are the HTML of a logo (fashion_beauty)
    assert sum(t in NEVER_FOR_DOCS for t in topics) <= 1
    assert np.mean([t in ("software_dev", "software") for t in topics]) >= 0.95
    bare = Topics({"labels": "none"})  # descriptions alone: what the seeds fix
    before = bare.process(make_docs([{"text": t, "source": "d"} for t in texts])).column("topic").to_pylist()
    assert np.mean([t in ("software_dev", "software") for t in before]) < np.mean([t in ("software_dev", "software") for t in topics])


def test_a_team_adds_its_own_labels(tmp_path):
    import json

    labels = tmp_path / "labels.jsonl"
    examples = [("Octave function reference: plot, axis, hold, legend and their options.", "scientific_computing"),
                ("MATLAB and Octave documentation: matrix functions, numel, zeros, linspace, see also.", "scientific_computing"),
                ("The striker scored twice and the team won the cup final.", "sports_fitness")]
    labels.write_text("".join(json.dumps({"text": t, "topic": k}) + "\n" for t, k in examples))
    stage = Topics({"labels": str(labels)})
    out = stage.process(make_docs([{"text": OCTAVE_DOC, "source": "d"}, {"text": DOCS[1][0], "source": "d"}]))
    assert out.column("topic").to_pylist() == ["scientific_computing", "sports_fitness"]
