"""The kind of page a document came from (`meta.page_type`: article, forum, product, listing,
collection, documentation, service, other), so mixtures can weight or drop page types.

Read from the page's own structure signals, never from a site list: the schema.org types it declares
(JSON-LD `@type`, microdata `itemtype`), its `og:type` and generator, the words of its canonical URL's
path, what its prepared tree holds (posts of a thread, code blocks, tables, repeated cards, headings,
prices) and what the extractor made of it (its share of the page). A multinomial logistic model over
those features, trained on the tune split of WCXB's dev sample (`benchmarks/page_type_train.py`),
ships as `page_type.json`: here only its weights are applied (a dot product per type).
"""
from __future__ import annotations

import json
import math
import operator
import re
from pathlib import Path

TYPES = ("article", "forum", "product", "listing", "collection", "documentation", "service")

# Two patterns, each opening with a literal that the regex engine looks for first: one alternation
# of both is tried at every character of the page (4x slower over a 400,000-character head).
_SCHEMA_JSON = re.compile(r""""@type"\s*:\s*\[?\s*"([A-Za-z]+)""")
_SCHEMA_MICRODATA = re.compile(r"""itemtype\s*=\s*["']?https?://schema\.org/([A-Za-z]+)""")
_OG_TYPE = re.compile(r"""<meta[^>]+property\s*=\s*["']og:type["'][^>]+content\s*=\s*["']([\w.:-]+)""", re.I)
_GENERATOR = re.compile(r"""<meta[^>]+name\s*=\s*["']generator["'][^>]+content\s*=\s*["']([^"']{1,80})""", re.I)
_CANONICAL = re.compile(r"""<link[^>]+rel\s*=\s*["']canonical["'][^>]+href\s*=\s*["']([^"']{1,500})""", re.I)
_PRICE = re.compile(r"[$€£¥]\s?\d")  # a price's start; a pattern starting at every digit costs 3 ms a page

_SCHEMA_TYPES = ("Product", "Offer", "AggregateOffer", "AggregateRating", "Review", "Article", "NewsArticle",
                 "BlogPosting", "TechArticle", "DiscussionForumPosting", "QAPage", "Question", "Answer", "Comment",
                 "ItemList", "CollectionPage", "SearchResultsPage", "FAQPage", "Service", "LocalBusiness",
                 "ProfessionalService", "Organization", "WebSite", "WebPage", "BreadcrumbList", "SoftwareApplication",
                 "JobPosting", "Event", "Recipe", "HowTo", "Person", "ListItem", "ProductGroup", "Brand")
_OG = ("article", "product", "website", "blog", "object")
_GENERATORS = ("sphinx", "discourse", "wordpress", "shopify", "docusaurus", "mkdocs", "phpbb", "vbulletin", "xenforo",
               "hugo", "jekyll", "drupal", "joomla", "wix", "squarespace", "elementor", "gitbook", "doxygen", "mediawiki",
               "woocommerce", "magento", "ghost", "next.js")
_URL_WORDS = ("product", "products", "p", "shop", "store", "item", "dp", "collections", "collection", "category",
              "categories", "c", "tag", "tags", "topics", "forum", "forums", "t", "thread", "threads", "topic",
              "questions", "community", "discussion", "board", "docs", "doc", "documentation", "api", "reference",
              "guide", "manual", "learn", "library", "blog", "news", "article", "articles", "post", "posts", "services",
              "service", "solutions", "jobs", "search", "list", "index", "html", "en", "help", "support", "wiki",
              "about", "pricing", "features", "deals", "sale", "year", "id")
_PAGE_WORDS = ("add to cart", "add-to-cart", "add to basket", "buy now", "in stock", "out of stock", "sku", "reviews",
               "reply", "replies", "posted", "joined", "quote", "thread", "breadcrumb", "pagination", "sort by",
               "filter", "results", "showing", "next page", "load more", "view all", "shop now", "contact us",
               "get a quote", "free consultation", "our services", "schedule", "book a", "documentation", "api",
               "parameters", "returns", "example", "version", "edit on github", "table of contents", "read more",
               "min read", "published", "author", "share", "comments", "subscribe")
_IN_PAGE = frozenset(("discourse", "sphinx", "shopify", "docusaurus", "xenforo", "phpbb", "woocommerce"))
_TAGS = ("article", "time", "pre", "code", "table", "li", "form", "h1", "h2", "h3", "dl", "img", "a", "p", "section",
         "button", "input", "select", "blockquote")

_MODEL = None

try:  # one automaton pass for all the words, where a `str.count` each scans the window 46 times
    import ahocorasick_rs

    # Over the UTF-8 bytes (the words are ASCII, so they match there where they match in the text):
    # 3x faster than over a string of wide characters.
    _WORD_SEARCH = ahocorasick_rs.BytesAhoCorasick([w.encode() for w in _PAGE_WORDS]).find_matches_as_indexes
except ImportError:
    _WORD_SEARCH = None
# The overlapping matches of a word equal `str.count`'s (which does not overlap) unless the word's
# start is also its end ("example", "breadcrumb", "read more"): those are counted by `str.count`.
_SELF_OVERLAP = frozenset(i for i, w in enumerate(_PAGE_WORDS) if any(w[:k] == w[-k:] for k in range(1, len(w))))


def _word_counts(low: str) -> list[int]:
    """`low.count(w)` for each of `_PAGE_WORDS`, in their order."""
    if _WORD_SEARCH is None:
        return [low.count(w) for w in _PAGE_WORDS]
    counts = [0] * len(_PAGE_WORDS)
    for i, _, _ in _WORD_SEARCH(low.encode("utf-8", "surrogatepass"), overlapping=True):
        counts[i] += 1
    for i in _SELF_OVERLAP:
        counts[i] = low.count(_PAGE_WORDS[i])
    return counts

_WORDS_WINDOW = 60_000  # characters


def tag_counts(tree) -> dict[str, int]:
    """Counts of the telling tags in the prepared tree (before selection prunes it), and the size
    of its largest group of sibling cards (children of one element with one tag and class)."""
    counts = dict.fromkeys(_TAGS, 0)
    for el in tree.iter(*_TAGS):
        counts[el.tag] += 1
    best = 0
    for el in tree.iter("ul", "ol", "div", "section", "main", "tbody"):
        if len(el) > best:
            kinds: dict = {}
            for kid in el:
                k = (kid.tag, kid.get("class"))
                kinds[k] = kinds.get(k, 0) + 1
            best = max(best, max(kinds.values(), default=0))
    counts["cards"] = best
    return counts


def features(html: str, counts: dict[str, int], posts: int, text: str, page_chars: int | None) -> dict[str, float]:
    """The model's inputs for one page: indicator and log-count features by name."""
    low = html[:_WORDS_WINDOW].lower()  # words counted in the page's start only: each count is a scan
    f: dict[str, float] = {}
    types = set(_SCHEMA_JSON.findall(html, 0, 400_000)) | set(_SCHEMA_MICRODATA.findall(html, 0, 400_000))
    for t in _SCHEMA_TYPES:
        f[f"schema:{t}"] = float(t in types)
    og = _OG_TYPE.search(html, 0, _WORDS_WINDOW)
    og = og.group(1).lower() if og else ""
    for t in _OG:
        f[f"og:{t}"] = float(og.startswith(t))
    gen = _GENERATOR.search(html, 0, _WORDS_WINDOW)
    gen = gen.group(1).lower() if gen else ""
    for g in _GENERATORS:
        # A few platforms name themselves in their asset paths when the generator tag is missing.
        f[f"gen:{g}"] = float(g in gen or g in _IN_PAGE and g in low)
    url = _CANONICAL.search(html, 0, _WORDS_WINDOW)
    path = re.sub(r"^https?://[^/]+", "", url.group(1).lower()) if url else ""
    words = set(re.split(r"[/\-_.?=&#]+", path))
    for w in _URL_WORDS:
        f[f"url:{w}"] = float(w in words)
    f["url:depth"] = float(min(path.rstrip("/").count("/"), 6)) / 6
    f["url:digits"] = float(bool(re.search(r"\d{4,}", path)))
    for w, n in zip(_PAGE_WORDS, _word_counts(low)):
        f[f"word:{w}"] = math.log1p(min(n, 50)) / 4
    f["prices"] = math.log1p(min(len(_PRICE.findall(html, 0, _WORDS_WINDOW)), 200)) / 5
    for tag in (*_TAGS, "cards"):
        f[f"tag:{tag}"] = math.log1p(counts.get(tag, 0)) / 7
    f["posts"] = math.log1p(posts) / 4
    n = len(text)
    f["text:log"] = math.log1p(n) / 12
    f["text:share"] = min(n / page_chars, 2.0) if page_chars else 0.0
    f["text:code"] = float(text.count("\n```") // 2 > 0)
    f["text:lines"] = math.log1p(text.count("\n\n")) / 8
    lines = [ln for ln in text.split("\n\n") if ln.strip()]
    f["text:short_lines"] = sum(1 for ln in lines if len(ln) < 60) / len(lines) if lines else 0.0
    f["text:headings"] = math.log1p(sum(1 for ln in lines if ln.startswith("#"))) / 5
    return f


def _model() -> dict:
    global _MODEL
    if _MODEL is None:
        _MODEL = json.loads((Path(__file__).with_name("page_type.json")).read_text())
    return _MODEL


def classify(f: dict[str, float]) -> str:
    """The most likely page type for the features `f` (`other` when no type is likely)."""
    model = _model()
    names, mean, scale = model["features"], model["mean"], model["scale"]
    x = [(f.get(n, 0.0) - mu) / sd for n, mu, sd in zip(names, mean, scale)]
    best, best_z = "other", -math.inf
    zs = []
    for kind, coef, b in zip(model["classes"], model["coef"], model["intercept"]):
        z = b + sum(map(operator.mul, coef, x))  # the generator's sums in the same order, without its frames
        zs.append(z)
        if z > best_z:
            best, best_z = kind, z
    top = math.exp(best_z - max(zs)) / sum(math.exp(z - max(zs)) for z in zs)
    return best if top >= model.get("min_probability", 0.0) else "other"
