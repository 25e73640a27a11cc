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

6. A page built as a stack of sections (a service's hero, cards, quotes, FAQ): a choice that is one
   of three or more sibling sections of one kind and holds under three quarters of their text
   widens to the sections (`native_sections`); a choice that is a listing's `<header>` takes its
   container with the entries after it, and a list of entries (linked names with prices) is the
   page's region wherever the first choice was (`native_region`).

Repeated blocks across a site's pages are not used: the stage sees one page at a time.

Where each step lives: `native_measure` (1, and the class/id evidence), `native_select` (2, 3),
`native_prune` (4), `native_shape` (5, with `native_title`). Here: `select`, which runs them in
order, and `script_hidden`, which `html._prepare` asks (0).
"""
from __future__ import annotations

import re

from .native_measure import Measures, _is_cjk
from .native_prune import _prune_all
from .native_region import entries, is_landmark, main_region, page_region
from .native_sections import widen_to_sections
from .native_select import _in_small_forms, _score_candidates, _selection
from .native_shape import (_cut_before_headline, _cut_teaser_runs, _cut_teasers, _drop_captioned_images, _drop_headline,
                           _trim_head)


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


def select(root, keep_all: bool = False, title: str | None = None, ascii_only: bool = False, region: bool = False,
           info: dict | None = None) -> list:
    """The main-content elements of a prepared tree, in page order, pruned. `keep_all`: the tree is
    a thread region (every post is content): prune only. `title`: the page's title, whose headline
    is dropped from the text. `ascii_only`: the page's text is ASCII (so not CJK: no need to look).
    `region`: take the page's main region (`native_region`), pruned with a floor and no teaser cuts:
    the second look at a page whose first choice came out a small share of it (a listing's cards
    read as teasers). `info`: filled with the page's text length (`page_chars`)."""
    body = root.find("body") if root.tag == "html" else root
    if body is None:
        body = root
    m = Measures(body, not ascii_only and _is_cjk(body))
    if info is not None:
        info["page_chars"] = m.total(body)
    if keep_all:
        chosen = [body]
    elif region:
        chosen = page_region(body, m)
        # Only around or inside the first choice (`info['within']`: its paths in the same page
        # prepared the same way) or a list of entries (`entries`): a list of headlines elsewhere is
        # no region of a thread's posts.
        within = (info or {}).get("within")
        if not chosen or within and not is_landmark(chosen[0]) and \
                not all(_nested(p, _path(chosen[0])) for p in within) and not entries(chosen[0], m):
            return []
    else:
        skip = _in_small_forms(body, m)
        chosen = main_region(body, m, _selection(body, m, _score_candidates(m, skip), skip, title))
        chosen = widen_to_sections(body, chosen, m)
        if info is not None:
            info["within"] = [_path(el) for el in chosen]
    body_chars = sum(m.total(el) for el in chosen) or 1
    if not keep_all and not region:
        _cut_teaser_runs(chosen, m)
        _cut_teasers(chosen, m, title)  # before pruning, which drops the short heading alone ("Related")
    _prune_all(chosen, m, body_chars, keep_all)
    if not keep_all and not region:
        _trim_head(chosen, m, body_chars)
        _drop_captioned_images(chosen, m)
    if title and not keep_all:
        if not region:
            _cut_before_headline(chosen, m, title, body_chars)
        _drop_headline(chosen, title)
    return chosen


def _path(el) -> str:
    return el.getroottree().getpath(el)


def _nested(a: str, b: str) -> bool:
    """One of two element paths is the other or inside it."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")
