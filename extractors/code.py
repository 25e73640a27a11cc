"""Code blocks in every shape highlighters, documentation tools and forum engines print them → one
plain `<pre>` each, before main-content selection.

A reader copies code from what the page shows; extractors only treat `<pre>` as code and walk its
markup, so code comes out mangled or not at all when the page:
- numbers the lines: in a gutter column of a table (Pygments `linenos=table`, MkDocs, Hugo/Chroma,
  highlight.js's line-number plugin, GitHub gists: one table row per line) or in spans inside the
  block (Pygments `linenos=inline`);
- writes the block without `<pre>`: BBCode `[code]` as `<code>` with `<br>` and `&nbsp;` (phpBB 3.0,
  SMF, MyBB), `div`s with `<br>` (W3Schools-style), or a read-only `<textarea>` (SyntaxHighlighter 1.x
  and code-tutorial sites).
`normalize_code` rewrites those into `<pre>` blocks whose text is the code, line for line.
"""
from __future__ import annotations

import re

# Line-number gutters, by the class names highlighters give them.
_GUTTER = re.compile(r"(?:^|\s)(?:[\w-]*[-_])?(?:linenos?|linenodiv|lineno|line-?numbers?(?:-rows)?|lnt|lntd-n|gutter"
                     r"|hljs-ln-n(?:umbers)?|blob-num|line-?num(?:ber)?s?|ln-num)(?:$|\s)", re.I)
_NUMBERS = re.compile(r"^[\s\d.:|]*$")
_CODE_TABLE = re.compile(r"code|blob|hljs|highlight|lntable|source|listing|syntax", re.I)
_CODE_CLASS = re.compile(r"(?:^|\s)[\w-]*code[\w-]*(?:$|\s)", re.I)
# Substring prefilters so the anchored regexes only see candidate class names. A Python walk that
# reads each class once is 2-2.5x faster here than XPath's contains(@class, ...), which copies the
# attribute for every test.


def gutter_class(cls: str) -> bool:
    """`cls` names a line-number gutter. The substring prefilter is inline: this runs once for every
    class string of a page not seen before (about 90 a page), where a second call costs as much."""
    return ("lin" in cls or "Lin" in cls or "lnt" in cls or "gutter" in cls or "num" in cls or "hljs-ln" in cls) \
        and _GUTTER.search(cls) is not None


def _code_class(cls: str | None) -> bool:
    return bool(cls) and "code" in cls.lower() and _CODE_CLASS.search(cls) is not None
_TABLE_XPATH = ("//table[.//pre or .//code or contains(@class, 'code') or contains(@class, 'highlight')"
                " or contains(@class, 'blob') or contains(@class, 'hljs') or contains(@class, 'source')"
                " or .//td[contains(@class, 'code')] or ancestor::pre]")
_BLOCK_TAGS = {"p", "div", "table", "ul", "ol", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "dl",
               "section", "article"}


def pre_text(el) -> str:
    """What a reader copies from a code element: <br> as newlines, no-break spaces as spaces."""
    for br in el.iter("br"):
        br.tail = "\n" + (br.tail or "")
        br.tag = "span"  # counted once even if called again on the same element
    return el.text_content().replace("\xa0", " ").replace("\r\n", "\n")


def _drop(el) -> None:
    el.drop_tree()  # lxml.html: the tail stays in the document


def _to_pre(el, text: str) -> None:
    """Replace `el` by a <pre> holding `text` (language hints in class names are kept)."""
    pre = el.makeelement("pre", {})
    for attr in ("class", "data-lang", "data-language"):
        if el.get(attr):
            pre.set(attr, el.get(attr))
    pre.text, pre.tail = text, el.tail
    el.getparent().replace(el, pre)


def _table_lines(table) -> str | None:
    """A table that is one code listing with a row per line: its lines, else None."""
    rows = table.xpath("./tr | ./tbody/tr | ./thead/tr")
    if len(rows) < 2:
        return None
    lines = []
    for row in rows:
        cells = row.xpath("./td | ./th")
        if len(cells) != 1:
            return None
        lines.append(pre_text(cells[0]).rstrip("\n"))
    return "\n".join(lines)


def normalize_code(tree, gutters: list | None = None) -> int:
    """Rewrite numbered, table-laid, <br>-written and textarea code into plain <pre> blocks; returns
    how many blocks were rewritten. `gutters`: the elements whose class names a gutter, in page order,
    when the caller's own walk over the page found them (html._scan); else a walk finds them here."""
    changed = 0
    # Read-only text areas outside forms are code listings (form fields are dropped later).
    for ta in list(tree.iter("textarea")):
        if ta.getparent() is not None and not ta.xpath("ancestor::form") and "\n" in (ta.text or "").strip():
            ta.tag = "pre"
            ta.attrib.pop("name", None)
            changed += 1
    # Gutters: elements named as line numbers that hold nothing but numbers.
    if gutters is None:
        gutters = [el for el in tree.iter("*") if (cls := el.get("class")) and gutter_class(cls)]
    for el in gutters:  # one in a subtree dropped since then is dropped there: the page is unchanged
        if el.getparent() is not None and _NUMBERS.match(el.text_content()):
            _drop(el)
    # A table laid around one listing (a numbers column, the code column) is the listing itself;
    # a <pre> of numbers only (an unnamed gutter) beside code is dropped first.
    for table in reversed(tree.xpath(_TABLE_XPATH)):  # innermost first
        if table.getparent() is None:
            continue
        pres = table.xpath(".//pre")
        if len(pres) > 1:
            for pre in pres:
                if _NUMBERS.match(pre.text_content()):
                    _drop(pre)
            pres = table.xpath(".//pre")
        outside = len(table.text_content().strip()) - sum(len(p.text_content().strip()) for p in pres)
        if len(pres) == 1 and outside <= 0:
            pre = pres[0]
            pre.tail = table.tail
            table.getparent().replace(table, pre)
            changed += 1
            continue
        marks = " ".join(table.xpath("./@class | .//td/@class")) + " " + " ".join(
            a.get("class") or "" for a in table.iterancestors("pre", "code", "div"))
        if not pres and _CODE_TABLE.search(marks):
            lines = _table_lines(table)
            if lines is not None:
                in_pre = table.xpath("ancestor::pre")
                if in_pre:  # highlight.js line numbers: the table sits inside <pre><code>
                    pre = in_pre[0]
                    pre.clear()
                    pre.text = lines
                else:
                    _to_pre(table, lines)
                changed += 1
    # Code written with <br> line breaks outside <pre>: BBCode boxes, W3Schools-style divs.
    boxes = [el for el in tree.iter("code", "div", "td", "p")
             if (el.tag == "code" or _code_class(el.get("class"))) and el.find(".//br") is not None]
    for el in boxes:
        if el.getparent() is None:
            continue
        if el.xpath("ancestor::pre") or any(d.tag in _BLOCK_TAGS for d in el.iterdescendants() if isinstance(d.tag, str)):
            continue
        _to_pre(el, pre_text(el).strip("\n"))
        changed += 1
    # Code written as a <div> per line inside a code-classed box (Telerik/RadEditor `reCodeBlock`,
    # some forum and blog engines): the innermost divs are the lines.
    for el in [el for el in tree.iter("div") if _code_class(el.get("class"))]:
        if el.getparent() is None or el.find(".//pre") is not None or el.find(".//br") is not None:
            continue
        lines = [d for d in el.iter("div") if d is not el and d.find(".//div") is None]
        if len(lines) < 2 or any(d.tag in _BLOCK_TAGS and d.tag != "div" for d in el.iterdescendants() if isinstance(d.tag, str)):
            continue
        _to_pre(el, "\n".join(pre_text(d).rstrip() for d in lines))
        changed += 1
    return changed
