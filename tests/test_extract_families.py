"""Math and code in the shapes real sites print them (issue #10's failure families), on pages built
here: each test would fail on the extractor before the fix it covers."""
import re

import pytest

from assay.extractors.html import extract_html
from assay.extractors.math import looks_like_tex, mathml_to_latex

FILL = "This paragraph has enough ordinary words in it to look like the main content of an article. " * 2
NAV = "<nav><a href='/'>Home</a> <a href='/a'>About</a></nav>"
FOOT = "<footer>Copyright 2024 Example. All rights reserved.</footer>"


def page(body: str, wrap: str = "article") -> str:
    return (f"<html><head><title>t</title></head><body>{NAV}<div id='sidebar'><a href='/x'>Related link</a></div>"
            f"<{wrap}><h1>Notes</h1><p>{FILL}</p>{body}<p>Closing words. {FILL}</p></{wrap}>{FOOT}</body></html>")


def text_of(html: str, mode: str = "precise") -> str:
    return extract_html({"html": html, "mode": mode})["text"]


# ---- MediaWiki ---------------------------------------------------------------------------------

def _mw(tex: str, display: bool = False, annotation: bool = True) -> str:
    kind = "display" if display else "inline"
    alt = "{\\displaystyle " + tex + "}"
    sem = (f"<semantics><mrow><mi>x</mi></mrow><annotation encoding='application/x-tex'>{alt}</annotation></semantics>"
           if annotation else "<mrow><mi>x</mi></mrow>")
    return (f"<span class='mwe-math-element'><span class='mwe-math-mathml-{kind} mwe-math-mathml-a11y' "
            f"style='display: none;'><math xmlns='http://www.w3.org/1998/Math/MathML' alttext='{alt}'>{sem}</math>"
            f"</span><img src='https://wikimedia.org/api/rest_v1/media/math/render/svg/0ab1' class='mwe-math-fallback-image-{kind}"
            f" mw-invert' aria-hidden='true' alt='{alt}'></span>")


@pytest.mark.parametrize("annotation", [True, False], ids=["annotation", "alttext-only"])
def test_mediawiki_math_in_body_sections(annotation):
    mean, x = _mw("\\mu =\\operatorname {E} [X]", annotation=annotation), _mw("X", annotation=annotation)
    body = "".join(
        f"<div class='mw-heading mw-heading2'><h2 id='s{i}'>Section {i}</h2><span class='mw-editsection'>[edit]</span></div>"
        f"<p>The expected value of the squared deviation from the mean of {x}, {mean}: {FILL}</p>"
        f"<dl><dd>{_mw('SIGMA_' + str(i), display=True, annotation=annotation)}</dd></dl>" for i in range(4))
    body = body.replace("SIGMA_", "\\sigma ^{2}_")
    html = page(f"<div class='mw-parser-output'>{body}</div>", wrap="main")
    text = text_of(html)
    assert text.count("{\\displaystyle X}") == 4  # once per section: no hidden-span loss, no fallback copy
    assert "mean of ${\\displaystyle X}$, ${\\displaystyle \\mu =\\operatorname {E} [X]}$:" in text
    for i in range(4):
        assert "$${\\displaystyle \\sigma ^{2}_" + str(i) + "}$$" in text


# ---- formula images ----------------------------------------------------------------------------

@pytest.mark.parametrize("img, tex", [
    ("<img src='/cgi-bin/mimetex.cgi?x^2+y^2=z^2'>", "x^2+y^2=z^2"),  # TeX as the raw query, '+' is a plus
    ("<img src='https://www.forkosh.com/mathtex.cgi?%5Cfrac%7Ba%7D%7Bb%7D'>", "\\frac{a}{b}"),
    ("<img src='https://latex.codecogs.com/svg.image?\\dpi{110}&space;\\sum_{i=1}^n&space;i'>", "\\sum_{i=1}^n i"),
    ("<img src='https://s0.wp.com/latex.php?latex=a%2Bb+%3D+c&bg=ffffff&fg=000000&s=0' class='latex'>", "a+b = c"),
    ("<img src='/ql-cache/quicklatex.com-0a1b_l3.png' class='ql-img-inline-formula' alt='&#92;&#115;&#113;&#114;&#116;&#123;2&#125;'>",
     "\\sqrt{2}"),
    ('<img src="/images/eq1.png" alt="$E = mc^2$">', "E = mc^2"),
    ('<img src="/images/eq2.png" alt="\\alpha^2">', "\\alpha^2"),
    ("<img src='https://latex.codecogs.com/png.latex?%5Ctextstyle%20a_i%5E2' alt='a_i^2' title='a_i^2' class='math inline'>",
     "a_i^2"),
])
def test_formula_images_give_their_tex(img, tex):
    text = text_of(page(f"<p>We have {img} as shown. {FILL}</p>"))
    assert f"${tex}$" in text


def test_ordinary_images_are_not_formulas():
    text = text_of(page(f"<p>Look <img src='/cat.png' alt='Revenue = profit + costs chart'> here. {FILL}</p>"))
    assert "$" not in text
    assert not looks_like_tex("A photo of the team at the finish line")
    assert looks_like_tex("\\alpha + \\beta") and looks_like_tex("x_i^2 + 1")


# ---- TeX as text in formula elements, MathJax 3, scripts ---------------------------------------

def test_bare_tex_in_math_elements():
    body = (f"<p>Pandoc --katex writes <span class='math inline'>a_i^2 + \\frac{{1}}{{2}}</span> bare. {FILL}</p>"
            "<p><span class='math display'>\\int_0^1 x\\,dx</span></p>"
            "<div class='math'>\n\\begin{equation*}\nb=-x^2+6x-2\n\\end{equation*}\n</div>"
            f"<div class='arithmatex'>\\[\nc \\neq 0\n\\]</div><p>{FILL}</p>")
    text = text_of(page(body))
    assert "$a_i^2 + \\frac{1}{2}$" in text and "$$\\int_0^1 x\\,dx$$" in text
    assert "b=-x^2+6x-2" in text and "\\begin{equation*}" in text  # a display <div> kept as a paragraph
    assert "$$c \\neq 0$$" in text


def test_mathjax3_container_and_escaped_script():
    mjx = ("<mjx-container class='MathJax' jax='CHTML' display='true'><mjx-math aria-hidden='true'><mjx-mi>"
           "<mjx-c class='mjx-c1D466'></mjx-c></mjx-mi></mjx-math><mjx-assistive-mml display='block'><math><mi>y</mi>"
           "<mo>=</mo><mi>a</mi><mi>cos</mi><mi>b</mi><mi>x</mi></math></mjx-assistive-mml></mjx-container>")
    body = f"<div>{mjx}</div><p>And <script type='math/tex'>b &gt; \\frac{{1}}{{2}}</script> holds. {FILL}</p>"
    text = text_of(page(body))
    assert "$$y=a\\cos bx$$" in text  # a command name is not glued to the letter after it
    assert "$b > \\frac{1}{2}$" in text


def test_mathml_overline_and_spacing():
    from lxml import etree

    mml = etree.fromstring("<math><mover><mrow><mi>A</mi><mi>B</mi></mrow><mo>_</mo></mover><mo>=</mo>"
                           "<mi>π</mi><mi>i</mi></math>")
    assert mathml_to_latex(mml) == "\\overline{AB}=\\pi i"


# ---- code blocks -------------------------------------------------------------------------------

CODE = 'def area(r):\n    """Blank lines stay."""\n\n    return 3.14 * r ** 2 < 10'
LINES = CODE.split("\n")


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _nbsp_br(code: str) -> str:
    return "<br />".join(_esc(line).replace("    ", "&nbsp;&nbsp;&nbsp;&nbsp;") for line in code.split("\n"))


CODE_SHAPES = {
    "pygments-table": (
        "<table class='highlighttable'><tr><td class='linenos'><div class='linenodiv'><pre><span class='normal'>1</span>\n"
        "<span class='normal'>2</span>\n<span class='normal'>3</span>\n<span class='normal'>4</span></pre></div></td>"
        f"<td class='code'><div class='highlight'><pre><span></span><span class='k'>def</span> {_esc(CODE[4:])}\n</pre></div>"
        "</td></tr></table>"),
    "pygments-inline-numbers": "<div class='highlight'><pre><span></span>" + "\n".join(
        f"<span class='linenos'>{i}</span>{_esc(line)}" for i, line in enumerate(LINES, 1)) + "\n</pre></div>",
    "pandoc-line-anchors": "<div class='sourceCode' id='cb1'><pre class='sourceCode python'><code class='sourceCode python'>" + "\n".join(
        f"<span id='cb1-{i}'><a href='#cb1-{i}' aria-hidden='true' tabindex='-1'></a>{_esc(line)}</span>"
        for i, line in enumerate(LINES, 1)) + "</code></pre></div>",
    "hljs-line-number-table": "<pre><code class='hljs language-python'><table class='hljs-ln'><tbody>" + "".join(
        f"<tr><td class='hljs-ln-line hljs-ln-numbers' data-line-number='{i}'><div class='hljs-ln-n' data-line-number='{i}'>"
        f"</div></td><td class='hljs-ln-line hljs-ln-code'>{_esc(line)}</td></tr>" for i, line in enumerate(LINES, 1))
        + "</tbody></table></code></pre>",
    "gist-table": "<div class='gist'><table class='highlight tab-size js-file-line-container'>" + "".join(
        f"<tr><td id='L{i}' class='blob-num js-line-number' data-line-number='{i}'></td>"
        f"<td id='LC{i}' class='blob-code blob-code-inner js-file-line'>{_esc(line)}</td></tr>" for i, line in enumerate(LINES, 1))
        + "</table></div>",
    "chroma-lntable": "<div class='highlight'><div class='chroma'><table class='lntable'><tr><td class='lntd'><pre class='chroma'><code>"
        + "".join(f"<span class='lnt'>{i}\n</span>" for i in range(1, len(LINES) + 1))
        + "</code></pre></td><td class='lntd'><pre class='chroma'><code class='language-python'>"
        + "".join(f"<span class='line'><span class='cl'>{_esc(line)}\n</span></span>" for line in LINES)
        + "</code></pre></td></tr></table></div></div>",
    "phpbb-codebox-br": f"<dl class='codebox'><dt>Code: <a href='#'>Select all</a></dt><dd><code>{_nbsp_br(CODE)}</code></dd></dl>",
    "smf-code-br": f"<div class='codeheader'>Code</div><code class='bbc_code'>{_nbsp_br(CODE)}</code>",
    "w3-div-br": f"<div class='w3-example'><div class='w3-code notranslate pythonHigh'>{_nbsp_br(CODE)}</div></div>",
    "textarea": f"<div class='codeblock'><textarea name='code' class='python' rows='4' readonly>{_esc(CODE)}</textarea></div>",
    # Telerik/RadEditor forum posts: a div per line, no-break spaces for the indentation, no <pre>
    "div-per-line": "<div class='reCodeBlock'><div class='container'>" + "".join(
        "<div class='line'><code class='python plain'>" + (re.sub(r"^ +", lambda m: "&nbsp;" * len(m.group()), _esc(line))
                                                          or "&nbsp;") + "</code></div>" for line in LINES) + "</div></div>",
}


@pytest.mark.parametrize("shape", sorted(CODE_SHAPES))
def test_code_shapes_come_back_line_for_line(shape):
    html = page(f"<p>The function: {FILL}</p>{CODE_SHAPES[shape]}<p>After the block. {FILL}</p>")
    for mode in ("precise", "fast", "native"):
        text = text_of(html, mode)
        assert "\n" + CODE + "\n```" in text, (shape, mode)
        assert "After the block." in text


def test_forum_post_in_blockquote_and_layout_table():
    post = (f"<blockquote class='postcontent restore'>I tried this:<br /><pre class='bbcode_code'>{_esc(CODE)}</pre>"
            "and it failed.</blockquote>")
    html = (f"<html><body>{NAV}<table width='100%'><tr><td class='left'><a href='/f'>Forums</a></td><td class='main'>"
            f"<h1>Help with area</h1><p>{FILL}</p>{post}<p>{FILL}</p></td></tr></table>{FOOT}</body></html>")
    text = text_of(html)
    assert "```\n" + CODE + "\n```" in text  # no "> " before each line, no table row joining the lines
    assert "I tried this:" in text and "| " not in text


def test_data_tables_stay_tables():
    html = page("<table class='code-list'><tr><th>code</th><th>meaning</th></tr><tr><td>200</td><td>OK</td></tr>"
                "<tr><td>404</td><td>Not found</td></tr></table>")
    text = text_of(html)
    assert "| code | meaning |" in text and "| 404 | Not found |" in text


def test_every_post_of_a_thread_whose_posts_mark_their_body_again():
    """vBulletin: each post container holds `div.postcontent`, the class an extractor takes for the
    article body; it must not pick the first post's body and drop the rest."""
    posts = "".join(
        f"<li class='postbitlegacy postcontainer' id='post_{i}'><div class='posthead'>01-0{i + 1}-2014</div>"
        f"<div class='postdetails'><div class='userinfo'><a href='/member/{i}'>user{i}</a></div>"
        f"<div class='postbody'><div class='postrow'><h2 class='title icon'>Re: help</h2><div class='content'>"
        f"<div id='post_message_{i}'><blockquote class='postcontent restore'>Reply number {i} says this.<br /><br />"
        f"{FILL}<br /><pre class='bbcode_code'>{_esc(CODE.replace('area', f'area{i}'))}</pre>Thanks.</blockquote>"
        f"</div></div></div><div class='signature'>Sent from my phone</div></div></div></li>"
        for i in range(4))
    html = (f"<html><body>{NAV}<h1>Help with area</h1><ol id='posts' class='posts'>{posts}</ol>{FOOT}</body></html>")
    for mode in ("precise", "fast", "native"):
        text = text_of(html, mode)
        for i in range(4):
            assert f"Reply number {i} says this." in text, (mode, i)
            assert CODE.replace("area", f"area{i}") in text, (mode, i)
