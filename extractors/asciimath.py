"""AsciiMath → TeX, for pages whose formulas MathJax renders from AsciiMath (`` `x^2/2` ``).

AsciiMath (asciimath.org) is the notation MathJax 2's `AM_*` configurations and MathJax 3's
`input/asciimath` read; a crawler sees the source between backticks, or in a
`<script type="math/asciimath">` once MathJax 2 has run. Its grammar is small:

    S ::= v | l E r | u S | b S S      simple: symbol, bracketed, unary (sqrt x), binary (root n x)
    I ::= S_S | S^S | S_S^S | S        sub- and superscripts
    E ::= I E | I/I E                  a sequence; `/` makes a fraction of its neighbours

and this is a direct recursive-descent reading of it with the symbol table of the reference
implementation (ASCIIMathML.js, which MathJax embeds): the longest symbol name wins, a bracket
around a fraction's, root's or script's argument is the grouping and is dropped, as the renderer
does. Unknown characters pass through unchanged. No Python package of it is kept up (the last
release of py-asciimath is from 2020), hence this module.
"""
from __future__ import annotations

import re

_GREEK = ("alpha beta gamma Gamma delta Delta epsilon varepsilon zeta eta theta Theta vartheta iota kappa lambda "
          "Lambda mu nu xi Xi pi Pi rho sigma Sigma tau upsilon phi Phi varphi chi psi Psi omega Omega").split()
_FUNCS = frozenset("sin cos tan csc sec cot sinh cosh tanh coth sech csch arcsin arccos arctan log ln exp det dim gcd lcm "
          "min max lim Lim sup inf mod".split())

# Constants and operators: AsciiMath name → TeX.
_SYMBOLS = {
    **{g: "\\" + g for g in _GREEK},
    **{f: ("\\" + f if f not in ("lcm", "Lim", "mod") else "\\operatorname{" + f + "}") for f in _FUNCS},
    "+": "+", "-": "-", "*": "\\cdot", "**": "\\ast", "***": "\\star", "//": "/", "\\\\": "\\backslash",
    "setminus": "\\setminus", "xx": "\\times", "|><": "\\ltimes", "><|": "\\rtimes", "|><|": "\\bowtie",
    "-:": "\\div", "divide": "\\div", "@": "\\circ", "o+": "\\oplus", "ox": "\\otimes", "o.": "\\odot",
    "sum": "\\sum", "prod": "\\prod", "^^": "\\wedge", "^^^": "\\bigwedge", "vv": "\\vee", "vvv": "\\bigvee",
    "nn": "\\cap", "nnn": "\\bigcap", "uu": "\\cup", "uuu": "\\bigcup",
    "=": "=", "!=": "\\neq", ":=": ":=", "<": "<", "lt": "<", ">": ">", "gt": ">", "<=": "\\leq", "le": "\\leq",
    ">=": "\\geq", "ge": "\\geq", "-<": "\\prec", "-lt": "\\prec", ">-": "\\succ", "-<=": "\\preceq",
    ">-=": "\\succeq", "in": "\\in", "!in": "\\notin", "sub": "\\subset", "sup": "\\supset",
    "sube": "\\subseteq", "supe": "\\supseteq", "-=": "\\equiv", "~=": "\\cong", "~~": "\\approx",
    "~": "\\sim", "prop": "\\propto",
    "and": "\\text{ and }", "or": "\\text{ or }", "not": "\\neg", "=>": "\\Rightarrow", "if": "\\text{ if }",
    "<=>": "\\Leftrightarrow", "AA": "\\forall", "EE": "\\exists", "_|_": "\\bot", "TT": "\\top",
    "|--": "\\vdash", "|==": "\\models",
    "int": "\\int", "oint": "\\oint", "del": "\\partial", "grad": "\\nabla", "+-": "\\pm", "-+": "\\mp",
    "O/": "\\emptyset", "oo": "\\infty", "aleph": "\\aleph", "...": "\\ldots", ":.": "\\therefore",
    ":'": "\\because", "/_": "\\angle", "/_\\": "\\triangle", "'": "'", "|...|": "|\\ldots|",
    "cdots": "\\cdots", "vdots": "\\vdots", "ddots": "\\ddots", "quad": "\\quad", "qquad": "\\qquad",
    "diamond": "\\diamond", "square": "\\square", "|__": "\\lfloor", "__|": "\\rfloor", "|~": "\\lceil",
    "~|": "\\rceil", "CC": "\\mathbb{C}", "NN": "\\mathbb{N}", "QQ": "\\mathbb{Q}", "RR": "\\mathbb{R}",
    "ZZ": "\\mathbb{Z}", "dx": "dx", "dy": "dy", "dz": "dz", "dt": "dt", "f": "f", "g": "g",
    "uarr": "\\uparrow", "uparrow": "\\uparrow", "darr": "\\downarrow", "downarrow": "\\downarrow",
    "rarr": "\\rightarrow", "rightarrow": "\\rightarrow", "->": "\\to", "to": "\\to", ">->": "\\rightarrowtail",
    "->>": "\\twoheadrightarrow", "|->": "\\mapsto", "mapsto": "\\mapsto", "larr": "\\leftarrow",
    "leftarrow": "\\leftarrow", "harr": "\\leftrightarrow", "rArr": "\\Rightarrow", "lArr": "\\Leftarrow",
    "hArr": "\\Leftrightarrow", "iff": "\\Leftrightarrow", "!": "!", ",": ",", ".": ".", ";": ";", ":": ":",
}
_LEFT = {"(": "(", "[": "[", "{": "\\{", "(:": "\\langle", "<<": "\\langle", "{:": ""}
_RIGHT = {")": ")", "]": "]", "}": "\\}", ":)": "\\rangle", ">>": "\\rangle", ":}": ""}
_SYMBOLS.update({"|": "|", "||": "\\|"})  # drawn as brackets by the renderer; the same symbols in TeX
_UNARY = {"sqrt": "\\sqrt", "hat": "\\hat", "bar": "\\overline", "overline": "\\overline", "ul": "\\underline",
          "underline": "\\underline", "vec": "\\vec", "dot": "\\dot", "ddot": "\\ddot", "tilde": "\\tilde",
          "bb": "\\mathbf", "mathbf": "\\mathbf", "bbb": "\\mathbb", "mathbb": "\\mathbb", "cc": "\\mathcal",
          "mathcal": "\\mathcal", "tt": "\\mathtt", "sf": "\\mathsf", "fr": "\\mathfrak", "text": "\\text",
          "mbox": "\\text", "abs": "abs", "floor": "floor", "ceil": "ceil", "norm": "norm", "ubrace": "\\underbrace",
          "obrace": "\\overbrace", "cancel": "\\cancel"}
_BINARY = {"frac": "\\frac", "root": "root", "stackrel": "\\stackrel", "overset": "\\overset",
           "underset": "\\underset", "color": "color"}
_NAMES = sorted(set(_SYMBOLS) | set(_LEFT) | set(_RIGHT) | set(_UNARY) | set(_BINARY), key=len, reverse=True)
_TOKEN = re.compile("|".join(re.escape(n) for n in _NAMES) + r"|\d+(?:\.\d+)?|\"[^\"]*\"|\S")


def _tokens(src: str) -> list[str]:
    # Symbol names are matched only where a name can start: "sin" in "using" is not a symbol, but
    # the reference parser reads "xx" in "2xx3" as times, so letters are split greedily per name.
    return _TOKEN.findall(src)


class _Parser:
    def __init__(self, tokens: list[str]):
        self.t, self.i = tokens, 0

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> str:
        tok = self.t[self.i]
        self.i += 1
        return tok

    def simple(self) -> tuple[str, str]:
        """(TeX, argument TeX): a bracketed group's argument form has no brackets, since as an
        argument of a fraction, root or script they only group (the renderer drops them too)."""
        tok = self.peek()
        if tok is None or tok in _RIGHT:
            return "", ""  # an unmatched closing bracket ends the expression
        self.take()
        if tok in _LEFT:
            inner = self.expression(stop=True)
            close = self.take() if self.peek() in _RIGHT else ""
            left, right = _LEFT[tok], _RIGHT.get(close, "")
            if not left and not right:
                return inner, inner
            return f"\\left{left or '.'}{inner}\\right{right or '.'}", inner
        if tok in _UNARY:
            _, arg = self.simple()
            kind = _UNARY[tok]
            if kind in _FENCED:
                left, right = _FENCED[kind]
                tex = f"\\left{left} {arg}\\right{right}"
            elif kind == "\\text" and arg.startswith("\\text{"):
                tex = arg
            else:
                tex = f"{kind}{{{arg}}}"
            return tex, tex
        if tok in _BINARY:
            _, a = self.simple()
            _, b = self.simple()
            kind = _BINARY[tok]
            if kind == "root":
                tex = f"\\sqrt[{a}]{{{b}}}"
            elif kind == "color":
                tex = f"{{\\color{{{a}}}{b}}}"
            else:
                tex = f"{kind}{{{a}}}{{{b}}}"
            return tex, tex
        if tok in _FUNCS and self.peek() in _LEFT:  # sin(x): the function with its bracketed argument
            group, _ = self.simple()
            tex = _join([_SYMBOLS[tok], group])
            return tex, tex
        if len(tok) >= 2 and tok[0] == tok[-1] == '"':
            tex = "\\text{" + tok[1:-1] + "}"
        else:
            tex = _SYMBOLS.get(tok, tok)
        return tex, tex

    def intermediate(self) -> tuple[str, str]:
        base, arg = self.simple()
        for mark in ("_", "^"):
            if self.peek() == mark:
                self.take()
                _, script = self.simple()
                base = arg = f"{{{base}}}{mark}{{{script}}}" if base.startswith("\\left") else f"{base}{mark}{{{script}}}"
        return base, arg

    def expression(self, stop: bool = False) -> str:
        out: list[str] = []
        while self.peek() is not None:
            if self.peek() in _RIGHT:
                if stop:
                    break
                self.take()  # a closing bracket with no opening one: dropped
                continue
            term, arg = self.intermediate()
            if self.peek() == "/":
                self.take()
                _, den = self.intermediate()
                term = f"\\frac{{{arg}}}{{{den}}}"
            out.append(term)
        return _join(out)


_FENCED = {"abs": ("|", "|"), "norm": ("\\|", "\\|"), "floor": ("\\lfloor", "\\rfloor"), "ceil": ("\\lceil", "\\rceil")}


def _join(parts: list[str]) -> str:
    """TeX pieces in a row, a space only where a command name would run into a letter."""
    out = ""
    for p in parts:
        if out and re.search(r"\\[A-Za-z]+$", out) and p[:1].isalpha():
            out += " "
        out += p
    return out


def asciimath_to_tex(src: str) -> str:
    """TeX for one AsciiMath formula."""
    return _Parser(_tokens(src.strip())).expression()
