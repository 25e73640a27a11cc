"""ePub → text: the book's XHTML chapters in spine (reading) order, each through the HTML extractor.

An ePub is a zip: META-INF/container.xml names the package document (OPF), whose manifest lists the
files and whose spine gives the reading order. Every chapter is written out by extract.html's Markdown
writer over the whole body (no main-content selection: a chapter is all content), so headings, lists,
tables, code and MathML formulas come out as they do for web pages. Rejects: corrupt_epub (not a zip,
no container or package document), encrypted_epub (DRM: encryption.xml lists content files), no_text.
"""
from __future__ import annotations

import posixpath
import zipfile
from typing import Any

_NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container", "opf": "http://www.idpf.org/2007/opf",
       "dc": "http://purl.org/dc/elements/1.1/"}
_XHTML = ("application/xhtml+xml", "text/html", "application/xml")


class EpubReject(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _xml(data: bytes):
    from lxml import etree

    # no network, no entities: a package document is data, not a program
    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, recover=True))


def spine(zf: zipfile.ZipFile) -> tuple[list[str], dict[str, str]]:
    """Zip paths of the linear spine items in order, and the book's metadata (title, language)."""
    try:
        container = _xml(zf.read("META-INF/container.xml"))
        opf_path = container.find(".//c:rootfile", _NS).get("full-path")
        opf = _xml(zf.read(opf_path))
    except (KeyError, AttributeError, TypeError, ValueError) as exc:
        raise EpubReject("corrupt_epub", f"no package document: {exc}") from exc
    if opf is None:
        raise EpubReject("corrupt_epub", "package document is not XML")
    base = posixpath.dirname(opf_path)
    manifest = {}
    for item in opf.iterfind(".//opf:manifest/opf:item", _NS):
        href = item.get("href")
        if href:
            manifest[item.get("id")] = (posixpath.normpath(posixpath.join(base, href.split("#")[0])),
                                        item.get("media-type", ""))
    order = []
    for ref in opf.iterfind(".//opf:spine/opf:itemref", _NS):
        path, media = manifest.get(ref.get("idref"), (None, ""))
        if path and ref.get("linear", "yes") != "no" and (media in _XHTML or path.endswith((".xhtml", ".html", ".htm"))):
            order.append(path)
    meta = {}
    for key in ("title", "language", "creator"):
        el = opf.find(f".//dc:{key}", _NS)
        if el is not None and (el.text or "").strip():
            meta[key] = el.text.strip()
    return order, meta


def _encrypted(zf: zipfile.ZipFile) -> bool:
    """DRM lists content files in encryption.xml; font obfuscation alone (IDPF/Adobe) leaves text readable."""
    try:
        enc = _xml(zf.read("META-INF/encryption.xml"))
    except KeyError:
        return False
    if enc is None:
        return False
    for data in enc.iter("{*}EncryptedData"):
        method = data.find(".//{*}EncryptionMethod")
        algo = method.get("Algorithm", "") if method is not None else ""
        ref = data.find(".//{*}CipherReference")
        uri = ref.get("URI", "") if ref is not None else ""
        if "obfuscation" not in algo and "font" not in algo and not uri.lower().endswith((".ttf", ".otf", ".woff")):
            return True
    return False


def extract_epub(item: dict[str, Any]) -> dict[str, Any]:
    """{'path', 'min_chars'} → {'text', 'title', 'meta'} or {'reject', 'detail'}."""
    from .html import extract_html

    try:
        zf = zipfile.ZipFile(item["path"])
    except (zipfile.BadZipFile, OSError) as exc:
        return {"reject": "corrupt_epub", "detail": f"not a zip: {exc}"}
    with zf:
        try:
            if _encrypted(zf):
                return {"reject": "encrypted_epub", "detail": "META-INF/encryption.xml lists content files (DRM)"}
            order, book = spine(zf)
        except EpubReject as rej:
            return {"reject": rej.reason, "detail": rej.detail}
        parts, missing = [], 0
        for path in order:
            try:
                data = zf.read(path)
            except (KeyError, zipfile.BadZipFile, OSError):
                missing += 1
                continue
            text = extract_html({"html": data, "mode": "whole"})["text"].strip()
            if text:
                parts.append(text)
    text = "\n\n".join(parts)
    meta = {"chapters": len(order), "chapters_with_text": len(parts), "chapters_missing": missing, **book}
    if len(text) < item.get("min_chars", 50):
        return {"reject": "no_text", "detail": f"{len(text)} chars in {len(order)} spine items", "meta": meta}
    return {"text": text, "title": book.get("title"), "meta": meta}
