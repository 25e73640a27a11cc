"""AsciiMath (MathJax's other input notation) → TeX, and pages that MathJax renders from it."""
import pytest

from assay.extractors.asciimath import asciimath_to_tex
from assay.extractors.html import extract_html


@pytest.mark.parametrize("src, tex", [
    ("E=mc^2", "E=mc^{2}"),
    ("(a+b)/(c+d)", "\\frac{a+b}{c+d}"),  # brackets around a fraction's parts only group
    ("sqrt(x^2+1)", "\\sqrt{x^{2}+1}"),
    ("root(3)(x)", "\\sqrt[3]{x}"),
    ("sum_(i=1)^n i^2", "\\sum_{i=1}^{n}i^{2}"),
    ("lim_(x->oo) 1/x = 0", "\\lim_{x\\to\\infty}\\frac{1}{x}=0"),
    ("alpha+beta <= gamma", "\\alpha+\\beta\\leq\\gamma"),
    ("sin(x)/x", "\\frac{\\sin\\left(x\\right)}{x}"),  # a function takes its bracketed argument along
    ('"area" = pi r^2', "\\text{area}=\\pi r^{2}"),
    ("a_(ij) xx b", "a_{ij}\\times b"),
    ("[a,b)", "\\left[a,b\\right)"),
])
def test_asciimath_to_tex(src, tex):
    assert asciimath_to_tex(src) == tex


@pytest.mark.parametrize("mode", ["precise", "native"])
def test_backticks_are_formulas_only_where_mathjax_reads_asciimath(mode):
    filler = "This sentence is here so that the paragraph reads as the main text of an article page. " * 2
    body = (f"<article><p>The energy is `E=mc^2` and the mean is `(sum_(i=1)^n x_i)/n`. {filler}</p>"
            f"<pre><code>a = `b`</code></pre><p>A saved page: <script type='math/asciimath'>sqrt(x)/2</script>. "
            f"{filler}</p></article>")
    mathjax2 = ("<html><head><script src='https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?"
                f"config=AM_CHTML'></script></head><body>{body}</body></html>")
    text = extract_html({"html": mathjax2, "mode": mode})["text"]
    assert "$E=mc^{2}$" in text and "$\\frac{\\sum_{i=1}^{n}x_{i}}{n}$" in text and "$\\frac{\\sqrt{x}}{2}$" in text
    assert "a = `b`" in text  # code keeps its backticks
    plain = extract_html({"html": f"<html><body>{body}</body></html>".replace("<script type='math/asciimath'>sqrt(x)/2</script>", ""),
                          "mode": mode})["text"]
    assert "`E=mc^2`" in plain  # no MathJax reading AsciiMath: backticks are text
