"""`mode=native`'s pruning inside the chosen blocks (step 4 of `native`'s docstring): what reads as
boilerplate (names against, link lists, bylines and stock lines, forms, an article's header and
metadata), and what keeps a block (code, formulas, quotations, sentences with links, blocks of one
name that together hold the text)."""
from __future__ import annotations

import functools
import re

from lxml import etree

from .native_measure import (_BLOCK, _CLASS_WEIGHT, _HEADINGS, _NEGATIVE, _NOTHING, _SENTENCE_END, Measures,
                             _class_words, _named_like, _opens_with_link, _paragraph, _sentence)


_KEEP = frozenset(("pre", "math", "table", "tbody", "thead", "tr", "td", "th"))

_LISTS = frozenset(("ul", "ol", "dl"))


_INLINE = frozenset(("span", "time", "small"))  # pruned only for their class (a span.byline), not their links

_JUDGED = (_BLOCK | _INLINE | {"figure"}) - _KEEP  # the tags `_prune` asks `_boilerplate` about

# Short lines that are page furniture whatever their markup: bylines, datelines, copyright and share
# lines, "related" and comment-count headings. Only blocks under _SHORT characters are tested.
_SHORT = 100

_FURNITURE = re.compile(
    r"^(?:©|\(c\)\s|copyright\b|all rights reserved|(?:first\s+)?published\b|(?:last\s+)?updated\b|posted\b"
    r"|share\b|follow us|read more\b|read also\b|related\b|you may also like|more from\b|recommended\b"
    r"|advertisement\b|anzeige\b|werbung\b|\d+\s+(?:comments?|replies)\b|comments?\b|tags?:|filed under\b"
    r"|photo\s*:|image\s*:|credit\s*:|source\s*:|sign up\b|subscribe\b|click here\b|loading\b)", re.I)

_DATE = re.compile(r"\b(?:19|20)\d\d\b|\b\d{1,2}:\d\d\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d", re.I)

# Formulas as the prepared tree holds them: `$..$` and `$$..$$`, or the page's own `\(..\)`, `\[..\]`.
_FORMULA = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\[.+?\\\]|\\\(.+?\\\)", re.S)

_BYLINE = re.compile(r"^(?:by|von|par|por|di|door|av|от|текст:)\s", re.I)


# A site's calls to action under an article (newsletter, social, tips, affiliate notes): up to _CALL
# characters, longer than the stock lines above.
_CALL = 220

_CALL_TO_ACTION = re.compile(
    r"^(?:follow (?:us\b|@\w+|[\w .'’&@()-]{1,60} on (?:twitter|facebook|instagram|linkedin|tiktok|youtube|x)\b)"
    r"|(?:get|receive) (?:the|our)\b.{0,60}\b(?:in|to) your inbox|sign up (?:for|to) (?:our|the)\b.{0,60}\bnewsletters?\b"
    r"|subscribe to (?:our|the|[\w.’']+(?:'s|’s)) (?:[\w-]+ )?newsletters?\b|you have been successfully subscribed"
    r"|there was a problem subscribing|thanks? (?:you )?for (?:subscribing|signing up)|have a (?:news )?tip\?"
    r"|if you (?:buy|purchase|click)\b.{0,80}\b(?:commission|share of the sale|affiliate|earn)\b)", re.I)


def _furniture(node, total: int) -> bool:
    """A short block that reads as a byline, a dateline or a site's stock line."""
    text = " ".join(node.text_content().split())
    if not text:
        return False
    if _CALL_TO_ACTION.match(text):
        return True
    if total >= _SHORT:
        return False
    if _FURNITURE.match(text) or _BYLINE.match(text) and not _SENTENCE_END.search(text):
        return True
    if "$" in text or "\\" in text:
        text = _FORMULA.sub(" ", text)  # a formula's numbers are no date (`n \ge 2015`)
    return len(text) < 80 and len(text.split()) <= 10 and bool(_DATE.search(text)) and not _SENTENCE_END.search(text)


def _prune_all(chosen: list, m: Measures, body_chars: int, thread: bool = False) -> None:
    """Drop the boilerplate blocks inside the chosen elements (in place), but never below a floor
    share of their text: when what reads as boilerplate is nearly all of the right block (a page
    builder names every block of a body `elementor-widget`, each a small share), the names are no
    evidence there, and when even without them pruning would empty it, nothing is pruned. Not on a
    thread's posts (`thread`): how much of them pruning keeps tells posts from teaser cards."""
    victims = [v for el in chosen for v in _victims(el, m, body_chars, thread)]
    if not thread and _kept(victims, m, body_chars) < _FLOOR * body_chars:
        victims = [v for el in chosen for v in _victims(el, m, body_chars, thread, names=False)]
        if _kept(victims, m, body_chars) < _FLOOR * body_chars:
            victims = []
    for node in victims:
        _remove(node)


_FLOOR = 0.25


def _kept(victims: list, m: Measures, body_chars: int) -> int:
    return body_chars - sum(m.total(v) for v in victims)


def _victims(el, m: Measures, body_chars: int, thread: bool = False, names: bool = True) -> list:
    """The boilerplate blocks inside a chosen element, outermost only, in page order. `thread`: `el`
    holds the posts of a thread, all content: a short reply with a mention link is no menu.
    `names`: class/id words against a block count as evidence."""
    holds_code = {a for pre in el.iter("pre") for a in pre.iterancestors()}  # code is content wherever it is
    # A quotation (an embedded post, a pull quote) is the author's material: its attribution line
    # ("— Name (@name) May 4, 2019") is no dateline, and a wrapper named for the embed (`social-embed`)
    # that holds little besides the quote is no share bar.
    quoted = {d for q in el.iter("blockquote") for d in q.iterdescendants()} if el.find(".//blockquote") is not None \
        else _EMPTY
    # Inside a selection that is itself named as boilerplate (a thread of `comment` blocks), names
    # against are no evidence: the page's content lives in such markup.
    named_against = not names or any(m.weight(a) < 0 for a in (el, *el.iterancestors()))
    groups = _Groups(el)
    # Children as elements only, filtered and reversed in C (no Python test of each child's tag).
    stack = list(el.iterchildren(etree.Element, reversed=True))
    found = []
    while stack:  # depth first in page order; a dropped block's descendants are not looked at
        node = stack.pop()
        if node.tag in _JUDGED and node not in holds_code and \
                _boilerplate(node, m, body_chars, named_against, groups, thread, node in quoted):
            found.append(node)
        elif len(node):
            stack.extend(node.iterchildren(etree.Element, reversed=True))
    return found


# schema.org properties that mark an article's metadata, not its text: headline, byline, dates, dek.
_META_PROPS = frozenset(("headline", "alternativeHeadline", "author", "creator", "datePublished", "dateModified",
                         "dateCreated", "publisher", "description", "image", "thumbnailUrl", "contentUrl", "keywords",
                         "mainEntityOfPage", "width", "height", "logo"))


def _boilerplate(node, m: Measures, body_chars: int, named_against: bool, groups: _Groups, thread: bool = False,
                 quoted: bool = False) -> bool:
    found = m.v.get(node)
    if found is None:
        return False
    total = found[0]
    prop = node.get("itemprop")
    if prop and (prop in _META_PROPS or prop == "url" and node.tag != "a") and total < 0.3 * body_chars:
        return True
    weight = m.weight(node)
    if weight < 0 and total < 0.3 * body_chars and not named_against and \
            _group_chars(node, m, groups) < 0.3 * body_chars and not _holds_quote(node, m, total):
        return True
    tag = node.tag
    if tag in _INLINE:
        return tag == "time" and node.getparent().tag in _BLOCK and not (node.getparent().text or "").strip()
    # A block with no text (total 0: every text node blank; pruning only moves text within a parent)
    # is no furniture, and is one in three of the blocks asked: its text is not read.
    if 0 < total < _CALL and tag != "li" and not quoted and _furniture(node, total):
        return True
    if tag == "header" and total < 0.3 * body_chars:
        return True  # an article's header: its headline, standfirst, byline and date
    density = m.density(node)
    if tag in _HEADINGS:
        return density > 0.5 and not _section_heading(node, m, body_chars)
    if tag in _LISTS or tag in ("div", "section", "p", "li", "header", "figure"):
        # A block whose text is its own (a paragraph written as a <div>) is judged as a <p> is: a
        # sentence with links in it is a paragraph.
        sentence = (tag == "p" or tag == "div" and found[2] >= _OWN_SHARE * total) and total >= 100 and \
            density <= _LINKED_SENTENCE and _sentence(node)
        if density > 0.5 and total < 0.5 * body_chars and not sentence:
            return True
        return not thread and tag in ("div", "section", "header") and density > 0.33 and weight < _CLASS_WEIGHT and \
            found[4] < 5 and total < 0.25 * body_chars and not sentence and not _holds_quote(node, m, total) and \
            not _paragraphs(node, m, total)
    if tag in ("form", "fieldset"):
        return total < 0.5 * body_chars  # a form that holds most of the text is the page (a post feed)
    return tag in ("figcaption", "address")


_EMPTY: frozenset = frozenset()


def _section_heading(node, m: Measures, body_chars: int) -> bool:
    """A linked heading in the body's own container, with running text after it: a section of a
    listicle or a gift guide named by the page it links to, not another page's teaser (whose
    heading sits in a small block with its summary)."""
    parent, after = node.getparent(), node.getnext()
    return parent is not None and after is not None and m.v.get(after, _NOTHING)[5] > 0 and \
        m.good(parent) >= 0.5 * body_chars


def _paragraphs(node, m: Measures, total: int) -> bool:
    """`node` is mostly running text in two paragraphs or more, not opened by a linked title: a
    section of the body whose sentences carry links, not a teaser or a menu."""
    if m.v[node][5] < 0.5 * total or _opens_with_link(node, m):
        return False
    n = 0
    for el in node.iter():
        found = m.v.get(el)
        if found is not None and _paragraph(found):
            n += 1
            if n >= 2:
                return True
    return False


_LINKED_SENTENCE = 0.65

_OWN_SHARE = 0.8  # a block with this share of its text its own (not in nested blocks) is a paragraph


def _holds_quote(node, m: Measures, total: int) -> bool:
    """`node` is mostly a quotation with running text in it: an embedded post's wrapper."""
    quotes = node.findall(".//blockquote") if node.tag != "blockquote" else [node]
    return bool(quotes) and sum(m.total(q) for q in quotes) >= 0.8 * total and any(m.good(q) for q in quotes)


def _remove(node) -> None:
    """Remove `node`, keeping the text that follows it."""
    tail = node.tail
    parent = node.getparent()
    prev = node.getprevious()
    if tail and tail.strip():
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(node)


class _Groups:
    """What `_group_chars` counts once per selection: the text of each run of siblings named alike,
    and of the selection's blocks named against, by tag and class (built at the first need)."""

    __slots__ = ("selection", "siblings", "named")

    def __init__(self, selection):
        self.selection, self.siblings, self.named = selection, {}, None


def _group_chars(node, m: Measures, groups: _Groups) -> int:
    """Text of `node` and its siblings of the same tag named like it (`_named_like`), or of all the
    selection's blocks with its tag and class if more: repeated blocks that together hold much of the
    selection (the posts of a thread named `comment`, the text blocks of a page builder) are its
    content."""
    key = (node.getparent(), node.tag, node.get("class"))
    found = groups.siblings.get(key)
    if found is None:
        found = groups.siblings[key] = sum(m.total(s) for s in key[0] if s.tag == node.tag and _named_like(s, node))
    return max(found, _named_chars(node, m, groups))


def _named_chars(node, m: Measures, groups: _Groups) -> int:
    """Text of the blocks of the selection with `node`'s tag named against by one of its class
    words, the most of its words: a name that the page gives to the wrappers of its body
    (`elementor-widget-container`, one in each of its text blocks) is the body's, and so is one a
    page builder gives every block beside words of its own (`elementor-element-54d0325
    elementor-widget elementor-widget-heading`, each in a column of its own: one body's headings
    and text blocks)."""
    named = groups.named
    if named is None:
        named = groups.named = {}
        # Outermost blocks of each name only: a reply nested in the comment it answers is counted once.
        stack = [(el, _NO_KEYS) for el in groups.selection.iterchildren(etree.Element)]
        while stack:
            el, above = stack.pop()
            cls = el.get("class")
            if cls and m.weight(el) < 0:
                keys = {(el.tag, word) for word in _against_words(cls)}
                for k in keys - above:
                    named[k] = named.get(k, 0) + m.total(el)
                above = above | keys
            stack.extend((kid, above) for kid in el.iterchildren(etree.Element))
    cls = node.get("class")
    return max((named.get((node.tag, w), 0) for w in _against_words(cls)), default=0) if cls else 0


_NO_KEYS: frozenset = frozenset()


@functools.lru_cache(maxsize=50_000)  # a page repeats a few class strings many times
def _against_words(cls: str) -> frozenset:
    """The class words that name a block as boilerplate, else the class itself as one word. Not the
    words of reader comments: under an article they share one name, and are not its text (a thread's
    posts are taken whole by `threads`)."""
    return frozenset(w for w in _class_words(cls) if _NEGATIVE.search(w) and not _COMMENT.search(w)) or \
        frozenset((cls,))


_COMMENT = re.compile(r"comment|repl(?:y|ies)|respond", re.I)
