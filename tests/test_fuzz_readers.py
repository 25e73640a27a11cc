"""Fuzz every reader and source stage with malformed files: the promise is a reject, never a crash
or a hang, and every input file accounted for.

From a fixed seed, real files of the repository (examples/sample/, tests/fixtures/) are mutated
(byte flips, truncation, insertion, deletion, chunk duplication, random overwrites, damaged headers),
at the container level and inside the decompressed content, and joined by hand-made edge cases
(lone surrogates, deep nesting, wrong types, bombs, lying lengths, object loops, FIFOs, ...).

Each file goes through the stage's `read_file` in-process under a wall-clock guard; then the whole
directory goes once through `run_stage`, which writes real shards and checks the ledger. Asserted:
no exception escapes, no case runs past its limit, every row is valid (UTF-8, JSON meta, reason and
detail on rejects), every input file yields at least one row traceable to it. Counts of inputs and
reject reasons are printed; with ASSAY_FUZZ_REPORT=path they are also written there as JSON
(benchmarks/results/fuzz.json holds a committed run).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from assay.extractors.pdf import ExtractPdf
from assay.extractors.stages import ExtractHtmlFiles, ExtractWarc
from assay.pipeline.dataset import Dataset
from assay.pipeline.readers import ReadJsonl, ReadParquet, ReadTextFiles, valid_utf8
from assay.pipeline.runner import run_stage
from conftest import FIXTURES, SAMPLE
from fuzzing import (Hang, Mutator, deadline, http_response, pdf_file, pdf_stream, text_page_objects, warc_record,
                     write_report)

SEED = 20240909
CASE_LIMIT_S = 30  # per file; extraction itself is held to timeout_s per document by the stages
EXTRACT_TIMEOUT_S = 2.5
REASON = re.compile(r"^[a-z][a-z0-9_]*$")
# Cases that cost seconds by design (80,000 tiny records before the bomb guard trips, a 300 MB line):
# the per-file pass reads them, the end-to-end pass does not repeat them.
HEAVY = {"edge:bomb-records.jsonl.zst", "edge:huge-record"}


@dataclass
class Case:
    path: str
    origin: str  # "seed", "mutant:<op>", "content:<op>" (mutated inside the compression), "edge:<name>"


class Corpus:
    """Writes the cases of one reader into its own directory; special files go to a side directory
    (directory listings skip them, so only the per-file pass sees them)."""

    def __init__(self, root: Path, name: str, seed: int):
        self.dir = root / name
        self.side = root / f"{name}-special"
        self.dir.mkdir(parents=True)
        self.side.mkdir()
        self.mutate = Mutator(seed)
        self.cases: list[Case] = []

    def add(self, name: str, data: bytes, origin: str) -> Path:
        path = self.dir / f"{len(self.cases):04d}-{name}"
        path.write_bytes(data)
        self.cases.append(Case(str(path), origin))
        return path

    def mutants(self, name: str, data: bytes, n: int, wrap=None, layer: str = "mutant") -> None:
        """n mutants of `data`; with `wrap` the mutation happens inside and the result is wrapped
        (compressed) afterwards, so the parser behind the decompressor sees the damage."""
        for _ in range(n):
            op, bad = self.mutate(data)
            self.add(name, wrap(bad) if wrap else bad, f"{layer}:{op}")

    def special(self, name: str, make) -> None:
        path = self.side / name
        make(path)
        self.cases.append(Case(str(path), f"edge:{name}"))


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def sparse_line(path: Path, prefix: bytes, size: int, after: bytes) -> None:
    """A record of `size` bytes without reading or writing them all: the file is sparse."""
    with open(path, "wb") as fh:
        fh.write(prefix)
        fh.truncate(size)
        fh.seek(size)
        fh.write(b"\n" + after)


def common_specials(c: Corpus, suffix: str, data: bytes) -> None:
    # A regular file whose name is not UTF-8: paths and source names come from names like this.
    c.add(os.fsdecode(b"name-\xff\xfe") + suffix, data, "edge:non-utf8-name")
    c.special(f"fifo{suffix}", os.mkfifo)  # opening it would block forever
    c.special(f"dev-zero{suffix}", lambda p: os.symlink("/dev/zero", p))  # endless
    c.special(f"loop{suffix}", lambda p: (os.symlink(p.with_name("loop-b"), p), os.symlink(p, p.with_name("loop-b"))))
    c.special(f"dir{suffix}", lambda p: p.mkdir())
    c.special(f"gone{suffix}", lambda p: None)  # listed, then deleted before reading


# ---- corpora ------------------------------------------------------------------------------------------

def jsonl_cases(root: Path) -> list[Case]:
    c = Corpus(root, "jsonl", SEED + 1)
    issues = gzip.decompress((SAMPLE / "issues" / "swebench-issues.jsonl.gz").read_bytes())
    seed = b"".join(issues.splitlines(keepends=True)[:30])
    urls = (SAMPLE / "html" / "urls.jsonl").read_bytes()
    c.add("issues.jsonl.gz", gz(seed), "seed")
    c.add("urls.jsonl", urls, "seed")
    c.mutants("m.jsonl", seed, 70)
    c.mutants("m.jsonl", urls, 30)
    c.mutants("m.jsonl.gz", gz(seed), 40)
    c.mutants("m.jsonl.zst", zst(seed), 40)
    c.mutants("c.jsonl.gz", seed, 25, wrap=gz, layer="content")
    c.mutants("c.jsonl.zst", seed, 25, wrap=zst, layer="content")
    deep = b"[" * 100_000 + b"]" * 100_000
    edges = {
        "surrogates.jsonl": b'{"text": "a\\ud800b", "url": "http://x/\\udfff", "k\\ud83d": {"v": ["\\udc00"]}}\n',
        "surrogate-pair.jsonl": b'{"text": "smile \\ud83d\\ude00 ok"}\n',
        "deep.jsonl": deep + b"\n" + b'{"text": "after deep"}\n',
        "deep-meta.jsonl": b'{"text": "x", "m": ' + b"[" * 20_000 + b"]" * 20_000 + b"}\n",
        "wrong-types.jsonl": b"\n".join([b'{"text": 5}', b'{"text": ["a"]}', b'{"text": {"a": 1}}', b'{"text": null}',
                                        b'{"text": true}', b'{"text": "ok", "url": 7, "lang": ["en"]}', b"[1, 2]",
                                        b'"str"', b"42", b"null", b"true"]) + b"\n",
        "nan.jsonl": b'{"text": NaN}\n{"text": "x", "n": Infinity}\n{"text": "y", "n": -Infinity}\n',
        "big-int.jsonl": b'{"text": "x", "n": ' + b"9" * 10_000 + b"}\n",
        "bom.jsonl": b'\xef\xbb\xbf{"text": "after a byte order mark"}\n',
        "crlf-no-final-newline.jsonl": b'{"text": "a"}\r\n\r\n   \r\n{"text": "b"}',
        "nul.jsonl": b'{"text": "a\\u0000b"}\n{"text": "raw \x00 nul"}\n',
        "bad-utf8.jsonl": b'{"text": "caf\xe9"}\n{"text": "\xc0\x80 overlong"}\n{"text": "\xed\xa0\x80 surrogate"}\n{"text": "ok"}\n',
        "utf16.jsonl": '{"text": "utf-16"}\n'.encode("utf-16"),
        "many-keys.jsonl": json.dumps({"text": "k", **{f"k{i}": i for i in range(20_000)}}).encode() + b"\n",
        "long-key.jsonl": json.dumps({"text": "k", "x" * 100_000: 1}).encode() + b"\n",
        "dup-keys.jsonl": b'{"text": "a", "text": "b", "url": 1, "url": "http://x"}\n',
        "empty.jsonl": b"",
        "blank.jsonl": b"\n\n  \n\t\n",
        "empty.jsonl.gz": gz(b""),
        "empty.jsonl.zst": zst(b""),
        "random.jsonl": Mutator(1)._noise(5000),
        "random.jsonl.gz": Mutator(2)._noise(5000),
        "random.jsonl.zst": Mutator(3)._noise(5000),
        "not-gzip.jsonl.gz": seed,
        "truncated.jsonl.gz": gz(seed)[: len(gz(seed)) // 2],
        "truncated.jsonl.zst": zst(seed)[: len(zst(seed)) // 2],
        "corrupt-frame.jsonl.zst": zst(seed)[:4] + b"\xff\xff" + zst(seed)[6:],
        "trailing-garbage.jsonl.gz": gz(seed) + b"garbage after the member",
        "two-members.jsonl.gz": gz(seed) + gz(seed),
        "two-frames.jsonl.zst": zst(seed) + zst(seed),
        "skippable-frame.jsonl.zst": b"\x50\x2a\x4d\x18" + (8).to_bytes(4, "little") + b"skipthis" + zst(seed),
        "bomb.jsonl.gz": gzip.compress(b"\n" * (40 << 20), 9),
        "bomb-records.jsonl.zst": zst(b'{"text":"a"}\n' * (3 << 20)),
        "bomb-line.jsonl.gz": gzip.compress(b'{"text": "' + b"a" * (60 << 20), 9),
    }
    for name, data in edges.items():
        c.add(name, data, "edge:" + name)
    huge = c.add("huge-record.jsonl", b"", "edge:huge-record")
    sparse_line(huge, b'{"text": "', 300 << 20, b'{"text": "the line after a 300 MB record"}\n')
    common_specials(c, ".jsonl", seed)
    return c.cases


def text_cases(root: Path) -> list[Case]:
    c = Corpus(root, "text", SEED + 2)
    code = sorted((SAMPLE / "code").rglob("*.py"))[:12]
    for path in code[:4]:
        c.add(path.name, path.read_bytes(), "seed")
    for i in range(100):
        c.mutants(code[i % len(code)].name, code[i % len(code)].read_bytes(), 1)
    c.mutants("m.py.gz", gz(code[0].read_bytes()), 30)
    c.mutants("m.py.zst", zst(code[1].read_bytes()), 30)
    edges = {
        "empty.py": b"", "blank.txt": b" \n\t\r\n", "nul.txt": b"a\x00b\x00" * 100, "bad-utf8.py": b"x = 'caf\xe9'\n",
        "surrogate-bytes.txt": b"\xed\xa0\x80\xed\xb0\x80", "utf16-bom.txt": "hello".encode("utf-16"),
        "random.py": Mutator(4)._noise(4000), "random.py.gz": Mutator(5)._noise(4000), "random.txt.zst": Mutator(6)._noise(4000),
        "truncated.py.gz": gz(code[2].read_bytes())[:200], "truncated.py.zst": zst(code[2].read_bytes())[:200],
        "bomb.txt.gz": gzip.compress(b"a" * (60 << 20), 9), "bomb.txt.zst": zst(b"\n" * (60 << 20)),
        "no-suffix": code[3].read_bytes(), "long-line.txt": b"x" * 5_000_000,
    }
    for name, data in edges.items():
        c.add(name, data, "edge:" + name)
    huge = c.add("huge.txt", b"", "edge:huge-file")
    sparse_line(huge, b"start", 60 << 20, b"end")  # over the default max_doc_bytes, by size alone
    common_specials(c, ".py", code[0].read_bytes())
    return c.cases


def _parquet_bytes(table: pa.Table, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def parquet_cases(root: Path) -> list[Case]:
    c = Corpus(root, "parquet", SEED + 3)
    texts = [p.read_text() for p in sorted((SAMPLE / "code").rglob("*.py"))[:40]]
    table = pa.table({"text": texts, "url": [f"https://example.com/{i}" for i in range(len(texts))],
                      "meta": [json.dumps({"n": i}) for i in range(len(texts))], "score": [i / 7 for i in range(len(texts))]})
    seeds = {
        "zstd.parquet": _parquet_bytes(table, compression="zstd", row_group_size=10),
        "snappy.parquet": _parquet_bytes(table, compression="snappy", write_page_index=True),
        "plain.parquet": _parquet_bytes(table, compression="none", use_dictionary=False, data_page_size=1024),
    }
    for name, data in seeds.items():
        c.add(name, data, "seed")
        c.mutants("m-" + name, data, 40)
    n = 3
    edges = {
        "int-text.parquet": pa.table({"text": [1, 2, 3]}),
        "no-text-column.parquet": pa.table({"body": ["a", "b"]}),
        "no-columns.parquet": pa.table({"text": ["x"]}).drop(["text"]),
        "zero-rows.parquet": table.slice(0, 0),
        "null-text.parquet": pa.table({"text": pa.array([None, "ok", None], pa.string())}),
        "binary-text.parquet": pa.table({"text": pa.array([b"fine", b"\xff\xfe bad", b"\xed\xa0\x80"], pa.binary())}),
        "large-string.parquet": pa.table({"text": pa.array(["a", "b"], pa.large_string())}),
        "dictionary-text.parquet": pa.table({"text": pa.array(["a", "b", "a"]).dictionary_encode()}),
        "bad-meta.parquet": pa.table({"text": ["a"] * 7, "meta": ["{", '{"a": NaN}', "{} trailing", "{" * 5000 + "}" * 5000,
                                                                   "plain string", "[1, 2]", '{"ok": 1}']}),
        "meta-int.parquet": pa.table({"text": ["a", "b"], "meta": [1, 2]}),
        "odd-columns.parquet": pa.table({"text": ["a"] * n, "url": [1, 2, 3], "lang": [["en"], [], None],
                                         "domain": [{"x": 1}, None, {"x": 2}], "content_type": ["web", "blog", None],
                                         "source": [None, "s", "t"], "id": [1, 2, 3]}),
        "nested.parquet": pa.table({"text": ["a", "b"], "s": [{"a": [1, {"b": None}.get("b")]}, None],
                                    "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64()))}),
        "timestamps.parquet": pa.table({"text": ["a", "b"], "t": pa.array([0, 2**62], pa.timestamp("ms")),
                                        "d": pa.array([1, 2], pa.duration("s")), "dec": pa.array([1, 2], pa.decimal128(5, 2))}),
        "huge-text.parquet": pa.table({"text": ["x" * (60 << 20), "small"]}),
    }
    for name, t in edges.items():
        c.add(name, _parquet_bytes(t), "edge:" + name)
    raw = seeds["zstd.parquet"]
    for name, data in {"empty.parquet": b"", "magic-only.parquet": b"PAR1", "random.parquet": Mutator(7)._noise(5000),
                       "no-footer.parquet": raw[:-8], "bad-footer-length.parquet": raw[:-8] + (2**31 - 1).to_bytes(4, "little") + b"PAR1",
                       "truncated.parquet": raw[: len(raw) // 2] + b"PAR1", "jsonl.parquet": b'{"text": "x"}\n'}.items():
        c.add(name, data, "edge:" + name)
    common_specials(c, ".parquet", raw)
    return c.cases


def html_cases(root: Path) -> list[Case]:
    c = Corpus(root, "html", SEED + 4)
    pages = sorted((SAMPLE / "html").glob("*.html.gz"), key=lambda p: p.stat().st_size)[:6]
    raw = [gzip.decompress(p.read_bytes()) for p in pages]
    for p in pages[:3]:
        c.add(p.name, p.read_bytes(), "seed")
    c.mutants("m.html.gz", pages[0].read_bytes(), 25)
    c.mutants("m.html.gz", pages[1].read_bytes(), 20)
    for i in range(60):
        c.mutants("c.html", raw[i % len(raw)], 1, layer="content")
    c.mutants("c.html.gz", raw[2], 20, wrap=gz, layer="content")
    laughs = (b'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY a "lollollollol">'
              + b"".join(b'<!ENTITY %c "%s">' % (98 + i, b"&%c;" % (97 + i) * 10) for i in range(9))
              + b']><html><body><p>&j;</p><p>' + b"words " * 50 + b"</p></body></html>")
    edges = {
        "empty.html": b"", "nul.html": b"\x00" * 10_000, "random.html": Mutator(8)._noise(20_000),
        "random.html.gz": Mutator(9)._noise(20_000), "not-gzip.html.gz": raw[0],
        "truncated.html.gz": pages[0].read_bytes()[:3000],
        "corrupt-member.html.gz": pages[1].read_bytes()[:200] + b"\xff" * 64 + pages[1].read_bytes()[264:],
        "bomb.html.gz": gzip.compress(b"<p>" + b"a" * (12 << 20), 9),
        "billion-laughs.xhtml": laughs,
        "deep-divs.html": b"<html><body>" + b"<div>" * 200_000 + b"deep text" + b"</div>" * 200_000 + b"</body></html>",
        "deep-tables.html": b"<table><tr><td>" * 30_000 + b"cell",
        "unclosed-links.html": b"<html><head>" + b"<link rel=canonical " * 13_000,
        "unclosed-comment.html": b"<html><body><p>visible</p><!--" + b"hidden " * 10_000,
        "many-attributes.html": b"<div " + b" ".join(b"a%d=x" % i for i in range(100_000)) + b">t</div>",
        "bogus-charset.html": b'<html><head><meta charset="x-no-such-charset"></head><body><p>' + b"text " * 100 + b"</p></body></html>",
        "utf16.html": ("<html><body><p>" + "utf sixteen page " * 20 + "</p></body></html>").encode("utf-16"),
        "canonical-junk.html": b'<link rel="canonical" href="http://[::1">\xff<link href="https://\xed\xa0\x80/" rel=canonical>' + raw[3],
        "script-only.html": b"<script>" + b"var a = 1;" * 10_000 + b"</script>",
        "too-large.html": b"<p>" + b"big words " * 1_100_000,
    }
    for name, data in edges.items():
        c.add(name, data, "edge:" + name)
    common_specials(c, ".html", raw[0])
    return c.cases


def warc_cases(root: Path) -> list[Case]:
    c = Corpus(root, "warc", SEED + 5)
    whole_gz = (FIXTURES / "warc" / "warcfile.warc.gz").read_bytes()
    seed_gz = whole_gz[:42425]  # the first 14 records (gzip members), 4 of them responses
    seed_plain = gzip.decompress(seed_gz)
    seed_lz4 = (FIXTURES / "warc" / "warcfile.warc.lz4").read_bytes()[:50890]
    for name, data in {"seed.warc.gz": seed_gz, "seed.warc": seed_plain, "seed.warc.lz4": seed_lz4}.items():
        c.add(name, data, "seed")
    c.mutants("m.warc.gz", seed_gz, 30)
    c.mutants("m.warc", seed_plain, 30)
    c.mutants("m.warc.lz4", seed_lz4, 15)
    for name in ("clipped.warc.gz", "block-sized-records.warc"):
        c.add(name, (FIXTURES / "warc" / name).read_bytes(), "seed")
    page = gzip.decompress(sorted((SAMPLE / "html").glob("*.html.gz"), key=lambda p: p.stat().st_size)[2].read_bytes())
    good = warc_record(http_response(page), "https://example.com/good")
    records = {
        "short-length": warc_record(http_response(page), "https://example.com/short", length=len(http_response(page)) // 2),
        "long-length": warc_record(http_response(page), "https://example.com/long", length=len(http_response(page)) + 500),
        "huge-length": warc_record(http_response(page), "https://example.com/huge", length=b"99999999999999999999"),
        "negative-length": warc_record(http_response(page), "https://example.com/neg", length=b"-5"),
        "text-length": warc_record(http_response(page), "https://example.com/abc", length=b"abc"),
        "gzip-bomb-body": warc_record(http_response(gzip.compress(b"a" * (12 << 20)),
                                                    [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]), "https://example.com/bomb"),
        "negative-chunk": warc_record(http_response(b"-5\r\nhello\r\n0\r\n\r\n", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]),
                                      "https://example.com/chunk"),
        "underscore-chunk": warc_record(http_response(b"1_0\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n",
                                                      [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]), "https://example.com/chunk2"),
        "no-http-end": warc_record(b"HTTP/1.1 200 OK\r\nContent-Type: text/html", "https://example.com/noend"),
        "odd-status": warc_record(http_response(page, status=b"\xb2\xb2\xb2 OK"), "https://example.com/status"),
        "not-utf8-url": warc_record(http_response(page), "https://example.com/\udcff\udcfe"),
        "warc-1.1": warc_record(http_response(page), "https://example.com/v11", version=b"1.1"),
        "only-warcinfo": warc_record(b"software: x\r\n", kind=b"warcinfo"),
    }
    for name, rec in records.items():
        c.add(name + ".warc", good + rec + good, "edge:" + name)
    c.add("gzip-members.warc.gz", gz(good) + gz(records["long-length"]) + gz(good), "edge:gzip-members-lying")
    c.add("oversized-member.warc.gz", gz(good) + gz(warc_record(b"x" * 11_000_000, "https://example.com/big")) + gz(good), "edge:oversized")
    c.add("garbage-between.warc", good + Mutator(10)._noise(3000) + good, "edge:garbage-between")
    c.add("fake-starts.warc", good + b"\nWARC/1.0\r\n" * 3000 + good, "edge:fake-record-starts")
    for name, data in {"empty.warc": b"", "random.warc": Mutator(11)._noise(8000), "random.warc.gz": Mutator(12)._noise(8000),
                       "header-only.warc": b"WARC/1.0\r\n", "bomb.warc.gz": gzip.compress(b"\n" * (5 << 20), 9)}.items():
        c.add(name, data, "edge:" + name)
    common_specials(c, ".warc", seed_plain)
    return c.cases


def pdf_cases(root: Path) -> list[Case]:
    c = Corpus(root, "pdf", SEED + 6)
    lines = [f"Line {i} of a small hand-made paper about fuzzing readers, with enough words." for i in range(30)]
    made = pdf_file(text_page_objects(lines))
    seeds = {name: (SAMPLE / "pdf" / name).read_bytes() for name in ("simple1.pdf", "malformed-from-issue-932.pdf", "password-example.pdf")}
    seeds["made.pdf"] = made
    for name, data in seeds.items():
        c.add(name, data, "seed")
    c.mutants("m-made.pdf", made, 40)
    c.mutants("m-simple1.pdf", seeds["simple1.pdf"], 15)
    c.mutants("m-malformed.pdf", seeds["malformed-from-issue-932.pdf"], 12)
    c.mutants("m-password.pdf", seeds["password-example.pdf"], 8)
    objs = text_page_objects(lines)
    loop_tree = {**objs, 2: b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>"}
    parent_loop = {**objs, 3: objs[3].replace(b"/Parent 2 0 R", b"/Parent 3 0 R")}
    self_length = {**objs, 4: objs[4].replace(b"/Length", b"/Length 6 0 R %"), 6: b"6 0 R"}
    bomb = {**objs, 4: pdf_stream(zlib.compress(b" " * (50 << 20), 9), b"/Filter /FlateDecode ")}
    deep = {**objs, 4: pdf_stream(b"[" * 100_000 + b"]" * 100_000)}
    count = {**objs, 2: b"<< /Type /Pages /Kids [3 0 R] /Count 2000000000 >>"}
    kids_many = {**objs, 2: b"<< /Type /Pages /Kids [" + b"3 0 R " * 100_000 + b"] /Count 100000 >>"}
    edges = {
        "broken-xref.pdf": pdf_file(objs, shift_xref=37), "no-xref.pdf": pdf_file(objs, xref=False),
        "page-tree-loop.pdf": pdf_file(loop_tree), "parent-loop.pdf": pdf_file(parent_loop),
        "self-length.pdf": pdf_file(self_length), "flate-bomb.pdf": pdf_file(bomb), "deep-arrays.pdf": pdf_file(deep),
        "huge-count.pdf": pdf_file(count), "many-kids.pdf": pdf_file(kids_many),
        "empty.pdf": b"", "header-only.pdf": b"%PDF-1.7\n", "random.pdf": Mutator(13)._noise(10_000),
        "truncated.pdf": made[: len(made) // 2], "html.pdf": b"<html><body>not a pdf</body></html>",
    }
    for name, data in edges.items():
        c.add(name, data, "edge:" + name)
    common_specials(c, ".pdf", made)
    return c.cases


STAGES = {
    "read.jsonl": (lambda d: ReadJsonl({"paths": d}), jsonl_cases),
    "read.text": (lambda d: ReadTextFiles({"paths": d}), text_cases),
    "read.parquet": (lambda d: ReadParquet({"paths": d}), parquet_cases),
    "extract.html": (lambda d: ExtractHtmlFiles({"paths": d, "timeout_s": EXTRACT_TIMEOUT_S}), html_cases),
    # WARC framing is what is fuzzed here, not extraction quality: the fast extractor keeps it quick.
    "extract.warc": (lambda d: ExtractWarc({"paths": d, "timeout_s": EXTRACT_TIMEOUT_S, "mode": "fast"}), warc_cases),
    # PDF parsing is fuzzed, not OCR (seconds per page: tests/test_pdf_ocr.py covers it).
    "extract.pdf": (lambda d: ExtractPdf({"paths": d, "timeout_s": EXTRACT_TIMEOUT_S, "ocr": "off"}), pdf_cases),
}
# Every PDF backend sees a share of the PDF cases: their failure modes differ (pypdf is pure Python).
PDF_BACKENDS = ("auto", "pdfium", "pypdf")


# ---- checks -------------------------------------------------------------------------------------------

def row_problems(table: pa.Table, path: str, per_file_meta_path: bool) -> list[str]:
    """What is wrong with the rows one input file gave (empty list: nothing)."""
    problems = []
    path = valid_utf8(path)[0]  # rows store names that are not UTF-8 with U+FFFD in place
    if table.num_rows == 0:
        return ["no row at all: the file is not accounted for"]
    try:
        table.validate(full=True)  # includes UTF-8 validity of every string
        pq.write_table(table, io.BytesIO())
    except Exception as exc:
        problems.append(f"rows cannot be stored: {type(exc).__name__}: {exc}")
    for row in table.to_pylist():
        meta = json.loads(row["meta"])
        reason = row["reject_reason"]
        if not isinstance(meta, dict):
            problems.append(f"meta is not an object: {row['meta'][:80]}")
        elif reason is not None:
            if not REASON.match(reason) or not row["reject_detail"]:
                problems.append(f"reject without a reason code and detail: {reason!r} {row['reject_detail']!r}")
            if path not in str(meta.get("location", "")) and meta.get("path") != path:
                problems.append(f"reject not traceable to its file: {meta}")
        elif per_file_meta_path and meta.get("path") != path:
            problems.append(f"document not traceable to its file: meta path {meta.get('path')!r}")
    return problems


def run_one_by_one(stages: list, cases: list[Case], stats: dict) -> list[str]:
    """The per-file pass: read_file on each case under a wall-clock guard."""
    failures = []
    for stage in stages:
        stage.ensure_setup()
    for i, case in enumerate(cases):
        stage = stages[i % len(stages)]
        started = time.perf_counter()
        try:
            with deadline(CASE_LIMIT_S):
                tables = list(stage.read_file(case.path))
        except Hang:
            failures.append(f"{case.origin} {case.path}: ran past {CASE_LIMIT_S}s")
            continue
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # anything else escaping a reader is exactly what this test hunts
            failures.append(f"{case.origin} {case.path}: {type(exc).__name__}: {exc}"[:400])
            continue
        finally:
            stats["slowest_case_s"] = max(stats.get("slowest_case_s", 0), round(time.perf_counter() - started, 2))
        table = pa.concat_tables(tables) if tables else pa.table({})
        per_file = stage.name in ("read.text", "extract.html", "extract.pdf", "extract.warc")
        # rows name their file by its place among the stage's inputs (the same on local disk or a store)
        for problem in (row_problems(table, stage.name_of(case.path), per_file) if tables else ["no row at all"]):
            failures.append(f"{case.origin} {case.path}: {problem}")
        stats["inputs"] += 1
        stats["rows"] += table.num_rows
        reasons = Counter(table.column("reject_reason").to_pylist()) if tables else Counter()
        stats["kept"] += reasons.pop(None, 0)
        stats["rejects"].update(reasons)
        if case.origin == "seed":
            stats["seed_documents"] += table.num_rows - sum(reasons.values())
    return failures


def run_as_stage(stage, out: Path, files: list[str]) -> list[str]:
    """The end-to-end pass: one run_stage over the reader's directory, with its real shard writer and
    ledger; every listed file must own at least one row of some shard (by meta path/location, or as
    the only file of its shard)."""
    with deadline(CASE_LIMIT_S * 4 + 2 * len(files)):
        result = run_stage(stage, [], out, engine="local", options={"workers": 1}, force=True)
    counts = result.manifest["counts"]
    failures = []
    if counts["rows_in"] != counts["rows_out"] + counts["rows_rejected"]:
        failures.append(f"ledger does not balance: {counts}")
    shard_files = {g["shard"]: g["files"] for g in result.manifest["input_files"]}
    listed = {f for group in shard_files.values() for f in group}
    if listed != set(files):
        failures.append(f"run_stage listed {len(listed)} files, the directory has {len(files)}")
    owned = set()
    for shard in Dataset(out).shards() + Dataset(out).reject_shards():
        group = shard_files[int(shard.stem.split("-")[1])]
        for meta in pq.read_table(shard, columns=["meta"]).column("meta").to_pylist():
            meta = json.loads(meta)
            if len(group) == 1:
                owned.add(group[0])
            else:
                where = str(meta.get("path") or meta.get("location") or "")
                owned.update(f for f in group if where == _named(stage, f) or where.startswith((_named(stage, f) + ":", _named(stage, f) + " ")))
    missing = sorted(set(files) - owned)
    if missing:
        failures.append(f"{len(missing)} files own no row after run_stage, e.g. {missing[:3]}")
    return failures


def _named(stage, path: str) -> str:
    """How the stage's rows name the file `path` (valid UTF-8, as rows store it)."""
    return valid_utf8(stage.name_of(path))[0]


# ---- tests --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report():
    results: dict[str, dict] = {}
    yield results
    total = sum(r["inputs"] for r in results.values())
    lines = [f"fuzz: {total} malformed and seed inputs across {len(results)} readers"]
    for name, r in results.items():
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["rejects"].items(), key=lambda kv: -kv[1]))
        lines.append(f"  {name:<13} {r['inputs']:>4} inputs {r['kept']:>5} kept  {r['seconds']:>5.1f}s  rejects: {reasons}")
    print("\n" + "\n".join(lines))
    if results:
        write_report("readers", {"seed": SEED, "inputs": total, "per_reader": results})


@pytest.mark.parametrize("name", list(STAGES))
def test_fuzz_reader(name, tmp_path, report):
    make_stage, build = STAGES[name]
    started = time.perf_counter()
    cases = build(tmp_path / "cases")
    directory = str(Path(cases[0].path).parent)
    if name == "extract.pdf":
        stages = [ExtractPdf({"paths": [directory], "timeout_s": EXTRACT_TIMEOUT_S, "backend": b, "ocr": "off"})
                  for b in PDF_BACKENDS]
    else:
        stages = [make_stage([directory])]
    stats = {"inputs": 0, "rows": 0, "kept": 0, "seed_documents": 0, "rejects": Counter()}
    failures = run_one_by_one(stages, cases, stats)
    # The end-to-end pass takes the seeds, the hand-made cases and a sample of mutants: extraction
    # dominates the time, and the per-file pass above already saw every case.
    files = sorted(c.path for i, c in enumerate(cases) if Path(c.path).parent == Path(directory)
                   and (c.origin.startswith(("seed", "edge")) or i % 5 == 0) and c.origin not in HEAVY)
    failures += run_as_stage(make_stage(files), tmp_path / "out", files)
    stats["seconds"] = round(time.perf_counter() - started, 1)
    stats["rejects"] = dict(stats["rejects"])
    report[name] = stats
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])
    # The readers are not just rejecting everything: the unmutated seeds give documents.
    assert stats["seed_documents"] > 0 and stats["kept"] > 0


# ---- what must not become a reject ---------------------------------------------------------------------

@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, MemoryError, Hang])
def test_interrupts_pass_through_the_guards(exc, tmp_path):
    from assay.pipeline.readers import DocBuffer

    buf = DocBuffer("s")
    with pytest.raises(exc):
        with buf.guard("here", "bad_json"):
            raise exc()
    assert buf.rows == []
    with buf.guard("here", "bad_json"):  # while a document's own error is one reject
        raise ValueError("bad")
    assert [r["reject_reason"] for r in buf.rows] == ["bad_json"]
    # Thrown into a reader at a yield (a consumer interrupted mid-file): out it comes, unchanged.
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "a"}\n' * 12_000)
    reading = ReadJsonl({"paths": [str(path)]}).read_file(str(path))
    next(reading)
    with pytest.raises(exc):
        reading.throw(exc())


def test_interrupted_watchdog_kills_its_child():
    from assay.extractors.limits import Watchdog

    with Watchdog(time.sleep, timeout_s=30) as dog:
        with pytest.raises(Hang):
            with deadline(0.5):
                dog.run(10)
        assert dog._proc is None  # a late answer to the interrupted item cannot reach the next caller
        out = dog.run(0)
        assert out.ok and out.value is None
