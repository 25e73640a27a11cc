"""`mode=native`'s last cuts, by the page's shape rather than its names (step 5 of `native`'s
docstring): teasers and replies after the article, short lines above its first paragraph, a photo
with its caption, what stands before the headline, and the headline itself (the title carries it)."""
from __future__ import annotations

import re

from .native_measure import _BLOCK, _HEADINGS, _HEADLINE, _NOTHING, Measures, _opens_with_link, _sentence
from .native_prune import _KEEP, _remove
from .native_title import _TITLE_HEADING, _in_title, _plain, _replies_heading, _title_headline


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


def _text_before(node, top, m: Measures) -> bool:
    """Running text precedes `node` inside `top`."""
    while node is not top and node is not None:
        if any(m.v.get(sib, _NOTHING)[5] for sib in node.itersiblings(preceding=True)):
            return True
        node = node.getparent()
    return False


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

_TEASER_RUN, _TEASER_MAX = 3, 600


def _teaser(node, m: Measures) -> bool:
    """A short block with a link of a headline's length: another page's teaser (its title, and
    maybe its section, summary and date). Looser than `_teaser_item` (no summary needed): it only
    prunes runs after the article's last running text."""
    found = m.v.get(node)
    if found is None or not 0 < found[0] <= _TEASER_MAX or found[6] in ("p", "pre", "tr", "td", "blockquote") or \
            found[6] in _HEADINGS:
        return False
    return _opens_with_link(node, m)


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
                    not _sentence(node):
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
    if not chosen:
        return
    el = chosen[0]  # the headline opens the selection's first block, or is not looked for
    h = next(el.iter("h1"), None)
    if h is None or not _in_title(_plain(h.text_content()), _plain(title)):
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
