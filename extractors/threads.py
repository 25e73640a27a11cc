"""Forum and Q&A pages: find the posts (question, answers, replies) so none of them is lost.

Main-content extractors pick *one* content block. On a thread page the posts are many sibling blocks
of the same shape, so the extractor keeps the first (the question) and drops the answers, or files
them as comments. `thread_region` finds the post bodies and hands back a tree holding only them, in
page order, under one `<article>`; the extractor then has nothing left to choose between.

Posts are found by markup, never by site:
1. schema.org microdata: the `itemprop=text` of each Question/Answer/Comment/...Posting item (what
   StackExchange, Discourse and many Q&A engines emit);
2. else repeated post bodies: two or more elements with the same tag and class, a class token that
   names a post body (`post-body`, `reply-content`, `message_text`, `answer-body`, ...), none
   nested in another, with real text.
`comment` alone is not a post word: article pages carry reader comments, which are not main content.
"""
from __future__ import annotations

import re
from collections import defaultdict

_POST_TYPES = re.compile(r"/(?:Question|Answer|Comment|DiscussionForumPosting|SocialMediaPosting)$")
_POST_WORDS = "post|posts|message|reply|replies|answer|topic|thread"
_BODY_WORDS = "body|content|contents|text|message|entry"
# A class token naming the body of one post: post word, optional separator, body word.
_BODY_TOKEN = re.compile(rf"^(?:[\w-]*[-_])?(?:{_POST_WORDS})[-_]?(?:{_BODY_WORDS})$", re.I)
# Containers of one whole post (header, body, signature): used when no body class is found.
_POST_TOKEN = re.compile(r"^(?:post|message|reply|answer|[\w-]*[-_](?:post|reply|answer))$", re.I)
# Substring prefilter: only classes holding a post word reach the token regexes.
POST_HINT = re.compile("post|Post|message|Message|repl|Repl|answer|Answer|topic|thread")
_NOT_POSTS = frozenset(("p", "span", "a", "ul", "ol", "img", "h1", "h2", "h3", "h4", "button", "form"))
_MIN_POST_CHARS = 20
_MIN_THREAD_CHARS = 200


def _text_len(el) -> int:
    # XPath string() joins the text in C; "".join(itertext()) made a Python string per text node.
    return len(el.xpath("string()").strip())


def _outermost(els: list) -> list:
    """Drop elements nested inside another element of the list (keeps document order)."""
    chosen = set(els)
    out = []
    for el in els:
        parent = el.getparent()
        while parent is not None and parent not in chosen:
            parent = parent.getparent()
        if parent is None:
            out.append(el)
    return out


def _schema_posts(tree, scoped: list | None = None) -> list:
    bodies, starter = [], False
    for item in tree.xpath("//*[@itemscope][@itemtype]") if scoped is None else scoped:
        found = _POST_TYPES.search(item.get("itemtype", "").rstrip("/"))
        if not found or _in_faq(item):
            continue
        starter = starter or not found.group().endswith("Comment")
        # The item's own text property, not one of a nested item (an answer's comments).
        for text in item.iterdescendants():
            if text.get("itemprop") == "text" and _nearest_scope(text) is item:
                bodies.append(text)
                break
    # Comments alone are reader comments under an article; a thread has a question or a first post.
    return bodies if starter else []


def _in_faq(item) -> bool:
    """Inside a schema.org FAQPage: its Questions and Answers are the page's own text (a service's
    questions and answers), not the posts of a Q&A thread."""
    return any(a.get("itemtype", "").rstrip("/").endswith("FAQPage") for a in item.iterancestors()
               if a.get("itemscope") is not None)


def _nearest_scope(el):
    parent = el.getparent()
    while parent is not None and parent.get("itemscope") is None:
        parent = parent.getparent()
    return parent


def _class_posts(tree, classed: list | None = None) -> list:
    groups: dict[tuple[str, str], list] = defaultdict(list)
    fallback: dict[tuple[str, str], list] = defaultdict(list)
    # One walk reading each class once: 3x faster than XPath's contains(@class, ...) per word.
    for el in tree.iter("*") if classed is None else classed:
        cls = el.get("class")
        if not cls or not POST_HINT.search(cls) or el.tag in _NOT_POSTS:
            continue  # a post is a block: classed paragraphs or items are parts of one text
        tokens = cls.split()
        if any(_BODY_TOKEN.match(t) for t in tokens):
            groups[(el.tag, cls)].append(el)
        elif any(_POST_TOKEN.match(t) for t in tokens):
            fallback[(el.tag, cls)].append(el)
    return _best_group(groups) or _best_group(fallback)


def _best_group(groups: dict) -> list:
    best, best_chars = [], 0
    for members in groups.values():
        members = [m for m in _outermost(members) if _text_len(m) >= _MIN_POST_CHARS]
        if len(members) < 2:
            continue
        chars = sum(_text_len(m) for m in members)
        if chars >= _MIN_THREAD_CHARS and chars > best_chars:
            best, best_chars = members, chars
    return best


def thread_posts(tree, found: tuple[list, list] | None = None) -> list:
    """Post bodies of a thread page in document order; [] when the page is not a thread. `found`:
    the candidates (schema.org items, elements with a post-word class) a walk over the page
    collected before it was cleaned; those no longer in the page are passed over."""
    scoped = classed = None
    if found is not None:
        known: dict = {tree.getroottree().getroot(): True}
        scoped, classed = ([el for el in els if in_page(el, known)] for els in found)
    posts = _outermost([p for p in _schema_posts(tree, scoped) if _text_len(p) >= _MIN_POST_CHARS])
    if len(posts) >= 2:
        return posts
    return _class_posts(tree, classed)


def in_page(el, known: dict) -> bool:
    """`el` is still under the page's root (`known` starts with the root: True, and remembers each
    element passed on the way up, so shared ancestors are climbed once). A removed element's
    `getroottree()` can still name the page's document, hence the climb."""
    path = []
    while el is not None and el not in known:
        path.append(el)
        el = el.getparent()
    found = el is not None and known[el]
    for p in path:
        known[p] = found
    return found


_QUESTION = re.compile(r"^(?:question|topic)(?:[-_]?(?:body|content|text|container|detail))?$", re.I)


def _question(tree, posts: list):
    """Q&A pages shape the question unlike the answers, and forum engines the opening post unlike
    the replies: an element named `question` or `topic` (`topic-detail`, `topic-content`) that is
    neither inside a post nor holds one, found when the posts are the answers or replies only."""
    for el in tree.xpath("//*[contains(@class, 'question') or contains(@id, 'question') or contains(@class, 'topic')]"):
        names = (el.get("class") or "").split() + [el.get("id") or ""]
        if not any(_QUESTION.match(n) for n in names) or _text_len(el) < _MIN_POST_CHARS:
            continue
        if any(p is el or el in p.iterancestors() or p in el.iterancestors() for p in posts):
            continue
        return el
    return None


_WORD = re.compile(r"\w+")


def is_thread(extracted: str, posts: list, share: float = 0.5) -> bool:
    """The page is a thread when what the main-content extractor chose is mostly post text: it
    picked one post of many. Repeated blocks beside an article (teasers, reader comments) fail this,
    because the extractor's choice there is the article, which is no post."""
    chosen = _WORD.findall(extracted.lower())
    if not chosen:
        return False
    in_posts = set(_WORD.findall(" ".join(" ".join(p.itertext()) for p in posts).lower()))
    return sum(w in in_posts for w in chosen) >= share * len(chosen)


# A class or id token naming the body of a post, entry or article (`postcontent`, `post-body`,
# `entry-content`, `article__body`, `message-text`, or just `post` / `entry`).
_INNER_BODY = re.compile(
    rf"^(?:[\w-]*[-_])?(?:{_POST_WORDS}|entry|article|art|page|story)(?:[-_]|__)?(?:{_BODY_WORDS})$"
    r"|^(?:post|entry|articlebody)$", re.I)


def _marks_body(el) -> bool:
    if el.get("itemprop") == "articleBody":
        return True
    marks = f"{el.get('class') or ''} {el.get('id') or ''}".split()
    return any(_INNER_BODY.match(t) for t in marks)


def thread_region(tree, posts: list):
    """A new tree `<html><body><article>` holding the page's <h1> (when it is outside the posts)
    and every post body in page order. Moves the nodes (no copies)."""
    from lxml import etree

    from .html import new_body

    body = new_body(tree)
    root, article = body.getparent(), etree.SubElement(body, "article")
    question = _question(tree, posts)
    if question is not None:
        posts = [question] + posts
    h1 = next(iter(tree.iter("h1")), None)
    if h1 is not None and not any(p in h1.iterancestors() for p in posts) and _text_len(h1):
        h1.tail = None
        article.append(h1)
    # The extractor looks for *one* element with an article-body class and takes the first: without
    # its class a post body is plain content of the <article>. The same holds for a body marked again
    # inside each post (vBulletin's `div.postcontent` inside the post container); a mark inside only
    # some of the posts is an article's body beside teasers, and stays.
    inner = [[el for el in post.iter("div", "section", "article", "main") if el is not post and _marks_body(el)]
             for post in posts]
    unmark = posts + [el for marks in inner for el in marks] if all(inner) else posts
    for el in unmark:
        for attr in ("class", "id", "itemprop"):
            el.attrib.pop(attr, None)
    for post in posts:
        post.tail = None
        etree.SubElement(article, "div").append(post)
    return root
