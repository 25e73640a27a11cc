"""filter.url_blocklist: domains with their subdomains, URL patterns, annotate first, reject on request."""
from __future__ import annotations

import pyarrow as pa

from assay.filters.urls import UrlBlocklist


def test_domains_subdomains_and_patterns(tmp_path):
    lists = tmp_path / "block.txt"
    lists.write_text("# adult\nbad.example\n.casino.test\nexample.org/ads/*\n*.tracker.*/pixel*\n")
    urls = ["https://bad.example/page", "http://www.bad.example/x", "https://notbad.example/",
            "https://casino.test", "https://example.org/ads/1", "https://example.org/news/1",
            "https://cdn.tracker.net/pixel.gif", None, "not a url at all"]
    table = pa.table({"id": [str(i) for i in range(len(urls))], "text": ["t"] * len(urls), "url": urls})
    out = UrlBlocklist({"lists": [str(lists)]}).process(table)
    assert out.column("url_blocked").to_pylist() == [True, True, False, True, True, False, True, False, False]
    assert out.column("url_block_entry").to_pylist()[1] == "bad.example"
    assert out.column("reject_reason").null_count == len(urls)  # annotates only
    dropped = UrlBlocklist({"lists": [str(lists)], "drop": True}).process(table)
    assert dropped.column("reject_reason").to_pylist()[4] == "url_blocked"
    assert dropped.column("reject_detail").to_pylist()[4] == "example.org/ads/*"
