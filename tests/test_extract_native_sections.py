"""mode=native on pages that are not articles (services, products): each test is a page shape the
selector once got wrong on WCXB's tune pages, written as the rule it now follows (not as a site)."""
from assay.extractors.html import extract_html

NAV = "<nav><a href='/'>Home</a> <a href='/services'>Services</a> <a href='/contact'>Contact</a></nav>"


def native(html: str) -> str:
    return extract_html({"html": html, "mode": "native"})["text"]


def _section(kind: str, inner: str) -> str:
    return f"<section class='page-section section-{kind}'><div class='container'>{inner}</div></section>"


def test_a_service_page_built_of_a_stack_of_sections_keeps_every_section():
    # A landing page: a hero, cards of features, a quote, a long FAQ, a visit block, each its own
    # <section>. The FAQ holds the most running text, but it is one section of the page, not the page.
    faq = "".join(f"<div class='faq-item'><h3>Question {i} about the repairs?</h3><p>Answer {i}. We repair "
                  f"bicycles of every make, from city bikes to racing frames, and we keep the parts in stock, "
                  f"so most repairs are done on the same day.</p></div>" for i in range(5))
    cards = "".join(f"<div class='card'><h3>Feature {i}</h3><p>Feature {i} is a service we offer to every "
                    f"rider in town, at a fair price.</p></div>" for i in range(3))
    html = (f"<html><head><title>Bicycle repairs</title></head><body>{NAV}"
            + _section("hero", "<h1>Bicycle repairs</h1><p>The workshop in the old town that fixes your bike "
                               "while you wait, since 1984.</p>")
            + _section("features", f"<h2>What we do</h2><div class='row'>{cards}</div>")
            + _section("quote", "<h2>What riders say</h2><blockquote>They fixed my wheel in ten minutes and "
                                "charged me almost nothing for it.</blockquote>")
            + _section("faq", f"<h2>Questions</h2>{faq}")
            + _section("visit", "<h2>Plan your visit</h2><p>Open daily from nine to six, in the lane behind "
                                "the market hall, with parking for bikes.</p>")
            + "<footer><p>Copyright 2025 the workshop</p></footer></body></html>")
    text = native(html)
    for part in ("fixes your bike while you wait", "Feature 2 is a service", "They fixed my wheel", "Answer 4.",
                 "Open daily from nine"):
        assert part in text, part
    assert "Copyright" not in text


def test_an_faq_marked_up_as_schema_org_faqpage_is_no_thread():
    # schema.org Question and Answer items are a Q&A thread's posts, but inside an FAQPage they are
    # the page's own questions: the service text around them stays.
    faq = "".join(f"<div itemscope itemprop='mainEntity' itemtype='https://schema.org/Question'>"
                  f"<h3 itemprop='name'>Question {i} about the fees?</h3><div itemscope itemprop='acceptedAnswer' "
                  f"itemtype='https://schema.org/Answer'><p itemprop='text'>Answer {i}. Our fees depend on the size "
                  f"of the garden, the hedges and the trees to cut, and we send a written quote before any work "
                  f"starts, so there is never a surprise on the bill.</p></div></div>" for i in range(4))
    intro = ("<p>We look after gardens in the valley all year round: mowing, pruning, planting, and clearing "
             "leaves in the autumn, with our own tools and vans.</p><p>Every garden gets the same two gardeners "
             "each visit, who learn what grows where and what the owners want from it.</p>")
    html = (f"<html><head><title>Garden care</title></head><body>{NAV}<div class='page'><h1>Garden care</h1>"
            f"{intro}<div itemscope itemtype='https://schema.org/FAQPage'><h2>Questions</h2>{faq}</div></div>"
            "</body></html>")
    text = native(html)
    assert "We look after gardens" in text and "the same two gardeners" in text
    assert "Answer 3." in text


def test_page_builder_text_blocks_each_in_a_column_of_its_own_are_the_body():
    # Elementor gives every block a numbered class of its own (`elementor-element-54d0325`) beside the
    # words all its text blocks share (`elementor-widget elementor-widget-text-editor`), and sets each
    # in a section and column of its own: blocks of one name, not siblings, together the whole body.
    def section(i, inner, kind="text-editor"):
        return (f"<section class='elementor-section elementor-top-section'><div class='elementor-container'>"
                f"<div class='elementor-column'><div class='elementor-widget-wrap'><div class='elementor-element "
                f"elementor-element-{i}f{i}c elementor-widget elementor-widget-{kind}'><div class="
                f"'elementor-widget-container'>{inner}</div></div></div></div></div></section>")
    para = ("We help owners set up a company in the state, file the papers, draft the operating agreement and "
            "answer the questions that come up in the first year of business. ")
    body = "".join(section(i, f"<h2>Part {i} of the service</h2><p>Part {i}. {para * 2}</p>") for i in range(4))
    recent = section(9, "".join(f"<a href='/r{j}'>Recent post number {j} on the blog</a><br>" for j in range(8)),
                     "posts")
    # Questions in tabs, outside any widget: pruning the text blocks would leave them alone.
    tabs = "".join(f"<div class='elementor-tab-title'>Question {j}?</div><div class='elementor-tab-content'>"
                   f"<p>Answer {j}. {para}</p></div>" for j in range(5))
    html = (f"<html><head><title>Company formation</title></head><body>{NAV}<div class='site'>"
            f"<h1>Company formation</h1>{body}<div class='elementor-tabs'>{tabs}</div>{recent}</div></body></html>")
    text = native(html)
    assert all(f"Part {i}. We help owners" in text for i in range(4))
    assert "Recent post" not in text


def test_customer_reviews_under_a_product_are_not_its_text():
    # A shop's reviews block (`product-reviews`) under a long description: buyers' sentences, running
    # text enough to join it, but the page's text is the product's own description.
    desc = ("<p>The kettle holds one and a half litres, boils in under three minutes, and switches itself off "
            "when the water is ready, so it never runs dry.</p><p>Its steel body stays cool to the touch, and "
            "the filter in the spout keeps limescale out of your cup.</p>") * 3
    reviews = "".join(f"<div class='review'><p>Buyer {i}: I bought this kettle for my kitchen and it has worked "
                      f"well every day since, quiet and quick, though the lid is a little stiff.</p></div>"
                      for i in range(2))
    html = (f"<html><head><title>Steel kettle</title></head><body>{NAV}<div class='product'><h1>Steel kettle</h1>"
            f"<div class='description'>{desc}</div><div class='product-reviews'><h2>Reviews</h2>{reviews}</div>"
            "</div></body></html>")
    text = native(html)
    assert "boils in under three minutes" in text and "limescale" in text
    assert "Buyer" not in text


def test_a_listing_beside_its_own_intro_is_taken_whole():
    # A listing page: the article's header holds its one paragraph of running text, and beside it,
    # in the same article, groups of entries (a linked name, a price, a few words) with none. The
    # header is only the first choice; the entries' region is in the same article, no sidebar.
    groups = "".join(f"<section class='group'><h2>Shelf {g}</h2><ul>" + "".join(
        f"<li><a href='/p{g}{i}'>Notebook model {g}{i}, ruled</a> <span>$1{i}.00</span></li>"
        for i in range(6)) + "</ul></section>" for g in range(4))
    html = (f"<html><head><title>Notebooks</title></head><body>{NAV}<article><header><h1>Notebooks</h1><p>Every "
            f"notebook we sell, from pocket sizes to desk pads, sorted by the shelf they sit on in the shop.</p>"
            f"</header><div><div>{groups}</div></div></article></body></html>")
    text = native(html)
    assert "Every notebook we sell" in text
    assert all(f"Notebook model {g}{i}" in text for g in range(4) for i in range(6))


def test_a_listing_of_zebra_striped_rows_is_one_run_of_cards():
    # Rows of a price list alternate two classes (`row bg-white`, `row bg-grey`): one kind of card,
    # whose run is the page's main region, not two runs of half of it each.
    rows = "".join(f"<div class='flex entry-row {'bg-white' if i % 2 else 'bg-grey'}'><a href='/p{i}'>Seed packet "
                   f"{i}</a><span>$2.{i}0</span></div>" for i in range(20))
    html = (f"<html><head><title>Seeds</title></head><body>{NAV}<div class='page'><div class='intro'><p>Seeds for the "
            f"kitchen garden, sown by hand.</p></div><div class='list'>{rows}</div></div>"
            "<div class='foot'><p>Seed shop, the market square, open on Saturdays from eight.</p></div></body></html>")
    text = native(html)
    assert all(f"Seed packet {i}" in text for i in range(20))
