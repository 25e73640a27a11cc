"""URL normalisation: one canonical spelling per page, so URL dedup sees duplicates as equal.

Rules (RFC 3986 §6 syntax-based normalisation plus the usual web-crawl extras):
lower-case scheme and host, IDNA-encode the host, drop default ports, drop the fragment, drop
tracking parameters (utm_*, fbclid, gclid, ...), sort the remaining query parameters, and turn an
empty path into "/". Garbage never raises: it comes back stripped, unchanged otherwise.
"""
from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "ws": 80, "wss": 443}

# Exact names of parameters that only track the click, never select content.
TRACKING_PARAMS = frozenset(
    {
        "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid",
        "ttclid", "li_fat_id", "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi", "mkt_tok",
        "oly_anon_id", "oly_enc_id", "vero_id", "rb_clickid", "s_cid", "_ga", "_gl", "ref_src",
        "spm", "scid", "zanpid", "wickedid", "cmpid", "ncid", "sr_share", "trk", "trkcampaign",
    }
)
# Prefixes: utm_source, utm_medium, ..., pk_campaign (Matomo), hsa_* (HubSpot ads).
TRACKING_PREFIXES = ("utm_", "pk_", "hsa_", "mtm_")

_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://")
# Characters that may stay unescaped in a path (RFC 3986 pchar + "/"); everything else is %-encoded.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


def _is_tracking(name: str) -> bool:
    low = name.lower()
    return low in TRACKING_PARAMS or low.startswith(TRACKING_PREFIXES)


def _host(hostname: str) -> str:
    host = hostname.lower().rstrip(".")
    if host.startswith("[") or host.isascii():
        return host
    try:  # IDNA 2003 via the codec: good enough for hostnames in crawls, and in the stdlib
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _path(path: str) -> str:
    if not path:
        return "/"
    # Resolve dot segments ("/a/./b/../c" -> "/a/c") without touching a trailing slash.
    segments: list[str] = []
    parts = path.split("/")
    for i, seg in enumerate(parts):
        if seg == ".":
            if i == len(parts) - 1:
                segments.append("")
            continue
        if seg == "..":
            if len(segments) > 1:
                segments.pop()
            if i == len(parts) - 1:
                segments.append("")
            continue
        segments.append(seg)
    path = "/".join(segments) or "/"
    if not path.startswith("/"):
        path = "/" + path
    # Normalise percent-encoding: decode then re-encode, so "%7e" and "~" compare equal.
    return quote(unquote(path), safe=_PATH_SAFE)


def _query(query: str) -> str:
    if not query:
        return ""
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not _is_tracking(k)]
    pairs.sort()
    return urlencode(pairs, doseq=False, quote_via=quote, safe="/:@!$'()*+,;-._~")


def normalize_url(url: str) -> str:
    """Canonical form of an absolute http(s)-like URL; anything unparseable comes back stripped."""
    if not isinstance(url, str):
        return url
    raw = url.strip()
    if not raw:
        return raw
    try:
        candidate = raw if _SCHEME_RE.match(raw) else ("http://" + raw if raw.startswith("www.") else raw)
        parts = urlsplit(candidate)
        if not parts.scheme or not parts.netloc or not parts.hostname:
            return raw
        scheme = parts.scheme.lower()
        host = _host(parts.hostname)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # IPv6 literal: urlsplit strips the brackets
        port = parts.port  # raises ValueError on a bad port -> garbage
        netloc = host
        if port is not None and DEFAULT_PORTS.get(scheme) != port:
            netloc = f"{host}:{port}"
        if parts.username is not None:
            auth = parts.username + (f":{parts.password}" if parts.password is not None else "")
            netloc = f"{auth}@{netloc}"
        return urlunsplit(SplitResult(scheme, netloc, _path(parts.path), _query(parts.query), ""))
    except (ValueError, UnicodeError):
        return raw


def normalize_urls(urls: Iterable[str | None]) -> list[str | None]:
    """Vectorised-friendly: a list (or Arrow column `.to_pylist()`) in, a list out; None stays None."""
    cache: dict[str, str] = {}
    out: list[str | None] = []
    for u in urls:
        if u is None:
            out.append(None)
            continue
        got = cache.get(u)
        if got is None:
            got = cache[u] = normalize_url(u)
        out.append(got)
    return out


def url_domain(url: str | None) -> str | None:
    """The lower-cased host of a URL without a leading "www.", for the `domain` column."""
    if not url:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".")
    return host[4:] if host.startswith("www.") else host
