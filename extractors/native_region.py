"""`mode=native`'s fallback when the choice holds a small share of the page: listings and collections
(a grid of product cards, a job board, a news front page) have no one block of running text, so the
scoring picks their intro line or a single card; a docs index (a Sphinx toctree: links only) scores
nothing but its footer. There the page's main region is taken instead: its `<main>` landmark
(`role=main`), else the container around the choice whose children of one kind (tag and class) hold
the most text: the cards."""
from __future__ import annotations

from .native_measure import Measures, _named_like
from .native_select import _teaser_run

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
        # elsewhere are the page's when they are entries (`entries`).
        parent = chosen[0].getparent()
        if len(chosen) == 1 and chosen[0].tag == "header" and parent is not None and parent is not body and \
                within(region[0], parent):
            return [parent]
        if not entries(region[0], m):
            return chosen
    return region  # a landmark wins wherever the choice was (a docs index's footer beside its toctree)


def entries(region, m: Measures) -> bool:
    """Cards that are a list of entries, each a link to its page and more (a price list's rows: a
    linked name and its price), not a list of headlines (links alone, or text alone) nor of teasers
    (linked titles with summaries: a sidebar's other pages)."""
    return _ENTRY_LINKS[0] <= m.density(region) < _ENTRY_LINKS[1] and not _teaser_run(region, m)


_ENTRY_LINKS = (0.1, 0.8)


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
    """The element whose children of one kind (one tag, named alike), three or more, hold the most
    text, when that is `_REGION_SHARE` of the page's text or more."""
    best, best_chars = None, 0
    for el in body.iter("*"):
        if len(el) < _CARDS:
            continue
        # One kind: one tag, named alike (`_named_like`: zebra-striped rows `row bg-white`, `row bg-grey`).
        kinds: list = []  # [representative, count, chars]
        for kid in el:
            if isinstance(kid.tag, str):
                kind = next((k for k in kinds if k[0].tag == kid.tag and (k[0].get("class") == kid.get("class")
                                                                         or _named_like(k[0], kid))), None)
                if kind is None:
                    kinds.append([kid, 1, m.total(kid)])
                else:
                    kind[1] += 1
                    kind[2] += m.total(kid)
        chars = max((c for _, n, c in kinds if n >= _CARDS), default=0)
        if chars > best_chars:
            best, best_chars = el, chars
    return best if best_chars >= _REGION_SHARE * page else None
