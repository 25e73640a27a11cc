"""`filter.url_blocklist`: mark (and on request reject) documents whose URL is on a blocklist.

A list is a text file, one entry a line (`#` starts a comment), in the format UT1's and most
blocklists' `domains` files use: a domain blocks itself and every subdomain (`example.com` blocks
`www.example.com`); an entry holding `/` or `*` is a URL pattern, matched against the URL without its
scheme (`example.org/ads/*`, `*.tracker.*/pixel`). No list ships with Assay: UT1's lists (CC BY-SA 4.0)
or a user's own are given with `lists`.
"""
from __future__ import annotations

import fnmatch
import re
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, register, set_column, with_rejects


class UrlBlocklistParams(Params):
    lists: list[str] = Field(default_factory=list, description="Blocklist files (one domain or URL pattern a line)")
    column: str = Field("url", description="Column holding each row's URL")
    drop: bool = Field(False, description="Reject rows whose URL is blocked (reason `url_blocked`, detail = the entry)")


def read_lists(paths: list[str]) -> tuple[set[str], list[tuple[str, re.Pattern]]]:
    from assay.pipeline import storage

    domains: set[str] = set()
    patterns: list[tuple[str, re.Pattern]] = []
    for path in paths:
        for line in storage.read_bytes(path).decode("utf-8", "replace").splitlines():
            entry = line.split("#", 1)[0].strip().lower()
            if not entry:
                continue
            if "/" in entry or "*" in entry:
                patterns.append((entry, re.compile(fnmatch.translate(entry.split("://", 1)[-1]))))
            else:
                domains.add(entry.lstrip("."))
    return domains, patterns


def blocked_by(url: str | None, domains: set[str], patterns) -> str | None:
    """The list entry that blocks `url`, or None."""
    if not url:
        return None
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        return None
    labels = host.split(".")
    for k in range(len(labels) - 1):
        candidate = ".".join(labels[k:])
        if candidate in domains:
            return candidate
    rest = url.split("://", 1)[-1].lower()
    for entry, regex in patterns:
        if regex.match(rest):
            return entry
    return None


@register("filter.url_blocklist")
class UrlBlocklist(MapStage):
    """Mark rows whose URL's domain (or a parent domain) or URL pattern is on a blocklist: adds
    `url_blocked` and `url_block_entry`; rejects only with --drop (reason `url_blocked`).

    Example: assay filter url_blocklist runs/x/docs runs/x/checked --lists ut1-adult-domains.txt --drop
    """

    Params = UrlBlocklistParams
    columns = {"url_blocked": pa.bool_(), "url_block_entry": pa.string()}
    reads = {"lists": "file"}

    def setup(self) -> None:
        self.domains, self.patterns = read_lists(self.params.lists)

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        p = self.params
        urls = table.column(p.column).to_pylist() if p.column in table.column_names else [None] * table.num_rows
        entries = [blocked_by(u, self.domains, self.patterns) for u in urls]
        blocked = np.array([e is not None for e in entries], dtype=bool)
        self.stats.count("url_blocklist.blocked", int(blocked.sum()))
        table = set_column(table, "url_blocked", pa.array(blocked, pa.bool_()))
        table = set_column(table, "url_block_entry", pa.array(entries, pa.string()))
        reasons = np.where(blocked & p.drop, "url_blocked", None)
        details = np.where(blocked & p.drop, np.array(entries, dtype=object), None)
        return with_rejects(table, reasons, details)
