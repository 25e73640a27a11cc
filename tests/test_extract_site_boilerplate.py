"""extract.site_boilerplate: blocks a site repeats across its pages go; code, tables, formulas,
other sites' blocks and documents without a URL stay; an emptied page is a reject; the artifact
does not depend on the order of the shards; the same rows on the local engine, Spark and Ray."""
from __future__ import annotations

import itertools
import json

import pytest

from assay.extractors.site_boilerplate import SiteBoilerplate, split_blocks
from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.engines import get_engine
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import loads_meta, make_docs

NEWSLETTER = "Sign up for our newsletter: the day's stories in your inbox."
CODE = "```bash\npip install gazette-tools\n\n# then\ngazette --help\n```"
TABLE = "| plan | price |\n|---|---|\n| basic | 5 |"
FORMULA = "The rate is $r = k/n$ for every reader."
BODIES = [
    "The council voted on the bridge budget after a long night of debate.",
    "A storm closed the harbour for three days and fishermen stayed home.",
    "The library reopened with a new wing for children and a reading garden.",
    "Local runners raised money for the hospital in a race around the lake.",
    "Farmers reported the best apple harvest in a decade this autumn.",
]


TITLES = ["Bridge budget", "Harbour storm", "Library wing", "Lake race", "Apple harvest"]


def page(i: int, *extra: str) -> str:
    return "\n\n".join([f"# {TITLES[i % len(TITLES)]}", f"Posted {i + 2} days ago", BODIES[i % len(BODIES)], *extra])


def site_docs(host: str = "gazette.example", n: int = 4, extra=(NEWSLETTER,)) -> list[dict]:
    return [{"id": f"{host}-{i}", "text": page(i, *extra), "url": f"https://www.{host}/news/{i}", "source": "t"}
            for i in range(n)]


def fit_apply(rows: list[dict], shards: int = 1, **params):
    stage = SiteBoilerplate(params)
    table = make_docs(rows)
    step = -(-table.num_rows // shards)
    states = [stage.fit(table.slice(i, step), None) for i in range(0, table.num_rows, step)]
    artifact = stage.reduce(states)
    return stage.apply(table, artifact), artifact


def by_id(table) -> dict[str, dict]:
    return {r["id"]: r for r in table.to_pylist()}


def test_furniture_on_enough_of_a_sites_pages_goes_and_is_recorded():
    out, artifact = fit_apply(site_docs(), shards=2)
    rows = by_id(out)
    for i in range(4):
        r = rows[f"gazette.example-{i}"]
        assert r["reject_reason"] is None
        assert NEWSLETTER not in r["text"] and "Posted" not in r["text"]  # digits differ: one block
        assert r["text"] == f"# {TITLES[i]}\n\n{BODIES[i]}"
        assert loads_meta(r["meta"])["site_boilerplate"] == {"blocks": 2, "chars": len(NEWSLETTER) + len(f"Posted {i + 2} days ago")}
    assert list(artifact["sites"]) == ["gazette.example"] and len(artifact["sites"]["gazette.example"]) == 2


def test_below_min_pages_or_min_share_nothing_goes():
    rows = site_docs(n=4)
    for r in rows[2:]:
        r["text"] = r["text"].replace(NEWSLETTER, "")
    out, _ = fit_apply(rows, min_pages=3)  # the newsletter is on 2 pages, "Posted ..." on all 4
    assert all(NEWSLETTER in r["text"] for r in by_id(out).values() if r["id"].endswith(("-0", "-1")))
    rows = site_docs(n=8)
    for r in rows[3:]:
        r["text"] = r["text"].replace(NEWSLETTER, "")
    out, _ = fit_apply(rows, min_pages=3, min_share=0.5)  # on 3 of 8 pages: under half
    assert sum(NEWSLETTER in r["text"] for r in by_id(out).values()) == 3


def _math_site(n: int = 18) -> list[dict]:
    """A worked-problems site: each page its own problem, the same furniture, and an answer line in
    one of three styles whose number differs from page to page."""
    styles = ["Answer: {}", "#### {}", "The answer is {}."]
    rows = []
    for i in range(n):
        a, b = 3 * i + 7, 5 * i + 11
        text = "\n\n".join([f"# Problem {i + 1}", f"Tom has {a} apples and buys {b} more. How many apples does he have?",
                             f"He has {a} + {b} = {a + b} apples.", styles[i % 3].format(a + b), NEWSLETTER])
        rows.append({"id": f"math-{i}", "text": text, "url": f"https://math.example/p/{i}", "source": "t"})
    return rows


def test_answer_lines_whose_numbers_differ_from_page_to_page_stay():
    """Numbers are what tells such blocks apart: "Answer: 72" on one page and "Answer: 35" on
    another are two blocks, not one repeated 18 times (issue 46: all 18 answer lines went)."""
    rows = _math_site()
    out, artifact = fit_apply(rows)
    kept = by_id(out)
    for r in rows:
        answer = r["text"].split("\n\n")[3]
        assert kept[r["id"]]["reject_reason"] is None
        assert answer in kept[r["id"]]["text"] and r["text"].split("\n\n")[0] in kept[r["id"]]["text"]
        assert NEWSLETTER not in kept[r["id"]]["text"]
    assert len(artifact["sites"]["math.example"]) == 1  # the newsletter alone


def test_pages_that_differ_only_in_their_numbers_are_not_emptied():
    rows = [{"id": f"drill-{i}", "text": f"Compute {i + 2} x {i + 3}.\n\nAnswer: {(i + 2) * (i + 3)}",
             "url": f"https://drill.example/{i}", "source": "t"} for i in range(20)]
    out, artifact = fit_apply(rows)
    assert [r["reject_reason"] for r in out.to_pylist()] == [None] * 20
    assert [r["text"] for r in out.to_pylist()] == [r["text"] for r in rows]
    assert artifact["sites"] == {}


def test_timestamps_still_count_as_one_block():
    """Dates, clock times and "N days ago" are what a byline's numbers are: they still collapse."""
    stamps = ["Posted on 2024-03-0{} at 10:1{} am", "Updated March {}, 2024 1{}:05:00", "기사입력 :[ 2018-08-2{} 15:2{} ]"]
    for stamp in stamps:
        rows = site_docs(extra=(NEWSLETTER,))
        for i, r in enumerate(rows):
            r["text"] += "\n\n" + stamp.format(i + 1, i)
        kept = by_id(fit_apply(rows)[0])
        assert all(stamp[:6] not in kept[r["id"]]["text"] for r in rows), stamp


def test_code_tables_and_formulas_repeated_on_every_page_stay():
    out, _ = fit_apply(site_docs(extra=(NEWSLETTER, CODE, TABLE, FORMULA)))
    for r in by_id(out).values():
        assert NEWSLETTER not in r["text"]
        assert CODE in r["text"] and TABLE in r["text"] and FORMULA in r["text"]


def test_a_fenced_block_with_blank_lines_is_one_block():
    text = f"intro\n\n{CODE}\n\noutro"
    assert [text[a:b] for a, b in split_blocks(text)] == ["intro", CODE, "outro"]


def test_another_sites_identical_block_is_counted_for_that_site_alone():
    """The newsletter is on 2 pages of each of two sites: 4 pages in all, but under min_pages 3 on
    each site, so it stays everywhere."""
    rows = site_docs("a.example", n=3) + site_docs("b.example", n=3)
    for r in rows:
        if r["id"].endswith("-2"):
            r["text"] = r["text"].replace(NEWSLETTER, "")
    out, artifact = fit_apply(rows, min_pages=3, min_share=0.5)
    assert sum(NEWSLETTER in r["text"] for r in by_id(out).values()) == 4
    assert sorted(artifact["sites"]) == ["a.example", "b.example"]  # "Posted ..." is on all 3 of each


def test_documents_without_a_url_pass_through_untouched():
    rows = site_docs()
    loose = [{"id": f"loose-{i}", "text": page(i, NEWSLETTER), "url": None, "source": "t"} for i in range(4)]
    out, _ = fit_apply(rows + loose)
    table = make_docs(rows + loose)
    before = by_id(table)
    for r in by_id(out).values():
        if r["id"].startswith("loose"):
            assert r["text"] == before[r["id"]]["text"] and r["meta"] == before[r["id"]]["meta"]
            assert r["reject_reason"] is None


def test_a_page_of_nothing_but_furniture_is_a_reject_with_its_text():
    rows = site_docs()
    rows.append({"id": "tag-page", "text": f"Posted 1 days ago\n\n{NEWSLETTER}\n", "url": "https://gazette.example/tag/x", "source": "t"})
    out, _ = fit_apply(rows)
    r = by_id(out)["tag-page"]
    assert r["reject_reason"] == "site_boilerplate" and "gazette.example" in r["reject_detail"]
    assert r["text"] == rows[-1]["text"]


def test_blocks_longer_than_the_limit_are_neither_counted_nor_dropped():
    long_blurb = "About us. " * 30  # 300 characters
    out, _ = fit_apply(site_docs(extra=(long_blurb.strip(),)), max_block_chars=200)
    assert all(long_blurb.strip() in r["text"] for r in by_id(out).values())


def test_the_artifact_is_the_same_whatever_the_order_of_the_shards():
    """The contract: reduce gets partial states in shard order and must be deterministic. Combined
    in any order and grouping, the states of three shards give the same artifact, byte for byte."""
    stage = SiteBoilerplate({"min_pages": 2})
    rows = site_docs("a.example", n=3) + site_docs("b.example", n=4) + [dict(site_docs("c.example", n=1)[0])]
    table = make_docs(rows)
    states = [stage.fit(table.slice(i, 3), None) for i in range(0, table.num_rows, 3)]
    artifacts = set()
    for perm in itertools.permutations(states):
        artifacts.add(json.dumps(stage.reduce(list(perm)), sort_keys=True))
        artifacts.add(json.dumps(stage.reduce([stage.combine(list(perm[:2])), perm[2]]), sort_keys=True))
    assert len(artifacts) == 1
    assert json.loads(artifacts.pop())["documents"] == 8


def _corpus() -> list[dict]:
    rows = site_docs("a.example", n=5, extra=(NEWSLETTER, CODE)) + site_docs("b.example", n=3)
    rows += [{"id": "tag-page", "text": f"Posted 1 days ago\n\n{NEWSLETTER}", "url": "https://a.example/tag", "source": "t"},
             {"id": "loose", "text": page(0, NEWSLETTER), "url": None, "source": "t"}]
    return rows


def _rows(path, rejects=False):
    ds = Dataset(path)
    table = ds.read_rejects() if rejects else ds.read()
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_through_the_runner_on_the_local_engine(tmp_path):
    src = write_table(make_docs(_corpus()), tmp_path / "in", shards=3)
    result = run_stage(SiteBoilerplate({}), [src], tmp_path / "out", engine=get_engine("local", {"workers": 2}))
    counts = result.manifest["counts"]
    assert counts["rows_in"] == 10 and counts["rows_out"] == 9 and counts["rows_rejected"] == 1
    kept = {r["id"]: r for r in _rows(tmp_path / "out")}
    assert all(NEWSLETTER not in kept[f"a.example-{i}"]["text"] and CODE in kept[f"a.example-{i}"]["text"] for i in range(5))
    assert all("Posted" not in kept[f"b.example-{i}"]["text"] for i in range(3))
    assert NEWSLETTER in kept["loose"]["text"]
    assert [(r["id"], r["reject_reason"]) for r in _rows(tmp_path / "out", rejects=True)] == [("tag-page", "site_boilerplate")]
    artifact = json.loads((tmp_path / "out" / "_artifacts" / "fit.json").read_text())
    assert sorted(artifact["sites"]) == ["a.example", "b.example"]


# slow: a Spark session and a Ray cluster of this file's own (about 30 s); the fit-then-apply machinery
# on both engines is in the fast suite through quality.tiers.
@pytest.mark.slow
@pytest.mark.parametrize("engine", [pytest.param("spark", marks=pytest.mark.spark), pytest.param("ray", marks=pytest.mark.ray)])
def test_same_rows_rejects_and_artifact_on_spark_and_ray(tmp_path, engine, request):
    src = write_table(make_docs(_corpus()), tmp_path / "in", shards=3)
    run_stage(SiteBoilerplate({}), [src], tmp_path / "local", engine=get_engine("local", {"workers": 2}))
    run_stage(SiteBoilerplate({}), [src], tmp_path / engine, engine=request.getfixturevalue(f"{engine}_engine"))
    for rejects in (False, True):
        assert _rows(tmp_path / engine, rejects) == _rows(tmp_path / "local", rejects)
    fit = lambda name: (tmp_path / name / "_artifacts" / "fit.json").read_bytes()  # noqa: E731
    assert fit(engine) == fit("local")
