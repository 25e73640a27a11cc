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
_ACCENTS = {"^": r"\hat", "¯": r"\bar", "ˉ": r"\bar", "→": r"\vec", "˙": r"\dot", "~": r"\tilde", "˜": r"\tilde"}


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


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
        return r"\sqrt{" + "".join(conv) + "}"
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
    return "".join(conv)


def _fence(ch: str) -> str:
    return {"{": r"\{", "}": r"\}", "": "."}.get(ch, ch)


def _tex_annotation(el) -> str | None:
    for ann in el.iter():
        if _local(ann.tag) == "annotation" and "tex" in (ann.get("encoding") or "").lower():
            return (ann.text or "").strip() or None
    return None


# ---- rewriting the tree ------------------------------------------------------------------------

_MATH_SCRIPT = re.compile(r"math/(tex|asciimath|mml)", re.I)


def _wrap(tex: str, display: bool) -> str:
    tex = tex.strip()
    return f"$${tex}$$" if display else f"${tex}$"


def _replace(el, text: str) -> None:
    """Replace `el` by `text`, keeping the tail that follows it."""
    parent = el.getparent()
    if parent is None:
        return
    text = text + (el.tail or "")
    prev = el.getprevious()
    if prev is not None:
        prev.tail = (prev.tail or "") + text
    else:
        parent.text = (parent.text or "") + text
    parent.remove(el)


def _asciimath_to_tex(src: str) -> str:
    # Only the forms that differ most from TeX; AsciiMath is otherwise close to TeX for simple input.
    out = re.sub(r"\bsqrt\s*\(([^()]*)\)", r"\\sqrt{\1}", src)
    out = re.sub(r"\(([^()]*)\)\s*/\s*\(([^()]*)\)", r"\\frac{\1}{\2}", out)
    for a, b in (("<=", r"\leq "), (">=", r"\geq "), ("!=", r"\neq "), ("->", r"\to "), ("oo", r"\infty ")):
        out = out.replace(a, b)
    return out


def rewrite_math(root) -> int:
    """Turn every formula under `root` into `$tex$` / `$$tex$$` text; returns how many were found."""
    count = 0
    # Rendered copies that sit beside a source we read: drop them first so the text is not doubled.
    for el in root.xpath(
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' MathJax_Preview ')"
        " or contains(concat(' ', normalize-space(@class), ' '), ' MathJax ')"
        " or contains(concat(' ', normalize-space(@class), ' '), ' MathJax_Display ')"
        " or contains(concat(' ', normalize-space(@class), ' '), ' MathJax_SVG ')"
        " or contains(concat(' ', normalize-space(@class), ' '), ' katex-html ')]"
    ):
        if el.getparent() is not None:
            _replace(el, "")
    for el in root.xpath("//script[@type]"):
        typ = el.get("type") or ""
        if not _MATH_SCRIPT.search(typ):
            continue
        src = (el.text or "").strip()
        if src in ("\\begingroup", "\\endgroup"):  # StackExchange's per-post MathJax scoping, not math
            _replace(el, "")
            continue
        display = "display" in typ.lower()
        if "asciimath" in typ.lower():
            src = _asciimath_to_tex(src)
        elif "mml" in typ.lower():
            try:
                src = mathml_to_latex(etree.fromstring(src.encode()))
            except etree.XMLSyntaxError:
                pass
        _replace(el, _wrap(src, display) if src else "")
        count += 1
    # KaTeX: <span class="katex"> holds <span class="katex-mathml"><math>…<annotation>.
    for el in root.xpath("//*[contains(concat(' ', normalize-space(@class), ' '), ' katex ')]"):
        if el.getparent() is None:
            continue
        parent = el.getparent()
        display = "katex-display" in (parent.get("class") or "")
        tex = _tex_annotation(el)
        if tex is None:
            maths = [m for m in el.iter() if _local(m.tag) == "math"]
            tex = mathml_to_latex(maths[0]) if maths else None
        if tex:
            _replace(el, _wrap(tex, display))
            count += 1
    # MathJax 3 containers keep MathML in an assistive copy; raw MathML anywhere else.
    for el in root.xpath("//mjx-container"):
        maths = [m for m in el.iter() if _local(m.tag) == "math"]
        if maths:
            display = el.get("display") == "true"
            _replace(el, _wrap(_tex_annotation(maths[0]) or mathml_to_latex(maths[0]), display))
            count += 1
    for el in root.xpath("//*[local-name()='math']"):
        if el.getparent() is None:
            continue
        display = (el.get("display") or el.get("mode") or "") in ("block", "display")
        tex = _tex_annotation(el) or mathml_to_latex(el)
        _replace(el, _wrap(tex, display) if tex.strip() else "")
        count += 1
    # Wikipedia and many blogs: formula images whose alt text is the TeX source.
    for el in root.xpath("//img[contains(@class, 'math') or contains(@class, 'latex') or contains(@class, 'tex')][@alt]"):
        alt = el.get("alt").strip()
        if alt:
            alt = alt[1:-1] if alt.startswith("$") and alt.endswith("$") and len(alt) > 1 else alt
            display = "display" in (el.get("class") or "") or "block" in (el.get("class") or "")
            _replace(el, _wrap(alt.strip("$ "), display))
            count += 1
    return count


_DISPLAY_BRACKETS = re.compile(r"\\\[(.+?)\\\]", re.S)
_INLINE_PARENS = re.compile(r"\\\((.+?)\\\)", re.S)


def normalize_tex_delimiters(text: str) -> tuple[str, int]:
    """`\\[..\\]` → `$$..$$` and `\\(..\\)` → `$..$` in extracted text; returns (text, count)."""
    text, n1 = _DISPLAY_BRACKETS.subn(lambda m: "$$" + m.group(1).strip() + "$$", text)
    text, n2 = _INLINE_PARENS.subn(lambda m: "$" + m.group(1).strip() + "$", text)
    return text, n1 + n2
