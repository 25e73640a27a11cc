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
        raw = self.inline(el)
        # Collapse layout whitespace but keep explicit line breaks (<lb/>) and fenced code.
        if "```" in raw:
            return raw.strip()
        lines = [" ".join(line.split()) for line in raw.split("\n")]
        out = "\n".join(line for line in lines if line)
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
            marker = f"{n}." if ordered else "-"
            body = self.text(item)
            if body and "```" in body:
                # Code keeps its lines as they are: indenting them for the list would change the code.
                out.append("  " * depth + f"{marker} " + body)
            elif body:
                out.append("  " * depth + f"{marker} " + body.replace("\n", "\n" + "  " * (depth + 1)))
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
