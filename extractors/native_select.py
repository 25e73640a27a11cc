"""`mode=native`'s choice of the main content (steps 2 and 3 of `native`'s docstring): paragraphs
score their ancestors, the best container goes up while its parent adds more of the body, a list of
other pages' teasers is passed over, and siblings that continue the body join it."""
from __future__ import annotations

from .native_measure import (_BLOCK, _CLASS_WEIGHT, _HEADINGS, _LONG, _MIN_PARAGRAPH, _NOTHING, Measures, _named_like,
                             _opens_with_link, _sentence)
from .native_title import _in_title, _plain


_MIN_GAIN, _GAIN_SHARE, _GAIN_RATIO = 100, 0.15, 1.0

_TAG_SCORE = {"div": 5.0, "article": 10.0, "main": 5.0, "section": 3.0, "pre": 3.0, "td": 3.0, "blockquote": 3.0,
              "ul": -3.0, "ol": -3.0, "dl": -3.0, "form": -3.0, "li": -3.0, "th": -5.0, "address": -3.0,
              "h1": -5.0, "h2": -5.0, "h3": -5.0, "h4": -5.0, "h5": -5.0, "h6": -5.0}


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


_CONTINUES = 0.7
