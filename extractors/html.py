"""HTML → Markdown-ish text with math as LaTeX and code fenced.

Three modes over one preparation step:

* prepare: decode (HTTP/meta charset, else charset-normalizer), parse with lxml, rewrite every
  formula to `$tex$`/`$$tex$$` text (`math.py`), turn every code listing into a plain `<pre>`
  (`code.py`: line-number tables, `<br>` code boxes, textareas), remember each `<pre>` block verbatim
  with its language, and drop script/style/svg/iframe/form nodes so the extractor has less tree to walk.
* `native` (default): Assay's own main-content selector (`native.py`: paragraphs score, the best
  container is chosen and pruned; no trafilatura), written out by `markdown.HtmlWriter`.
* `precise`: trafilatura's main-content selection in its fast mode (no readability/jusText
  fallback; on the AEB benchmark that is both faster *and* more accurate than its default), written
  out by our own Markdown writer (`markdown.py`): code blocks come back verbatim from the saved copy.
  The default before `native`; kept for comparison and for pages where trafilatura's rules are wanted.
* `fast`: resiliparse's main-content text on the prepared tree (about 10× faster, lower precision),
  for bulk crawls where throughput matters more than the last points of F1.

`extract_html` is a plain function of one document so `limits.Watchdog` can run it in a child.
"""
from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from .code import gutter_class, normalize_code, pre_text
from .markdown import CodeBlock, body_to_markdown, code_key, code_language
from .native import script_hidden
from .threads import POST_HINT

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_DROP_TAGS = ("script", "style", "noscript", "svg", "iframe", "template", "object", "embed", "canvas",
              "nav", "footer", "aside", "select", "button", "input", "textarea", "link", "meta")
# Landmarks that are never main content; pruned before extraction so every later pass walks less tree.
_DROP_ROLES = frozenset(("navigation", "contentinfo", "complementary", "search"))
_DROP_ROLES_NATIVE = _DROP_ROLES | {"dialog", "alertdialog"}
_POST_QUOTE = re.compile(r"post|message|content|body|entry", re.I)
# Charset names under which `decode_html` decoded the bytes strictly as UTF-8 (ASCII is a subset).
_UTF8_NAMES = frozenset(("utf-8", "utf8", "ascii", "us-ascii"))
_DOCTYPE_SLASH = re.compile(r"^\s*<\s?!\s?doctype[^>]*/[^<>]*>", re.I)


def decode_html(data: bytes | str, declared: str | None = None) -> tuple[str, str]:
    """Bytes → str using the declared (HTTP) charset, then <meta charset>, then detection."""
    if isinstance(data, str):
        return data, "str"
    candidates = []
    if declared:
        candidates.append(declared)
    m = _META_CHARSET.search(data[:4096])
    if m:
        candidates.append(m.group(1).decode("ascii", "ignore"))
    candidates.append("utf-8")
    for enc in candidates:
        try:
            return data.decode(enc), enc.lower()
        except (LookupError, UnicodeDecodeError):
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(data[:200_000]).best()
    enc = best.encoding if best is not None else "utf-8"
    return data.decode(enc, errors="replace"), enc


_TITLE_XPATHS = None  # (in the head, in the whole page) per source of a title, compiled once


def _title(tree) -> str | None:
    global _TITLE_XPATHS
    if _TITLE_XPATHS is None:
        from lxml import etree

        _TITLE_XPATHS = tuple((etree.XPath(xp) if xp[0] == "." else None, etree.XPath(xp.lstrip(".")))
                              for xp in (".//meta[@property='og:title']/@content", ".//title/text()", "//h1//text()"))
    head = tree.find("head")
    for in_head, in_page in _TITLE_XPATHS:
        # The head first: it precedes the body, so what it holds is the page's first match anyway,
        # and the body (most of the page) is searched only when the head has none.
        found = in_head(head) if head is not None and in_head is not None else None
        if not found:
            found = in_page(tree)
        if found:
            title = " ".join(str(found[0]).split())
            if title:
                return title
    return None


_PARSER = None


def _parse(html: str, utf8: bytes | None = None):
    """lxml parse with comments and processing instructions dropped by the parser itself.
    Not trafilatura's `load_html`: its control-character regex over the whole page costs as much as
    the parse; only NUL (which libxml2 chokes on) is removed, and a doctype with a stray `/`
    (lxml bug 1955915, which empties the tree) is cut. `utf8`: the page's bytes when they are valid
    UTF-8 (`html` decoded from them); libxml2 reads them 1.25x faster than a Python string."""
    global _PARSER
    from lxml import etree, html as lxml_html

    if _PARSER is None:
        _PARSER = lxml_html.HTMLParser(collect_ids=False, default_doctype=False, encoding="utf-8", remove_comments=True,
                                       remove_pis=True)
        # lxml.html picks each element's class in a Python callback (form, input, label... classes),
        # once per element proxy: the extractor's walks create about 1,700 per page. Every element as
        # a plain HtmlElement is the same API, chosen in C.
        _PARSER.set_element_class_lookup(etree.ElementDefaultClassLookup(
            element=lxml_html.HtmlElement, comment=lxml_html.HtmlComment, pi=lxml_html.HtmlProcessingInstruction,
            entity=lxml_html.HtmlEntity))
    source = utf8
    # NUL looked for in the bytes when there are some (U+0000 is the only character with a 0 byte in
    # UTF-8): memchr, where a string of wide characters is scanned 18x slower (24 ms over the 181 AEB
    # pages, 1.4 ms in their bytes).
    if (b"\x00" in source) if source is not None else ("\x00" in html):
        html, source = html.replace("\x00", ""), None
    head = html[:200]
    if "/" in head and _DOCTYPE_SLASH.match(head):
        html, source = _DOCTYPE_SLASH.sub("", html, count=1), None
    if source is not None and source.startswith(b"\xef\xbb\xbf"):
        source = None  # the decoded string keeps the byte-order mark as a character; libxml2 would skip it
    try:
        tree = lxml_html.document_fromstring(html if source is None else source, parser=_PARSER)
    except (etree.ParserError, ValueError):
        # "Unicode strings with encoding declaration are not supported": parse the bytes instead.
        try:
            tree = lxml_html.document_fromstring(html.encode("utf-8", "surrogatepass"), parser=_PARSER)
        except (etree.ParserError, ValueError):
            return None
    return tree if tree is not None and len(tree) else None


def _prepare(html: str, passes: set[str] | None = None, utf8: bytes | None = None, native: bool = False):
    from lxml import etree

    from .math import math_passes, rewrite_math
    from .threads import thread_posts

    tree = _parse(html, utf8)
    if tree is None:
        return None, 0, {}, None, []
    title = _title(tree)
    _show_noscript(tree)
    # Math markup is rare; substring tests on the raw text are much cheaper than the rewrite's XPaths.
    if passes is None:
        passes = math_passes(html if utf8 is None else utf8)  # the bytes: no second copy of a wide string
    n_math = rewrite_math(tree, passes) if passes else 0
    hidden, found, bodies, gutters = _scan(tree, native)
    hidden = _truly_hidden(tree, hidden)
    for el in hidden:
        if el.getparent() is not None and el.tag not in ("html", "body"):
            el.drop_tree()  # keeps the tail: the text after a hidden anchor is content
    # Dropped before the code blocks are saved: a <script> (highlighter loaders) or a "Copy" <button>
    # inside a <pre> is no code, and the saved copy must match what the extractor keeps of the block.
    if next(tree.iter("pre", "code", "textarea"), None) is not None or _code_named(html, utf8):
        normalize_code(tree, gutters)  # before the drop: a <textarea> can be a code listing
    post_quotes = []
    for quote in tree.iter("blockquote"):
        # Forum engines (vBulletin's blockquote.postcontent) put whole posts in a <blockquote>: that is
        # the post's text, not a quotation, and would come out with every line behind "> ".
        cls = quote.get("class") or ""
        if _POST_QUOTE.search(cls) and "quote" not in cls.replace("blockquote", ""):
            quote.tag = "div"
            post_quotes.append(quote)
    _loose_text_paragraphs(post_quotes)
    _open_swallowing_buttons(tree)
    etree.strip_elements(tree, *_DROP_TAGS, etree.Comment, with_tail=False)
    code_blocks: dict[str, CodeBlock] = {}
    for pre in list(tree.iter("pre")):  # a list: _unwrap_code moves blocks
        text = pre_text(pre)
        if text.strip():
            code_blocks.setdefault(code_key(text), CodeBlock(text, code_language(pre)))
            # The block as plain text: the extractor's walk over highlighter spans loses pieces
            # (and costs time); the verbatim copy is written back from `code_blocks` anyway.
            tail, attrib = pre.tail, dict(pre.attrib)
            pre.clear()
            pre.attrib.update(attrib)
            pre.text, pre.tail = text, tail
            _unwrap_code(pre, len(text))
    posts = thread_posts(tree, found)  # forum/Q&A candidates; whether the page is a thread is decided later
    _loose_text_paragraphs(posts)
    return _main_region(tree, bodies), n_math, code_blocks, title, posts


_NOSCRIPT_MIN = 500  # characters of text in a <noscript> that can be a page's content
_VISIBLE_TEXT = "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript or ancestor::template)]"


def _show_noscript(tree) -> None:
    """A page whose visible body is (almost) empty of text and whose text is in a `<noscript>`
    (Discourse serves its posts to crawlers that way; the app draws them with a script): that
    `<noscript>` is the page, so it becomes a `<div>` rather than being dropped with the others."""
    found = [(len(n.text_content()), n) for n in tree.iter("noscript")]
    big = [n for chars, n in found if chars >= _NOSCRIPT_MIN]
    if not big:
        return
    visible = sum(len(t.strip()) for t in tree.xpath(_VISIBLE_TEXT))
    if visible < 0.1 * max(chars for chars, _ in found):
        for n in big:
            n.tag = "div"


_BUTTON_TEXT = 300  # characters: more than a button's label


def _open_swallowing_buttons(tree) -> None:
    """A `<button>` holding more than a label's text is not dropped with the page's controls but
    kept as a block: libxml2 does not close an unclosed `<button>` at the next one (an HTML5 parser
    does), so one misnested button swallows the rest of the page; and accordions put a section's
    text in theirs."""
    from lxml import etree

    global _STRING_LENGTH
    if _STRING_LENGTH is None:
        _STRING_LENGTH = etree.XPath("string-length(.)")
    for button in list(tree.iter("button")):
        if _STRING_LENGTH(button) > _BUTTON_TEXT:
            button.tag = "div"


_HIDDEN_BULK = 0.5  # of the page's text: a hidden element holding this much is the page, shown by a script
_STRING_LENGTH = None


def _truly_hidden(tree, hidden: list) -> list:
    """The hidden elements (`_scan`) to drop, less a `hidden`/`aria-hidden` element that holds the
    bulk of the page's text: React's streamed segment (`<div hidden id="S:1">`, moved into place by
    a script), a shop's `<main aria-hidden=true>` under a menu drawer. Never a dialog, a landmark or
    a block hidden by its class: those are hidden for good."""
    global _STRING_LENGTH
    body = tree.find("body")
    if not hidden or body is None:
        return hidden
    from lxml import etree

    if _STRING_LENGTH is None:
        _STRING_LENGTH = etree.XPath("string-length(.)")
    page = None
    shown = set()
    for el in hidden:
        if el.get("hidden") is None and el.get("aria-hidden") != "true" or el.tag in ("nav", "footer", "aside") or \
                el.get("role") or el.get("aria-modal") or script_hidden(el.get("class") or ""):
            continue
        if page is None:
            page = _STRING_LENGTH(body) - sum(_STRING_LENGTH(s) for s in body.iter("script", "style", "template"))
        if _STRING_LENGTH(el) - sum(_STRING_LENGTH(s) for s in el.iter("script", "style", "template")) >= _HIDDEN_BULK * page:
            shown.add(el)
    return [el for el in hidden if el not in shown] if shown else hidden


try:  # the formula gate's library (math.py): its SIMD search, not str's, over a page of wide characters
    import ahocorasick_rs

    _CODE_SEARCH = ahocorasick_rs.BytesAhoCorasick(
        [b"-code"], matchkind=ahocorasick_rs.MatchKind.LeftmostLongest).find_matches_as_indexes
except ImportError:
    _CODE_SEARCH = None


def _code_named(html: str, utf8: bytes | None) -> bool:
    """"-code" in the page (a `wp-block-code` box, a `highlight-code` table), searched in the bytes when
    there are some: 1.8 ms over the 181 AEB pages, against 29 ms for `in` on their strings of wide
    characters (about 4% of native's time there: most of them have no <pre>, <code> or <textarea>)."""
    if utf8 is not None and _CODE_SEARCH is not None:
        return bool(_CODE_SEARCH(utf8))
    return "-code" in html


def _scan(tree, native: bool = False) -> tuple[list, tuple[list, list], list, list]:
    """One walk over the page (each walk costs as much as the parse's tenth; Python reads of a few
    attributes are faster than XPath's tests on them): the elements to drop, and the candidates of
    `threads.thread_posts` (schema.org items, classes with a post word), `itemprop=articleBody`
    elements (`_main_region`) and the elements classed as line-number gutters (`normalize_code`).
    Dropped: navigation, footer, sidebar and search landmarks, and hidden elements; for
    `mode=native` also dialogs and blocks a CSS framework hides (`native.script_hidden`).
    Most elements have no attribute, or a class only: one `keys()` call tells, and a class string's
    tests are looked up (a page repeats a few class strings many times)."""
    roles = _DROP_ROLES_NATIVE if native else _DROP_ROLES
    hidden, scoped, classed, bodies, gutters = [], [], [], [], []
    plain = _RARE_ATTRS.isdisjoint
    flags = _CLASS_FLAGS[native]
    for el in tree.iter("*"):  # inlined tests: a function call per element costs more than they do
        keys = el.keys()
        if not keys:
            continue
        cls = el.get("class")
        hide = False
        if cls:
            hide, post, gutter = flags.get(cls) or _class_flags(cls, native)
            if post:
                classed.append(el)
            if gutter:
                gutters.append(el)
        if plain(keys):
            if hide:
                hidden.append(el)
            continue
        if hide or el.get("role") in roles or el.get("aria-hidden") == "true" or el.get("hidden") is not None:
            hidden.append(el)
        if el.get("itemprop") == "articleBody":
            bodies.append(el)
        if el.get("itemscope") is not None and el.get("itemtype") is not None:
            scoped.append(el)
    return hidden, (scoped, classed), bodies, gutters


_RARE_ATTRS = frozenset(("role", "aria-hidden", "hidden", "itemprop", "itemscope"))
_CLASS_FLAGS: dict[bool, dict[str, tuple[bool, bool, bool]]] = {False: {}, True: {}}


def _class_flags(cls: str, native: bool) -> tuple[bool, bool, bool]:
    """(hidden by a dialog or framework class in `mode=native`, names a thread post, names a
    line-number gutter) for one class. The imports are the module's: inside, they cost twice what
    the tests do (a page has about 80 class strings not seen on the pages before)."""
    found = (bool(native and ("hid" in cls or "none" in cls or "modal" in cls or "dialog" in cls or "popup" in cls
                         or "lightbox" in cls) and script_hidden(cls)), POST_HINT.search(cls) is not None,
             gutter_class(cls))
    cache = _CLASS_FLAGS[native]
    if len(cache) > 50_000:
        cache.clear()
    cache[cls] = found
    return found


_CODE_WRAPPERS = ("div", "figure", "span", "section")
_BESIDE_CODE = ("p", "pre", "h1", "h2", "h3", "h4", "h5", "h6")


def _titled(heading) -> bool:
    """A heading longer than a label ("Example", "Output"): three words, or ten characters of a
    script written without spaces (a post's or a section's title)."""
    text = heading.text_content().strip()
    return len(text.split()) >= 3 or not text.isascii() and len(text) >= 10


def _unwrap_code(pre, chars: int) -> None:
    """Highlighters wrap a block in containers that hold little else (`div.code-toolbar`, a language
    label, a copy button); boilerplate pruning matches such class names ("toolbar") and drops the code
    with them. The outermost wrapper that adds at most a label's worth of text is replaced by the
    <pre> itself."""
    outer, node = None, pre.getparent()
    for _ in range(3):
        if node is None or node.tag not in _CODE_WRAPPERS or len(node.text_content()) - chars > 40:
            break
        if any(other is not pre and (other.tag in ("p", "pre") or _titled(other)) for other in node.iter(_BESIDE_CODE)):
            break  # a paragraph, another block or a title beside the block is content, not a label
        outer, node = node, node.getparent()
    if outer is None or outer.getparent() is None:
        return
    pre.tail = outer.tail
    outer.getparent().replace(outer, pre)


_LOOSE_XPATH = "descendant-or-self::*[self::div or self::td][text()[normalize-space()]][*]"
_BLOCKS = {"p", "div", "pre", "table", "ul", "ol", "dl", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "section",
           "article", "form", "figure", "hr", "center", "header", "main", "details"}


def _loose_text_paragraphs(roots) -> None:
    """Text written straight into a post body between <br>s and blocks (vBulletin/phpBB posts):
    the main-content extractor skips such text and keeps only the nested blocks, so a post shrinks
    to its code box. Each run of text and inline elements becomes a <p>. Only post bodies: on
    article pages the same rewrite changes which block the extractor picks, for the worse."""
    for el in (e for root in roots for e in root.xpath(_LOOSE_XPATH)):
        kids = list(el)
        if not any(isinstance(k.tag, str) and k.tag in _BLOCKS for k in kids):
            continue  # no blocks beside the text: the extractor reads the element as one paragraph
        rebuilt, run, run_text = [], [], el.text

        def close() -> None:
            if (run_text or "").strip() or any(isinstance(r.tag, str) and r.tag != "br" for r in run):
                para = el.makeelement("p", {})
                para.text = run_text
                para.extend(run)  # each element moves with its tail
                rebuilt.append(para)

        for kid in kids:
            if isinstance(kid.tag, str) and kid.tag in _BLOCKS:
                close()
                run, run_text = [], kid.tail
                kid.tail = None
                rebuilt.append(kid)
            else:
                run.append(kid)
        close()
        for kid in list(el):  # the blocks; inline elements already moved into their paragraphs
            el.remove(kid)
        el.text = None
        el.extend(rebuilt)


def new_body(tree):
    """The <body> of a new `<html><body>` document made by `tree`'s own parser, so its elements get
    the page's (C-side) element class lookup."""
    from lxml import etree, html as lxml_html

    parser = tree.getroottree().parser
    root = parser.makeelement("html") if parser is not None else lxml_html.Element("html")
    return etree.SubElement(root, "body")


def _one_of_cards(article, articles: list) -> bool:
    """An <article> with others of its class in the page (`articles`: all of them) is one entry of a
    list (teaser cards, a feed, reader comments each in a list item), not the page's article,
    however long its text."""
    cls = article.get("class")
    return any(other is not article and other.get("class") == cls for other in articles)


def _main_region(tree, bodies: list):
    """When the page marks its article unambiguously (one <article> or itemprop=articleBody with
    real text), extract from that subtree only: less tree to walk and less boilerplate to judge.
    `bodies`: the itemprop=articleBody elements `_scan` found (some may have been removed since)."""
    from .threads import in_page

    articles = list(tree.iter("article"))
    found = [e for e in articles if len(e.text_content()) > 500]
    if len(found) == 1 and _one_of_cards(found[0], articles):
        return tree
    if len(found) != 1:
        known: dict = {tree: True}
        found = [e for e in bodies if in_page(e, known) and len(e.text_content()) > 500]
    if len(found) != 1:
        return tree
    body = new_body(tree)
    body.append(found[0])
    return body.getparent()


def _precise(tree, code_blocks, include_comments: bool, posts: list):
    from .threads import is_thread, thread_region

    doc = _trafilatura(tree, include_comments)
    # Thread page: the extractor kept one post (the question). Extract again from the posts alone.
    # bare_extraction works on a copy, so the posts are still in place for thread_region.
    if include_comments and posts and doc is not None and doc.body is not None and is_thread(" ".join(doc.body.itertext()), posts):
        doc = _trafilatura(thread_region(tree, posts), include_comments) or doc
    if doc is None or doc.body is None:
        return "", None
    text, stats = body_to_markdown(doc.body, code_blocks)
    if include_comments and doc.commentsbody is not None and len(doc.commentsbody):
        comments, cstats = body_to_markdown(doc.commentsbody, code_blocks)
        if comments:
            text = f"{text}\n\n{comments}" if text else comments
            for key, value in asdict(cstats).items():
                setattr(stats, key, getattr(stats, key) + value)
    return text, stats


def _trafilatura(tree, include_comments: bool):
    import trafilatura

    return trafilatura.bare_extraction(
        tree, fast=True, include_comments=include_comments, include_tables=True,
        include_formatting=True, include_images=False, deduplicate=False,
        # Not "python": that format also renders body and comments to plain text, which we never
        # read (our writer renders the XML body); any XML format hands back the bare trees.
        output_format="xml",
    )


def _fast(tree, code_blocks, include_comments: bool, posts: list):
    from lxml import html as lxml_html
    from resiliparse.extract.html2text import extract_plain_text

    from .markdown import Stats
    from .threads import is_thread, thread_region

    # Code blocks become fences in place so the formatter keeps them with their language.
    for pre in list(tree.iter("pre")):
        block = code_blocks.get(code_key(pre.text_content()))
        if block is None:
            continue
        fence = f"\n```{block.lang or ''}\n{block.text.strip(chr(10))}\n```\n"
        tail = pre.tail
        pre.clear()  # clears the tail too: the text after the block is not ours to drop
        pre.text, pre.tail = fence, tail

    def main_text(root) -> str:
        return extract_plain_text(lxml_html.tostring(root, encoding="unicode"), main_content=True,
                                  preserve_formatting=True, list_bullets=True, alt_texts=False, links=False,
                                  form_fields=False, noscript=False)

    text = main_text(tree)
    if include_comments and posts and is_thread(text, posts):  # see _precise
        text = main_text(thread_region(tree, posts))
    from .math import normalize_tex_delimiters

    text, n = normalize_tex_delimiters(text)
    stats = Stats(math=n, code_blocks=text.count("\n```") // 2)
    return text.strip(), stats


_REGION_SHARE = 0.45  # of the page's text: less came out, and the main region is looked at (WCXB tune split)
_REGION_GAIN = 2.0


def _native(tree, code_blocks, include_comments: bool, posts: list, title: str | None, ascii_only: bool, again=None):
    from .markdown import html_to_markdown
    from .native import select
    from .threads import is_thread, thread_region

    info: dict = {}
    text, stats = html_to_markdown(select(tree, title=title, ascii_only=ascii_only, info=info), code_blocks)
    # Thread page: the selection is mostly one post of many; every post is content (see _precise).
    # Selection and pruning removed nodes, so the posts still in the tree are taken again.
    if include_comments and posts:
        posts_chars = sum(len(p.xpath("string()")) for p in posts)
        # The posts hold more text than the selection: it missed the thread (a cookie dialog, one answer).
        if is_thread(text, posts) or posts_chars >= len(text):
            region = thread_region(tree, [p for p in posts if _attached(p)])
            posts_text, posts_stats = html_to_markdown(select(region, keep_all=True, ascii_only=ascii_only),
                                                      code_blocks)
            # Pruning kept under half of the posts' text, and less than the selection holds: they were
            # teaser cards beside a short article (a blog's related posts), not a thread.
            if len(posts_text) >= len(text) or 2 * len(posts_text) >= posts_chars:
                text, stats = posts_text, posts_stats
    if again is not None and len(text) < _REGION_SHARE * info["page_chars"]:
        # A small share of the page came out: a listing's cards pruned as teasers, a collection cut
        # to its intro. A second look, on a fresh tree (the first was pruned in place), at the page's
        # main region; kept when it holds more.
        tree2 = again()
        if tree2 is not None:
            chosen = select(tree2, title=title, ascii_only=ascii_only, region=True, info=info)
            text2, stats2 = html_to_markdown(chosen, code_blocks) if chosen else ("", None)
            if len(text2) >= _REGION_GAIN * len(text):  # a real gain, not teasers beside a short article
                text, stats = text2, stats2
    return _dedup_blocks(text), stats


_DEDUP_MIN = 40  # characters: shorter repeated lines ("Reply", "Share", a signature) are left alone


def _dedup_blocks(text: str) -> str:
    """The text without a paragraph it already holds: a page that prints a block twice (a post's
    mobile and desktop copies, a question quoted again above its answers, a Q&A page's JSON-LD and
    its markup) keeps it once. Code blocks are never touched: a listing may repeat a line."""
    if text.count("\n\n") < 2:
        return text
    seen, out, fenced = set(), [], False
    for block in text.split("\n\n"):
        if block.count("```") % 2:
            fenced = not fenced
        key = " ".join(block.split())
        if not fenced and "```" not in block and len(key) >= _DEDUP_MIN:
            if key in seen:
                continue
            seen.add(key)
        out.append(block)
    return "\n\n".join(out)


def _spare(tree):
    """The second look's fresh tree: a copy of the prepared one before selection prunes it, made in
    C at a fourteenth of a second `_prepare` (parse and walks), which a fifth of pages would run."""
    from copy import deepcopy

    spare = deepcopy(tree)
    return lambda: spare


def _attached(el) -> bool:
    return el.getroottree().getroot().tag == "html"


def extract_html(item: dict[str, Any]) -> dict[str, Any]:
    """One document: {'html': str|bytes, 'charset': str|None, 'mode' (native, precise or fast; default
    native; whole: the whole body, no selection), 'include_comments'} →
    {'text', 'title', 'meta'}; text '' when nothing was found. An optional 'math_passes' (from
    `math.math_passes` on the decoded page) spares the scan: a reader computes it while its
    extraction child is busy with the page before."""
    html, charset = decode_html(item["html"], item.get("charset"))
    utf8 = item["html"] if charset in _UTF8_NAMES else None  # decoded strictly, so valid UTF-8
    if charset == "str" and not html.isascii():
        try:  # libxml2 reads UTF-8 bytes faster than a wide string, and the formula gate needs them too
            utf8 = html.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate
            pass
    mode = item.get("mode", "native")
    tree, n_math, code_blocks, title, posts = _prepare(html, item.get("math_passes"), utf8, mode == "native")
    if tree is None:
        return {"text": "", "title": None, "meta": {"charset": charset, "page_type": "other"}}
    from .page_type import classify, features, tag_counts

    counts = tag_counts(tree)  # before selection prunes the tree
    page_chars = int(tree.xpath("string-length(normalize-space(.))"))
    if mode == "whole":  # a book chapter (extract.epub): all of the body is content, no selection
        from .markdown import html_to_markdown
        from .native import select

        text, stats = html_to_markdown(select(tree, keep_all=True), code_blocks)
    elif mode == "fast":
        text, stats = _fast(tree, code_blocks, item.get("include_comments", True), posts)
    elif mode == "native":
        text, stats = _native(tree, code_blocks, item.get("include_comments", True), posts, title,
                              html.isascii() and "&#" not in html,  # no character reference to a CJK letter
                              _spare(tree))
    else:
        text, stats = _precise(tree, code_blocks, item.get("include_comments", True), posts)
    meta: dict[str, Any] = {"charset": charset, "extractor": f"assay-{mode}"}
    if stats is not None:
        meta.update(
            math=stats.math + n_math, code_blocks=stats.code_blocks, tables=stats.tables,
            headings=stats.headings,
        )
        if stats.code_langs:
            meta["code_langs"] = sorted(set(stats.code_langs))
    meta["html_chars"] = len(html)
    found = features(html, counts, len(posts), text or "", page_chars)
    meta["page_type"] = classify(found) if text else "other"  # nothing extracted: no page to tell
    result = {"text": text or "", "title": title, "meta": meta}
    if item.get("page_type_features"):  # for benchmarks/page_type_train.py
        result["page_type_features"] = found
    return result
