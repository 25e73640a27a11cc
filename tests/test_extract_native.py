"""mode=native: Assay's own main-content selector. Each test is a page shape the selector once got
wrong, written as the rule it now follows (not as a site)."""
from assay.extractors.html import extract_html

SENT = ("The committee met on Tuesday to discuss the budget, and after a long debate it agreed to fund the new "
        "library, the repairs to the bridge, and a study of the harbour. ")
NAV = "<nav><a href='/'>Home</a> <a href='/news'>News</a> <a href='/about'>About us</a></nav>"


def paragraphs(n: int) -> str:
    """An article body: `n` numbered sentences of running text, one paragraph each."""
    return "".join(f"<p>Paragraph {i}. {SENT}</p>" for i in range(n))


def native(html: str) -> str:
    return extract_html({"html": html, "mode": "native"})["text"]


def test_a_body_split_over_unnamed_containers_is_kept_whole():
    # The article's paragraphs sit in two columns with nothing in common, the second shorter and
    # nested deeper: the container of both holds more running text than anything else it adds.
    first = "".join(f"<p>First part {i}. {SENT}</p>" for i in range(6))
    second = "".join(f"<p>Second part {i}. {SENT}</p>" for i in range(3))
    html = (f"<html><body>{NAV}<div class='wrap'><div class='x1'><div class='y'>{first}</div></div>"
            f"<div class='x2'><span>12 May</span><div><div><div class='z'>{second}</div></div></div></div></div>"
            f"<div class='links'>{''.join(f'<a href=/p{i}>Another story number {i}</a> ' for i in range(9))}</div>"
            "</body></html>")
    text = native(html)
    assert "First part 5." in text and "Second part 2." in text
    assert "Another story" not in text and "About us" not in text


def test_a_thread_of_blocks_named_comment_keeps_every_post():
    # Posts named `comment` (no post markup, no schema.org): names against boilerplate are no
    # evidence inside a selection made of such blocks.
    posts = "".join(f"<div class='comment'><div class='comment-meta'>user{i} wrote:</div>"
                    f"<div class='comment-body'><p>Reply {i}. {SENT}</p></div></div>" for i in range(5))
    html = f"<html><body>{NAV}<main><h1>Budget thread</h1><div class='comments'>{posts}</div></main></body></html>"
    text = native(html)
    assert all(f"Reply {i}." in text for i in range(5))


def test_cjk_posts_are_paragraphs_and_a_headline_list_is_not():
    # Chinese says in ten characters what English says in thirty: the short posts of a thread are
    # paragraphs; a list of headlines without a comma or stop is not, however many there are.
    post = "今天终于放假了，大家好好休息，年后继续努力。"
    headlines = "".join(f"<div class='item'>热门新闻标题第{i}条消息来了</div>" for i in range(20))
    html = (f"<html><body><div class='search'>{headlines}</div><div class='thread'>"
            + "".join(f"<div class='floor'><p>{post}{i}</p></div>" for i in range(4))
            + "</div></body></html>")
    text = native(html)
    assert text.count("今天终于放假了") == 4 and "热门新闻" not in text


def test_a_dialog_is_never_the_content():
    # A report form or help sheet that a script opens can hold more text than a short article.
    article = paragraphs(2)
    help_text = "".join(f"<p>Help {i}. {SENT} {SENT}</p>" for i in range(5))
    html = (f"<html><body>{NAV}<div class='post'>{article}</div><div class='ui modal small'>{help_text}</div>"
            "</body></html>")
    text = native(html)
    assert "Paragraph 1." in text and "Help" not in text


def test_a_long_body_without_paragraph_markup_or_commas_beats_a_comma_rich_footer():
    # One long block of text between <br>s in a script without Latin commas (Urdu, Thai...): a
    # paragraph longer than a few hundred characters counts as several.
    words = "دریائے راوی پر ڈیم کی تعمیر سے پانی بند ہوچکا ہے اس کو لے کر بحث جاری ہے "
    body = "<br>".join(words * 6 for _ in range(8))
    footer = ("<p>Example Network is the largest independent media house, serving its users since 1997. We provide "
              "breaking news, world news, business news, sports news, and live news, every day, all year.</p>")
    html = (f"<html><body>{NAV}<div class='main'><div class='detail'><div>{body}</div></div></div>"
            f"<div class='footer'><div class='footer_bottom'><div class='fl'>{footer}</div></div></div></body></html>")
    text = native(html)
    assert "دریائے راوی" in text and "media house" not in text


def test_blocks_hidden_by_a_css_framework_class_are_not_text():
    # `hidden` (Bootstrap 3, Tailwind) and `d-none` hide a block on every screen; `hidden md:block`
    # shows it on larger ones, so it stays.
    article = paragraphs(4)
    html = (f"<html><body>{NAV}<article><div class='body'>{article}"
            f"<div class='hidden support-message'><p>Please donate to keep us going, every dollar counts.</p></div>"
            f"<div class='d-none'><p>Variant two of the donation appeal, shown to some readers only.</p></div>"
            f"<div class='hidden md:block'><p>Shown on wide screens: the closing paragraph of the article.</p></div>"
            "</div></article></body></html>")
    text = native(html)
    assert "Paragraph 3." in text and "donate" not in text and "donation" not in text
    assert "closing paragraph" in text


def test_every_entry_of_a_list_of_documented_members_is_kept():
    # Javadoc's method details: each entry a section (name, signature, comment, notes) in a list
    # item; the longest comment wins the scoring, and its section and item add little: the list
    # beyond them holds as much text again.
    def entry(i, n):
        body = "".join(f"<p>Entry {i} sentence {k}. {SENT}</p>" for k in range(n))
        return (f"<li><section class='detail' id='m{i}'><h3>method{i}</h3><div class='member-signature'>"
                f"public static int method{i}(int x, int y, int z) throws IllegalStateException</div>"
                f"<div class='block'>{body}</div><dl class='notes'><dt>Parameters:</dt><dd><code>x</code> - "
                f"the value, an integer that is counted</dd><dt>Returns:</dt><dd>the value plus the index of the "
                "method</dd></dl></section></li>")
    html = (f"<html><body>{NAV}<main><section class='method-details'><h2>Method Details</h2>"
            f"<ul class='member-list'>{entry(0, 5)}{entry(1, 1)}{entry(2, 2)}{entry(3, 1)}</ul></section></main>"
            "</body></html>")
    text = native(html)
    assert all(f"Entry {i} sentence 0." in text for i in range(4)) and "Entry 0 sentence 4." in text


def _forum(replies: list[str]) -> str:
    # A forum engine's thread: the opening post in a block named `topic-detail`, each reply in a
    # `div.reply` with its author line (a profile link, the floor number) and its text.
    rows = "".join(f"<div class='reply'><div class='infos'><div class='info'><a href='/u{i}'>user{i}</a> #{i}</div>"
                   f"<div class='markdown'><p>{r}</p></div></div></div>" for i, r in enumerate(replies))
    return (f"<html><body>{NAV}<div class='main'><div class='topic-detail'><h1>Budget thread</h1>"
            f"<div class='card-body'><p>Opening post. {SENT}</p></div></div>"
            f"<div class='replies'>{rows}</div></div></body></html>")


def test_a_thread_keeps_its_opening_post_and_short_replies_with_a_mention():
    # The replies are the repeated post blocks; the opening post is shaped otherwise (named `topic`,
    # like a Q&A page's `question`), and a short reply that mentions another user by a profile link
    # is a post, not a menu.
    replies = [f"Reply {i}. {SENT}" for i in range(4)] + ["<a href='/u1'>@user1</a> agreed, thanks!"]
    text = native(_forum(replies))
    assert "Opening post." in text and all(f"Reply {i}." in text for i in range(4))
    assert "agreed, thanks!" in text


def test_teasers_under_a_related_heading_after_the_article_are_not_text():
    # Other stories' teasers (titles and summaries: running text) under an "Others also read" heading
    # after a short article: the heading opens a list of other pages, which goes with it.
    body = "".join(f"<p>Article line {i}. {SENT}</p>" for i in range(3))
    teasers = "".join(f"<li><a href='/s{i}'>Story {i}</a><p>Teaser {i}. {SENT}</p></li>" for i in range(5))
    for heading in ("Related stories", "其他人也在看", "You may also like"):
        html = (f"<html><body>{NAV}<div class='page'><div class='col'>{body}</div><div class='stream'>"
                f"<div class='hdr'><h2>{heading}</h2></div><ul>{teasers}</ul></div></div></body></html>")
        text = native(html)
        assert all(f"Article line {i}." in text for i in range(3)), heading
        assert "Teaser" not in text and heading not in text, heading


def test_a_related_heading_at_the_start_of_the_selection_keeps_what_follows():
    # Nothing of an article before the heading: what follows it is the content itself.
    body = "".join(f"<p>Article line {i}. {SENT}</p>" for i in range(4))
    text = native(f"<html><body>{NAV}<main><h2>Related work</h2>{body}</main></body></html>")
    assert all(f"Article line {i}." in text for i in range(4))


def test_a_post_feed_inside_a_form_is_the_content():
    # Forum engines wrap the whole post feed in a <form> (moderators' checkboxes): a form that holds
    # most of the selection's text is no search box or sign-up form.
    posts = "".join(f"<article class='cPost'><div class='author'><a href='/u{i}'>user{i}</a></div>"
                    f"<div class='richText'><p>Post {i}. {SENT}</p></div></article>" for i in range(4))
    html = (f"<html><body>{NAV}<div id='feed'><h1>Budget thread</h1><form action='/mod'>{posts}</form></div>"
            "<form class='search'><p>Search the forum for other threads</p></form></body></html>")
    text = native(html)
    assert all(f"Post {i}." in text for i in range(4))


def test_calls_to_action_under_the_article_are_not_text():
    # Newsletter, social and affiliate lines under an article are longer than a byline but are the
    # site's, not the story's; a sentence of the story that starts like one stays.
    body = "".join(f"<p>Article line {i}. {SENT}</p>" for i in range(4))
    calls = ["Get the latest updates right in your inbox. Subscribe to NJ.com’s newsletters.",
             "Follow The Daily Planet Opinion section on Facebook, Twitter (@DPopinion) and Instagram.",
             "If you buy something through this post, the site may get a share of the sale.",
             "Have a tip? Our reporter may be reached at tips@example.com."]
    html = (f"<html><body>{NAV}<article>{body}" + "".join(f"<p>{c}</p>" for c in calls)
            + "<p>Follow the river north for two miles, and the library stands on the left bank.</p></article></body></html>")
    text = native(html)
    assert all(f"Article line {i}." in text for i in range(4)) and "Follow the river north" in text
    assert not any(c[:20] in text for c in calls)


def test_the_headline_goes_when_the_selection_starts_with_it_or_repeats_it():
    # The title's heading is the selection's first element (joined as a sibling of the body's
    # container), and a sticky bar repeats it inside the article further down: neither is text.
    # A section heading the title merely contains stays.
    title = "Harbour study funded after a long budget debate in which the council heard from forty residents"
    article = paragraphs(5)
    html = (f"<html><head><title>{title}</title></head><body>{NAV}<div class='page'><h2>{title}</h2>"
            f"<div class='story'>{article}<h3>Harbour study</h3><p>The closing paragraph. {SENT}</p>"
            f"<div class='sticky'><h1>{title}</h1></div></div></div></body></html>")
    text = native(html)
    assert "Paragraph 4." in text and "closing paragraph" in text and "Harbour study\n" in text + "\n"
    assert "long budget debate" not in text


def test_the_articles_own_header_is_not_text():
    # <article><header>: the headline, the standfirst and the byline; the body follows.
    article = paragraphs(5)
    html = (f"<html><head><title>Budget news</title></head><body>{NAV}<article><header><h1>Council funds library</h1>"
            "<p class='lead'>After a long night of talks the council agreed on a budget that pleases nobody, "
            "and the mayor says it is the best deal the town could get.</p><span>Jane Doe</span></header>"
            f"<div class='text'>{article}</div></article></body></html>")
    text = native(html)
    assert "Paragraph 4." in text and "Paragraph 0." in text
    assert "pleases nobody" not in text and "Council funds library" not in text


def test_short_lines_above_the_first_paragraph_are_not_text():
    # Kicker, byline, agency and reading time above the body, each a short block without a
    # sentence's end; a page whose text is all short lines (a poem) keeps them.
    article = paragraphs(5)
    furniture = "<div>Opinion</div><div>Jane Doe</div><div>Associated Press</div><div>5 min read</div>"
    html = f"<html><body>{NAV}<div class='story'>{furniture}{article}</div></body></html>"
    text = native(html)
    assert "Paragraph 0." in text and "Paragraph 4." in text
    assert "Jane Doe" not in text and "Associated Press" not in text and "5 min read" not in text
    poem = "".join(f"<div>The quiet harbour line {i}</div>" for i in range(12))
    text = native(f"<html><body>{NAV}<div class='poem'>{poem}</div></body></html>")
    assert "The quiet harbour line 0" in text and "The quiet harbour line 11" in text


def test_schema_org_metadata_inside_the_article_is_not_text():
    # Microdata marks the headline, byline, date and standfirst of an article as its metadata.
    article = paragraphs(5)
    html = (f"<html><body>{NAV}<div class='story' itemscope itemtype='https://schema.org/NewsArticle'>"
            "<div itemprop='description'>The council agreed on a budget that pleases nobody, and the mayor says "
            "it is the best deal the town could have hoped to get this year.</div>"
            "<div>Written by <span itemprop='author'>Jane Doe, city hall reporter for the Example Gazette</span> "
            "on <span itemprop='datePublished'>the twelfth of May, a Tuesday</span></div>"
            f"{article}</div></body></html>")
    text = native(html)
    assert "Paragraph 0." in text and "Paragraph 4." in text
    assert "pleases nobody" not in text and "Jane Doe" not in text and "twelfth of May" not in text


def test_a_hint_in_a_comment_form_is_not_the_content_of_a_short_post():
    # A short post (a line, a code block, a line, a code block) scores little: its lines are below a
    # paragraph's length (in Chinese they also lack a full-width comma). The hint in the comment form
    # under it ("be kind, stay on topic") is one comma-rich paragraph; a form that holds a small share
    # of the page is no content (what pruning says of it too), so its text scores nothing.
    code = "npm install --global depcheck-tool"
    for lines, hint in ((["Install the tool", "Then check the project"],
                         "Discussion should help us learn, so be kind, stay on topic, and cite your sources."),
                        (["每次打开别人新的项目都要 npm 依赖都会各种报错很烦", "检查依赖"],
                         "讨论应以学习和精进为目的。请勿发布不友善或者负能量的内容，与人为善，比聪明更重要！")):
        post = f"<p>{lines[0]}</p><pre><code>{code}</code></pre><p>{lines[1]}</p><pre><code>depcheck --json</code></pre>"
        html = (f"<html><body>{NAV}<div class='main'><h1>Checking dependencies</h1><div class='markdown-body'>{post}"
                "</div></div><div class='comments'><form class='reply-form' action='/replies'>"
                f"<div class='tip'>{hint}</div><textarea name='body'></textarea></form></div></body></html>")
        text = native(html)
        assert code in text and "depcheck --json" in text and lines[1] in text, lines[0]
        assert hint[:10] not in text, lines[0]


def test_a_post_of_short_lines_and_code_blocks_beats_teaser_summaries():
    # The post's steps are one-line commands and its lines are shorter than a paragraph; the teasers
    # beside it are sentences with commas. A code block is a paragraph at any length, and its lines,
    # not its commas, are its clauses (a comma in code is syntax, and a Chinese page's code has no
    # full-width ones), so the post outweighs the teasers.
    teaser = ("In Europe, where the order books open in November, the maker will start with a special, "
              "limited launch edition in blue.")
    cjk_teaser = ("会议由县委副书记主持，县委常委、组织部长，县人大副主任，副县长，县政协副主席，县人武部部长，"
                  "县应急管理局局长，以及各乡镇负责人参加了会议，并就下一步工作作了部署。")
    code = "def rotate(items, k):\n    k = k % len(items)\n    head = items[:k]\n    return items[k:] + head"
    for steps, lines, summary in ((["go get github.com/acme/median", "pip install str-eval"],
                                   ["Install the tool", "Then the parser", "That is all"], teaser),
                                  ([code, "pip install rotate"], ["先安装依赖", "然后运行", "就可以了"], cjk_teaser)):
        post = "".join(f"<p>{line}</p><pre><code>{step}</code></pre>" for line, step in zip(lines, steps))
        teasers = "".join(f"<li><a href='/p/{i}'>Story {i}</a><div class='snippet'>{summary}</div></li>" for i in range(4))
        html = (f"<html><body>{NAV}<div class='main-column'><div class='article-content'><h1>Tools</h1>"
                f"<div class='markdown-body'>{post}<p>{lines[2]}</p></div></div></div>"
                f"<div class='aside'><div class='course'><ul>{teasers}</ul></div></div></body></html>")
        text = native(html)
        assert all(step in text for step in steps) and lines[2] in text, lines[0]
        assert summary[:10] not in text, lines[0]


def test_a_formula_with_a_year_like_number_is_no_dateline():
    # A short block with a number from 1900 to 2099 and no full stop reads as a dateline ("12 May
    # 2015"); a formula's numbers are no date: `n \ge 2015`, `z_{2005}=1` on a competition-maths page.
    head = "<script src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js'></script>"
    body = paragraphs(3)
    for block, tex in (("<p>\\[n \\ge 2015\\]</p>", "n \\ge 2015"),
                       ("<div class='math'><script type='math/tex; mode=display'>z_{2005}=1</script></div>", "z_{2005}=1"),
                       ("<p>so <script type='math/tex'>2^{2010}</script> is even</p>", "2^{2010}")):
        html = f"<html><head>{head}</head><body>{NAV}<article>{body}{block}<p>Then {SENT}</p></article></body></html>"
        text = native(html)
        assert tex in text and "Then The committee" in text, tex
    dateline = f"<html><body>{NAV}<article><div class='when'>12 May 2015, 10:24</div>{body}</article></body></html>"
    assert "12 May 2015" not in native(dateline)


def test_an_embedded_post_is_quoted_text_with_its_attribution():
    # An embedded post sits in a wrapper named for the embed (`social-embed`) between the article's
    # paragraphs: the quote and its attribution line ("— Name (@name) date") are the author's
    # material, not a share bar or a dateline.
    body = paragraphs(5)
    quote = ("<div class='social-embed'><blockquote class='tweet'><p>Yes this is real and yes the state "
             "spent nearly half a million dollars on it, which is a lot.</p>— Dana Smith (@dsmith) "
             "<a href='https://example.com/s/1'>November 18, 2019</a></blockquote></div>")
    html = (f"<html><body>{NAV}<div class='story'>{body[:len(body) // 2]}</div><div class='story'>{body}{quote}"
            f"<p>After the quote. {SENT}</p></div><div class='share'><a href='/s'>Share this story</a></div>"
            "</body></html>")
    text = native(html)
    assert "half a million dollars" in text and "(@dsmith) November 18, 2019" in text
    assert "Share this story" not in text


def test_a_sentence_with_several_links_is_a_paragraph():
    # A paragraph that links most of its nouns (deals, names) is still a sentence of the article when
    # a third of it is plain text; a line that is all links is not.
    body = paragraphs(5)
    linked = ("<p>Monday’s best deals include <a href='/a'>various MacBook models from $700 at Amazon</a>. "
              "You’ll also find <a href='/b'>AirPods 2 with wireless charging case for $150</a> and "
              "<a href='/c'>Black Friday pricing on thermostats from $139</a>, all in one place today.</p>")
    related = "<p><a href='/r'>Related: the ten best laptops of the year, tested and ranked by our staff</a></p>"
    html = f"<html><body>{NAV}<article>{body}{linked}{related}<p>The end. {SENT}</p></article></body></html>"
    text = native(html)
    assert "Monday’s best deals include" in text and "The end." in text
    assert "ten best laptops" not in text


def test_an_embedded_post_full_of_links_is_still_quoted_text():
    # An embedded post is mostly links (its short link, its author's handle, its date), but it is a
    # quotation with a sentence in it, not a block of links.
    body = paragraphs(6)
    quote = ("<div class='embed'><blockquote><p>we are on it, said the state about the campaign "
             "<a href='https://t.co/x'>https://t.co/HO1ZRs9T1P</a></p>— tall glass of coquito "
             "(@orabora) <a href='https://example.com/s/2'>November 19, 2019</a></blockquote></div>")
    html = f"<html><body>{NAV}<article>{body}{quote}<p>After the quote. {SENT}</p></article></body></html>"
    text = native(html)
    assert "said the state about the campaign" in text and "(@orabora)" in text


def test_a_body_continued_past_a_level_of_furniture_is_kept_whole():
    # The body's container sits with a share bar and a tag list (more text than the one level up
    # gains); the rest of the body follows an advertisement one level further out.
    first = "".join(f"<p>First part {i}. {SENT}</p>" for i in range(6))
    rest = "".join(f"<p>Second part {i}. {SENT}</p>" for i in range(3))
    share = "".join(f"<a href='/s{i}'>Share this story on network number {i}</a> " for i in range(8))
    tags = "".join(f"<a href='/t{i}'>Topic {i}</a> " for i in range(12))
    html = (f"<html><body>{NAV}<div class='page'><div class='wrap'><div class='bar'>{share}</div>"
            f"<div class='body'>{first}</div><div class='topics'>{tags}</div></div>"
            f"<div class='slot'><a href='/ad'>Advertisement</a></div><div class='more'><div>{rest}</div></div></div>"
            f"<div class='links'>{''.join(f'<a href=/p{i}>Another story number {i}</a> ' for i in range(9))}</div>"
            "</body></html>")
    text = native(html)
    assert "First part 5." in text and "Second part 2." in text
    assert "Another story" not in text


def test_a_continuation_nested_too_deep_to_score_joins_the_body():
    # After an advertisement the body goes on in wrappers four levels deep: its paragraphs give the
    # outer wrapper no score, but it is running text and nothing else. A lone notice does not join.
    first = "".join(f"<p>First part {i}. {SENT}</p>" for i in range(6))
    rest = "".join(f"<p>Second part {i}. {SENT}</p>" for i in range(2))
    notice = "<div class='n'><div><div><div><p>" + SENT + "This notice stands alone.</p></div></div></div></div>"
    html = (f"<html><body>{NAV}<div class='page'><div class='body'>{first}</div>"
            f"<div class='slot'><a href='/ad'>Advertisement</a></div><div class='c'><div><div><div>{rest}</div></div></div></div>"
            f"{notice}<div class='links'>{''.join(f'<a href=/p{i}>Another story number {i}</a> ' for i in range(30))}</div>"
            "</div></body></html>")
    text = native(html)
    assert "First part 5." in text and "Second part 1." in text
    assert "stands alone" not in text and "Another story" not in text


def test_a_body_split_over_page_builder_blocks_named_widget_is_kept_whole():
    # A page builder names every block of the body alike (`elementor-element elementor-element-<id>
    # elementor-widget elementor-widget-text-editor`), `widget` included: among blocks named like the
    # winner, that word is no evidence against, and the text blocks around the images are the body.
    def block(i, inner, kind="text-editor"):
        return (f"<div class='elementor-element elementor-element-{i}a3f elementor-widget elementor-widget-{kind}'>"
                f"<div class='elementor-widget-container'>{inner}</div></div>")
    parts = (block(1, "".join(f"<p>Part one {j}. {SENT}</p>" for j in range(4))) + block(2, "<img src='a.jpg'>", "image")
             + block(3, "".join(f"<p>Part two {j}. {SENT}</p>" for j in range(2))) + block(4, "<h2>A subheading</h2>", "heading")
             + block(5, "".join(f"<p>Part three {j}. {SENT}</p>" for j in range(2))))
    recent = block(9, "".join(f"<a href='/r{j}'>Recent post number {j} on the blog</a><br>" for j in range(12)), "posts")
    html = (f"<html><body>{NAV}<div class='elementor-section'><div class='elementor-column'><div class='elementor-widget-wrap'>"
            f"{parts}</div></div><div class='elementor-column'><div class='elementor-widget-wrap'>{recent}</div></div></div>"
            "</body></html>")
    text = native(html)
    assert all(f"{w}" in text for w in ("Part one 3.", "Part two 1.", "Part three 1.", "A subheading"))
    assert "Recent post" not in text


def test_a_list_of_teasers_beside_the_headline_does_not_win_over_a_one_command_post():
    # The post under the page's headline is one short command and two short lines: it scores little.
    # Beside it a list of other pages' teasers (each item a title linked to another page and a
    # summary) holds sentences with commas. Teasers that do not hold the page's headline are not its
    # running text: the post under the headline is the content, wherever the headline sits (inside
    # the post's container or in a header above both columns), and with a list on either side.
    cmd = "brew install sum-digit-factorials"
    for summary, heading in (
            ("Those commercials were super cool back in 2016, when driving for a ride app, shopping for others, or "
             "letting out a room to cover your rent, actually seemed like an opportunity rather than a necessity.",
             "Installing the digit factorial tool"),
            ("从打赢脱贫攻坚战到全面推进乡村振兴，从建设共同富裕示范区到深化东西部协作和定点帮扶，中国通过有效举措巩固成果。",
             "不要使用编排工具，自己写脚本更为灵活自主可控")):
        teasers = "".join(f"<li><a href='/p/{i}'>{summary[:24]} {i}</a><div class='snippet'>{summary}</div></li>"
                          for i in range(4))
        post = f"<div class='markdown-body'><p>Run this</p><pre><code>{cmd}</code></pre><p>Done</p></div>"
        side = f"<div class='col-side'><div class='course'><ul>{teasers}</ul></div></div>"
        for layout in (f"<div class='col-main'><div class='segment'><h1>{heading}</h1>{post}</div></div>{side}",
                       f"<div class='top'><h1>{heading}</h1></div><div class='row'><div class='col-main'>{post}</div>"
                       f"{side}</div>",
                       f"<div class='row'>{side}<div class='col-main'><h1>{heading}</h1>{post}</div>{side}</div>"):
            html = f"<html><head><title>{heading} - Site</title></head><body>{NAV}{layout}</body></html>"
            text = native(html)
            assert cmd in text and "Run this" in text, (heading, layout[:40])
            assert summary[:10] not in text, (heading, layout[:40])


def test_replies_under_a_heading_that_names_the_article_are_cut():
    # No class names to go by: the replies' heading quotes the article's title with more words
    # ("3 thoughts on “...”"); it and the replies after it in the article's container go.
    replies = "".join(f"<li><p>Reader {i} says: I loved this piece, and I will try it at home with my family "
                      f"tonight, thank you so much for writing it.</p></li>" for i in range(3))
    html = (f"<html><head><title>Why the harbour study matters | The Daily</title></head><body>{NAV}"
            f"<div class='a1'><h1>Why the harbour study matters</h1>{paragraphs(4)}"
            f"<div class='a2'><h3>3 thoughts on “Why the harbour study matters”</h3><ol>{replies}</ol></div>"
            "</div></body></html>")
    text = native(html)
    assert "Paragraph 3." in text
    assert "thoughts on" not in text and "Reader 1" not in text


def test_a_run_of_teasers_after_the_article_is_cut_by_its_shape():
    # Names hashed, no "Related" heading: after the article's last paragraph, sibling blocks of one
    # kind, each a headline link with its summary, are other pages' teasers.
    teasers = "".join(f"<div class='c9f2'><a href='/story-{i}'>Council approves the new ferry timetable {i}</a>"
                      f"<p>Summary {i}: the ferry will run every hour from May, and the fares will stay the same for "
                      f"residents, the council said on Monday.</p></div>" for i in range(4))
    html = f"<html><body>{NAV}<div class='a81b'><h1>Budget</h1>{paragraphs(5)}{teasers}</div></body></html>"
    text = native(html)
    assert "Paragraph 4." in text
    assert "ferry" not in text


def test_a_list_of_links_inside_the_article_stays():
    # The same shape with running text after it is part of the article (a list of sources).
    sources = "".join(f"<li><a href='/report-{i}'>The harbour report, volume {i}</a> (published by the port authority, with the maps of the old quay)</li>"
                      for i in range(4))
    html = (f"<html><body>{NAV}<div class='a81b'>{paragraphs(3)}<ul>{sources}</ul>"
            f"<p>Closing. {SENT}</p></div></body></html>")
    text = native(html)
    assert "volume 3" in text and "Closing." in text


def test_a_photo_and_its_caption_in_a_container_of_their_own_go():
    # Names hashed: a container that holds an image and a short text without links is a photo with
    # its caption and credit. An image inline in a line of text (a smiley in a post) is the text's.
    photo = ("<div class='f3a1'><img src='/harbour.jpg'><div class='f3a2'><span>The old quay at dawn on Monday, "
             "where the ferry will dock.</span> <span>Photo: J. Smith, AP</span></div></div>")
    inline = f"<div class='q7'>Inline line with a smiley <img src='/smile.gif'> kept in place, thank you all.</div>"
    html = (f"<html><body>{NAV}<div class='a81b'>{paragraphs(3)}{photo}{inline}{paragraphs(2)}</div>"
            "</body></html>")
    text = native(html)
    assert "Paragraph 2." in text and "Inline line with a smiley" in text
    assert "old quay" not in text and "J. Smith" not in text


def test_a_heading_that_repeats_the_whole_title_opens_no_replies():
    # A title of several parts ("Upvote · Name · Author"), repeated as a heading in the body: the
    # heading holds the title's longest part with more words, but all of them are the title's.
    title = "Upvote · Walton Teltru, a critical thinker · Author has 1"
    html = (f"<html><head><title>{title} | Example</title></head><body><div class='a81b'>"
            f"<h1>{title}</h1>{paragraphs(3)}<h2>{title}</h2><p>After the heading. {SENT}</p></div></body></html>")
    assert "After the heading." in native(html)


def test_schema_org_image_and_keyword_properties_are_metadata():
    # Microdata a page prints for machines (an ImageObject's url and size, the keywords): no text.
    meta = ("<div itemprop='image' itemscope itemtype='http://schema.org/ImageObject'>"
            "<div itemprop='url'>https://example.com/img/harbour-study-500-250.jpg</div>"
            "<div itemprop='width'>500</div><div itemprop='height'>250</div></div>"
            "<div itemprop='keywords'>harbour,budget,ferry timetable,council</div>")
    html = (f"<html><body>{NAV}<div class='a81b'>{paragraphs(2)}{meta}{paragraphs(2)}"
            "<p>Read <a itemprop='url' href='/report'>the harbour report</a> for the details of the study.</p>"
            "</div></body></html>")
    text = native(html)
    assert "Paragraph 1." in text and "the harbour report" in text
    assert "500-250" not in text and "ferry timetable" not in text


def test_what_the_selection_holds_before_the_headline_goes():
    # The article starts at its headline (the first <h1>, held by the page's title): a link and a
    # date line above it, however long, are not the article's text.
    above = ("<div class='k1'><p>https://example.com/news/article/Why-the-harbour-study-matters-14847624.php</p>"
             "<p>Updated 9:41 a.m. CST, Wednesday, November 20, 2019</p></div>")
    html = (f"<html><head><title>Why the harbour study matters - The Daily</title></head><body>{NAV}"
            f"<div class='a81b'>{above}<div class='k2'><h1>Why the harbour study matters</h1>{paragraphs(4)}</div>"
            "</div></body></html>")
    text = native(html)
    assert "Paragraph 3." in text and "Why-the-harbour" not in text and "November 20" not in text


def test_sections_of_the_body_that_end_with_a_link_are_no_teasers():
    # Names hashed: the body sits in blocks of a paragraph or two, and the last three each end with
    # a linked line. A teaser opens with its linked title; a link after running text is the article's.
    def section(i: int, link: bool) -> str:
        more = f"<p><strong><a href='/promo-{i}'>READ MORE ON THE DAILY BY CLICKING HERE</a></strong></p>" if link else ""
        return f"<section><div><p>Section {i}. {SENT}</p>{more}</div></section>"
    body = "".join(section(i, i >= 3) for i in range(6))
    html = f"<html><body>{NAV}<div class='a81b'><h1>Budget</h1>{body}</div></body></html>"
    text = native(html)
    assert all(f"Section {i}." in text for i in range(6))


def test_a_section_of_running_text_whose_sentences_carry_links_stays():
    # Names hashed: a block of two paragraphs, a third of whose text is in links (names, products,
    # sources), is a section of the body; a block that dense with links and no running text is a menu.
    linked = ("<p>The plan, said <a href='/p/mayor'>Mayor Jane Smith</a>, follows <a href='/r/2019'>the harbour "
              "report of 2019</a> and <a href='/r/bridge'>the bridge survey</a>, and it was approved by the council "
              "on Monday evening after a short debate.</p>")
    html = (f"<html><body>{NAV}<div class='a81b'>{paragraphs(12)}<div><div class='s2'>{linked}"
            f"{linked.replace('The plan', 'The budget')}</div></div>{paragraphs(2)}</div></body></html>")
    text = native(html)
    assert "The plan, said" in text and "The budget, said" in text and "Paragraph 11." in text


def test_body_blocks_of_one_class_with_links_in_their_sentences_are_no_teaser_list():
    # Names hashed: the body in blocks of one class (a page builder's text blocks), each a
    # paragraph with a long link inside a sentence. A teaser opens with its linked title; these
    # are the article, not other pages' summaries to pass over for the photo's caption.
    block = ("<div class='t1'><p>Block {i}. The council said on Monday that <a href='/report-{i}'>the report on "
             "the harbour and the bridge</a> will be published, and the vote follows in May, after the summer "
             "break and a public hearing.</p></div>")
    photo = ("<div class='f1'><figure><img src='/harbour.jpg'><figcaption>The old quay at dawn, where the "
             "ferry will dock from May, and the bridge behind it.</figcaption></figure></div>")
    html = (f"<html><head><title>Why the harbour study matters | The Daily</title></head><body>{NAV}"
            f"<article><div class='h9'><h1>Why the harbour study matters</h1>{photo}</div><div class='b1'>"
            + "".join(block.format(i=i) for i in range(5)) + "</div></article></body></html>")
    text = native(html)
    assert all(f"Block {i}." in text for i in range(5))


def test_a_paragraph_written_as_a_div_with_links_in_its_sentence_stays():
    # Text in <div>s without <p>: a sentence that carries a few links is a paragraph, as it is in a
    # <p>; a short line of links ("By signing up you agree to our Terms") is still furniture.
    linked = ("<div>The plan, said <a href='/p/mayor'>Mayor Jane Smith</a>, follows <a href='/r/2019'>the harbour "
              "report of 2019</a> and <a href='/r/bridge'>the bridge survey</a>, and was approved.</div>")
    body = "".join(f"<div>Paragraph {i}. {SENT}</div>" for i in range(8))
    html = (f"<html><body>{NAV}<div class='a81b'>{body}{linked}"
            "<div>By signing up you agree to our <a href='/terms'>Terms of Use</a> and <a href='/privacy'>Privacy Policy</a>.</div>"
            f"{body.replace('Paragraph', 'Part')}</div></body></html>")
    text = native(html)
    assert "The plan, said" in text and "Part 7." in text
    assert "By signing up" not in text


def test_the_steps_of_a_how_to_are_no_photo_captions():
    # Each step is an image and a one-line instruction in a small container of its own, as a photo
    # and its caption are; a run of such blocks side by side is the how-to's text. A photo between
    # paragraphs still goes with its caption.
    steps = "".join(f"<div class='e3k9'><img src='/step-{i}.jpg'><div class='e3k9-t'>Step {i}: turn the valve "
                    f"{i} times to the left.</div></div>" for i in range(1, 6))
    photo = ("<div class='f3a1'><img src='/harbour.jpg'><div class='f3a2'>The old quay at dawn, where the ferry "
             "will dock.</div></div>")
    html = (f"<html><body>{NAV}<div class='a81b'>{paragraphs(2)}{photo}{paragraphs(1)}<div class='s1'>{steps}</div>"
            f"{paragraphs(1)}</div></body></html>")
    text = native(html)
    assert all(f"Step {i}: turn the valve" in text for i in range(1, 6))
    assert "old quay" not in text


def test_linked_section_headings_of_a_listicle_stay():
    # A gift guide names each section by the product it links to: a linked heading in the body's
    # own container with running text after it is the body's. Another page's teaser (its linked
    # title and summary in a small block of their own) still loses its heading.
    sections = "".join(f"<h3><a href='/product/{i}'>Harbour ferry pass number {i}</a></h3><p>Item {i}. {SENT}</p>"
                       for i in range(5))
    teaser = ("<div class='t7'><h4><a href='/story-9'>Council approves the new ferry timetable</a></h4>"
              "<p>The ferry will run every hour from May, the council said.</p></div>")
    html = f"<html><body>{NAV}<div class='a81b'><h1>Budget</h1>{sections}{teaser}{paragraphs(1)}</div></body></html>"
    text = native(html)
    assert all(f"Harbour ferry pass number {i}" in text for i in range(5)) and "Item 4." in text
    assert "Council approves" not in text


def test_teaser_cards_named_post_beside_a_short_article_do_not_replace_it():
    # A blog theme's related-post cards carry a post class; together they hold more text than a short
    # article whose lines are split by <br>. Taken as a thread, pruning empties them (each is a linked
    # title and a line): the article stands.
    body = "<br><br>".join(f"Line {i} of the short story. {SENT[:90]}" for i in range(4))
    cards = "".join(f"<div class='post-item'><div class='post-content'><h3><a href='/p{i}'>Another story "
                    f"number {i} on this blog</a></h3><a href='/p{i}'>Read this one too, about the "
                    f"harbour and the bridge {i}</a></div></div>" for i in range(7))
    html = (f"<html><head><title>Short story</title></head><body>{NAV}<div class='main'><h1>Short story</h1>"
            f"<div class='post-body'>{body}</div></div><div class='side'>{cards}</div></body></html>")
    text = native(html)
    assert "Line 0 of the short story." in text and "Line 3 of the short story." in text
    assert "Another story number" not in text


def test_the_one_long_comment_article_is_not_the_page_article():
    # Comments each in an <article> of their own class, nested in list items (not siblings), and
    # only one of them long: the page's article is elsewhere, in <div>s.
    comments = "".join(f"<li><article class='comment-body'><p>{'Thanks for this. ' * (40 if i == 2 else 3)}"
                       f"Comment {i}.</p></article></li>" for i in range(4))
    html = (f"<html><body>{NAV}<div class='entry'><h1>The budget</h1>{paragraphs(8)}</div>"
            f"<ol class='comment-list'>{comments}</ol></body></html>")
    for mode in ("native", "precise"):
        text = extract_html({"html": html, "mode": mode})["text"]
        assert "Paragraph 0." in text and "Paragraph 7." in text, mode
