"""Trafilatura's internal XML body → Markdown-ish text.

We let trafilatura decide *what* is main content but write the text ourselves, because its own
Markdown output escapes `_` inside LaTeX, loses blank lines in code and drops the code language.
Body elements: head(rend=hN), p, list/item, table/row/cell, code, quote, hi, ref, lb, del, graphic.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .math import normalize_tex_delimiters

_WS = re.compile(r"\s+")


def code_key(text: str) -> str:
    """Whitespace-free fingerprint used to find a code block again after extraction."""
    return _WS.sub("", text)


@dataclass
class CodeBlock:
    text: str  # verbatim, blank lines and indentation intact
    lang: str | None


@dataclass
class Stats:
    math: int = 0
    code_blocks: int = 0
    tables: int = 0
    headings: int = 0
    list_items: int = 0
    code_langs: list[str] = field(default_factory=list)


class MarkdownWriter:
    def __init__(self, code_blocks: dict[str, CodeBlock]):
        self.code_blocks = code_blocks
        self.stats = Stats()

    # -- inline ---------------------------------------------------------------------------------
    def inline(self, el) -> str:
        parts = [el.text or ""]
        for child in el:
            if not isinstance(child.tag, str):
                parts.append(child.tail or "")
                continue
            tag = child.tag
            if tag == "lb":
                parts.append("\n")
            elif tag == "code":
                inner = "".join(child.itertext())
                if "\n" in inner.strip():
                    parts.append("\n\n" + self.fence(child) + "\n\n")
                else:
                    inner = inner.strip()
                    tick = "``" if "`" in inner else "`"
                    parts.append(f"{tick}{inner}{tick}" if inner else "")
            elif tag == "graphic":
                pass
            else:
                parts.append(self.inline(child))
            parts.append(child.tail or "")
        return "".join(parts)

    def text(self, el) -> str:
        return self.clean(self.inline(el))

    def clean(self, raw: str) -> str:
        # Collapse layout whitespace but keep explicit line breaks (<lb/>) and fenced code.
        if "```" in raw:
            return raw.strip()
        if "\n" in raw:  # each line's whitespace collapsed, empty lines dropped (builtins: no Python loop)
            out = "\n".join(filter(None, map(" ".join, map(str.split, raw.split("\n")))))
        else:
            out = " ".join(raw.split())
        if "\\" in out:  # \( or \[ delimiters: most text has no backslash at all
            out, n = normalize_tex_delimiters(out)
            self.stats.math += n
        return out

    # -- blocks ---------------------------------------------------------------------------------
    def fence(self, el) -> str:
        found = "".join(el.itertext())
        block = self.code_blocks.get(code_key(found))
        lang = None
        if block is not None:
            found, lang = block.text, block.lang
        else:
            for sub in el.iter():
                lang = lang or _lang_from_class(sub.get("class"))
        found = found.strip("\n")
        fence = "````" if "```" in found else "```"
        self.stats.code_blocks += 1
        if lang:
            self.stats.code_langs.append(lang)
        return f"{fence}{lang or ''}\n{found}\n{fence}"

    def table(self, el) -> str:
        if _is_layout(el):
            # A page laid out in a table (old sites, forum engines): its cells are sections of text,
            # not data. Written as blocks, code keeps its lines and paragraphs stay apart.
            return "\n\n".join(filter(None, (self.blocks(c) for c in el.iter("cell"))))
        rows = []
        for row in el.iter("row"):
            cells = [self.text(c).replace("\n", " ").replace("|", "\\|") for c in row if c.tag == "cell"]
            if cells:
                rows.append(cells)
        return self.grid(rows)

    def grid(self, rows: list[list[str]]) -> str:
        """Rows of cell texts as a Markdown table (short rows padded), counted in the stats."""
        if not rows:
            return ""
        self.stats.tables += 1
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return "\n".join(lines)

    def list(self, el, depth: int = 0) -> str:
        ordered = (el.get("rend") or "").lower() in ("ol", "1", "a")
        out = []
        n = 0
        for item in el:
            if item.tag != "item":
                continue
            n += 1
            self.stats.list_items += 1
            nested = [c for c in item if c.tag == "list"]
            for c in nested:
                item.remove(c)
            out += [_item(f"{n}." if ordered else "-", self.text(item), depth)]
            out += [self.list(c, depth + 1) for c in nested]
        return "\n".join(x for x in out if x)

    def block(self, el) -> str:
        tag = el.tag
        if tag == "head":
            level = (el.get("rend") or "h2")[-1:]
            level = int(level) if level.isdigit() else 2
            txt = self.text(el).replace("\n", " ")
            if txt:
                self.stats.headings += 1
            return "#" * max(1, min(level, 6)) + " " + txt if txt else ""
        if tag == "list":
            return self.list(el)
        if tag == "table":
            return self.table(el)
        if tag == "code":
            return self.fence(el)
        if tag in ("quote", "p") and self.code_blocks and code_key("".join(el.itertext())) in self.code_blocks:
            # A bare <pre> (no <code> inside) can come back as a quote or paragraph: its text is
            # exactly a saved block, so it is written as the block, verbatim.
            return self.fence(el)
        if tag == "quote":
            inner = self.blocks(el) if any(isinstance(c.tag, str) and c.tag in _BLOCKS for c in el) else self.text(el)
            return "\n".join("> " + line if line else ">" for line in inner.split("\n"))
        if tag in ("div", "body", "section"):
            return self.blocks(el)
        if tag == "graphic":
            return ""
        return self.text(el)

    def blocks(self, el) -> str:
        parts = []
        if el.text and el.text.strip():
            parts.append(" ".join(el.text.split()))
        for child in el:
            if not isinstance(child.tag, str):
                continue
            out = self.block(child)
            if out:
                parts.append(out)
            if child.tail and child.tail.strip():
                parts.append(" ".join(child.tail.split()))
        return "\n\n".join(parts)


def _item(marker: str, body: str, depth: int) -> str:
    """One list item; code keeps its lines as they are (indenting them for the list would change it)."""
    if not body:
        return ""
    if "```" in body:
        return "  " * depth + f"{marker} " + body
    return "  " * depth + f"{marker} " + body.replace("\n", "\n" + "  " * (depth + 1))


_BLOCKS = {"p", "head", "list", "table", "code", "quote", "div"}
_LAYOUT_CHILDREN = {"head", "list", "table", "code", "quote"}


def _is_layout(table) -> bool:
    """A table is layout when a cell holds block structure: a heading, list, code block, quote,
    nested table, or several paragraphs."""
    for cell in table.iter("cell"):
        kids = [c.tag for c in cell if isinstance(c.tag, str)]
        if any(k in _LAYOUT_CHILDREN for k in kids) or kids.count("p") > 1:
            return True
    return False
_LANG_RE = re.compile(r"(?:^|\s)(?:language|lang|highlight|brush|sourceCode|code)[-_:]\s*([A-Za-z0-9_+#.-]+)")
_NOT_LANGS = {"none", "plaintext", "text", "plain", "nohighlight", "block", "inline", "wrap", "source"}


def _lang_from_class(value: str | None) -> str | None:
    if not value:
        return None
    m = _LANG_RE.search(value)
    if m:
        lang = m.group(1).lower().strip(".-")
        return None if lang in _NOT_LANGS else lang
    return None


def code_language(pre) -> str | None:
    """The language a page states for a <pre> block: class on pre/code/ancestors, or data-lang."""
    candidates = [pre] + [c for c in pre.iter("code")][:1]
    parent = pre.getparent()
    for _ in range(2):
        if parent is None:
            break
        candidates.append(parent)
        parent = parent.getparent()
    for el in candidates:
        for attr in ("data-lang", "data-language", "lang"):
            value = el.get(attr)
            if value and el.tag in ("pre", "code", "div") and value.lower() not in _NOT_LANGS and attr != "lang":
                return value.lower()
        lang = _lang_from_class(el.get("class"))
        if lang:
            return lang
    return None


def body_to_markdown(body, code_blocks: dict[str, CodeBlock]) -> tuple[str, Stats]:
    writer = MarkdownWriter(code_blocks)
    text = writer.blocks(body)
    return text, writer.stats


# ---- HTML (the prepared lxml tree) → Markdown, for `native.select` -----------------------------

_HTML_BLOCKS = frozenset(("p", "div", "pre", "table", "ul", "ol", "dl", "blockquote", "h1", "h2", "h3", "h4", "h5",
                          "h6", "section", "article", "main", "header", "figure", "figcaption", "center", "details",
                          "summary", "li", "dd", "dt", "address", "body", "html", "hr", "tr", "td", "th", "tbody",
                          "thead", "tfoot", "caption", "form", "fieldset"))
_HTML_LAYOUT = frozenset(("h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "pre", "table", "blockquote", "div",
                          "section", "article"))


class HtmlWriter(MarkdownWriter):
    """The same Markdown as `MarkdownWriter`, read from HTML elements: headings `#`, lists, quotes,
    tables (data tables as Markdown tables, layout tables as blocks), code fenced from the saved copy."""

    def inline(self, el) -> str:
        if not len(el):  # a leaf (most inline elements): its text, no child iterator or join
            return el.text or ""
        parts = [el.text or ""]
        for child in el:
            tag = child.tag
            if isinstance(tag, str):
                parts.append(_inline_of(self, child, tag))
            parts.append(child.tail or "")
        return "".join(parts)

    def table(self, el) -> str:
        rows = [r for r in el.iter("tr") if _nearest_table(r) is el]
        cells_of = [[c for c in r if c.tag in ("td", "th")] for r in rows]
        layout = any(sum(1 for d in c.iter() if isinstance(d.tag, str) and d.tag in _HTML_LAYOUT) > 0 or
                     len(c.findall("p")) > 1 for cells in cells_of for c in cells)
        if layout or len(rows) == 1 and len(cells_of[0]) == 1:
            return "\n\n".join(filter(None, (self.blocks(c) for cells in cells_of for c in cells)))
        out_rows = []
        for cells in cells_of:
            row = []
            for c in cells:
                row.append(self.text(c).replace("\n", " ").replace("|", "\\|"))
                span = c.get("colspan")
                if span and span.isdigit():
                    row += [""] * min(int(span) - 1, 50)
            if any(row):
                out_rows.append(row)
        grid = self.grid(out_rows)
        caption = el.find("caption")
        head = self.text(caption) if caption is not None and grid else ""
        return (head + "\n\n" if head else "") + grid

    def list(self, el, depth: int = 0) -> str:
        ordered = el.tag == "ol"
        out, n = [], 0
        for item in el:
            # A <div> or other block straight in a list is an item too (slider and carousel markup:
            # `ul.splide__list > div.splide__slide`), not text to lose.
            if not isinstance(item.tag, str) or item.tag not in ("li", "dt", "dd") and item.tag not in _HTML_BLOCKS:
                continue
            n += 1
            self.stats.list_items += 1
            nested = [c for c in item if c.tag in ("ul", "ol")]
            for c in nested:
                tail = c.tail
                c.getparent().remove(c)
                c.tail = None
                if tail and tail.strip():
                    item.append(item.makeelement("span", {}))
                    item[-1].text = tail
            body = self.blocks(item) if any(isinstance(c.tag, str) and c.tag in _HTML_LAYOUT for c in item) \
                else self.text(item)
            out += [_item(f"{n}." if ordered else "-", body, depth)] + [self.list(c, depth + 1) for c in nested]
        return "\n".join(x for x in out if x)

    def block(self, el) -> str:
        tag = el.tag
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            txt = self.text(el).replace("\n", " ")
            if not txt:
                return ""
            self.stats.headings += 1
            return "#" * int(tag[1]) + " " + txt
        if tag in ("ul", "ol"):
            return self.list(el)
        if tag == "dl":
            return "\n".join(filter(None, (self.text(c) for c in el if c.tag in ("dt", "dd"))))
        if tag == "table":
            return self.table(el)
        if tag == "pre":
            return self.fence(el) if el.text_content().strip() else ""
        if tag == "blockquote":
            inner = self.blocks(el)
            return "\n".join("> " + line if line else ">" for line in inner.split("\n")) if inner else ""
        if tag in ("hr", "br", "img"):
            return ""
        if tag == "p" and not any(isinstance(c.tag, str) and c.tag in _HTML_LAYOUT for c in el):
            return self.text(el)
        return self.blocks(el)

    def blocks(self, el) -> str:
        """Runs of text and inline elements become paragraphs between the block children."""
        parts, run = [], [el.text or ""]

        def flush() -> None:
            text = self.clean("".join(run))
            if text:
                parts.append(text)

        for child in el:
            tag = child.tag
            if isinstance(tag, str) and tag in _HTML_BLOCKS and tag != "br":
                flush()
                run = []
                out = self.block(child)
                if out:
                    parts.append(out)
            elif isinstance(tag, str):
                run.append(_inline_of(self, child, tag))
            run.append(child.tail or "")
        flush()
        return "\n\n".join(parts)


def _inline_of(writer: HtmlWriter, child, tag: str) -> str:
    """`tag`: the caller's read of `child.tag` (each read builds a new string)."""
    if tag == "br":
        return "\n"
    if tag in ("code", "tt", "kbd"):
        inner = child.text_content()
        if "\n" in inner.strip():
            return "\n\n" + writer.fence(child) + "\n\n"
        inner = inner.strip()
        tick = "``" if "`" in inner else "`"
        return f"{tick}{inner}{tick}" if inner else ""
    if tag in _HTML_BLOCKS:  # a block inside inline markup (<a><div>..</div></a>)
        block = writer.block(child)
        return f"\n\n{block}\n\n" if block else "\n"
    if tag == "img":
        return ""
    return writer.inline(child)


def _nearest_table(el):
    for a in el.iterancestors("table"):
        return a
    return None


def html_to_markdown(elements: list, code_blocks: dict[str, CodeBlock]) -> tuple[str, Stats]:
    writer = HtmlWriter(code_blocks)
    parts = [writer.block(el) if el.tag not in ("body", "html") else writer.blocks(el) for el in elements]
    return "\n\n".join(p for p in parts if p), writer.stats
