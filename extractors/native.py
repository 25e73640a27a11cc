"""Assay's own main-content selector (`mode=native`): boilerplate scoring on the prepared lxml tree,
written out as Markdown by `markdown.HtmlWriter`. No trafilatura in the loop.

The prepared tree (`html._prepare`) already holds formulas as `$tex$` text, code as plain `<pre>`,
and no script/style/nav/footer/aside/form controls or hidden landmarks. On it:

0. `html._prepare` drops dialogs a script opens (class token `modal`, `dialog`, `popup`, `lightbox`;
   `role=dialog`) and blocks a CSS framework hides on every screen (`hidden`, not `hidden md:block`).
1. One bottom-up pass measures every element: its text, the share of that text inside links, and the
   text that is its own (text and inline children, not nested blocks): a *paragraph* when that is at
   least `_MIN_PARAGRAPH` characters. On a Chinese/Japanese/Korean page a character counts as three
   and a paragraph needs a full-width comma or stop (a list of headlines has none).
2. Each paragraph scores by its length and its links (a line of links scores nothing) and gives its
   score to its parent, half to its grandparent, a third to the next ancestor: the container that
   holds most of the page's running text wins; a paragraph over `_LONG` characters counts as more
   than one (a body written as one block between `<br>`s, in a script without Latin commas). Class
   and id words add or subtract evidence (`article`, `entry-content` for; `sidebar`, `related`,
   `comment`, `share` against), and the container's own link density scales its score down (a menu
   of long titles). A code block is a paragraph at any length, its lines counted like commas (up to
   three); text in a form holding a small share of the page (a comment form's hint) scores nothing.
3. The winner goes up to its parent while the parent adds more running text (paragraph text outside
   links, in blocks not named as boilerplate) than other text: a body split over containers with
   nothing in common, the other posts of a thread. Its siblings then join when they score a fair
   share of it, or are plain paragraphs with few links (a body split around an advertisement).
   A winner that is, or holds mostly, a list of other pages' teasers (linked titles with summaries)
   not holding the page's headline is passed over: the best of the rest under the block holding
   the headline and the list wins (a post of one command beside a sidebar of long summaries).
4. Inside the selection, blocks that read as boilerplate go: class/id evidence against them with a
   small share of the text (not inside a selection itself so named, and not when blocks of the same
   class together hold much of it: a thread of `comment` blocks), link lists, headings that are
   links, blocks of images or form controls, an article's own `<header>` and its schema.org metadata
   (`itemprop` headline, author, dates, description, image, keywords), and short lines without a
   sentence's end above the first paragraph (kicker, byline, reading time). Code blocks and formulas
   are never pruned for their links or size.
5. Evidence from the page's shape, not its names (names learned from some sites do not carry to
   others): after the article's last running text, a run of sibling blocks of one kind each opened
   by a headline link goes (teasers); a heading that names the article with more words than its title
   goes with what follows it (the replies); an image with a short text beside it in a container
   of their own goes (a photo and its caption), unless three or more such blocks of one kind stand
   side by side (a how-to's steps); the article starts at its headline (the first `<h1>` that the
   title holds), so what the selection holds before it goes. What keeps the body whole in shapes
   the names do not tell: a teaser opens with its linked title (a block whose link follows or sits
   in its running text is the article's), a block of two or more paragraphs of running text or a
   `<div>` that is one sentence with links is not pruned for its links, and a linked heading in the
   body's own container with running text after it is a section heading (a listicle's).

Repeated blocks across a site's pages are not used: the stage sees one page at a time.
"""
from __future__ import annotations

import re

from lxml import etree

# Class/id words: evidence a block is boilerplate / main content (whole words of the class or id).
_NEGATIVE = re.compile(
    r"(?:^|[-_\s])(?:comments?|commentlist|respond|sidebar|side|widgets?|footer|foot|navbar|nav|menu|share|sharing"
    r"|social|related|relatedposts|breadcrumbs?|crumbs|cookies?|consent|banner|advert\w*|ads?|adsense|adslot|dfp"
    r"|promo\w*|sponsor\w*|subscribe|subscription|newsletter|signup|popup|modal|tags|taglist|tag-list|byline"
    r"|author-?bio|authorbox|about-author|pagination|pager|paging|skip|print|rating|toolbar|masthead|teasers?"
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
_MIN_GAIN, _GAIN_SHARE, _GAIN_RATIO = 100, 0.15, 1.0

_BLOCK = frozenset(("p", "div", "pre", "table", "ul", "ol", "dl", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6",
                    "section", "article", "main", "header", "figure", "figcaption", "form", "fieldset", "hr",
                    "center", "details", "summary", "li", "dd", "dt", "tr", "td", "th", "tbody", "thead", "tfoot",
                    "address", "body", "html", "caption", "br"))
_HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
_MIN_PARAGRAPH = 25
_LONG = 500  # a paragraph longer than this counts as more than one (a body without <p>)
_TAG_SCORE = {"div": 5.0, "article": 10.0, "main": 5.0, "section": 3.0, "pre": 3.0, "td": 3.0, "blockquote": 3.0,
              "ul": -3.0, "ol": -3.0, "dl": -3.0, "form": -3.0, "li": -3.0, "th": -5.0, "address": -3.0,
              "h1": -5.0, "h2": -5.0, "h3": -5.0, "h4": -5.0, "h5": -5.0, "h6": -5.0}


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

    def commas(self, el) -> int:
        return self.v[el][4]

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


def _in_small_forms(body, m: Measures) -> set:
    """The elements inside a form that holds under half the page's text (a search box; a comment or
    sign-up form and its hint, "be kind, stay on topic"): what pruning drops (`_boilerplate`) is no
    running text to choose by. A form holding most of the page (a post feed, an ASP.NET page) counts."""
    half = 0.5 * m.total(body)
    return {el for form in body.iter("form") if m.total(form) < half for el in form.iter()}


def _score_candidates(m: Measures, skip: set = frozenset()) -> dict:
    scores: dict = {}
    cjk = m.cjk
    for el, (_, _, own, links, commas, _, tag) in reversed(m.v.items()):  # page order: ties go to the first
        if tag == "pre":
            # Code: a paragraph at any length (a one-line command is a step of the post, as a sentence
            # is); its clauses are its commas (ASCII ones: a Chinese page's code has no full-width
            # commas) or its lines up to three, as its length counts up to three hundred characters.
            if not own or el in skip:
                continue
            text = el.text_content()
            commas = max(commas, text.count(","), min(text.count("\n") + 1, 3))
        elif own < _MIN_PARAGRAPH or tag not in _BLOCK or tag in _HEADINGS or cjk and not commas:
            continue
        if links > 0.5 * own or el in skip:
            continue  # a line of links: navigation, not a paragraph; or a form's text
        score = (1.0 + commas + min(own / 100.0, 3.0) + max(0, own - _LONG) / _LONG) * (1.0 - links / own)
        node, share = el.getparent(), 1.0
        for _ in range(3):
            if node is None or node.tag == "html":
                break
            scores[node] = scores.get(node, 0.0) + score / share
            node, share = node.getparent(), share + 1.0
        if tag not in ("pre", "td", "blockquote", "p"):
            # A block of text with no paragraph markup (text in a div) is a candidate itself.
            scores[el] = scores.get(el, 0.0) + score
    # Class and id evidence scales what the text earned: a tiny element named `content` must not
    # beat the article, and a big one named `comments` can still win a page that is all comments.
    return {el: (s + _TAG_SCORE.get(el.tag, 0.0)) * (1.0 - m.density(el)) * (1.0 + m.weight(el) / (2 * _CLASS_WEIGHT))
            for el, s in scores.items()}


def _top(scores: dict, m: Measures):
    if not scores:
        return None
    best = max(scores, key=scores.get)
    # A winner that shares its ancestor with other strong candidates is one part of a body split in
    # sections: go up while the ancestor scores close to it or holds most of the page's paragraph text.
    top_score = scores[best]
    strong = [el for el, s in scores.items() if s >= 0.75 * top_score and el is not best]
    if len(strong) >= 2:
        ancestors = set(best.iterancestors())
        for el in strong:
            shared = [a for a in el.iterancestors() if a in ancestors]
            if shared:
                ancestors &= set(shared)
        for a in best.iterancestors():
            if a in ancestors and a.tag not in ("html", "body"):
                if sum(1 for el in strong if a in set(el.iterancestors())) >= 2:
                    best = a
                break
    parent = best.getparent()
    while parent is not None and parent.tag not in ("html", "body") and m.total(parent):
        if m.total(best) >= 0.85 * m.total(parent) and m.density(parent) < 0.3:
            best, parent = parent, parent.getparent()  # a wrapper that adds a title or a line: take it
        elif _gains(parent, best, m):
            best, parent = parent, parent.getparent()  # the rest of a body split over containers
        else:
            found = _gains_beyond(parent, best, m)
            if found is None:
                found = _continued_above(parent, best, m)
            if found is None:
                break
            best, parent = found, found.getparent()
    return best


def _gains_beyond(parent, best, m: Measures):
    """The first ancestor two or three levels above `best` that gains (`_gains`, counted from `best`)
    when the levels on the way add little text, and gains at least as much running text again as
    `best` holds: one entry of a list of documented members, whose next level is the entry's section
    and its notes, and then the list."""
    thin = 0.3 * m.total(best)
    node = parent
    for _ in range(2):
        if m.total(node) - m.total(best) > thin:
            return None
        up = node.getparent()
        if up is None or up.tag in ("html", "body") or not m.total(up):
            return None
        if _gains(up, best, m) and _gain_of(up, best, m) >= m.good(best):
            return up
        node = up
    return None


def _continued_above(parent, best, m: Measures):
    """The grandparent, when counted from `best` it gains (`_gains`) at least half as much running
    text as `best` holds: the rest of the body one level further out, past a level of furniture
    (share bar, tags, byline) that would not gain alone."""
    up = parent.getparent()
    if up is None or up.tag in ("html", "body") or not m.total(up):
        return None
    if _gains(up, best, m) and _gain_of(up, best, m) >= _CONTINUED * m.good(best):
        return up
    return None


_CONTINUED = 0.5


def _gain_of(top, best, m: Measures) -> int:
    """The running text that going up from `best` to its ancestor `top` adds, outside blocks named
    as boilerplate unless they are named like `best`."""
    gain = 0
    same = best.get("class")
    node = best
    while node is not top:
        parent = node.getparent()
        for sib in parent:
            if sib is node or not isinstance(sib.tag, str):
                continue
            g = m.good(sib)
            if g and (m.weight(sib) >= 0 or sib.get("class") == same or _named_like(sib, node)):
                gain += g
        node = parent
    return gain


def _gains(parent, best, m: Measures) -> bool:
    """Going up from `best` to its ancestor `parent` adds more running text (paragraph text outside
    links) than other text: the parent holds more of the same body (sections, a second column of
    paragraphs, the other posts of a thread). Text in blocks named as boilerplate counts against,
    unless they are named like `best` itself. (Looking further up, past any level that adds little,
    took in whole sites on the dev pages; `_gains_beyond` looks past thin levels only.)"""
    gain = _gain_of(parent, best, m)
    cost = m.total(parent) - m.total(best) - gain
    return gain >= max(_MIN_GAIN, _GAIN_SHARE * m.good(best)) and gain >= _GAIN_RATIO * cost


def _selection(root, m: Measures, scores: dict, skip: set = frozenset(), title: str | None = None) -> list:
    top = _top(scores, m)
    if top is None:
        return [root]
    teasers = _teaser_list(top, m)
    excluded: list = []
    if teasers is not None:
        top, scores = _past_teasers(root, top, teasers, m, skip, title, scores, excluded)
    parent = top.getparent()
    if parent is None:
        return [top]
    threshold = max(10.0, 0.2 * scores.get(top, 0.0))
    chosen = []
    after = False
    for sib in parent:
        if not isinstance(sib.tag, str):
            continue
        if sib is top:
            chosen.append(sib)
            after = True
            continue
        if any(sib is t for t in excluded):
            continue  # a list of teasers passed over
        s = scores.get(sib)
        like = _named_like(sib, top)
        if s is not None and s + (_CLASS_WEIGHT * 0.2 if like else 0) >= threshold and (like or m.weight(sib) >= 0):
            chosen.append(sib)
        elif sib.tag in ("p", "pre", "blockquote", "ul", "ol", "table", "h2", "h3", "h4") and m.weight(sib) >= 0:
            own, d = m.total(sib), m.density(sib)
            if sib.tag == "pre" or (own > 80 and d < 0.25) or (0 < own <= 80 and d == 0 and _sentence(sib)):
                chosen.append(sib)
        elif after and _continues(sib, m) and (like or m.weight(sib) >= 0):
            chosen.append(sib)
    return chosen


_TEASER_ITEMS = frozenset(("li", "div", "article", "section"))
_TEASER_TITLE = 20  # characters of a linked title (a CJK character counts three)


def _teaser_item(item, m: Measures) -> bool:
    """A title linked to another page and a summary: text outside links of a paragraph's length but
    no more than two long paragraphs (a post, a reply or an article says more). Stricter than
    `_teaser`, which prunes after the body: here a list with summaries is kept from winning."""
    found = m.v.get(item)
    if found is None or found[6] not in _TEASER_ITEMS:
        return False
    summary = found[0] - found[1]
    if not _MIN_PARAGRAPH <= summary <= 2 * _LONG:
        return False
    return _opens_with_link(item, m, _TEASER_TITLE, True)


def _teaser_run(parent, m: Measures) -> int:
    """The running text of `parent`'s teaser items (`_teaser_item`) when its children of one kind
    (tag and class) are three or more and mostly teaser items; else 0."""
    kids = [k for k in parent if k.tag in _TEASER_ITEMS]  # a comment's tag is no string: not in the set
    if len(kids) < 3:
        return 0
    kinds: dict = {}
    for kid in kids:
        k = (kid.tag, kid.get("class"))
        kinds[k] = kinds.get(k, 0) + 1
    (tag, cls), n = max(kinds.items(), key=lambda kv: kv[1])
    if n < 3:
        return 0
    items = [kid for kid in kids if kid.tag == tag and kid.get("class") == cls and _teaser_item(kid, m)]
    return sum(m.good(kid) for kid in items) if len(items) >= 3 and 3 * len(items) >= 2 * n else 0


def _teaser_list(top, m: Measures):
    """The list of other pages' teasers (`_teaser_run`) that `top` is part of, or the largest of
    the lists whose summaries together are most of its running text (a sidebar of popular posts,
    one on each side), else None."""
    node = top
    t, links = m.v[top][:2]
    for _ in range(3 if t - links <= 2 * _LONG else 0):  # `top` is an item, or a summary inside one
        node = node.getparent()
        if node is None or node.tag in ("html", "body"):
            break
        if _teaser_run(node, m):
            return node
    good = m.good(top)
    if not good:
        return None
    runs, stack = [], [top]
    while stack:  # only blocks that hold a quarter of the running text (a few on each level) and
        node = stack.pop()  # the linked titles of three teasers
        found = _teaser_run(node, m) if m.v[node][1] >= 3 * _TEASER_TITLE else 0
        if found:
            runs.append((found, node))
        else:
            stack.extend(k for k in node if isinstance(k.tag, str) and m.v[k][5] >= 0.25 * good
                         and m.v[k][1] >= 3 * _TEASER_TITLE)
    if sum(g for g, _ in runs) >= 0.5 * good:
        return max(runs, key=lambda r: r[0])[1]
    return None


def _headline_element(root, title: str | None, teasers):
    """The page's headline: its first h1 whose text the page's title holds, else h2, else h3; not
    one inside the list of teasers (the page itself among its popular posts)."""
    if not title:
        return None
    key = _plain(title)
    for tag in ("h1", "h2", "h3"):
        for h in root.iter(tag):
            if _in_title(_plain(h.text_content()), key) and teasers not in h.iterancestors():
                return h
    return None


def _past_teasers(root, top, teasers, m: Measures, skip, title, scores: dict, excluded: list):
    """`top` is, or holds mostly, a list of other pages' teasers. Unless the list holds the page's
    headline (then it is the page's subject: a listicle, an index), its summaries are no running
    text of the page: they neither score nor count when the choice goes up, and the best of the rest
    inside the smallest block that holds both the headline and the teasers is chosen (the short post
    beside a sidebar of long summaries). Again while that is another list of teasers (a second
    widget). Returns the chosen element and the scores it was chosen by; the lists passed over are
    added to `excluded`."""
    head = _headline_element(root, title, teasers)
    if head is None:
        return top, scores
    above = set(head.iterancestors())
    skip = set(skip)
    for _ in range(_TEASER_LISTS):
        if teasers in above or head is teasers:
            break
        common = next((a for a in (teasers, *teasers.iterancestors()) if a in above), None)
        if common is None:
            break
        lost = m.good(teasers)
        kept = [(a, m.v[a]) for a in (teasers, *teasers.iterancestors()) if a in m.v]
        for a, v in kept:  # the summaries are not the page's running text
            m.v[a] = v[:5] + (v[5] - lost,) + v[6:]
        skip.update(teasers.iter())
        rescored = _score_candidates(m, skip)
        inside = set(common.iter())
        found = _top({el: s for el, s in rescored.items() if el in inside}, m)
        if found is None:  # nothing else: the teasers are all the page has
            m.v.update(kept)
            break
        top, scores = found, rescored
        excluded.append(teasers)
        teasers = _teaser_list(top, m)
        if teasers is None:
            break
    return top, scores


_TEASER_LISTS = 3


def _continues(sib, m: Measures) -> bool:
    """A container after the winner that is running text and nothing else (paragraphs, few links):
    the rest of a body split around an advertisement or a figure, however little it scores (its
    paragraphs sit too deep to give it any)."""
    found = m.v.get(sib)
    if found is None or found[5] < _MIN_GAIN or found[5] < _CONTINUES * found[0] or found[1] > 0.2 * found[0]:
        return False
    # Paragraphs in list items are a list's entries (teasers: a link and its summary), not a body's.
    paragraphs = sum(1 for el in sib.iter() if m.v.get(el, _NOTHING)[2] >= _MIN_PARAGRAPH and el.tag in _BLOCK
                     and not _in_list_item(el, sib))
    return paragraphs >= 2  # one paragraph alone: a notice, a disclaimer


def _in_list_item(el, top) -> bool:
    for a in el.iterancestors():
        if a is top:
            return False
        if a.tag == "li":
            return True
    return False


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


_CONTINUES = 0.7


_SENTENCE_END = re.compile(r"[.!?。！？]\s*$")


def _sentence(el) -> bool:
    return bool(_SENTENCE_END.search(el.text_content()))


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


def _prune(el, m: Measures, body_chars: int, thread: bool = False) -> None:
    """Drop the boilerplate blocks inside a chosen element (in place). `thread`: `el` holds the posts
    of a thread, all content: a short reply with a mention link is no menu."""
    holds_code = {a for pre in el.iter("pre") for a in pre.iterancestors()}  # code is content wherever it is
    # A quotation (an embedded post, a pull quote) is the author's material: its attribution line
    # ("— Name (@name) May 4, 2019") is no dateline, and a wrapper named for the embed (`social-embed`)
    # that holds little besides the quote is no share bar.
    quoted = {d for q in el.iter("blockquote") for d in q.iterdescendants()} if el.find(".//blockquote") is not None \
        else _EMPTY
    # Inside a selection that is itself named as boilerplate (a thread of `comment` blocks), names
    # against are no evidence: the page's content lives in such markup.
    named_against = any(m.weight(a) < 0 for a in (el, *el.iterancestors()))
    groups = _Groups(el)
    # Children as elements only, filtered and reversed in C (no Python test of each child's tag).
    stack = list(el.iterchildren(etree.Element, reversed=True))
    while stack:  # depth first in page order; a dropped block's descendants are not looked at
        node = stack.pop()
        if node.tag in _JUDGED and node not in holds_code and \
                _boilerplate(node, m, body_chars, named_against, groups, thread, node in quoted):
            _remove(node)
        elif len(node):
            stack.extend(node.iterchildren(etree.Element, reversed=True))


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


def _paragraph(found: tuple) -> bool:
    """A `Measures` tuple of a paragraph: a block (not a heading) of 25+ own characters, at most half
    of them in links (what `Measures` counts as running text, commas aside)."""
    return found[2] >= _MIN_PARAGRAPH and 2 * found[3] <= found[2] and found[6] in _BLOCK and found[6] not in _HEADINGS


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
    """Text of the blocks of the selection named against with `node`'s tag and class: a name
    that the page gives to the wrappers of its body (`elementor-widget-container`, one in each of
    its text blocks) is the body's."""
    named = groups.named
    if named is None:
        named = groups.named = {}
        for el in groups.selection.iter("*"):
            cls = el.get("class")
            if cls and m.weight(el) < 0:
                k = (el.tag, cls)
                named[k] = named.get(k, 0) + m.total(el)
    return named.get((node.tag, node.get("class")), 0)


# Headings that open a list of other pages' teasers after the article ("Related stories", "其他人也在看").
_MORE_HEADING = re.compile(
    r"^(?:related(?:\s+(?:articles?|posts?|stories|news|content|reading|links))?|you (?:may|might) also like"
    r"|more (?:from|stories|news|articles|to read|on this)\b|recommended(?:\s+(?:for you|reading|stories|articles))?"
    r"|read (?:next|also)|also read|popular (?:posts|stories|articles|now)|trending(?: now| stories)?"
    r"|most (?:read|popular|viewed|shared)|what to read next|around the web"
    r"|other (?:people|readers) (?:also )?(?:read|viewed)"
    r"|mehr zum thema|das könnte sie auch interessieren|weitere artikel|à lire aussi|lire aussi|sur le même sujet"
    r"|te puede interesar|noticias relacionadas|más noticias|читайте также|похожие (?:статьи|новости)"
    r"|其他人也在看|大家都在看|相关阅读|相關閱讀|相关文章|相關文章|相关新闻|相關新聞|推荐阅读|推薦閱讀|猜你喜欢|为你推荐"
    r"|熱門|热门推荐|热门文章|延伸阅读|延伸閱讀|関連記事|おすすめ記事|관련 기사)\s*[:：]?$", re.I)


def _more_heading(el) -> bool:
    return bool(_MORE_HEADING.match(" ".join(el.text_content().split())))


def _text_before(node, top, m: Measures, after: bool = False) -> bool:
    """Running text precedes `node` inside `top` (`after`: follows it)."""
    while node is not top and node is not None:
        if any(m.v.get(sib, _NOTHING)[5] for sib in node.itersiblings(preceding=not after)):
            return True
        node = node.getparent()
    return False


_NOTHING = (0,) * 7


_QUOTES = str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")  # a title's typography varies from its heading's
_TITLE_PARTS = re.compile(r"\s+[|\u2013\u2014:\u00b7\u2022-]+\s+")


def _title_headline(title: str | None) -> tuple[str, str] | None:
    """The page's title and the article's headline in it: its longest part between the separators
    that add the site's name ("Why X matters | Site"), both lower case."""
    if not title:
        return None
    title = " ".join(title.split()).lower().translate(_QUOTES)
    part = max(_TITLE_PARTS.split(title), key=len)
    return (title, part) if len(part) >= 15 else None


def _replies_heading(text: str, headline: tuple[str, str] | None) -> bool:
    """A heading (`text`, spaces collapsed) after the article that names the article with words the
    title does not have: the heading of its replies ("12 thoughts on “Title”", "3 responses to
    Title"). A heading that repeats the title, or part of it, is the article's own."""
    if headline is None or len(text) < len(headline[1]) + 5:
        return False
    text = text.lower().translate(_QUOTES)
    return headline[1] in text and text not in headline[0]


def _cut_teasers(chosen: list, m: Measures, title: str | None = None) -> None:
    """After the article, a heading that opens other pages' teasers, or the article's replies (a
    heading naming the article): it and what follows it in its container go (the teasers' summaries
    are running text, and lifted the selection to hold them). Not when no running text precedes it:
    then what follows is the content ("Related work")."""
    headline = _title_headline(title)
    for el in chosen:
        for h in list(el.iter("h2", "h3", "h4")):
            if h.getparent() is None:
                continue
            text = " ".join(h.text_content().split())
            if not (_MORE_HEADING.match(text) or _replies_heading(text, headline)):
                continue
            node = h  # the heading's wrapper, when the wrapper holds the heading alone
            while node.getparent() is not el and m.total(node.getparent()) <= m.total(node) + 5:
                node = node.getparent()
            if not _text_before(node, el, m):
                continue
            for sib in list(node.itersiblings()):
                if sib.tag in _HEADINGS and not _more_heading(sib):
                    break
                _remove(sib)
            _remove(node)


_HEAD_SHORT, _HEAD_SHARE = 50, 0.1
_TEASER_RUN, _TEASER_MAX, _HEADLINE = 3, 600, 15


def _teaser(node, m: Measures) -> bool:
    """A short block with a link of a headline's length: another page's teaser (its title, and
    maybe its section, summary and date). Looser than `_teaser_item` (no summary needed): it only
    prunes runs after the article's last running text."""
    found = m.v.get(node)
    if found is None or not 0 < found[0] <= _TEASER_MAX or found[6] in ("p", "pre", "tr", "td", "blockquote") or \
            found[6] in _HEADINGS:
        return False
    return _opens_with_link(node, m)


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


def _cut_teaser_runs(chosen: list, m: Measures) -> None:
    """After the article's last running text, a run of sibling blocks of one kind (same tag and
    class), each a `_teaser`: a list of other pages' teasers. The summaries are running text, so the
    selection can hold them; without a name or heading to tell, their shape does. Only the path to
    the last running text is looked at: a run with running text after it is the article's."""
    for el in chosen:
        node = el
        while node is not None:
            kids = list(node)
            last = -1  # the last child that holds running text
            for i, kid in enumerate(kids):
                if m.v.get(kid, _NOTHING)[5]:
                    last = i
            if len(kids) >= _TEASER_RUN and m.v.get(node, _NOTHING)[1] >= _TEASER_RUN * _HEADLINE:
                run, key = [], None
                for i, kid in enumerate((*kids, None)):  # None: the end closes the last run
                    k = (kid.tag, kid.get("class")) if kid is not None and _teaser(kid, m) else None
                    if k != key or k is None:
                        if len(run) >= _TEASER_RUN and i - 1 >= last and _text_before(run[0], el, m):
                            for teaser in run:
                                _remove(teaser)
                            if kids[last] in run:
                                last = -1
                        run, key = [], k
                    if k is not None:
                        run.append(kid)
            node = kids[last] if last >= 0 else None


_BODY_START = 150  # own paragraph characters of the first block of running text


def _trim_head(chosen: list, m: Measures, body_chars: int) -> None:
    """Before the first paragraph of running text, short blocks that are no sentence go: the
    kicker, byline, agency, dateline, reading time and share labels above an article. Headings,
    code, tables and formulas stay."""
    doomed = []
    for el in chosen:
        for node in el.iter():
            found = m.v.get(node)
            if found is None:
                continue
            total, _, own, own_links, _, _, tag = found
            if own >= _BODY_START and 2 * own_links <= own and tag not in _HEADINGS:
                break  # the body starts
            if tag in _BLOCK and tag not in _HEADINGS and tag not in _KEEP and 0 < total <= _HEAD_SHORT and \
                    not any(m.v.get(k, _NOTHING)[6] in _BLOCK for k in node) and \
                    next(node.iter("pre", "math", "table"), None) is None and \
                    not _SENTENCE_END.search(node.text_content()):
                doomed.append(node)  # a leaf block: a line of its own
        else:
            continue
        break
    else:
        return  # no paragraph of running text: a page of short lines (a poem, a list) is all body
    if sum(m.total(n) for n in doomed) > _HEAD_SHARE * body_chars:
        return  # more than a headline's furniture: short posts, a list that opens the text
    for node in doomed:
        if node.getparent() is not None:
            _remove(node)


_CAPTION = 300
_FIGURE_TAGS = frozenset(("div", "figure", "span", "section"))


def _drop_captioned_images(chosen: list, m: Measures) -> None:
    """An image with a short text beside it in a small container of their own: a photo and its
    caption and credit, not the article's text."""
    for el in chosen:
        doomed = []
        for img in el.iter("img", "picture"):
            node = img.getparent()
            while node is not None and node is not el and not m.total(node):
                node = node.getparent()  # up to the first container with text
            if node is None or node is el or node in chosen or node.tag not in _FIGURE_TAGS or \
                    m.total(node) > _CAPTION or m.v[node][1] or node is img.getparent() and m.v[node][2] or \
                    next(node.iter("pre", "math", "table"), None) is not None or _steps(node):
                continue
            text = node.text_content()
            if "$" not in text and "\\" not in text:  # a formula beside a figure is the text's
                doomed.append(node)
        for node in doomed:
            if node.getparent() is not None:
                _remove(node)


def _steps(node) -> bool:
    """`node` is one of a run of three or more adjacent sibling blocks of one kind (tag and class)
    that each hold an image: the steps of a how-to, each a picture and its instruction, not a photo
    with its caption (photos stand apart, between the article's paragraphs)."""
    cls, n = node.get("class"), 1
    for preceding in (True, False):
        for sib in node.itersiblings(preceding=preceding):
            if not isinstance(sib.tag, str):
                continue
            if sib.tag != node.tag or sib.get("class") != cls or next(sib.iter("img", "picture"), None) is None:
                break
            n += 1
            if n >= _STEPS:
                return True
    return False


_STEPS = 3


def _cut_before_headline(chosen: list, m: Measures, title: str, body_chars: int) -> None:
    """The article starts at its headline: what the selection holds before the first <h1> that the
    title holds (a section label, a breadcrumb trail, another story's teaser) goes, when it is a
    small share of the text."""
    key = _plain(title)
    for el in chosen:
        h = next(el.iter("h1"), None)
        if h is None or not _in_title(_plain(h.text_content()), key):
            return
        before = []
        node = h
        while node is not el:
            before.extend(node.itersiblings(preceding=True))
            node = node.getparent()
        if sum(m.total(b) for b in before) > 0.3 * body_chars or any(
                next(b.iter("pre", "math", "table"), None) is not None for b in before):
            return
        for b in before:
            _remove(b)
        return


_TITLE_HEADING = 10  # characters: a shorter heading ("News", "Home") inside the title names no article


def _plain(text: str) -> str:
    """Spaces collapsed, lower case: a title and a heading compared as a reader sees them."""
    return " ".join(text.split()).lower()


def _in_title(heading: str, title: str) -> bool:
    """The heading (`_plain`) is the title's or part of it (a title adds the site's name)."""
    return len(heading) >= _TITLE_HEADING and heading in title


def _drop_headline(chosen: list, title: str) -> None:
    """The page's headline is its title (`meta.title`), not part of the text: the first heading of
    the selection goes when the title holds it (a title adds the site's name), and so does any later
    heading that is the whole title (a sticky bar repeating it). The first heading can be a chosen
    element itself (a sibling joined to the body's container)."""
    key = _plain(title)
    first = True
    for el in list(chosen):
        for h in list(el.iter("h1", "h2")):
            text = _plain(h.text_content())
            if _in_title(text, key) if first else len(text) >= _TITLE_HEADING and text == key:
                if h is el:
                    if len(chosen) > 1:  # a page that is its headline alone keeps it
                        chosen.remove(el)
                elif h.getparent() is not None:
                    h.drop_tree()
            first = False


# Dialogs a script opens (report forms, cookie and newsletter pop-ups, help sheets): never the page's
# text, however much text they hold; and blocks a CSS framework hides on every screen (Bootstrap's
# `hidden`/`d-none`, Tailwind's `hidden`), unless a responsive class shows them again on some screen
# (`hidden md:block`, `d-none d-lg-block`). Not `style="display: none"`: threads fold replies and
# "show more" text that way, and a script shows them. Found in `html._prepare`'s walk over the tree.
# A token that ends in the noun, not a feature flag (`penci-enable-lightbox`, `has-modal`).
_DIALOG = re.compile(r"^(?:(?![\w-]*(?:enable|enabled|has|with|no|use|allow|open|trigger|toggle|show)[-_]"
                     r"(?:modal|dialog|popup|lightbox)$)[\w-]*[-_])?(?:modal|dialog|popup|lightbox)$", re.I)
_HIDDEN = frozenset(("hidden", "d-none", "hide", "is-hidden"))


def script_hidden(cls: str) -> bool:
    """A class that names a dialog, or hides its element on every screen."""
    tokens = cls.split()
    if any(_DIALOG.match(t) for t in tokens):
        return True
    return not _HIDDEN.isdisjoint(tokens) and not any(":" in t or t.startswith("d-") and t != "d-none" for t in tokens)


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


def select(root, keep_all: bool = False, title: str | None = None, ascii_only: bool = False) -> list:
    """The main-content elements of a prepared tree, in page order, pruned. `keep_all`: the tree is
    a thread region (every post is content): prune only. `title`: the page's title, whose headline
    is dropped from the text. `ascii_only`: the page's text is ASCII (so not CJK: no need to look)."""
    body = root.find("body") if root.tag == "html" else root
    if body is None:
        body = root
    m = Measures(body, not ascii_only and _is_cjk(body))
    if keep_all:
        chosen = [body]
    else:
        skip = _in_small_forms(body, m)
        chosen = _selection(body, m, _score_candidates(m, skip), skip, title)
    body_chars = sum(m.total(el) for el in chosen) or 1
    if not keep_all:
        _cut_teaser_runs(chosen, m)
        _cut_teasers(chosen, m, title)  # before pruning, which drops the short heading alone ("Related")
    for el in chosen:
        _prune(el, m, body_chars, keep_all)
    if not keep_all:
        _trim_head(chosen, m, body_chars)
        _drop_captioned_images(chosen, m)
    if title and not keep_all:
        _cut_before_headline(chosen, m, title, body_chars)
        _drop_headline(chosen, title)
    return chosen
