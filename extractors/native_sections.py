"""`mode=native` on a page built as a stack of sections (a service or product landing page: a hero,
cards of features, quotes, an FAQ, a visit block, each its own `<section>` or page-builder block).
The running text is spread over the sections, so scoring picks the one that holds most (often the
FAQ) and the rest of the page is lost. When the choice sits in one of three or more sibling sections
of one kind and holds under three quarters of their text outside links, the sections are the content: those not
named as boilerplate and not mostly links are taken, and pruning then works inside each."""
from __future__ import annotations

from .native_measure import Measures

_SECTIONS = 3
_CHOICE_SHARE = 0.75  # of the stack's text outside links: more, and the choice is the page's body (an article)
_DENSITY = 0.5  # a section more of links than this is a menu or a strip of logos


def widen_to_sections(body, chosen: list, m: Measures) -> list:
    """`chosen`, or the sections of the stack it is one of (see the module's docstring)."""
    if not chosen:
        return chosen
    # Text outside links, not running text only: a page builder sets its paragraphs as headings.
    got = sum(_plain(el, m) for el in chosen)
    node = chosen[0]
    while node is not body and node.getparent() is not None and node.getparent() is not body.getparent():
        parent = node.getparent()
        stack = _stack(parent, node)
        if stack:
            good = sum(_plain(s, m) for s in stack)
            if good and got < _CHOICE_SHARE * good and all(_inside(el, stack) for el in chosen):
                kept = [s for s in stack if m.total(s) and m.density(s) < _DENSITY and m.weight(s) >= 0]
                if len(kept) >= _SECTIONS:
                    return kept
            return chosen  # the innermost stack decides: an outer one holds other furniture too
        node = parent
    return chosen


def _stack(parent, node) -> list:
    """`parent`'s children of `node`'s kind when they are three or more: `<section>`s, or blocks of
    one tag that share a class word (`content-section`, `elementor-section`); else []."""
    tag = node.tag
    kids = [k for k in parent if isinstance(k.tag, str) and k.tag == tag]
    if len(kids) < _SECTIONS:
        return []
    if tag == "section":
        return kids
    words = set((node.get("class") or "").split())
    if not words:
        return []
    same = [k for k in kids if words & set((k.get("class") or "").split())]
    shared = set.intersection(*(set((k.get("class") or "").split()) for k in same)) if same else set()
    return same if len(same) >= _SECTIONS and any("section" in w for w in shared) else []


def _plain(el, m: Measures) -> int:
    return m.v[el][0] - m.v[el][1]


def _inside(el, stack: list) -> bool:
    return any(el is s or any(a is s for a in el.iterancestors()) for s in stack)
