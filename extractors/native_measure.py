"""`mode=native`'s measures of the prepared tree, taken once in one bottom-up pass: per element its
text, its link text and its running text (`Measures`); the evidence its class and id words give
(`class_weight`); and the tests read from those numbers (a paragraph, a sentence, a block opened by a
linked title, a Chinese/Japanese/Korean page). Every later step decides from these."""
from __future__ import annotations

import re

from lxml import etree


# Class/id words: evidence a block is boilerplate / main content (whole words of the class or id).
_NEGATIVE = re.compile(
    r"(?:^|[-_\s])(?:comments?|commentlist|respond|sidebar|side|widgets?|footer|foot|navbar|nav|menu|share|sharing"
    r"|social|related|relatedposts|breadcrumbs?|crumbs|cookies?|consent|banner|advert\w*|ads?|adsense|adslot|dfp"
    r"|promo\w*|sponsor\w*|subscribe|subscription|newsletter|signup|popup|modal|tags|taglist|tag-list|byline"
    r"|author-?bio|authorbox|about-author|pagination|pager|paging|skip|print|rating|reviews|toolbar|masthead|teasers?"
    r"|recommend\w*|outbrain|taboola|disqus|login|follow|shoutbox|dialog|overlay|trending|popular|most-?read|latest"
    r"|read-?more|more-stories|newsflash|sitemap|breaking|meta|post-meta|entry-meta|postmeta|widget-area|visually-hidden|sr-only|screen-reader-text"
    r"|jump|links|linklist|blogroll|archive|categories|category|signature|sig|userinfo|postprofile|profile"
    r"|avatar|credits?|caption|copyright|legal|disclaimer|license|gallery|slideshow|carousel|video-?player"
    r"|inline-?ad|native-?ad|partner|affiliate|shopping|offers?|donate|support-us|feedback|survey|poll"
    r"|onetrust\w*|ot-pc\w*|ot-sdk\w*|gdpr\w*|cmp\w*|toc|table-of-contents|contents-list|edit|editsection|mw-editsection|noprint|navbox|catlinks|printfooter)"
    r"(?:$|[-_\s\d])", re.I)

_POSITIVE = re.compile(
    r"(?:^|[-_\s])(?:article\w*|body|content|entry|entry-content|main|post|post-?body|post-?content|story\w*"
    r"|blog|prose|markdown\w*|rst-content|document|hentry|page-?content|section|chapter|mw-parser-output"
    r"|(?:post|entry|article|story|body|main)-?text|message|answer|question|postcontent|td-post-content|field-?item|node-?content|itemprop)"
    r"(?:$|[-_\s\d])", re.I)

# The same patterns case-sensitive, for an ASCII name lowered (the patterns are lower case): Python's
# regex engine tests each of the alternatives case-insensitively 4x slower (7.6 vs 2 us a name).
_NEGATIVE_LOWER, _POSITIVE_LOWER = re.compile(_NEGATIVE.pattern), re.compile(_POSITIVE.pattern)

_CLASS_WEIGHT = 25.0

_BLOCK = frozenset(("p", "div", "pre", "table", "ul", "ol", "dl", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6",
                    "section", "article", "main", "header", "figure", "figcaption", "form", "fieldset", "hr",
                    "center", "details", "summary", "li", "dd", "dt", "tr", "td", "th", "tbody", "thead", "tfoot",
                    "address", "body", "html", "caption", "br"))

_HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))

_MIN_PARAGRAPH = 25

_LONG = 500  # a paragraph longer than this counts as more than one (a body without <p>)


class Measures:
    """Per element, one tuple `v[el]`: (all text chars, chars inside links, own paragraph chars,
    their chars inside links, commas, running-text chars, tag). One tuple and one dict lookup per
    child: the pass is the selector's largest part. The dict holds the element proxies alive.
    `v` is in reverse page order (every descendant before its ancestors). `w`: each element's
    `class_weight` once read (pruning asks again for most of the elements the selection asked for)."""

    __slots__ = ("v", "cjk", "w")

    def __init__(self, root, cjk: bool = False):
        order = list(root.iter("*"))  # elements only (no comment or processing instruction), in C
        # Chinese, Japanese and Korean say in one character what takes a word elsewhere: there a
        # character counts as three; commas and stops are full-width, and a line without one (a list
        # of headlines) is no paragraph.
        self.cjk = cjk
        w, comma = (3, "\uff0c") if cjk else (1, ",")
        self.v = v = {}
        self.w = {}
        for el in reversed(order):  # every descendant comes before its ancestors
            tag = el.tag
            text = el.text
            if text and not text.isspace():  # most text between tags is layout whitespace
                t = len(text.strip()) * w
                c = text.count(comma) + (text.count("\u3002") if cjk else 0)
            else:
                t = c = 0
            o, ol, tl, g = t, 0, 0, 0
            if len(el):  # half the elements are leaves: no child iterator made for them
                for kid in el:
                    tail = kid.tail
                    if tail and not tail.isspace():
                        n = len(tail.strip()) * w
                        t += n
                        o += n
                        c += tail.count(comma) + (tail.count("\u3002") if cjk else 0)
                    k = v.get(kid)
                    if k is None:
                        continue  # not an element
                    t += k[0]
                    tl += k[1]
                    g += k[5]
                    if k[6] not in _BLOCK:  # inline: its text is part of this block's paragraph
                        o += k[2]
                        ol += k[3]
                        c += k[4]
            if tag == "a":
                tl, ol = t, o
            if o >= _MIN_PARAGRAPH and 2 * ol <= o and tag in _BLOCK and tag not in _HEADINGS and \
                    (c or not cjk or tag == "pre"):
                g += o - ol  # a paragraph's own text outside links: running text
            v[el] = (t, tl, o, ol, c, g, tag)

    def total(self, el) -> int:
        found = self.v.get(el)
        return found[0] if found else 0

    def good(self, el) -> int:
        return self.v[el][5]

    def density(self, el) -> float:
        t, links = self.v[el][:2]
        return links / t if t else 0.0

    def weight(self, el) -> float:
        found = self.w.get(el)
        if found is None:
            found = self.w[el] = class_weight(el)
        return found


_WEIGHTS: dict[str, float] = {}  # class and id string → weight: pages repeat a few strings many times


def class_weight(el) -> float:
    cls, ident = el.get("class"), el.get("id")
    weight = 2 * _CLASS_WEIGHT if el.get("itemprop") == "articleBody" else 0.0
    if ident and ident.count("-") >= 3:
        ident = None  # a slug of the section's heading ("why-the-profile-matters"): words, no evidence
    if not cls and not ident:
        return weight
    names = f"{cls or ''} {ident or ''}"
    found = _WEIGHTS.get(names)
    if found is None:
        if names.isascii():  # nearly every name; re.IGNORECASE pairs an ASCII letter with others outside ASCII only
            low = names.lower()
            positive, negative = _POSITIVE_LOWER.search(low), _NEGATIVE_LOWER.search(low)
        else:
            positive, negative = _POSITIVE.search(names), _NEGATIVE.search(names)
        found = (_CLASS_WEIGHT if positive else 0.0) - (_CLASS_WEIGHT if negative else 0.0)
        if len(_WEIGHTS) > 50_000:
            _WEIGHTS.clear()
        _WEIGHTS[names] = found
    return weight + found


def _named_like(a, b) -> bool:
    """`a` and `b` share most of their class words (numbered tokens aside): blocks of one kind, as a
    page builder names every block of a body (`elementor-element elementor-element-3f2a
    elementor-widget`), so a word against boilerplate in the name is no evidence between them."""
    ca, cb = a.get("class"), b.get("class")
    if not ca or not cb:
        return False
    if ca == cb:
        return True
    ta, tb = _class_words(ca), _class_words(cb)
    return bool(ta and tb) and 2 * len(ta & tb) >= len(ta | tb)


_WORDS: dict[str, frozenset] = {}  # class string → its words: a node is compared with each sibling


def _class_words(cls: str) -> frozenset:
    found = _WORDS.get(cls)
    if found is None:
        found = frozenset(t for t in cls.split() if not any(ch.isdigit() for ch in t))
        if len(_WORDS) > 50_000:
            _WORDS.clear()
        _WORDS[cls] = found
    return found


_SENTENCE_END = re.compile(r"[.!?。！？]\s*$")


def _sentence(el) -> bool:
    return bool(_SENTENCE_END.search(el.text_content()))


def _paragraph(found: tuple) -> bool:
    """A `Measures` tuple of a paragraph: a block (not a heading) of 25+ own characters, at most half
    of them in links (what `Measures` counts as running text, commas aside)."""
    return found[2] >= _MIN_PARAGRAPH and 2 * found[3] <= found[2] and found[6] in _BLOCK and found[6] not in _HEADINGS


_NOTHING = (0,) * 7


_HEADLINE = 15  # characters of a link that reads as a headline (another page's title)


def _opens_with_link(node, m: Measures, chars: int = _HEADLINE, elsewhere: bool = False) -> bool:
    """A link of a headline's length (`chars`; `elsewhere`: to another page) comes before any
    paragraph of running text in `node`: another page's title opens it (a teaser). A link after
    running text, or inside it, is the article's own (a section of a body that ends with a link, a
    sentence with a link in a page builder's block)."""
    v = m.v
    for el in node.iter():
        found = v.get(el)
        if found is None:
            continue
        if found[6] == "a":
            if found[0] >= chars and not (elsewhere and (el.get("href") or "#").startswith(("#", "javascript:"))):
                return True
        elif _paragraph(found):
            return False
    return False


_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


_TEXT_SAMPLE = etree.XPath("substring(string(), 1, 12000)")  # cut in libxml2: not all the text to Python


def _is_cjk(body) -> bool:
    """The page's text is mostly Chinese, Japanese or Korean (a sample of its first characters)."""
    sample = str(_TEXT_SAMPLE(body))
    # Most pages have no such letter at all: an ASCII sample (a flag, no scan) or one search that
    # finds none answers, before the count of every letter and space.
    if sample.isascii() or _CJK.search(sample) is None:
        return False
    letters = len(sample) - sum(sample.count(ws) for ws in (" ", "\n", "\t", "\r"))
    return len(_CJK.findall(sample)) > 0.3 * letters
