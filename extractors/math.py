"""Math in HTML → LaTeX text, rewritten in the lxml tree before main-content extraction.

Extractors lose math because it lives where they do not look: in `<script type="math/tex">` (dropped
as script), in MathML (no text nodes worth keeping), or rendered twice by KaTeX/MathJax (HTML glyphs
plus a hidden TeX source). `rewrite_math` replaces every formula element by one text node, `$tex$`
inline or `$$tex$$` display, so whatever extractor runs next sees ordinary paragraph text.
MathJax delimiters written as page text (`\\(..\\)`, `\\[..\\]`) are normalised on the output text by
`normalize_tex_delimiters`.
"""
from __future__ import annotations

import re

from lxml import etree

from .asciimath import asciimath_to_tex

# ---- MathML → LaTeX ----------------------------------------------------------------------------

_MO = {
    "×": r"\times", "·": r"\cdot", "⋅": r"\cdot", "−": "-", "±": r"\pm", "∓": r"\mp", "÷": r"\div",
    "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "≈": r"\approx", "≡": r"\equiv", "∼": r"\sim",
    "→": r"\to", "←": r"\leftarrow", "⇒": r"\Rightarrow", "⇔": r"\Leftrightarrow", "↦": r"\mapsto",
    "∞": r"\infty", "∈": r"\in", "∉": r"\notin", "⊂": r"\subset", "⊆": r"\subseteq", "∪": r"\cup",
    "∩": r"\cap", "∑": r"\sum", "∏": r"\prod", "∫": r"\int", "∮": r"\oint", "∂": r"\partial",
    "∇": r"\nabla", "∀": r"\forall", "∃": r"\exists", "¬": r"\neg", "∧": r"\wedge", "∨": r"\vee",
    "…": r"\ldots", "⋯": r"\cdots", "∘": r"\circ", "′": "'", "⁡": "", "⁢": "", "⁣": ",", "{": r"\{",
    "}": r"\}", "∅": r"\emptyset", "√": r"\surd", "⟨": r"\langle", "⟩": r"\rangle", "‖": r"\|",
}
_MI = {
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\epsilon", "ϵ": r"\epsilon",
    "ζ": r"\zeta", "η": r"\eta", "θ": r"\theta", "ι": r"\iota", "κ": r"\kappa", "λ": r"\lambda",
    "μ": r"\mu", "ν": r"\nu", "ξ": r"\xi", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau",
    "υ": r"\upsilon", "φ": r"\phi", "ϕ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega",
    "Γ": r"\Gamma", "Δ": r"\Delta", "Θ": r"\Theta", "Λ": r"\Lambda", "Ξ": r"\Xi", "Π": r"\Pi",
    "Σ": r"\Sigma", "Φ": r"\Phi", "Ψ": r"\Psi", "Ω": r"\Omega", "ℝ": r"\mathbb{R}", "ℕ": r"\mathbb{N}",
    "ℤ": r"\mathbb{Z}", "ℚ": r"\mathbb{Q}", "ℂ": r"\mathbb{C}", "ℓ": r"\ell", "∞": r"\infty",
}
_FUNCS = {"sin", "cos", "tan", "log", "ln", "exp", "lim", "max", "min", "det", "sup", "inf", "arg"}
_ACCENTS = {"^": r"\hat", "ˆ": r"\hat", "ˉ": r"\bar", "→": r"\vec", "⃗": r"\vec", "˙": r"\dot", "~": r"\tilde",
            "˜": r"\tilde", "¯": r"\overline", "_": r"\overline", "‾": r"\overline", "―": r"\overline",
            "⏞": r"\overbrace"}


_LOCAL_NAMES: dict = {}  # tag -> its local name: pages repeat a few tags (68,000 asks on 603 pages)


def _local(tag) -> str:
    name = _LOCAL_NAMES.get(tag)
    if name is None:
        name = tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""
        if len(_LOCAL_NAMES) < 10_000:
            _LOCAL_NAMES[tag] = name
    return name


def _kids(el) -> list:
    return [c for c in el if isinstance(c.tag, str)]


_COMMAND = re.compile(r"^\\[A-Za-z]+ ?$")


def _group(s: str) -> str:
    if _COMMAND.match(s):
        return s.rstrip()  # \alpha, \sum: one token already
    return s if len(s) == 1 or (s.startswith("{") and s.endswith("}")) else "{" + s + "}"


def _token(el, table: dict[str, str]) -> str:
    text = (el.text or "").strip()
    if text in _FUNCS:
        return "\\" + text
    out = "".join(table.get(ch, ch) for ch in text)
    if _local(el.tag) == "mi" and len(text) > 1 and out == text:
        return r"\mathrm{" + text + "}"
    return out


def mathml_to_latex(el) -> str:
    """Convert a MathML element (lxml) to LaTeX; unknown elements fall back to their children."""
    tag = _local(el.tag)
    kids = _kids(el)
    conv = [mathml_to_latex(k) for k in kids]
    if tag in ("mi", "mn"):
        return _token(el, _MI)
    if tag == "mo":
        tok = _token(el, _MO)
        return tok + " " if tok.startswith("\\") and tok[-1].isalpha() else tok
    if tag == "mtext":
        text = (el.text or "").strip()
        return r"\text{" + text + "}" if text else " "
    if tag == "mspace":
        return r"\ "
    if tag == "msup" and len(conv) >= 2:
        return _group(conv[0]) + "^" + _group(conv[1])
    if tag == "msub" and len(conv) >= 2:
        return _group(conv[0]) + "_" + _group(conv[1])
    if tag == "msubsup" and len(conv) >= 3:
        return _group(conv[0]) + "_" + _group(conv[1]) + "^" + _group(conv[2])
    if tag == "munderover" and len(conv) >= 3:
        return conv[0] + "_" + _group(conv[1]) + "^" + _group(conv[2])
    if tag == "munder" and len(conv) >= 2:
        return conv[0] + "_" + _group(conv[1])
    if tag == "mover" and len(conv) >= 2:
        accent = _ACCENTS.get((kids[1].text or "").strip())
        return accent + "{" + conv[0] + "}" if accent else r"\overset{" + conv[1] + "}{" + conv[0] + "}"
    if tag == "mfrac" and len(conv) >= 2:
        return r"\frac{" + conv[0] + "}{" + conv[1] + "}"
    if tag == "msqrt":
        return r"\sqrt{" + _join(conv) + "}"
    if tag == "mroot" and len(conv) >= 2:
        return r"\sqrt[" + conv[1] + "]{" + conv[0] + "}"
    if tag == "mfenced":
        open_, close = el.get("open", "("), el.get("close", ")")
        sep = el.get("separators", ",")[:1] or ","
        return r"\left" + _fence(open_) + sep.join(conv) + r"\right" + _fence(close)
    if tag == "mtable":
        rows = [" & ".join(mathml_to_latex(c) for c in _kids(r)) for r in kids]
        return r"\begin{matrix}" + r" \\ ".join(rows) + r"\end{matrix}"
    if tag == "semantics":
        return conv[0] if conv else ""
    if tag in ("annotation", "annotation-xml"):
        return ""
    return _join(conv)


_ENDS_COMMAND = re.compile(r"\\[A-Za-z]+$")


def _join(parts: list[str]) -> str:
    """Concatenate converted pieces; a space after a command name that a letter follows (`\\pi i`,
    not `\\pii`)."""
    out = ""
    for part in parts:
        if out and part[:1].isalpha() and _ENDS_COMMAND.search(out):
            out += " "
        out += part
    return out


def _fence(ch: str) -> str:
    return {"{": r"\{", "}": r"\}", "": "."}.get(ch, ch)


def _tex_annotation(el) -> str | None:
    for ann in el.iter():
        if _local(ann.tag) == "annotation" and "tex" in (ann.get("encoding") or "").lower():
            return (ann.text or "").strip() or None
    return None


# ---- rewriting the tree ------------------------------------------------------------------------

_MATH_SCRIPT = re.compile(r"math/(tex|asciimath|mml)", re.I)
# Class names of the elements sites wrap one formula in (MediaWiki's mwe-math-element, KaTeX's
# katex-display, Pandoc's/Sphinx's span.math, arithmatex, MathJax's containers, ...).
_MATHY_CLASS = re.compile(r"math|katex|latex|\btex\b|mjx|formula|equation|arithmatex|wp-katex", re.I)
# Elements in which a formula is part of running text; anywhere else a display formula gets its own
# paragraph, since extractors skip bare text sitting in a <div> between blocks.
_INLINE_PARENTS = {"p", "span", "a", "em", "strong", "b", "i", "u", "font", "label", "small", "sup", "sub",
                   "li", "td", "th", "dd", "dt", "h1", "h2", "h3", "h4", "h5", "h6", "code", "blockquote",
                   "figcaption", "caption", "center", "q", "cite", "mark", "abbr", "big", "tt"}


def _wrap(tex: str, display: bool) -> str:
    tex = tex.strip()
    return f"$${tex}$$" if display else f"${tex}$"


def _drop(el) -> None:
    """Remove `el` but keep the text that follows it (lxml's remove() takes the tail with it)."""
    _replace(el, "")


def _replace(el, text: str, display: bool = False) -> None:
    """Replace `el` by `text`, keeping the tail that follows it. A display formula outside running
    text becomes a paragraph of its own."""
    parent = el.getparent()
    if parent is None:
        return
    if display and text and parent.tag not in _INLINE_PARENTS:
        para = el.makeelement("p", {})
        para.text, para.tail = text, el.tail
        parent.replace(el, para)
        return
    text = text + (el.tail or "")
    prev = el.getprevious()
    if prev is not None:
        prev.tail = (prev.tail or "") + text
    else:
        parent.text = (parent.text or "") + text
    parent.remove(el)


def _outer(el):
    """The outermost wrapper that holds nothing but this formula: a math-classed or hidden span/div
    whose other content is rendered copies or fallback images (no text of its own). Replacing the
    wrapper rather than the formula keeps the TeX out of hidden elements (MediaWiki hides its MathML
    in a `display: none` span) and drops the fallback image with it."""
    own = "".join(el.itertext()) if isinstance(el.tag, str) else ""
    node = el
    for _ in range(4):
        parent = node.getparent()
        if parent is None or parent.tag not in ("span", "div", "figure", "center") and not parent.tag.startswith("mjx"):
            break
        marks = (parent.get("class") or "") + " " + (parent.get("style") or "").replace(" ", "")
        if not (_MATHY_CLASS.search(marks) or "display:none" in marks):
            break
        if len("".join(parent.itertext()).strip()) > len(own.strip()) + 2 and not _only_renderings(parent, node):
            break
        node = parent
    return node


def _only_renderings(parent, keep) -> bool:
    """Everything in `parent` besides `keep` is a rendered copy or image of the same formula."""
    if (parent.text or "").strip():
        return False
    for child in parent:
        if child is keep:
            continue
        if (child.tail or "").strip():
            return False
        cls = child.get("class") or "" if isinstance(child.tag, str) else ""
        if child.tag in ("img", "svg") or _MATHY_CLASS.search(cls) or child.get("aria-hidden") == "true":
            continue
        if "".join(child.itertext()).strip():
            return False
    return True


# Class names of the rendered copies that MathJax 2 and KaTeX put beside the source they render.
_RENDERED_COPIES = frozenset((
    "MathJax_Preview", "MathJax", "MathJax_Display", "MathJax_SVG", "MathJax_SVG_Display", "MathJax_CHTML",
    "MathJax_PHTML", "MathJax_MathML", "MJXc-display", "katex-html"))


_KATEX = frozenset(("katex",))


def _with_class(root, names: frozenset) -> list:
    """Elements with one of `names` among their class tokens, in document order. A Python walk that
    reads each class once: faster than XPath's concat/normalize-space idiom per name (1.4x for one
    name, 10x for the ten rendered-copy names)."""
    return [el for el in root.iter("*") if (cls := el.get("class")) and not names.isdisjoint(cls.split())]


def _holds_mathml(el) -> bool:
    return any(_local(d.tag) == "math" for d in el.iterdescendants("*"))


def _is_display(el) -> bool:
    marks = " ".join(filter(None, (el.get("display"), el.get("mode"), el.get("class"))))
    parent = el.getparent()
    if parent is not None:
        marks += " " + (parent.get("class") or "")
    return bool(re.search(r"\b(block|display)\b|katex-display|math-display|MathJax_Display|equation", marks))


# Which pass can find anything, by substrings of the raw page (C-speed scans; each pass walks the
# whole tree, and most pages have no formula at all).
_PASS_MARKERS = {
    "script": ("math/",),
    # MathJax reading AsciiMath between backticks: MathJax 3's input/asciimath, MathJax 2's AM_*
    # configurations (their CDN paths say "mathjax", which the gate finds).
    "asciimath": ("asciimath", "AM_"),
    "katex": ("katex",),
    "mjx": ("<mjx-",),
    "mathml": ("<math", "<MATH", ":math"),
}


# One gate before the per-pass tests: a page without formulas (most pages) pays for these few scans
# only (each scan of a 200 KB page costs about as much as an XPath walk of its tree). Every TeX
# renderer's image URL or class carries one of them too (codecogs and WordPress: "latex", mathTeX
# and texvc's /math/: "math"); an image whose only hint is TeX in a single-quoted alt text on a page
# with no other formula markup is the case this gate gives up.
_GATE = ("math", "katex", "mjx-", "latex", "mimetex", "MATH", 'alt="$', 'alt="\\')


_GATE_BYTES = tuple(m.encode() for m in _GATE)
_PASS_MARKERS_BYTES = {name: tuple(m.encode() for m in markers) for name, markers in _PASS_MARKERS.items()}
# Every marker, gate's and passes', in one automaton: one pass over the page answers both questions.
_MARKERS = tuple(dict.fromkeys(_GATE + tuple(m for markers in _PASS_MARKERS.values() for m in markers)))
_GATE_IDS = frozenset(i for i, m in enumerate(_MARKERS) if m in _GATE)
_PASS_OF = {i: name for name, markers in _PASS_MARKERS.items() for i, m in enumerate(_MARKERS) if m in markers}


def _joined(markers: tuple[str, ...]) -> tuple[str, ...]:
    """`markers` and, for each two where one's end is the other's start ("asciimath" and "math/"), the
    two written over one another ("asciimath/"): in a leftmost-longest search, an occurrence of a
    marker is then either reported or inside a reported one (checked below)."""
    joined = [a + b[k:] for a in markers for b in markers if a != b
              for k in range(1, min(len(a), len(b))) if a[-k:] == b[:k]]
    return tuple(dict.fromkeys(markers + tuple(joined)))


def _overlaps(patterns) -> bool:
    """Whether two patterns overlap without their joined form among the patterns."""
    return any(a[-k:] == b[:k] and a + b[k:] not in patterns
               for a in patterns for b in patterns if a != b for k in range(1, min(len(a), len(b))))


# One pass of a SIMD multi-pattern search. Leftmost-longest, not overlapping: the Teddy prefilter runs
# only then (0.034 ms a page on the AEB pages, against 0.30 for the standard automaton's overlapping
# search, which reports every occurrence of every marker; 1.4 for 15 substring scans). A reported
# pattern stands for every marker inside it (`_INSIDE`).
_PATTERNS = _joined(_MARKERS)
_INSIDE = tuple(frozenset(i for i, m in enumerate(_MARKERS) if m in pattern) for pattern in _PATTERNS)
if _overlaps(_PATTERNS):  # one more level of joining would be needed for the markers as edited
    raise AssertionError("math markers overlap beyond _joined's one level")
try:
    import ahocorasick_rs

    _GATE_SEARCH = ahocorasick_rs.BytesAhoCorasick(
        [m.encode() for m in _PATTERNS], matchkind=ahocorasick_rs.MatchKind.LeftmostLongest).find_matches_as_indexes
except ImportError:  # the same answer, slower
    _GATE_SEARCH = None


def math_passes(html: str | bytes) -> set[str]:
    """The rewrite passes worth running on this page (empty: no formula markup at all). `html`: the
    decoded page, or its bytes when they are UTF-8 or another ASCII-compatible encoding (the markers
    are ASCII: found in the bytes exactly where they are in the text)."""
    if _GATE_SEARCH is None:
        return _math_passes_scans(html)
    if isinstance(html, str):
        html = html.encode("utf-8", "surrogatepass")  # 0.01 ms a page: the markers are ASCII
    hits = set().union(*[_INSIDE[i] for i in {i for i, _, _ in _GATE_SEARCH(html)}])
    if hits.isdisjoint(_GATE_IDS):
        return set()
    # Images and bare TeX in classed elements: their markers are many and each scan of a big page
    # costs more than the passes' own XPath prefilters, so these two always run behind the gate.
    return {_PASS_OF[i] for i in hits if i in _PASS_OF} | {"img", "raw"}


def _math_passes_scans(html: str | bytes) -> set[str]:
    """`math_passes` by one substring scan per marker (without ahocorasick_rs)."""
    binary = isinstance(html, bytes)
    if not any(m in html for m in (_GATE_BYTES if binary else _GATE)):
        return set()
    found = {name for name, markers in (_PASS_MARKERS_BYTES if binary else _PASS_MARKERS).items()
             if any(m in html for m in markers)}
    return found | {"img", "raw"}


def rewrite_math(root, passes: set[str] | None = None) -> int:
    """Turn every formula under `root` into `$tex$` / `$$tex$$` text; returns how many were found.
    `passes` (from `math_passes`) skips the kinds of markup the page does not have."""
    run = set(_PASS_MARKERS) | {"img", "raw"} if passes is None else passes
    count = 0
    # Rendered copies that sit beside a source we read: drop them first so the text is not doubled.
    # MathJax 2 renders beside its <script type=math/tex>; KaTeX beside its MathML.
    if "script" in run and root.xpath("boolean(//script[contains(@type, 'math/')])") or "katex" in run and "katex-html" in _classes(root):
        copies = [el for el in _with_class(root, _RENDERED_COPIES) if el.tag != "mjx-container" and not _holds_mathml(el)]
        for el in copies:  # a copy holding MathML (MathJax 3's assistive copy) is a source
            if el.getparent() is not None:
                _drop(el)
    for el in root.xpath("//script[contains(@type, 'math')]") if "script" in run else ():
        typ = el.get("type") or ""
        if not _MATH_SCRIPT.search(typ):
            continue
        src = (el.text or "").strip()
        if "&" in src and ";" in src:
            from html import unescape

            src = unescape(src)  # script text is not entity-decoded by the parser; `&lt;` here means <
        if src in ("\\begingroup", "\\endgroup"):  # StackExchange's per-post MathJax scoping, not math
            _drop(el)
            continue
        display = "display" in typ.lower()
        if "asciimath" in typ.lower():
            src = asciimath_to_tex(src)
        elif "mml" in typ.lower():
            try:
                src = mathml_to_latex(etree.fromstring(src.encode()))
            except etree.XMLSyntaxError:
                pass
        _replace(_outer(el), _wrap(src, display) if src else "", display)
        count += 1
    # KaTeX: <span class="katex"> holds <span class="katex-mathml"><math>…<annotation>.
    for el in _with_class(root, _KATEX) if "katex" in run else ():
        if el.getparent() is None:
            continue
        display = "katex-display" in (el.getparent().get("class") or "")
        tex = _tex_annotation(el)
        if tex is None:
            maths = [m for m in el.iter() if _local(m.tag) == "math"]
            tex = _math_tex(maths[0]) if maths else None
        if tex:
            _replace(_outer(el), _wrap(tex, display), display)
            count += 1
    # MathJax 3 containers keep MathML in an assistive copy; raw MathML anywhere else.
    for el in root.xpath("//mjx-container") if "mjx" in run else ():
        maths = [m for m in el.iter() if _local(m.tag) == "math"]
        if maths:
            display = el.get("display") == "true" or maths[0].get("display") == "block"
            _replace(_outer(el), _wrap(_math_tex(maths[0]), display), display)
            count += 1
    for el in root.xpath("//*[local-name()='math']") if run & {"mathml", "katex", "mjx"} else ():
        if el.getparent() is None:
            continue
        display = _is_display(el)
        tex = _math_tex(el)
        _replace(_outer(el), _wrap(tex, display) if tex.strip() else "", display)
        count += 1
    if "asciimath" in run:
        count += _rewrite_backticks(root)
    if "img" in run:
        count += _rewrite_images(root)
    if "raw" in run:
        count += _rewrite_raw_tex(root)
    return count


def _classes(root) -> str:
    return " ".join(root.xpath("//@class[contains(., 'katex')]"))


def _math_tex(el) -> str:
    """TeX of a MathML element: its TeX annotation, else its alttext (MediaWiki states the TeX there),
    else a conversion of the MathML."""
    tex = _tex_annotation(el)
    if tex:
        return tex
    alt = (el.get("alttext") or "").strip()
    if alt and looks_like_tex(alt):
        return alt
    return mathml_to_latex(el)


# ---- AsciiMath between backticks -----------------------------------------------------------------

_BACKTICKS = re.compile(r"`([^`]+)`")
_LITERAL = frozenset(("code", "pre", "kbd", "samp", "tt", "script", "style", "textarea"))


def _rewrite_backticks(root) -> int:
    """On a page whose MathJax reads AsciiMath, `` `...` `` in running text is a formula (MathJax's
    default AsciiMath delimiter): each becomes `$tex$`. Not inside code, where backticks are code."""
    count = 0

    def convert(text: str) -> str:
        nonlocal count

        def one(m) -> str:
            nonlocal count
            count += 1
            return _wrap(asciimath_to_tex(m.group(1)), False)

        return _BACKTICKS.sub(one, text)

    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        if el.text and "`" in el.text and not _in_literal(el):
            el.text = convert(el.text)
        if el.tail and "`" in el.tail and (el.getparent() is None or not _in_literal(el.getparent())):
            el.tail = convert(el.tail)
    return count


def _in_literal(el) -> bool:
    return el.tag in _LITERAL or any(a.tag in _LITERAL for a in el.iterancestors())


# ---- formula images ----------------------------------------------------------------------------

# Server-side TeX renderers and where each keeps the TeX in the image URL: the whole query string
# (mimeTeX, mathTeX, CodeCogs), a query parameter (WordPress latex.php, Google Chart's chl), or the
# path after a prefix (upmath, CodeCogs' /svg.image?...).
_TEX_URL = re.compile(
    r"(?:mimetex|mathtex|mathcgi|cgi-bin/(?:math)?tex)[\w.-]*\.(?:cgi|exe|php)\?(?P<query>.+)"
    r"|codecogs\.com/[\w.]*(?:latex|image|gif|png|svg)[\w.]*\?(?P<cogs>.+)"
    r"|[?&](?:latex|tex|chl|formula|eq|math)=(?P<param>[^&]+)"
    r"|(?:upmath\.me|latex\.[\w.-]+|tex\.[\w.-]+)/(?:svg|png|gif)/(?P<path>.+)", re.I)
# Renderer options that precede the formula in the URL: \dpi{110}, \bg_white, \inline, \large, ...
_URL_OPTIONS = re.compile(r"^(?:\s*(?:\\dpi\{\d+\}|\\bg_\w+|\\bg\{\w+\}|\\fg_\w+|\\inline|\\(?:tiny|small|normalsize"
                          r"|large|Large|LARGE|huge|Huge)\b|\\(?:fn|f)_\w+|\\(?:png|gif|svg)\b|\\(?:displaystyle|textstyle)\b"
                          r"|\\(?:phv|cm|jvn)\b)\s*)+")
_TEX_HINT = re.compile(r"\\[A-Za-z]+|[\^_]|\{.*\}|[=<>+\-*/]")
_GENERIC_ALT = re.compile(r"^(?:formula|equation|math|latex|tex|image|img|icon|logo|png|gif|svg|\d+)$", re.I)


def looks_like_tex(text: str) -> bool:
    """A short string that reads as a formula rather than words: a TeX command, a sub/superscript,
    braces or an operator, and not a sentence."""
    text = text.strip()
    if not text or len(text) > 2000 or _GENERIC_ALT.match(text):
        return False
    if re.search(r"\\[A-Za-z]+", text):
        return True
    words = re.findall(r"[A-Za-z]{4,}", text)
    return bool(_TEX_HINT.search(text)) and len(words) <= 2


def _tex_from_url(src: str) -> str | None:
    from html import unescape
    from urllib.parse import unquote, unquote_plus

    m = _TEX_URL.search(src)
    if not m:
        return None
    if m.group("param") is not None:
        tex = unquote_plus(m.group("param"))  # form encoding: '+' is a space, a plus is %2B
    else:
        tex = unquote(m.group("query") or m.group("cogs") or m.group("path") or "")
    # CodeCogs' editor writes spaces as &space; (an HTML entity inside the URL).
    tex = unescape(tex.replace("&space;", " ").replace("&plus;", "+"))
    tex = _URL_OPTIONS.sub("", tex).strip()
    return tex or None


# Candidate formula images (C-speed prefilter): a TeX-ish URL, class or alt text.
_IMG_XPATH = ("//img[contains(@src, 'tex') or contains(@src, 'math') or contains(@src, 'chl=') or contains(@src, 'cogs')"
              " or contains(@src, 'formula=') or contains(@src, 'eq=') or contains(@data-src, 'tex')"
              " or contains(@class, 'math') or contains(@class, 'tex') or contains(@class, 'formula')"
              " or contains(@class, 'equation') or contains(@alt, '\\') or starts-with(@alt, '$')"
              " or contains(@title, '\\')]")


def _rewrite_images(root) -> int:
    """Formula images: the TeX is in the URL of a known renderer, or in the alt/title text (MediaWiki
    fallback images, WordPress, QuickLaTeX, pandoc --webtex, Wikipedia's old texvc PNGs)."""
    count = 0
    for el in root.xpath(_IMG_XPATH):
        if el.getparent() is None:
            continue
        src = el.get("src") or el.get("data-src") or ""
        cls = el.get("class") or ""
        tex = _tex_from_url(src) if src else None
        alt = (el.get("alt") or el.get("title") or "").strip()
        mathy = bool(_MATHY_CLASS.search(cls)) or "quicklatex" in src or "/math/" in src or "/latex/" in src
        if alt.startswith("$") and alt.endswith("$") and len(alt) > 2:
            alt, mathy = alt.strip("$").strip(), True  # TeX delimiters in the alt text say it all
        if alt and looks_like_tex(alt) and (tex is not None or mathy or re.search(r"\\[A-Za-z]+", alt)):
            tex = alt  # the page's own text of the formula; the URL may carry renderer options
        if not tex:
            continue
        display = bool(re.search(r"display|block", cls)) or _alone_in_paragraph(el)
        _replace(_outer(el), _wrap(tex, display), display)
        count += 1
    return count


def _alone_in_paragraph(el) -> bool:
    parent = el.getparent()
    return (parent is not None and parent.tag in ("p", "div", "center", "dd") and len(parent) == 1
            and not (parent.text or "").strip() and not (el.tail or "").strip())


# ---- TeX written as text in a formula element --------------------------------------------------

_RAW_TEX_CLASS = re.compile("math|tex|equation")


def _rewrite_raw_tex(root) -> int:
    """Elements that hold bare TeX for a client-side renderer (Pandoc's --katex `span.math`, docutils'
    `div.math`, `span.arithmatex`, `<tex>`): wrapped in $ so the TeX is delimited like any other formula."""
    count = 0
    candidates = [el for el in root.iter("span", "div", "tex")
                  if el.tag == "tex" or _RAW_TEX_CLASS.search(el.get("class") or "")]
    for el in candidates:
        cls = el.get("class") or ""
        if el.tag != "tex" and not re.search(r"(?:^|\s)(?:math|tex|latex|arithmatex|equation)(?:$|\s)", cls):
            continue
        if len(el) or el.getparent() is None:
            continue  # rendered markup or already rewritten
        text = (el.text or "").strip()
        if not text:
            continue
        if re.match(r"^(?:\$|\\\(|\\\[)", text):
            # Delimited already (the text normaliser handles \( \[ and $); a display formula alone in
            # a <div> becomes a paragraph, which extractors keep.
            if el.tag == "div":
                el.tag = "p"
            continue
        if not looks_like_tex(text) and not re.match(r"^\\begin\{", text):
            continue
        display = el.tag == "div" or bool(re.search(r"display|block", cls))
        _replace(el, _wrap(text, display), display)
        count += 1
    return count


_DISPLAY_BRACKETS = re.compile(r"\\\[(.+?)\\\]", re.S)
_INLINE_PARENS = re.compile(r"\\\((.+?)\\\)", re.S)


def normalize_tex_delimiters(text: str) -> tuple[str, int]:
    """`\\[..\\]` → `$$..$$` and `\\(..\\)` → `$..$` in extracted text; returns (text, count)."""
    text, n1 = _DISPLAY_BRACKETS.subn(lambda m: "$$" + m.group(1).strip() + "$$", text)
    text, n2 = _INLINE_PARENS.subn(lambda m: "$" + m.group(1).strip() + "$", text)
    return text, n1 + n2
