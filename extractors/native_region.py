"""`mode=native`'s fallback when the choice holds a small share of the page: listings and collections
(a grid of product cards, a job board, a news front page) have no one block of running text, so the
scoring picks their intro line or a single card; a docs index (a Sphinx toctree: links only) scores
nothing but its footer. There the page's main region is taken instead: its `<main>` landmark
(`role=main`), else the container around the choice whose children of one kind (tag and class) hold
the most text: the cards."""
from __future__ import annotations

from .native_measure import Measures

_SMALL_SHARE = 0.2  # of the page's text: a choice this small on a page of cards is one of them
_REGION_SHARE = 0.4  # of the page's text a region must hold to be the page's main part
_CARDS = 3


def main_region(body, m: Measures, chosen: list) -> list:
    """`chosen`, or the page's main region when `chosen` holds under `_SMALL_SHARE` of the page's
    text and the region holds it and at least twice as much text."""
    page = m.total(body)
    got = sum(m.total(el) for el in chosen)
    if not page or got >= _SMALL_SHARE * page:
        return chosen
    region = page_region(body, m)
    if not region or m.total(region[0]) < 2 * got:
        return chosen
    if not is_landmark(region[0]) and not all(within(el, region[0]) for el in chosen):
        # The choice is the header of the container that holds the cards (a listing's intro in
        # its article's `<header>`, the entries after it): the container is the page's. Cards
        # elsewhere (a sidebar's list of teasers beside a post) are not the page's.
        parent = chosen[0].getparent()
        if len(chosen) == 1 and chosen[0].tag == "header" and parent is not None and parent is not body and \
                within(region[0], parent):
            return [parent]
        return chosen
    return region  # a landmark wins wherever the choice was (a docs index's footer beside its toctree)


def is_landmark(el) -> bool:
    return el.tag == "main" or el.get("role") == "main"


def within(el, region) -> bool:
    return el is region or any(a is region for a in el.iterancestors())


def page_region(body, m: Measures) -> list:
    """[the page's main region] (`<main>`, else the cards' container), or [] when it has none."""
    page = m.total(body)
    region = _landmark(body, m, page)
    if region is None:
        region = _cards(body, m, page)
    return [] if region is None else [region]


def _landmark(body, m: Measures, page: int):
    """The smallest `<main>` or `role=main` element holding `_REGION_SHARE` of the page's text."""
    found = [el for el in body.iter("main") if m.total(el) >= _REGION_SHARE * page]
    found += [el for el in body.iterfind(".//*[@role='main']") if m.total(el) >= _REGION_SHARE * page]
    return min(found, key=m.total) if found else None


def _cards(body, m: Measures, page: int):
    """The element whose children of one kind, three or more, hold the most text, when that is
    `_REGION_SHARE` of the page's text or more."""
    best, best_chars = None, 0
    for el in body.iter("*"):
        if len(el) < _CARDS:
            continue
        kinds: dict = {}
        for kid in el:
            if isinstance(kid.tag, str):
                k = (kid.tag, kid.get("class"))
                n, chars = kinds.get(k, (0, 0))
                kinds[k] = (n + 1, chars + m.total(kid))
        chars = max((c for n, c in kinds.values() if n >= _CARDS), default=0)
        if chars > best_chars:
            best, best_chars = el, chars
    return best if best_chars >= _REGION_SHARE * page else None
