"""Site boilerplate (`extract.site_boilerplate`): what dropping the blocks a site repeats across its
pages does to extraction scores, against the extraction alone, in one run.

1. Real pages: every AEB and magic-html (article, forum) page is extracted (`native`, then `precise`);
   the stage's fit/reduce/apply runs on all of them together (a site = the URL's host), so only the
   sites with two or more pages can change. Scored on those pages before and after: the AEB protocol
   (extraction.aeb_scores) for AEB pages, token P/R (extraction.token_scores) for magic-html pages.
   Every removed block is listed with whether its text is in the page's ground truth.
   Swept at min_pages 2 (the only value two pages a site can test): min_share, max_block_chars; then
   the defaults (min_pages 3: only the few sites with 3-4 pages could change).
2. The fit's state: distinct countable blocks per page for each max_block_chars, and what that makes
   per million pages (16 bytes an entry, no sharing between pages assumed: an upper bound).
3. A generated site of 20 pages: the same header, byline, newsletter blurb, related links and footer
   around different article bodies (AEB ground-truth texts), one sentence shared by two articles and
   one code block on every page. Checked: furniture native keeps is removed, article text stays.
4. Generated worked-problems sites (issue 46), one per answer style ("#### N", "Answer: N", "The
   answer is N."): 18 GSM8K test problems with their worked solutions, and the same furniture (a
   bio, a pointer to more problems) on every page; and a drill site of 20 pages that differ only in
   their numbers. Checked: answer lines kept, furniture removed, no page emptied.

Run:  python benchmarks/site_boilerplate.py   (writes benchmarks/results/site_boilerplate.json)
"""
from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from extraction import DATA, aeb_scores, token_scores  # noqa: E402

RESULTS = HERE / "results" / "site_boilerplate.json"


def real_pages() -> dict[str, dict]:
    """key -> {html, truth, url, group} for the AEB and magic-html pages (extraction.real_pages' keys)."""
    from extraction import real_pages as html_and_truth

    urls = {f"aeb/{k}": v.get("url") for k, v in json.loads((DATA / "aeb" / "ground-truth.json").read_text()).items()}
    for kind in ("article", "forum"):
        base = json.loads((DATA / "magic-html" / "benchmark" / "data" / kind / "base.json").read_text())
        urls.update({f"magic-{kind}/{k[:16]}": v.get("url") for k, v in base.items()})
    return {k: {"html": html, "truth": truth, "url": urls.get(k), "group": k.split("/")[0]}
            for k, (html, truth) in html_and_truth().items()}


def run_stage(texts: dict[str, str], urls: dict[str, str | None], params: dict) -> tuple[dict[str, str], dict, list]:
    """The stage's fit (one state per page: every page its own shard), combine, reduce and apply, in
    process. Returns the texts after (a rejected page's text becomes ""), the artifact, the rejects."""
    from assay.extractors.site_boilerplate import SiteBoilerplate
    from assay.pipeline.schema import make_docs

    keys = sorted(texts)
    table = make_docs([{"id": k, "text": texts[k], "url": urls[k]} for k in keys])
    stage = SiteBoilerplate(params)
    states = [stage.fit(table.slice(i, 1), None) for i in range(table.num_rows)]
    artifact = stage.reduce([stage.combine(states[i:i + 16]) for i in range(0, len(states), 16)])
    out = stage.apply(table, artifact)
    after, rejects = {}, []
    for k, text, reason in zip(keys, out.column("text").to_pylist(), out.column("reject_reason").to_pylist()):
        after[k] = "" if reason else text
        if reason:
            rejects.append(k)
    return after, artifact, rejects


def _flat(s: str) -> str:
    return re.sub(r"[\W_]+", " ", s).strip().casefold()


def removed_blocks(before: str, after: str, truth: str) -> list[dict]:
    from assay.extractors.site_boilerplate import split_blocks

    kept = {after[a:b] for a, b in split_blocks(after)} if after else set()
    flat_truth = _flat(truth)
    out = []
    for a, b in split_blocks(before):
        block = before[a:b]
        if block not in kept:
            out.append({"text": block[:200], "chars": len(block), "in_truth": bool(_flat(block)) and _flat(block) in flat_truth})
    return out


def scores(pages: dict[str, dict], keys: list[str], outs: dict[str, str]) -> dict:
    res = {}
    for group in ("aeb", "magic-article", "magic-forum"):
        ks = [k for k in keys if pages[k]["group"] == group]
        if not ks:
            continue
        if group == "aeb":
            s = aeb_scores({k: pages[k]["truth"] for k in ks}, outs)
        else:
            s = token_scores({k: ("", pages[k]["truth"]) for k in ks}, outs)
        res[group] = dict({m: round(v, 4) for m, v in s.items()}, pages=len(ks))
    return res


def real_section(pages: dict[str, dict], mode: str, sweep: list[dict]) -> dict:
    from assay.extractors.html import extract_html
    from assay.extractors.urls import url_domain

    texts = {k: extract_html({"html": p["html"], "mode": mode})["text"] or "" for k, p in pages.items()}
    urls = {k: p["url"] for k, p in pages.items()}
    by_site = defaultdict(list)
    for k in pages:
        by_site[url_domain(urls[k])].append(k)
    multi = sorted(k for site, ks in by_site.items() if site and len(ks) > 1 for k in ks)
    out = {"pages": len(pages), "sites_with_several_pages": sum(1 for s, ks in by_site.items() if s and len(ks) > 1),
           "pages_on_those_sites": len(multi), "before": scores(pages, multi, texts), "runs": []}
    for params in sweep:
        after, artifact, rejects = run_stage(texts, urls, params)
        changed = [k for k in multi if after[k] != texts[k]]
        removed = {k: removed_blocks(texts[k], after[k], pages[k]["truth"]) for k in changed}
        blocks = [b for bs in removed.values() for b in bs]
        rest = [k for k in multi if k not in set(rejects)]
        run = {"params": params, "after": scores(pages, multi, after), "pages_changed": len(changed),
               "without_rejected_pages": {"before": scores(pages, rest, texts), "after": scores(pages, rest, after)},
               "rejected": {k: urls[k] for k in rejects},
               "pages_rejected": len(rejects), "blocks_removed": len(blocks),
               "chars_removed": sum(b["chars"] for b in blocks),
               "blocks_removed_in_truth": sum(b["in_truth"] for b in blocks),
               "chars_removed_in_truth": sum(b["chars"] for b in blocks if b["in_truth"]),
               "unchanged_outside_multi_page_sites": all(after[k] == texts[k] for k in pages if k not in set(multi))}
        if params == sweep[0]:  # "T " marks a block whose text is in the page's ground truth
            run["removed"] = {k: [("T " if b["in_truth"] else "- ") + b["text"][:80] for b in removed[k]] for k in sorted(removed)}
        out["runs"].append(run)
        print(mode, params, run["after"], "changed", len(changed), "blocks", len(blocks),
              "in truth", run["blocks_removed_in_truth"], flush=True)
    out["state"] = state_size(texts)
    return out


def state_size(texts: dict[str, str]) -> dict:
    from assay.extractors.site_boilerplate import countable, split_blocks

    res = {}
    for limit in (200, 500, 1000, 2000, 10**9):
        per_page = [len({h for _, h in countable(t, split_blocks(t), limit)}) for t in texts.values()]
        mean = sum(per_page) / len(per_page)
        res[str(limit) if limit < 10**9 else "none"] = {"entries_per_page": round(mean, 1),
                                                        "mb_per_million_pages": round(mean * 16 * 1e6 / 2**20)}
    return res


# ---- a generated site ---------------------------------------------------------------------------

SHARED_SENTENCE = "The committee will publish its full findings in a report later this year, officials said."
CODE = "pip install example-toolkit==2.1"


def generated_site(n: int = 20) -> tuple[list[str], list[str], list[dict]]:
    """n pages of one site: the same furniture around different article bodies."""
    aeb = json.loads((DATA / "aeb" / "ground-truth.json").read_text())
    bodies = [v["articleBody"] for _, v in sorted(aeb.items()) if v["articleBody"].count("\n") >= 4
              and len(v["articleBody"]) < 6000 and v["articleBody"].isascii()][:n]
    pages, furniture = [], [
        "Sign up for The Daily Brief: the stories you need, in your inbox every morning before 7am.",
        "Share this article", "Advertisement",
        "Related: How the city plans to fix its roads | Five things to know this week | Letters to the editor",
        "Thomas Walker is a staff reporter covering city hall and transport.",
    ]
    truths = []
    for i, body in enumerate(bodies):
        paras = [p.strip() for p in body.split("\n") if p.strip()]
        if i in (3, 11):
            paras.insert(2, SHARED_SENTENCE)
        truths.append(paras)
        article = "".join(f"<p>{_esc(p)}</p>" for p in paras)
        pages.append(f"""<html><head><title>Story {i} - The Gazette</title></head><body>
<header><a href="/">The Gazette</a><nav><a href="/news">News</a> <a href="/sport">Sport</a> <a href="/opinion">Opinion</a></nav></header>
<main><article><h1>{_esc(" ".join(paras[0].split()[:8]))}</h1>
<p class="byline">By Thomas Walker | Posted {i % 7 + 1} days ago</p>
<p>{furniture[1]}</p>
{article}
<pre><code>{CODE}</code></pre>
<p>{furniture[2]}</p>
<div class="newsletter"><p>{furniture[0]}</p></div>
<p>{furniture[3]}</p>
<p class="bio">{furniture[4]}</p>
</article>
<aside><h2>Most read</h2><ul><li><a href="/a">Council votes on budget</a></li><li><a href="/b">Storm warning issued</a></li></ul></aside></main>
<footer><p>Copyright 2024 The Gazette. All rights reserved.</p><a href="/privacy">Privacy</a></footer></body></html>""")
    return pages, furniture, truths


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def generated_section(params: dict) -> dict:
    from assay.extractors.html import extract_html

    pages, furniture, truths = generated_site()
    texts = {f"p{i:02d}": extract_html({"html": h, "mode": "native"})["text"] for i, h in enumerate(pages)}
    urls = {k: f"https://www.gazette.example/news/{k}" for k in texts}
    after, artifact, rejects = run_stage(texts, urls, params)
    flat = lambda s: re.sub(r"\s+", " ", s)  # noqa: E731
    res = {"pages": len(pages), "boilerplate_blocks": artifact["boilerplate_blocks"], "rejected": len(rejects)}
    res["furniture_kept_by_native"] = {f[:40]: sum(f in flat(t) for t in texts.values()) for f in furniture}
    res["furniture_after"] = {f[:40]: sum(f in flat(t) for t in after.values()) for f in furniture}
    res["headlines_kept"] = sum(t.lstrip().startswith("#") for t in after.values())
    res["byline_kept_by_native"] = sum("Posted" in t for t in texts.values())
    res["byline_after"] = sum("Posted" in t for t in after.values())
    res["code_block_kept"] = sum(CODE in t for t in after.values())
    res["shared_sentence_kept"] = sum(SHARED_SENTENCE in t for t in after.values())
    paras = [(k, p) for k, ps in zip(sorted(texts), truths) for p in ps]
    res["article_paragraphs"] = len(paras)
    res["article_paragraphs_in_native"] = sum(flat(p) in flat(texts[k]) for k, p in paras)
    res["article_paragraphs_kept"] = sum(flat(p) in flat(after[k]) for k, p in paras)
    print("generated", res, flush=True)
    return res


ANSWER_STYLES = {"hashes": "#### {}", "answer_colon": "Answer: {}", "the_answer_is": "The answer is {}."}
# Furniture native extraction keeps (it drops dated bylines and sign-up blurbs itself)
FURNITURE = ("More problems like this one are in our weekly practice sheets for grade school.",
             "Thomas Walker is a staff writer covering maths education and homework help.")


def math_site(style: str, n: int = 18) -> tuple[dict[str, str], dict[str, str]]:
    """n pages of worked GSM8K problems, the final line in one style: key -> HTML, key -> answer line.
    The furniture is in plain paragraphs, so extraction keeps it."""
    problems = [json.loads(line) for line in (DATA.parent / "decontam" / "gsm8k" / "test.jsonl").open()][:n]
    pages, answers = {}, {}
    for i, item in enumerate(problems):
        *steps, final = item["answer"].split("\n")
        answer = ANSWER_STYLES[style].format(final.removeprefix("#### ").strip())
        key = f"{style}/{i:02d}"
        answers[key] = answer
        pages[key] = (f"<html><head><title>Problem {i + 1}</title></head><body><main><article>"
                      f"<h1>{_esc(' '.join(item['question'].split()[:6]))}</h1>"
                      f"<p>Posted on 2024-03-{i % 28 + 1:02d} at {i % 12 + 1}:15 pm</p><p>{_esc(item['question'])}</p>"
                      + "".join(f"<p>{_esc(re.sub(r'<<[^>]*>>', '', step))}</p>" for step in steps)
                      + f"<p>{_esc(answer)}</p>" + "".join(f"<p>{f}</p>" for f in FURNITURE)
                      + "</article></main></body></html>")
    return pages, answers


def numeric_section(params: dict) -> dict:
    from assay.extractors.html import extract_html

    out = {}
    for style in ANSWER_STYLES:
        pages, answers = math_site(style)
        texts = {k: extract_html({"html": h, "mode": "native"})["text"] for k, h in pages.items()}
        after, _, rejects = run_stage(texts, {k: f"https://{style.replace('_', '-')}.example/{k}" for k in texts}, params)
        out[style] = {"pages": len(pages), "answer_line_in_native": sum(answers[k] in texts[k] for k in texts),
                      "answer_line_kept": sum(answers[k] in after[k] for k in texts),
                      "furniture_in_native": sum(f in t for t in texts.values() for f in FURNITURE),
                      "furniture_after": sum(f in t for t in after.values() for f in FURNITURE),
                      "rejected": len(rejects)}
    drills = {f"d{i:02d}": f"Compute {i + 2} x {i + 3}.\n\nAnswer: {(i + 2) * (i + 3)}" for i in range(20)}
    after, _, rejects = run_stage(drills, {k: f"https://drill.example/{k}" for k in drills}, params)
    out["pages_differing_only_in_numbers"] = {"pages": len(drills), "rejected": len(rejects),
                                              "unchanged": sum(after[k] == drills[k] for k in drills)}
    print("numeric", out, flush=True)
    return out


def main() -> None:
    from assay.extractors.site_boilerplate import SiteBoilerplateParams

    pages = real_pages()
    default = SiteBoilerplateParams().model_dump()
    sweep = [dict(default, min_pages=2)]  # the only min_pages two pages a site can test; removed blocks listed
    sweep += [dict(default, min_pages=2, **change) for change in
              ({"min_share": 1.0}, {"max_block_chars": 500}, {"max_block_chars": 1000}, {"max_block_chars": 10**6})]
    sweep.append(default)
    result = {"real": {mode: real_section(pages, mode, sweep) for mode in ("native", "precise")},
              "defaults": default, "generated": generated_section(default), "numeric": numeric_section(default)}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
