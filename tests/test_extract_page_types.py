"""mode=native on pages that are not articles (WCXB's page types, #44): each test is a collapse
pattern seen on the dev sample, written as a page of our own that failed before the fix."""
from assay.extractors.html import extract_html

SENT = ("The committee met on Tuesday to discuss the budget, and after a long debate it agreed to fund the new "
        "library, the repairs to the bridge, and a study of the harbour. ")
NAV = "<nav><a href='/'>Home</a> <a href='/news'>News</a> <a href='/about'>About us</a></nav>"


def native(html: str) -> dict:
    return extract_html({"html": html, "mode": "native"})


def test_posts_inside_noscript_are_read_when_the_visible_body_has_no_text():
    # Discourse: the app draws the thread with a script; crawlers get the posts inside <noscript>.
    posts = "".join(f"<div class='topic-body crawler-post'><div class='post' itemprop='text'><p>Reply {i}. {SENT}</p>"
                    "</div></div>" for i in range(4))
    html = (f"<html><body><noscript>Please enable JavaScript.</noscript><section id='main'></section>"
            f"<noscript data-path='/t/budget/1'><div id='main-outlet'><h1>Budget thread</h1>{posts}</div></noscript>"
            "<script>app.boot()</script></body></html>")
    text = native(html)["text"]
    assert all(f"Reply {i}." in text for i in range(4))
    # A page with visible text keeps dropping its <noscript> (a tracking pixel's note, an ad's fallback).
    html = (f"<html><body><article>{''.join(f'<p>Paragraph {i}. {SENT}</p>' for i in range(6))}</article>"
            f"<noscript><div>{'Enable scripts to see our recommended stories and offers. ' * 12}</div></noscript>"
            "</body></html>")
    text = native(html)["text"]
    assert "Paragraph 5." in text and "Enable scripts" not in text


def test_a_page_builder_body_is_not_pruned_to_nothing():
    # Elementor names every block of a body `elementor-widget ...` with an id of its own, each in a
    # column of its own: each reads as a small widget, named against; together they are the page.
    blocks = "".join(f"<div class='col'><div class='widget widget-text el-{i}a{i}f'><h2>Service {i}</h2>"
                     f"<p>Offer {i}. {SENT}</p></div></div>" for i in range(6))
    html = (f"<html><head><title>Our services</title></head><body>{NAV}<main id='content'><div class='builder'>"
            f"{blocks}</div></main></body></html>")
    text = native(html)["text"]
    assert all(f"Offer {i}." in text for i in range(6))


def test_a_listing_is_not_cut_down_to_its_intro_line():
    # A job board: one sentence of intro, then cards of short fields (title, company, place, pay),
    # none of them a paragraph. The cards are the page.
    cards = "".join(f"<li class='job'><a href='/jobs/{i}'><h3>Senior engineer number {i}</h3></a><div>Company {i}</div>"
                    f"<div>Remote, anywhere in the world</div><div>Full-time</div><div>$50,000 - $74,999 USD</div></li>"
                    for i in range(12))
    html = (f"<html><head><title>Remote jobs</title></head><body>{NAV}<div class='page'><div class='intro'><p>{SENT}</p>"
            f"</div><ul class='jobs'>{cards}</ul></div></body></html>")
    text = native(html)["text"]
    assert all(f"Company {i}" in text for i in range(12)) and "$50,000" in text


def test_every_document_is_tagged_with_a_page_type_from_its_structure():
    product = ("<html><head><title>Blue kettle</title><script type='application/ld+json'>"
               '{"@context": "https://schema.org", "@type": "Product", "name": "Blue kettle", "offers": '
               '{"@type": "Offer", "price": "39.00", "priceCurrency": "USD"}}</script>'
               "<link rel='canonical' href='https://shop.example/products/blue-kettle'></head><body>"
               f"{NAV}<main><h1>Blue kettle</h1><div class='price'>$39.00</div><p>{SENT}</p>"
               "<button>Add to cart</button><div>In stock</div><h2>Reviews</h2></main></body></html>")
    posts = "".join(f"<div class='post' itemscope itemtype='https://schema.org/DiscussionForumPosting'>"
                    f"<span itemprop='author'>user{i}</span><div itemprop='text'><p>Reply {i}. {SENT}</p></div></div>"
                    for i in range(5))
    forum = ("<html><head><title>Budget thread</title><link rel='canonical' href='https://forum.example/t/budget/123'>"
             f"</head><body>{NAV}<h1>Budget thread</h1>{posts}</body></html>")
    assert native(product)["meta"]["page_type"] == "product"
    assert native(forum)["meta"]["page_type"] == "forum"
    for mode in ("precise", "fast"):
        assert extract_html({"html": forum, "mode": mode})["meta"]["page_type"] == "forum"
    assert native("<html><body></body></html>")["meta"].get("page_type", "other") == "other"


def test_main_text_in_a_hidden_wrapper_is_read_when_it_is_the_bulk_of_the_page():
    # React streams the page's body in a `<div hidden id="S:1">` that a script moves into place; a
    # shop hides its <main> with aria-hidden under a menu drawer. A small hidden block stays dropped.
    body = "".join(f"<p>Paragraph {i}. {SENT}</p>" for i in range(6))
    note = "<div hidden><p>A hidden note about cookies and offers, shown by a script, which is not content.</p></div>"
    for wrapper in (f"<div hidden id='S:1'><article>{body}</article></div>",
                    f"<main aria-hidden='true'><article>{body}</article></main>"):
        html = (f"<html><head><title>Budget</title></head><body>{NAV}<template id='B:1'></template><p>Loading...</p>"
                f"{note}{wrapper}</body></html>")
        text = native(html)["text"]
        assert "Paragraph 0." in text and "Paragraph 5." in text and "hidden note" not in text
    dialog = (f"<html><body>{NAV}<article><p>Paragraph 0. {SENT}</p></article>"
              f"<div role='dialog' aria-hidden='true'>{body}</div></body></html>")
    assert "Paragraph 5." not in native(dialog)["text"]


def test_an_unclosed_button_does_not_swallow_the_page():
    # libxml2 nests everything after an unclosed <button> inside it (an HTML5 parser closes it at the
    # next one); dropping the page's buttons then dropped the page. A real button stays dropped.
    body = "".join(f"<p>Paragraph {i}. {SENT}</p>" for i in range(6))
    html = (f"<html><head><title>Budget</title></head><body>{NAV}<div class='bar'><button class='menu'>Menu"
            f"<div class='page'><article>{body}</article></div><button>Subscribe now</button></div></body></html>")
    text = native(html)["text"]
    assert "Paragraph 0." in text and "Paragraph 5." in text and "Subscribe now" not in text


def test_a_docs_index_is_its_toctree_not_its_footer():
    # A Sphinx index page is a toctree: links only, nothing scores but the footer's sentences. The
    # page's main landmark (div.body role=main) holding the bulk of the page wins.
    toc = "".join(f"<li class='toctree-l1'><a class='reference internal' href='lib{i}.html'>{i}. Library module "
                  f"number {i}: what it does</a><ul><li class='toctree-l2'><a class='reference internal' "
                  f"href='lib{i}.html#a'>{i}.1. Functions and classes</a></li></ul></li>" for i in range(25))
    html = ("<html><head><title>The Standard Library — documentation</title></head><body>"
            "<div class='document'><div class='documentwrapper'><div class='bodywrapper'><div class='body' role='main'>"
            "<section id='the-standard-library'><h1>The Standard Library</h1><p>While the reference manual "
            f"describes the syntax, this library reference describes the standard library.</p><div class='toctree-wrapper'>"
            f"<ul>{toc}</ul></div></section></div></div></div></div><div class='footer'>© Copyright 2001-2024, the "
            "Software Foundation. This page is licensed under the Foundation License Version 2. Examples, recipes, "
            "and other code in the documentation are additionally licensed under the Zero Clause BSD License. "
            "Created using Sphinx 7.2.6.</div></body></html>")
    text = native(html)["text"]
    assert "Library module number 0" in text and "Library module number 24" in text


def test_a_block_the_page_prints_twice_comes_out_once():
    # A post's text printed twice inside the chosen block (a desktop and a mobile copy of the same
    # summary; a question recapped above its answers): it is kept once. Short lines may repeat.
    body = "".join(f"<p>Paragraph {i}. {SENT}</p>" for i in range(5))
    summary = f"<p>In short: {SENT}</p>"
    html = (f"<html><head><title>Budget</title></head><body>{NAV}<article><div class='d'>{summary}</div>{body}"
            f"<div class='m'>{summary}</div><p>Reply</p><p>Reply</p></article></body></html>")
    text = native(html)["text"]
    assert text.count("In short:") == 1 and "Paragraph 4." in text and text.count("Reply") == 2
