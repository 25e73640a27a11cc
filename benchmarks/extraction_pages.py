"""Generated extraction pages with free ground truth: known LaTeX and known code, rendered through the
tools the web is made of, so the benchmark can check that the extractor gets the source back.

Every page is an article of sections (prose, inline and display formulas, code blocks) inside a
site shell (navigation, sidebar, related links, footer, cookie notice) picked at random. What goes in:
- formulas: real LaTeX from the MATH test set (`../shared/data/decontam/math`);
- code: real Python functions (TheAlgorithms) and real diffs (SWE-bench golden patches);
- prose: sentences of the AEB and magic-html ground truths (English, Chinese, ...).

Renderers (real tools where one exists, see `FAMILIES`): pandoc (`--mathml`, `--mathjax`, `--katex`,
`--webtex`, its code highlighting), Python-Markdown (+ python-markdown-math, pymdown-extensions
arithmatex/highlight as MkDocs Material uses them), docutils (MathJax and MathML math, Pygments code),
Pygments' HtmlFormatter (every line-number layout), latex2mathml, and in node: KaTeX, MathJax 3
(CHTML + assistive MathML) and highlight.js. Hand-written only where no installable tool renders the
markup: MediaWiki's math element, server-side TeX images (mimeTeX, mathTeX, CodeCogs, WordPress
latex.php, QuickLaTeX, upmath), forum BBCode code boxes, legacy code widgets.

Split: every formula, code block and sentence of the pools is assigned to `dev` or `heldout` by a hash
of its text, and the pages of a split use only their own items, with their own seed. `dev` is for
looking at; `heldout` is scored at the end and never used to tune the extractor.

Run:  python benchmarks/extraction_pages.py [--split dev|heldout] [--per-family N] [--seed S]
writes .bench/extraction-pages/<split>/<family>/<n>.html and truth.json (family, formulas, code).
"""
from __future__ import annotations

import argparse
import hashlib
import html as htmllib
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (/work/main), or two levels up from a worktree (/work/wt/NAME).
SHARED = next((p / "shared" / "data" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
              ROOT.parent / "shared" / "data")
OUT = ROOT / ".bench" / "extraction-pages"
NODE_DIR = ROOT / ".bench" / "node"
NODE_PACKAGES = ("katex@0.19.1", "mathjax-full@3.2.2", "highlight.js@11.12.0")
SEEDS = {"dev": 1000, "heldout": 2000}


# ---- pools -------------------------------------------------------------------------------------

def _split_of(text: str) -> str:
    return "dev" if hashlib.sha1(text.encode()).digest()[0] % 2 == 0 else "heldout"


_DOLLAR = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$(?!\$)", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]", re.S)


def formula_pool(split: str) -> list[str]:
    out, seen = [], set()
    with open(SHARED / "decontam" / "math" / "math_test.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = row["problem"] + " " + row["solution"]
            found = [m.group(1) for m in _DOLLAR.finditer(_DISPLAY.sub(" ", text))]
            found += [a or b for a, b in _DISPLAY.findall(text)]
            for tex in found:
                tex = " ".join(tex.split())
                # Formulas, not numbers or one letter; no text-mode dollars or Asymptote code.
                if not 6 <= len(tex) <= 160 or "$" in tex or "[asy]" in tex or "\\text{" in tex and "}" not in tex:
                    continue
                if not re.search(r"[\\^_=+<>]", tex) or tex in seen or _split_of(tex) != split:
                    continue
                seen.add(tex)
                out.append(tex)
    return out


def code_pool(split: str) -> list[tuple[str, str]]:
    """(language, code): top-level Python functions of TheAlgorithms, and diff hunks."""
    out = []
    for path in sorted((SHARED / "code" / "thealgorithms-python").rglob("*.py")):
        src = path.read_text(encoding="utf-8", errors="replace").replace("\t", "    ")
        for m in re.finditer(r"^def .+?(?=^\S|\Z)", src, re.S | re.M):
            block = m.group().rstrip()
            block = re.sub(r'\n    """.*?"""\n', "\n", block, count=1, flags=re.S)  # docstrings: long prose
            lines = block.split("\n")
            if 4 <= len(lines) <= 22 and max(len(x) for x in lines) <= 100 and _split_of(block) == split:
                out.append(("python", block))
    patches = json.loads((SHARED / "swebench" / "princeton-nlp-SWE-bench_Lite-dev.json").read_text())
    for row in patches:
        for hunk in re.split(r"(?m)^(?=@@ )", row["patch"])[1:]:
            hunk = hunk.rstrip()
            if 4 <= hunk.count("\n") <= 25 and _split_of(hunk) == split:
                out.append(("diff", hunk))
    return out


def prose_pool(split: str) -> dict[str, list[str]]:
    """Sentences by language group: 'en' from AEB, 'intl' from magic-html (many languages)."""
    pools: dict[str, list[str]] = {"en": [], "intl": []}
    aeb = json.loads((SHARED / "extraction" / "aeb" / "ground-truth.json").read_text())
    for row in aeb.values():
        for s in re.split(r"(?<=[.!?])\s+", row.get("articleBody") or ""):
            s = " ".join(s.split())
            if 60 <= len(s) <= 300 and "$" not in s and "\\" not in s and _split_of(s) == split:
                pools["en"].append(s)
    for kind in ("article", "forum"):
        base = json.loads((SHARED / "extraction" / "magic-html" / "benchmark" / "data" / kind / "base.json").read_text())
        for row in base.values():
            for s in re.split(r"(?<=[.!?。！？])\s*", row.get("content") or ""):
                s = " ".join(s.split())
                if 30 <= len(s) <= 300 and not re.search(r"[\\$`<>{}|*_#\[\]]", s) and _split_of(s) == split \
                        and not re.match(r"^[\x00-\x7f]+$", s):
                    pools["intl"].append(s)
    return pools


# ---- node renderers (KaTeX, MathJax 3, highlight.js) -------------------------------------------

class Node:
    """One node process for all pages; jobs in and HTML out, a JSON line each."""

    def __init__(self):
        self.proc = None

    def _start(self):
        if not (NODE_DIR / "node_modules" / "mathjax-full").exists():
            if shutil.which("npm") is None:
                raise SystemExit("the KaTeX/MathJax/highlight.js families need node and npm")
            subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR),
                            *NODE_PACKAGES], check=True)
        env = dict(os.environ, NODE_PATH=str(NODE_DIR / "node_modules"))
        self.proc = subprocess.Popen(["node", str(ROOT / "benchmarks" / "extraction_render.js")], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def render(self, **job) -> str | None:
        if self.proc is None:
            self._start()
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()


# ---- the abstract document ---------------------------------------------------------------------

class Ctx:
    def __init__(self, split: str, seed: int):
        self.split = split
        self.rng = random.Random(seed)
        self.formulas = formula_pool(split)
        self.code = code_pool(split)
        self.prose = prose_pool(split)
        self.node = Node()

    def sentence(self, intl: bool = False) -> str:
        pool = self.prose["intl"] if intl and self.prose["intl"] else self.prose["en"]
        return self.rng.choice(pool)

    def doc(self, n_sections: int, formulas: tuple[int, int], code: int, intl: bool = False,
            display_share: float = 0.3) -> list:
        """Blocks: ('h', text) ('p', [str | ('m', tex)]) ('dm', tex) ('code', lang, code)."""
        rng = self.rng
        blocks: list = []
        code_left = code
        for s in range(n_sections):
            blocks.append(("h", self.sentence(intl)[:60].rstrip(" ,.;:")))
            for _ in range(rng.randint(1, 3)):
                parts: list = [self.sentence(intl)]
                for _ in range(rng.randint(*formulas)):
                    if rng.random() < display_share:
                        blocks.append(("p", parts))
                        blocks.append(("dm", rng.choice(self.formulas)))
                        parts = [self.sentence(intl)]
                    else:
                        parts += [" ", ("m", rng.choice(self.formulas)), " ", self.sentence(intl)]
                blocks.append(("p", parts))
            sections_left = n_sections - s
            for _ in range(code_left // sections_left + (rng.random() < (code_left % sections_left) / sections_left)):
                lang, src = rng.choice(self.code)
                blocks.append(("code", lang, src))
                blocks.append(("p", [self.sentence(intl)]))
                code_left -= 1
        return blocks


def truth_of(blocks: list, formula=lambda tex, display: tex, match: str = "tex") -> dict:
    formulas, code = [], []
    for b in blocks:
        if b[0] == "p":
            formulas += [{"tex": formula(x[1], False), "match": match} for x in b[1] if isinstance(x, tuple)]
        elif b[0] == "dm":
            formulas.append({"tex": formula(b[1], True), "match": match})
        elif b[0] == "code":
            code.append(b[2])
    return {"formulas": formulas, "code": code}


def esc(s: str) -> str:
    return htmllib.escape(s, quote=True)


def render_blocks(blocks: list, inline, display, code, para=lambda inner: f"<p>{inner}</p>",
                  head=lambda t, i: f"<h2 id='s{i}'>{esc(t)}</h2>") -> str:
    out = []
    for i, b in enumerate(blocks):
        if b[0] == "h":
            out.append(head(b[1], i))
        elif b[0] == "p":
            out.append(para("".join(esc(x) if isinstance(x, str) else inline(x[1]) for x in b[1])))
        elif b[0] == "dm":
            out.append(display(b[1]))
        elif b[0] == "code":
            out.append(code(b[2], b[1]))
    return "\n".join(out)


def to_markdown(blocks: list, dollars: bool = True) -> str:
    md = []
    for b in blocks:
        if b[0] == "h":
            md.append("## " + b[1])
        elif b[0] == "p":
            md.append("".join(_md_text(x) if isinstance(x, str) else f"${x[1].strip()}$" for x in b[1]))
        elif b[0] == "dm":
            md.append(f"$$\n{b[1]}\n$$" if dollars else f"\\[{b[1]}\\]")
        elif b[0] == "code":
            md.append(f"```{b[1]}\n{b[2]}\n```")
    return "\n\n".join(md) + "\n"


def _md_text(s: str) -> str:
    return re.sub(r"([\\`*_\[\]<>#$|])", r"\\\1", s)


def to_rst(blocks: list) -> str:
    out = []
    for b in blocks:
        if b[0] == "h":
            t = re.sub(r"[`*_|\\]", " ", b[1]).strip() or "Section"
            out.append(f"{t}\n{'-' * (len(t) * 2 + 4)}")
        elif b[0] == "p":
            out.append("".join(re.sub(r"[`*_|\\<>]", " ", x) if isinstance(x, str) else f" :math:`{x[1]}` " for x in b[1]))
        elif b[0] == "dm":
            out.append(f".. math::\n\n   {b[1]}")
        elif b[0] == "code":
            body = "\n".join("   " + line if line else "" for line in b[2].split("\n"))
            out.append(f".. code-block:: {b[1]}\n\n{body}")
    return "\n\n".join(out) + "\n"


# ---- site shells -------------------------------------------------------------------------------

_LINK_WORDS = ("Home", "News", "Tutorials", "Forum", "About us", "Contact", "Archive", "Downloads", "Blog",
               "Subscribe", "Login", "Register", "Privacy policy", "Terms of use", "Careers", "Help center")


def _links(rng, n: int, cls: str = "") -> str:
    words = rng.sample(_LINK_WORDS, min(n, len(_LINK_WORDS)))
    return f"<ul class='{cls}'>" + "".join(f"<li><a href='/{w.lower().replace(' ', '-')}'>{w}</a></li>" for w in words) + "</ul>"


def boilerplate(ctx: Ctx) -> dict[str, str]:
    rng = ctx.rng
    related = "".join(f"<li><a href='/p/{rng.randint(1, 999)}'>{esc(ctx.sentence()[:70])}</a></li>" for _ in range(5))
    return {
        "nav": _links(rng, 7, "menu"),
        "related": f"<h3>Related posts</h3><ul class='related-posts'>{related}</ul>",
        "footer": f"<p>Copyright {rng.randint(2005, 2025)} Example Media Group. All rights reserved.</p>" + _links(rng, 4),
        "cookie": "<div class='cookie-notice'>We use cookies to give you the best experience. <a href='/privacy'>Accept</a></div>",
        "share": "<div class='share-buttons'><a href='#'>Share on Twitter</a> <a href='#'>Share on Facebook</a></div>",
        "crumbs": "<div class='breadcrumbs'><a href='/'>Home</a> &gt; <a href='/docs'>Docs</a></div>",
    }


def shell(ctx: Ctx, title: str, body: str, head: str = "", kind: str | None = None) -> str:
    """Wrap an article body in one of several common site layouts."""
    rng = ctx.rng
    bp = boilerplate(ctx)
    kind = kind or rng.choice(["html5", "divs", "docs", "table"])
    title_e = esc(title)
    top = f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title_e} | Example</title>{head}</head><body>"
    if kind == "html5":
        page = (f"<header><div class='logo'>Example</div><nav>{bp['nav']}</nav></header>{bp['cookie']}"
                f"<main><article><h1>{title_e}</h1><div class='entry-meta'>Posted on March 3 by admin</div>"
                f"<div class='entry-content'>{body}</div>{bp['share']}</article></main>"
                f"<aside class='sidebar'>{bp['related']}</aside><footer>{bp['footer']}</footer>")
    elif kind == "divs":
        page = (f"<div id='wrapper'><div id='header'><div id='menu'>{bp['nav']}</div></div>{bp['crumbs']}"
                f"<div id='content'><div class='post'><h1 class='post-title'>{title_e}</h1>"
                f"<div class='post-content'>{body}</div>{bp['share']}</div></div>"
                f"<div id='sidebar'>{bp['related']}</div><div id='footer'>{bp['footer']}</div></div>{bp['cookie']}")
    elif kind == "docs":
        page = (f"<div class='wy-grid-for-nav'><nav class='wy-nav-side'><div class='toc'>{bp['nav']}</div></nav>"
                f"<section class='wy-nav-content-wrap'>{bp['crumbs']}<div class='rst-content'>"
                f"<div role='main' class='document'><div class='section'><h1>{title_e}</h1>{body}</div></div>"
                f"<footer>{bp['footer']}</footer></div></section></div>")
    else:  # an old table layout
        page = (f"<table width='100%'><tr><td colspan='2' class='top'>{bp['nav']}</td></tr><tr>"
                f"<td class='left' width='20%'>{bp['related']}</td><td class='main'><h1>{title_e}</h1>{body}</td></tr>"
                f"<tr><td colspan='2' class='bottom'>{bp['footer']}</td></tr></table>")
    return top + page + "</body></html>"


# ---- math families -----------------------------------------------------------------------------

def _pandoc(md: str, *args: str) -> str:
    import pypandoc

    return pypandoc.convert_text(md, "html5", format="markdown", extra_args=list(args))


def math_doc(ctx: Ctx, code: int = 0) -> list:
    return ctx.doc(ctx.rng.randint(3, 6), (1, 3), code, intl=ctx.rng.random() < 0.2)


def fam_pandoc(option: str):
    def make(ctx: Ctx) -> tuple[str, dict]:
        blocks = math_doc(ctx, code=ctx.rng.randint(0, 2))
        return shell(ctx, blocks[0][1], _pandoc(to_markdown(blocks), option)), truth_of(blocks)
    return make


def fam_markdown_math(ctx: Ctx) -> tuple[str, dict]:
    """Python-Markdown with python-markdown-math (MathJax scripts) or pymdownx.arithmatex (MkDocs)."""
    import markdown

    blocks = math_doc(ctx, code=ctx.rng.randint(0, 2))
    variant = ctx.rng.choice(["mdx_math", "arithmatex-generic", "arithmatex-script"])
    if variant == "mdx_math":
        exts, cfg = ["fenced_code", "codehilite", "mdx_math"], {"mdx_math": {"enable_dollar_delimiter": True}}
    else:
        exts = ["fenced_code", "pymdownx.arithmatex", "pymdownx.highlight"]
        cfg = {"pymdownx.arithmatex": {"generic": variant.endswith("generic")}}
    body = markdown.markdown(to_markdown(blocks), extensions=exts, extension_configs=cfg)
    return shell(ctx, blocks[0][1], body), truth_of(blocks)


def fam_docutils(math_output: str):
    def make(ctx: Ctx) -> tuple[str, dict]:
        from docutils.core import publish_parts

        blocks = math_doc(ctx, code=ctx.rng.randint(0, 2))
        parts = publish_parts(to_rst(blocks), writer_name="html5",
                              settings_overrides={"math_output": math_output, "report_level": 5, "halt_level": 5,
                                                  "syntax_highlight": "short"})
        match = "symbols" if math_output == "MathML" else "tex"
        return shell(ctx, blocks[0][1], parts["body"]), truth_of(blocks, match=match)
    return make


def fam_latex2mathml(ctx: Ctx) -> tuple[str, dict]:
    from latex2mathml.converter import convert

    blocks = math_doc(ctx)
    body = render_blocks(blocks, lambda t: convert(t), lambda t: "<p>" + convert(t, display="block") + "</p>",
                         lambda c, lang: f"<pre>{esc(c)}</pre>")
    return shell(ctx, blocks[0][1], body), truth_of(blocks, match="symbols")


def _node_blocks(ctx: Ctx, kind: str, blocks: list) -> list:
    """Keep the formulas the library renders (KaTeX refuses some MATH-set macros)."""
    kept = []
    for b in blocks:
        if b[0] == "dm" and ctx.node.render(kind=kind, tex=b[1], display=True) is None:
            continue
        if b[0] == "p":
            b = ("p", [x for x in b[1] if isinstance(x, str) or ctx.node.render(kind=kind, tex=x[1], display=False)])
        kept.append(b)
    return kept


def fam_katex(ctx: Ctx) -> tuple[str, dict]:
    blocks = _node_blocks(ctx, "katex", math_doc(ctx))
    r = ctx.node.render
    body = render_blocks(blocks, lambda t: r(kind="katex", tex=t, display=False),
                         lambda t: "<p>" + r(kind="katex", tex=t, display=True) + "</p>",
                         lambda c, lang: f"<pre><code class='language-{lang}'>{esc(c)}</code></pre>")
    return shell(ctx, blocks[0][1], body), truth_of(blocks)


def fam_mathjax3(ctx: Ctx) -> tuple[str, dict]:
    blocks = _node_blocks(ctx, "mathjax", math_doc(ctx))
    r = ctx.node.render
    body = render_blocks(blocks, lambda t: r(kind="mathjax", tex=t, display=False),
                         lambda t: r(kind="mathjax", tex=t, display=True),
                         lambda c, lang: f"<pre><code>{esc(c)}</code></pre>")
    return shell(ctx, blocks[0][1], body), truth_of(blocks, match="symbols")


def fam_mediawiki(ctx: Ctx) -> tuple[str, dict]:
    """MediaWiki's Math extension as Wikipedia serves it: an `mwe-math-element` holding hidden MathML
    (alttext and TeX annotation `{\\displaystyle ...}`) and a fallback SVG image with the same alt;
    display formulas in `<dl><dd>` (older) or a block element. Body in `mw-parser-output` sections."""
    from latex2mathml.converter import convert

    rng = ctx.rng
    blocks = ctx.doc(rng.randint(4, 8), (1, 3), 0, display_share=0.35)
    annotated = rng.random() < 0.7
    style = rng.choice(["dl", "block"])

    def element(tex: str, display: bool) -> str:
        alt = "{\\displaystyle " + tex + "}"
        mml = convert(tex, display="block" if display else "inline")
        inner = mml[mml.index(">") + 1: mml.rindex("</math>")]
        if annotated:
            inner = f"<semantics><mrow>{inner}</mrow><annotation encoding='application/x-tex'>{esc(alt)}</annotation></semantics>"
        kind = "display" if display else "inline"
        digest = hashlib.sha1(tex.encode()).hexdigest()
        disp = 'display="block" ' if display else ""
        return (f"<span class='mwe-math-element mwe-math-element-{'block' if display else 'inline'}'>"
                f"<span class='mwe-math-mathml-{kind} mwe-math-mathml-a11y' style='display: none;'>"
                f"<math xmlns='http://www.w3.org/1998/Math/MathML' {disp}alttext='{esc(alt)}'>"
                f"{inner}</math></span><img src='https://wikimedia.org/api/rest_v1/media/math/render/svg/{digest}' "
                f"class='mwe-math-fallback-image-{kind} mw-invert skin-invert' aria-hidden='true' "
                f"style='vertical-align: -0.838ex; width:12.5ex; height:2.843ex;' alt='{esc(alt)}'></span>")

    def display(tex: str) -> str:
        if style == "dl":
            return f"<dl><dd>{element(tex, True)}</dd></dl>"
        return f"<p>{element(tex, True)}</p>"

    def head(t: str, i: int) -> str:
        return (f"<div class='mw-heading mw-heading2'><h2 id='s{i}'>{esc(t)}</h2><span class='mw-editsection'>"
                f"<span class='mw-editsection-bracket'>[</span><a href='?action=edit&amp;section={i}'>edit</a>"
                f"<span class='mw-editsection-bracket'>]</span></span></div>")

    body = render_blocks(blocks, lambda t: element(t, False), display, lambda c, lang: "", head=head)
    toc = "".join(f"<li class='toclevel-1'><a href='#s{i}'>{esc(b[1])}</a></li>" for i, b in enumerate(blocks) if b[0] == "h")
    title = blocks[0][1]
    page = (f"<!DOCTYPE html><html class='client-nojs' lang='en'><head><meta charset='UTF-8'><title>{esc(title)} - Wikipedia</title></head>"
            f"<body class='mediawiki skin-vector'><div id='mw-navigation'><div id='p-navigation' role='navigation'>"
            f"{_links(rng, 6)}</div></div><div id='content' class='mw-body' role='main'>"
            f"<h1 id='firstHeading' class='firstHeading mw-first-heading'><span class='mw-page-title-main'>{esc(title)}</span></h1>"
            f"<div id='bodyContent' class='vector-body'><div id='siteSub'>From Wikipedia, the free encyclopedia</div>"
            f"<div id='mw-content-text' class='mw-body-content'><div class='mw-content-ltr mw-parser-output' lang='en' dir='ltr'>"
            f"<div id='toc' class='toc' role='navigation'><h2>Contents</h2><ul>{toc}</ul></div>{body}"
            f"<div class='navbox' role='navigation'><table><tr><th>Topics</th><td>{_links(rng, 8)}</td></tr></table></div>"
            f"</div></div><div id='catlinks' class='catlinks'>Categories: <a href='/c/1'>Mathematics</a></div></div></div>"
            f"<div id='footer' role='contentinfo'><ul><li>This page was last edited on 1 May 2024.</li>"
            f"<li>Text is available under the Creative Commons Attribution-ShareAlike License 4.0</li></ul></div></body></html>")
    return page, truth_of(blocks, formula=lambda tex, display: "{\\displaystyle " + tex + "}")


def _img_url(rng, tex: str) -> tuple[str, str, str]:
    """(src, alt, class) for a server-side TeX renderer, each encoding the TeX its own way."""
    kind = rng.choice(["mimetex", "mathtex", "codecogs", "codecogs-editor", "wordpress", "quicklatex", "upmath",
                       "googlechart", "alt-only"])
    if kind == "mimetex":
        safe = "\\^_{}()[]=+-*/,.|!<>"  # mimeTeX takes the TeX nearly raw; only spaces and & are encoded
        return "/cgi-bin/mimetex.cgi?" + quote(tex, safe=safe), tex, ""
    if kind == "mathtex":
        return f"https://www.forkosh.com/mathtex.cgi?{quote(tex)}", "", ""
    if kind == "codecogs":
        return f"https://latex.codecogs.com/png.latex?{quote(tex)}", "", ""
    if kind == "codecogs-editor":  # the CodeCogs editor's embed code: spaces as &space;, options first
        return "https://latex.codecogs.com/svg.image?\\dpi{110}&space;" + tex.replace(" ", "&space;"), tex, ""
    if kind == "wordpress":
        q = quote(tex).replace("%20", "+")
        return f"https://s0.wp.com/latex.php?latex={q}&bg=ffffff&fg=000000&s=0&c=20201002", tex, "latex"
    if kind == "quicklatex":  # alt text with every character as a numeric entity (kept as text here)
        return f"/wp-content/ql-cache/quicklatex.com-{hashlib.md5(tex.encode()).hexdigest()}_l3.png", tex, "ql-img-inline-formula quicklatex-auto-format"
    if kind == "upmath":
        return f"https://i.upmath.me/svg/{quote(tex)}", "", ""
    if kind == "googlechart":
        return f"https://chart.googleapis.com/chart?cht=tx&chl={quote(tex)}", "", ""
    return f"/images/eq{hashlib.md5(tex.encode()).hexdigest()[:8]}.png", f"${tex}$", ""


def fam_tex_images(ctx: Ctx) -> tuple[str, dict]:
    rng = ctx.rng
    blocks = math_doc(ctx)

    def img(tex: str, display: bool) -> str:
        src, alt, cls = _img_url(rng, tex)
        title = f" title='{esc(alt)}'" if alt and rng.random() < 0.5 else ""
        if "quicklatex" in src:
            alt_attr = " alt='" + "".join(f"&#{ord(c)};" for c in alt) + "'"
        else:
            alt_attr = f" alt='{esc(alt)}'" if alt or rng.random() < 0.5 else ""
        tag = f"<img src='{esc(src)}'{alt_attr}{title} class='{cls}' style='vertical-align:middle' />"
        return f"<p style='text-align:center'>{tag}</p>" if display else tag

    body = render_blocks(blocks, lambda t: img(t, False), lambda t: img(t, True), lambda c, lang: "")
    return shell(ctx, blocks[0][1], body), truth_of(blocks)


def fam_mathjax_source(ctx: Ctx) -> tuple[str, dict]:
    """Pages that MathJax/KaTeX typeset in the browser: TeX in the served HTML between delimiters, in
    a long textbook page (many sections) inside a MindTouch/LibreTexts-like shell."""
    rng = ctx.rng
    blocks = ctx.doc(rng.randint(8, 14), (1, 3), 0)
    delim = rng.choice([("\\(", "\\)", "\\[", "\\]"), ("$", "$", "$$", "$$"), ("\\(", "\\)", "$$", "$$")])
    body = render_blocks(blocks, lambda t: esc(delim[0] + t + delim[1]),
                         lambda t: f"<p class='mt-align-center'>{esc(delim[2] + t + delim[3])}</p>",
                         lambda c, lang: "",
                         head=lambda t, i: f"<h2 class='mt-section' id='s{i}'><span class='mt-section-title'>{esc(t)}</span></h2>")
    script = "<script src='https://cdn.example.org/mathjax/2.7.7/MathJax.js?config=TeX-AMS_HTML'></script>"
    page = shell(ctx, blocks[0][1], f"<div class='mt-content-container'>{body}</div>", head=script)
    return page, truth_of(blocks)


# ---- code families -----------------------------------------------------------------------------

def code_doc(ctx: Ctx, n_code: int | None = None) -> list:
    rng = ctx.rng
    return ctx.doc(rng.randint(2, 5), (0, 0), n_code or rng.randint(2, 6), intl=rng.random() < 0.3)


def _pygments(code: str, lang: str, **opts) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name

    return highlight(code, get_lexer_by_name(lang), HtmlFormatter(**opts))


def fam_pygments(ctx: Ctx) -> tuple[str, dict]:
    rng = ctx.rng
    blocks = code_doc(ctx)
    opts = rng.choice([{}, {"linenos": "table"}, {"linenos": "inline"}, {"linenos": "table", "anchorlinenos": True, "lineanchors": "L"},
                       {"noclasses": True}, {"wrapcode": True}, {"linenos": "inline", "wrapcode": True},
                       {"style": rng.choice(["monokai", "friendly", "solarized-dark"]), "noclasses": True, "linenos": "table"}])
    body = render_blocks(blocks, None, None, lambda c, lang: _pygments(c, lang, **opts))
    return shell(ctx, blocks[0][1], body), truth_of(blocks)


def fam_markdown_code(ctx: Ctx) -> tuple[str, dict]:
    """Python-Markdown code as MkDocs (Material) renders it: codehilite or pymdownx.highlight, with and
    without line numbers (a table), with and without a language."""
    import markdown

    rng = ctx.rng
    blocks = code_doc(ctx)
    variant = rng.choice(["codehilite", "codehilite-linenums", "pymdownx", "pymdownx-table", "pymdownx-inline", "plain"])
    if variant.startswith("codehilite"):
        exts = ["fenced_code", "codehilite"]
        cfg = {"codehilite": {"linenums": variant.endswith("linenums")}}
    elif variant.startswith("pymdownx"):
        exts = ["pymdownx.superfences", "pymdownx.highlight"]
        style = {"pymdownx": None, "pymdownx-table": "table", "pymdownx-inline": "inline"}[variant]
        cfg = {"pymdownx.highlight": {"linenums": style is not None, "linenums_style": style or "table",
                                      "anchor_linenums": rng.random() < 0.5}}
    else:
        exts, cfg = ["fenced_code"], {}
    body = markdown.markdown(to_markdown(blocks), extensions=exts, extension_configs=cfg)
    return shell(ctx, blocks[0][1], body, kind=rng.choice(["docs", "html5"])), truth_of(blocks)


def fam_pandoc_code(ctx: Ctx) -> tuple[str, dict]:
    blocks = code_doc(ctx)
    opt = ctx.rng.choice(["--syntax-highlighting=pygments", "--syntax-highlighting=none"])
    return shell(ctx, blocks[0][1], _pandoc(to_markdown(blocks), opt)), truth_of(blocks)


def fam_docutils_code(ctx: Ctx) -> tuple[str, dict]:
    """docutils' HTML5 writer (the same literal-block markup Sphinx themes wrap in `div.highlight`)."""
    from docutils.core import publish_parts

    blocks = code_doc(ctx)
    body = publish_parts(to_rst(blocks), writer_name="html5", settings_overrides={
        "report_level": 5, "halt_level": 5, "syntax_highlight": ctx.rng.choice(["short", "long", "none"])})["body"]
    return shell(ctx, blocks[0][1], body, kind="docs"), truth_of(blocks)


def fam_hljs(ctx: Ctx) -> tuple[str, dict]:
    """highlight.js output, bare and with the line-number plugin's table (hljs-ln)."""
    rng = ctx.rng
    blocks = code_doc(ctx)
    numbered = rng.random() < 0.5

    def block(code: str, lang: str) -> str:
        inner = ctx.node.render(kind="hljs", code=code, lang=lang)
        if numbered:  # highlightjs-line-numbers.js: one row per line, the number in a data attribute
            rows = "".join(
                f"<tr><td class='hljs-ln-line hljs-ln-numbers' data-line-number='{i}'><div class='hljs-ln-n' data-line-number='{i}'></div></td>"
                f"<td class='hljs-ln-line hljs-ln-code' data-line-number='{i}'>{line}</td></tr>"
                for i, line in enumerate(_split_highlighted(inner), 1))
            inner = f"<table class='hljs-ln'><tbody>{rows}</tbody></table>"
        return f"<pre><code class='hljs language-{lang}'>{inner}</code></pre>"

    body = render_blocks(blocks, None, None, block)
    return shell(ctx, blocks[0][1], body), truth_of(blocks)


def _split_highlighted(html: str) -> list[str]:
    """Highlighted HTML split into lines with spans closed and reopened at each newline, as the
    line-number plugins do."""
    lines, open_tags, cur = [], [], ""
    for tok in re.split(r"(<span[^>]*>|</span>|\n)", html):
        if tok == "\n":
            lines.append(cur + "</span>" * len(open_tags))
            cur = "".join(open_tags)
        elif tok.startswith("<span"):
            open_tags.append(tok)
            cur += tok
        elif tok == "</span>":
            open_tags.pop()
            cur += tok
        else:
            cur += tok
    lines.append(cur)
    return lines


def _br_code(code: str) -> str:
    """Code as BBCode engines print it: <br /> per line, runs of spaces as &nbsp;."""
    return "<br />".join(re.sub(r"(?<= ) |^ ", "&nbsp;", esc(line)) for line in code.split("\n"))


# How each forum engine prints a BBCode [code] box: {br} is the code with <br /> and &nbsp;, {pre} the
# escaped code for a <pre>, {lang} the language.
_FORUM_CODE = {
    "phpbb3.0": "<dl class='codebox'><dt>Code: <a href='#' onclick='selectCode(this); return false;'>Select all</a></dt>"
                "<dd><code>{br}</code></dd></dl>",
    "phpbb3.3": "<div class='codebox'><p>Code: <a href='#' onclick='selectCode(this); return false;'>Select all</a></p>"
                "<pre><code>{pre}</code></pre></div>",
    "vbulletin": "<div class='bbcode_container'><div class='bbcode_description'>Code:</div>"
                 "<pre class='bbcode_code' style='height:168px;'>{pre}</pre></div>",
    "xenforo": "<div class='bbCodeBlock bbCodeBlock--screenLimited bbCodeBlock--code'><div class='bbCodeBlock-title'>Code:"
               "</div><div class='bbCodeBlock-content' dir='ltr'><pre class='bbCodeCode' dir='ltr' data-xf-init='code-block' "
               "data-lang='{lang}'><code>{pre}</code></pre></div></div>",
    "smf": "<div class='codeheader'><span class='code floatleft'>Code</span> <a class='codeoperation smf_select_text'>"
           "[Select]</a></div><code class='bbc_code'>{br}</code>",
    "mybb": "<div class='codeblock'><div class='title'>Code:</div><div class='body' dir='ltr'><code>{br}</code></div></div>",
    "discourse": "<pre><code class='lang-{lang}'>{pre}</code></pre>",
    "invision": "<pre class='ipsCode prettyprint lang-{lang} prettyprinted'>{pre}</pre>",
}


def _forum_code(rng, code: str, lang: str) -> str:
    template = _FORUM_CODE[rng.choice(sorted(_FORUM_CODE))]
    return template.format(br=_br_code(code), pre=esc(code), lang=lang)


def fam_forum_code(ctx: Ctx) -> tuple[str, dict]:
    """A forum thread (vBulletin/phpBB/XenForo/SMF/MyBB/Discourse/Invision shapes): several posts, code
    boxes as each engine prints BBCode [code]; every post is main content."""
    rng = ctx.rng
    intl = rng.random() < 0.3
    posts, code = [], []
    layout = rng.choice(["vb", "phpbb", "xf", "generic"])
    for i in range(rng.randint(3, 8)):
        parts = [f"<p>{esc(ctx.sentence(intl))} {esc(ctx.sentence(intl))}</p>" if layout != "vb" else
                 f"{esc(ctx.sentence(intl))}<br /><br />{esc(ctx.sentence(intl))}<br />"]
        if rng.random() < 0.6:
            lang, src = rng.choice(ctx.code)
            parts.append(_forum_code(rng, src, lang))
            code.append(src)
            parts.append(f"<p>{esc(ctx.sentence(intl))}</p>" if layout != "vb" else esc(ctx.sentence(intl)))
        body = "".join(parts)
        user = f"<div class='userinfo'><a href='/member/{i}'>user{rng.randint(1, 9999)}</a><div>Posts: {rng.randint(1, 5000)}</div>" \
               f"<div>Join Date: Jan 2012</div></div>"
        sig = "<div class='signature'>Sent from my phone using Tapatalk</div>"
        if layout == "vb":
            posts.append(f"<li class='postbitlegacy postbitim postcontainer' id='post_{i}'><div class='posthead'>"
                         f"<span class='date'>01-0{i % 9 + 1}-2014</span></div><div class='postdetails'>{user}<div class='postbody'>"
                         f"<div class='postrow'><h2 class='title icon'>Re: help</h2><div class='content'><div id='post_message_{i}'>"
                         f"<blockquote class='postcontent restore'>{body}</blockquote></div></div></div>{sig}</div></div></li>")
        elif layout == "phpbb":
            posts.append(f"<div id='p{i}' class='post has-profile bg{i % 2 + 1}'><div class='inner'><dl class='postprofile'>"
                         f"{user}</dl><div class='postbody'><h3>Re: help</h3><p class='author'>by user on Mon Jan 6</p>"
                         f"<div class='content'>{body}</div>{sig}</div></div></div>")
        elif layout == "xf":
            posts.append(f"<article class='message message--post' data-author='u{i}'><div class='message-inner'>"
                         f"<div class='message-cell message-cell--user'>{user}</div><div class='message-cell message-cell--main'>"
                         f"<div class='message-content'><div class='message-userContent'><article class='message-body'>"
                         f"<div class='bbWrapper'>{body}</div></article></div></div>{sig}</div></div></article>")
        else:
            posts.append(f"<div class='forum-post'><div class='post-header'>{user}</div><div class='post-text'>{body}</div>{sig}</div>")
    bp = boilerplate(ctx)
    title = ctx.sentence(intl)[:70]
    container = "<ol id='posts' class='posts'>{}</ol>" if layout == "vb" else "<div class='thread'>{}</div>"
    page = (f"<!DOCTYPE html><html><head><title>{esc(title)} - Forum</title></head><body><div id='header'>{bp['nav']}</div>"
            f"{bp['crumbs']}<h1>{esc(title)}</h1><div class='pagination'>Page 1 of 2 <a href='?page=2'>Next</a></div>"
            + container.format("".join(posts)) +
            f"<div class='similar-threads'>{bp['related']}</div><div id='footer'>{bp['footer']}</div></body></html>")
    return page, {"formulas": [], "code": code}


def fam_legacy_code(ctx: Ctx) -> tuple[str, dict]:
    """Code widgets outside <pre><code>: SyntaxHighlighter (`pre.brush:` and the 1.x `<textarea
    name=code>`), W3Schools-style `div` with <br>, GitHub gist tables, Hugo/Chroma line-number
    tables, code in a bare block <code> with <br>."""
    rng = ctx.rng
    blocks = code_doc(ctx)
    kind = rng.choice(["brush", "textarea", "w3", "gist", "chroma", "code-br"])

    def block(code: str, lang: str) -> str:
        lines = code.split("\n")
        if kind == "brush":
            return f"<pre class='brush: {lang}; title: ; notranslate' title=''>{esc(code)}</pre>"
        if kind == "textarea":
            return f"<div class='codeblock'><textarea name='code' class='{lang}' rows='{len(lines)}' cols='80' readonly>{esc(code)}</textarea></div>"
        if kind == "w3":
            spans = _br_code(code)
            return f"<div class='w3-example'><h3>Example</h3><div class='w3-code notranslate {lang}High'>{spans}</div>" \
                   f"<a class='w3-btn' href='/tryit'>Try it Yourself »</a></div>"
        if kind == "gist":
            rows = "".join(f"<tr><td id='L{i}' class='blob-num js-line-number' data-line-number='{i}'></td>"
                           f"<td id='LC{i}' class='blob-code blob-code-inner js-file-line'>{esc(line)}</td></tr>"
                           for i, line in enumerate(lines, 1))
            return (f"<div class='gist'><div class='gist-file'><div class='gist-data'><div class='js-gist-file-update-container'>"
                    f"<div class='file'><div class='blob-wrapper data type-{lang}'><table class='highlight tab-size js-file-line-container'>"
                    f"{rows}</table></div></div></div></div><div class='gist-meta'><a href='#'>view raw</a> hosted with ❤ by GitHub</div></div></div>")
        if kind == "chroma":
            nums = "".join(f"<span class='lnt'>{i}\n</span>" for i in range(1, len(lines) + 1))
            code_html = "".join(f"<span class='line'><span class='cl'>{esc(line)}\n</span></span>" for line in lines)
            return (f"<div class='highlight'><div class='chroma'><table class='lntable'><tr><td class='lntd'>"
                    f"<pre tabindex='0' class='chroma'><code>{nums}</code></pre></td><td class='lntd'>"
                    f"<pre tabindex='0' class='chroma'><code class='language-{lang}' data-lang='{lang}'>{code_html}</code></pre>"
                    f"</td></tr></table></div></div>")
        return f"<p><code class='block'>{_br_code(code)}</code></p>"

    body = render_blocks(blocks, None, None, block)
    return shell(ctx, blocks[0][1], body), truth_of(blocks)


def fam_tutorial(ctx: Ctx) -> tuple[str, dict]:
    """A long documentation/tutorial page with many code blocks and short text between them, often
    localized, in a docs theme with a big navigation tree."""
    rng = ctx.rng
    blocks = ctx.doc(rng.randint(5, 9), (0, 0), rng.randint(8, 16), intl=rng.random() < 0.5)
    wrap = rng.choice(["ms", "div-example", "plain"])

    def block(code: str, lang: str) -> str:
        pre = f"<pre><code class='lang-{lang}'>{esc(code)}</code></pre>"
        if wrap == "ms":
            return (f"<div class='codeHeader' id='code-try-{rng.randint(1, 99)}'><span class='language'>{lang}</span>"
                    f"<button type='button' class='action'>Copy</button></div>{pre}")
        if wrap == "div-example":
            return f"<div class='example'><p class='example-title'>Example</p><div class='example-contents'>{pre}</div></div>"
        return pre

    body = render_blocks(blocks, None, None, block)
    nav = "".join(f"<li><a href='/docs/{i}'>{esc(ctx.sentence()[:40])}</a></li>" for i in range(30))
    page = shell(ctx, blocks[0][1], body, kind="docs").replace("<div class='toc'>", f"<div class='toc'><ul>{nav}</ul>", 1)
    return page, truth_of(blocks)


# ---- families of issue #30: script-rendered KaTeX, doctest blocks, forum code in divs, tables ---

def fam_katex_autorender(ctx: Ctx) -> tuple[str, dict]:
    """KaTeX's auto-render extension: the page ships raw TeX between delimiters in its text and a
    script renders it at load time (what a crawler sees is the TeX and the script, no glyphs)."""
    rng = ctx.rng
    blocks = math_doc(ctx)
    inline_open, inline_close = rng.choice([("\\(", "\\)"), ("$", "$")])
    body = render_blocks(blocks, lambda t: esc(f"{inline_open}{t}{inline_close}"),
                         lambda t: "<p>" + esc(rng.choice([f"$${t}$$", f"\\[{t}\\]"])) + "</p>",
                         lambda c, lang: f"<pre><code>{esc(c)}</code></pre>")
    head = ("<link rel='stylesheet' href='https://cdn.jsdelivr.net/npm/katex@0.16.9/dist/katex.min.css'>"
            "<script defer src='https://cdn.jsdelivr.net/npm/katex@0.16.9/dist/katex.min.js'></script>"
            "<script defer src='https://cdn.jsdelivr.net/npm/katex@0.16.9/dist/contrib/auto-render.min.js' "
            "onload='renderMathInElement(document.body);'></script>")
    truth = truth_of(blocks)
    if inline_open == "$":  # "$" inline is only TeX when the page's own config says so; it does here
        head += ("<script>document.addEventListener('DOMContentLoaded',function(){renderMathInElement(document.body,"
                 "{delimiters:[{left:'$$',right:'$$',display:true},{left:'$',right:'$',display:false}]});});</script>")
    return shell(ctx, blocks[0][1], body, head=head), truth


def _doctest(src: str) -> str:
    """A Python function as a doctest session: its lines at `>>>`/`...` prompts, then a call and its
    printed answer (what Sphinx, PyTorch and NumPy API pages show)."""
    lines = src.split("\n")
    out = [(">>> " if i == 0 else "... ") + line for i, line in enumerate(lines)] + ["..."]
    name = re.match(r"def (\w+)", src)
    out += [f">>> {name.group(1) if name else 'f'}", f"<function {name.group(1) if name else 'f'} at 0x7f3a2c1e5d30>"]
    return "\n".join(out)


def fam_doctest(ctx: Ctx) -> tuple[str, dict]:
    """Doctest blocks on API pages: docutils' own doctest block, or Sphinx's `div.highlight-pycon`
    (Pygments' console lexer, prompts in `span.gp`), beside a signature `dl` like autodoc's."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonConsoleLexer

    rng = ctx.rng
    blocks = [b for b in code_doc(ctx) if not (b[0] == "code" and b[1] != "python")]
    blocks = [("code", "pycon", _doctest(b[2])) if b[0] == "code" else b for b in blocks]
    style = rng.choice(["docutils", "sphinx"])

    def block(code: str, lang: str) -> str:
        if style == "docutils":
            return f"<pre class='code python doctest'>{esc(code)}</pre>"
        return (f"<div class='highlight-pycon notranslate'><div class='highlight'>"
                f"{highlight(code, PythonConsoleLexer(), HtmlFormatter(nowrap=False))}</div></div>")

    body = render_blocks(blocks, None, None, block)
    sig = (f"<dl class='py function'><dt class='sig sig-object py' id='mod.fn'><span class='sig-name descname'>"
           f"<span class='pre'>fn</span></span><span class='sig-paren'>(</span><em class='sig-param'>x</em>"
           f"<span class='sig-paren'>)</span><a class='headerlink' href='#mod.fn'>¶</a></dt><dd>{body}</dd></dl>")
    return shell(ctx, blocks[0][1], sig, kind="docs"), truth_of(blocks)


def fam_forum_divcode(ctx: Ctx) -> tuple[str, dict]:
    """Forum posts (Telerik-style threads) whose code sits in formatted `<div>`s, a div per line with
    no-break spaces for indentation, no `<pre>`; every post is main content."""
    rng = ctx.rng
    posts, code = [], []
    for i in range(rng.randint(3, 6)):
        body = f"<p>{esc(ctx.sentence())} {esc(ctx.sentence())}</p>"
        if rng.random() < 0.7:
            lang, src = rng.choice(ctx.code)
            lines = "".join(f"<div class='line'><code class='{lang} plain'>{_nbsp(esc(line)) or '&nbsp;'}</code></div>"
                            for line in src.split("\n"))
            body += f"<div class='reCodeBlock' style='border:1px solid #7f9db9'><div class='container'>{lines}</div></div>"
            body += f"<p>{esc(ctx.sentence())}</p>"
            code.append(src)
        posts.append(f"<div class='forum-post' id='p{i}'><div class='post-author'><a href='/u/{i}'>user{i}</a>"
                     f"<span>Posted on 12 Jan 2015</span></div><div class='post-content'>{body}</div>"
                     f"<div class='post-actions'><a href='#'>Reply</a> <a href='#'>Link</a></div></div>")
    bp = boilerplate(ctx)
    title = ctx.sentence()[:70]
    page = (f"<!DOCTYPE html><html><head><title>{esc(title)} in UI for ASP.NET AJAX | Forum</title></head><body>"
            f"<div id='header'>{bp['nav']}</div>{bp['crumbs']}<h1>{esc(title)}</h1><div class='thread'>{''.join(posts)}</div>"
            f"<div class='similar-threads'>{bp['related']}</div><div id='footer'>{bp['footer']}</div></body></html>")
    return page, {"formulas": [], "code": code}


def _nbsp(line: str) -> str:
    return re.sub(r"^ +", lambda m: "&nbsp;" * len(m.group()), line)


_TABLE_HEADS = ("Name", "Year", "Value", "Count", "Share", "Country", "Score", "Type", "Status", "Size")


def table_pool(ctx: Ctx) -> list[list[str]]:
    """A data table: a header row and 3-10 rows of words and numbers (cells without Markdown marks)."""
    rng = ctx.rng
    width = rng.randint(2, 5)
    heads = rng.sample(_TABLE_HEADS, width)
    rows = [heads]
    for _ in range(rng.randint(3, 10)):
        words = re.sub(r"[^\w ]", "", ctx.sentence(rng.random() < 0.3)).split()
        first = " ".join(words[:rng.randint(1, 3)]) or "item"
        rows.append([first] + [str(rng.choice([rng.randint(1, 99999), round(rng.random() * 100, 2)]))
                               for _ in range(width - 1)])
    return rows


def fam_tables(ctx: Ctx) -> tuple[str, dict]:
    """Data tables in article and documentation pages, rendered by Python-Markdown's tables extension,
    by pandoc, or as a MediaWiki `wikitable` with a caption; prose around them."""
    import markdown

    rng = ctx.rng
    blocks = ctx.doc(rng.randint(2, 4), (0, 0), 0)
    tables = [table_pool(ctx) for _ in range(rng.randint(1, 3))]
    renderer = rng.choice(["markdown", "pandoc", "wikitable"])
    md_tables = ["| " + " | ".join(t[0]) + " |\n|" + "---|" * len(t[0]) + "\n" +
                 "\n".join("| " + " | ".join(r) + " |" for r in t[1:]) for t in tables]
    parts = []
    for i, b in enumerate(blocks):
        parts.append(b)
        if b[0] == "p" and tables and rng.random() < 0.5 or i == len(blocks) - 1:
            parts += [("table", t) for t in tables]
            tables = []
    html_parts = []
    for b in parts:
        if b[0] == "table":
            t = b[1]
            if renderer == "wikitable":
                rows = "".join("<tr>" + "".join(f"<th>{esc(c)}</th>" for c in t[0]) + "</tr>" if j == 0 else
                               "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for j, r in enumerate(t))
                html_parts.append(f"<table class='wikitable sortable'><caption>{esc(ctx.sentence()[:50])}</caption>"
                                  f"<tbody>{rows}</tbody></table>")
            else:
                md = md_tables[[x for x in parts if x[0] == "table"].index(b)]
                html_parts.append(markdown.markdown(md, extensions=["tables"]) if renderer == "markdown" else _pandoc(md))
        else:
            html_parts.append(render_blocks([b], None, None, None))
    truth = {"formulas": [], "code": [], "tables": [t for b in parts if b[0] == "table" for t in [b[1]]]}
    return shell(ctx, blocks[0][1], "\n".join(html_parts)), truth


# ---- families of issue #30, second part: AsciiMath, long LibreTexts pages, MathML for a CDN
# script, Javadoc ---------------------------------------------------------------------------------

_TEX_TO_AM = {
    "frac": None, "dfrac": None, "tfrac": None, "sqrt": None, "text": None, "textrm": None, "mathrm": None,
    "cdot": "*", "times": "xx", "div": "-:", "pm": "+-", "mp": "-+", "le": "<=", "leq": "<=", "ge": ">=",
    "geq": ">=", "ne": "!=", "neq": "!=", "infty": "oo", "ldots": "...", "dots": "...", "cdots": "cdots",
    "to": "->", "rightarrow": "rarr", "Rightarrow": "=>", "Leftrightarrow": "<=>", "in": "in", "notin": "!in",
    "approx": "~~", "equiv": "-=", "sim": "~", "cong": "~=", "angle": "/_", "circ": "@", "sum": "sum",
    "prod": "prod", "int": "int", "partial": "del", "nabla": "grad", "cup": "uu", "cap": "nn",
    "subset": "sub", "subseteq": "sube", "emptyset": "O/", "forall": "AA", "exists": "EE", "neg": "not",
    "lfloor": "|__", "rfloor": "__|", "lceil": "|~", "rceil": "~|", "quad": "quad", "qquad": "qquad",
    "overline": "bar", "bar": "bar", "hat": "hat", "vec": "vec", "dot": "dot", "tilde": "tilde", "mathbf": "bb",
    "{": "{", "}": "}", "|": "||", "%": "%", ",": " ", ";": " ", "!": "", " ": " ", "displaystyle": "",
    "left": "", "right": "", "triangle": "/_\\", "perp": "_|_", "mid": "|", "star": "***", "ast": "**",
    **{f: f for f in ("sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "lim", "max", "min", "det",
                      "gcd", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan")},
    **{g: g for g in ("alpha beta gamma Gamma delta Delta epsilon varepsilon zeta eta theta Theta iota kappa "
                      "lambda Lambda mu nu xi Xi pi Pi rho sigma Sigma tau upsilon phi Phi varphi chi psi Psi "
                      "omega Omega").split()},
}
_MATHBB = {"R": "RR", "N": "NN", "Z": "ZZ", "Q": "QQ", "C": "CC"}
_TEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[{}^_]|\s+|[A-Za-z]|\d+(?:\.\d+)?|.")


def tex_to_asciimath(tex: str) -> str | None:
    """The AsciiMath an author would write for a TeX formula of the common subset (fractions, roots,
    scripts, Greek letters, operators, functions), or None when the formula has anything else. Whether
    MathJax reads the result as the same formula is checked by rendering it (`_asciimath_formulas`)."""
    toks = [t for t in _TEX_TOKEN.findall(tex) if not t.isspace()]
    pos = 0

    def group() -> str | None:  # {..} or one token, as AsciiMath
        nonlocal pos
        if pos >= len(toks):
            return None
        if toks[pos] == "{":
            pos += 1
            out = seq("}")
            pos += 1
            return out
        return seq(None, one=True)

    def seq(end: str | None, one: bool = False) -> str | None:
        nonlocal pos
        out: list[str] = []
        while pos < len(toks) and toks[pos] != end:
            if toks[pos] == "}":
                return None
            tok = toks[pos]
            pos += 1
            if tok in ("^", "_"):
                arg = group()
                if arg is None:
                    return None
                piece = tok + ("(" + arg + ")" if len(arg.replace(" ", "")) > 1 else arg)
            elif tok == "{":
                inner = seq("}")
                pos += 1
                if inner is None:
                    return None
                piece = "{:" + inner + ":}"
            elif tok.startswith("\\"):
                name = tok[1:]
                if name in ("frac", "dfrac", "tfrac"):
                    a, b = group(), group()
                    if a is None or b is None:
                        return None
                    piece = f"({a})/({b})"
                elif name == "sqrt":
                    if pos < len(toks) and toks[pos] == "[":
                        pos += 1
                        n = seq("]")
                        pos += 1
                        a = group()
                        if n is None or a is None:
                            return None
                        piece = f"root({n})({a})"
                    else:
                        a = group()
                        if a is None:
                            return None
                        piece = f"sqrt({a})"
                elif name in ("text", "textrm", "mathrm"):
                    if pos >= len(toks) or toks[pos] != "{":
                        return None
                    depth, start = 0, pos
                    while pos < len(toks):
                        depth += toks[pos] == "{"
                        depth -= toks[pos] == "}"
                        pos += 1
                        if depth == 0:
                            break
                    words = "".join(toks[start + 1:pos - 1])
                    if not re.fullmatch(r"[A-Za-z ]+", words):
                        return None
                    piece = f'"{words}"'
                elif name == "mathbb":
                    a = group()
                    if a not in _MATHBB:
                        return None
                    piece = _MATHBB[a]
                elif name in ("overline", "bar", "hat", "vec", "dot", "tilde", "mathbf"):
                    a = group()
                    if a is None:
                        return None
                    piece = f"{_TEX_TO_AM[name]}({a})"
                elif name in ("left", "right"):
                    if pos < len(toks) and toks[pos] in ("\\{", "\\}", "\\|", "."):
                        mark = toks[pos]
                        pos += 1
                        piece = {"\\{": "{", "\\}": "}", "\\|": "||", ".": "{:" if name == "left" else ":}"}[mark]
                    else:
                        piece = ""
                elif name in _TEX_TO_AM:
                    piece = _TEX_TO_AM[name]
                else:
                    return None
            elif tok.isalpha():
                piece = tok
            else:
                piece = tok
            out.append(piece)
            if one:
                break
        # Letters apart, so that "xi" stays x times i and is not read as the Greek letter.
        return " ".join(out)

    try:
        out = seq(None)
    except IndexError:
        return None
    return " ".join(out.split()) if out else None


def _leaves_of_mathml(mml: str) -> str:
    """The symbols of MathML in reading order (NFKC, no invisible operators, U+2212 as '-'): what
    the benchmark's symbol match compares."""
    import unicodedata

    from lxml import etree

    root = etree.fromstring(mml.encode())
    out = []
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.rsplit("}", 1)[-1] in ("mi", "mn", "mo", "mtext", "ms") and el.text:
            out.append(re.sub(r"[\u2061-\u2064\u200b\s]", "", unicodedata.normalize("NFKC", el.text)))
    return "".join(out).replace("\u2212", "-")


def _asciimath_formulas(ctx: Ctx, n: int) -> list[tuple[str, str]]:
    """(TeX, AsciiMath) pairs from the formula pool that MathJax's AsciiMath input reads as the same
    symbols, in the same order, as the TeX (latex2mathml's reading of it)."""
    from latex2mathml.converter import convert

    if not hasattr(ctx, "am_pool"):
        pool = []
        for tex in ctx.formulas:
            am = tex_to_asciimath(tex)
            if am is None or "`" in am:
                continue
            got = ctx.node.render(kind="am2mml", tex=am, display=False)
            try:
                want = _leaves_of_mathml(convert(tex))
            except Exception:  # latex2mathml raises many types on TeX it does not know
                continue
            if got and _leaves_of_mathml(got) == want:
                pool.append((tex, am))
            if len(pool) >= 400:
                break
        ctx.am_pool = pool
    return [ctx.rng.choice(ctx.am_pool) for _ in range(n)]


def fam_asciimath(ctx: Ctx) -> tuple[str, dict]:
    """MathJax pages written in AsciiMath: backticks in the served text read by MathJax 3's
    input/asciimath or MathJax 2's AM_CHTML configuration, or (a page saved after MathJax 2 ran)
    `<script type="math/asciimath">` beside its preview. Formulas whose AsciiMath MathJax reads as
    the TeX's symbols (`_asciimath_formulas`); scored by symbols."""
    rng = ctx.rng
    style = rng.choice(["mathjax3", "mathjax2", "mathjax2-saved"])
    blocks = ctx.doc(rng.randint(3, 6), (1, 3), 0, display_share=0.25)
    pairs = dict(_asciimath_formulas(ctx, sum(1 for b in blocks for x in (b[1] if b[0] == "p" else [b])
                                                if isinstance(x, tuple) or b[0] == "dm")))
    it = iter(list(pairs.items()) * 4)
    am_of: dict[str, str] = {}

    def swap(b):  # the pool's formulas replaced by ones that have an AsciiMath twin
        if b[0] == "dm":
            tex, am = next(it)
            am_of[tex] = am
            return ("dm", tex)
        if b[0] == "p":
            parts = []
            for x in b[1]:
                if isinstance(x, tuple):
                    tex, am = next(it)
                    am_of[tex] = am
                    x = ("m", tex)
                parts.append(x)
            return ("p", parts)
        return b

    blocks = [swap(b) for b in blocks]

    def formula(tex: str, display: bool) -> str:
        am = am_of[tex]
        if style == "mathjax2-saved":
            typ = "math/asciimath; mode=display" if display else "math/asciimath"
            return f"<span class='MathJax_Preview'>{esc(am)}</span><script type='{typ}'>{esc(am)}</script>"
        return esc(f"`{am}`")

    body = render_blocks(blocks, lambda t: formula(t, False), lambda t: f"<p>{formula(t, True)}</p>",
                         lambda c, lang: "")
    if style == "mathjax3":
        head = ("<script>MathJax = {loader: {load: ['input/asciimath', 'output/chtml']}};</script>"
                "<script id='MathJax-script' async src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/startup.js'></script>")
    else:
        head = "<script src='https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=AM_CHTML'></script>"
    return shell(ctx, blocks[0][1], body, head=head), truth_of(blocks, match="symbols")


def fam_mathml_cdn(ctx: Ctx) -> tuple[str, dict]:
    """MathML served in the page (as MathJax 3 builds it from TeX: no TeX annotation, no alttext)
    and rendered in the browser by MathJax's mml-chtml script from a CDN; scored by symbols."""
    blocks = _node_blocks(ctx, "tex2mml", math_doc(ctx))
    r = ctx.node.render

    def strip_ns(mml: str) -> str:
        return mml if ctx.rng.random() < 0.5 else mml.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "")

    body = render_blocks(blocks, lambda t: strip_ns(r(kind="tex2mml", tex=t, display=False)),
                         lambda t: "<p>" + strip_ns(r(kind="tex2mml", tex=t, display=True)) + "</p>",
                         lambda c, lang: f"<pre><code>{esc(c)}</code></pre>")
    head = "<script id='MathJax-script' async src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/mml-chtml.js'></script>"
    return shell(ctx, blocks[0][1], body, head=head), truth_of(blocks, match="symbols")


def fam_libretexts(ctx: Ctx) -> tuple[str, dict]:
    """A long MindTouch (LibreTexts) textbook page as the server sends it: MathJax 2 from its CDN
    reading `\\(..\\)`/`\\[..\\]`, 15-30 sections, example/exercise/note boxes, a long table of
    contents, a page-rating widget and license footer: a page where a selector that keeps one block
    keeps a few kB of a long text."""
    rng = ctx.rng
    blocks = ctx.doc(rng.randint(15, 30), (1, 3), 0, display_share=0.3)
    boxed: list[str] = []
    box_n = 0
    for b in blocks:
        inner = render_blocks([b], lambda t: esc("\\(" + t + "\\)"),
                              lambda t: "<p class='mt-align-center'>" + esc("\\[" + t + "\\]") + "</p>", lambda c, lang: "",
                              head=lambda t, i: f"<h2 class='editable'><span class='mt-font-size-28'>{esc(t)}</span></h2>")
        if b[0] in ("p", "dm") and rng.random() < 0.3:
            box_n += 1
            kind = rng.choice(["example", "exercise", "note"])
            title = {"example": f"Example {box_n}", "exercise": f"Exercise {box_n}", "note": "Note"}[kind]
            boxed.append(f"<div class='box-{kind}'><p class='boxtitle'><strong>{title}</strong></p>{inner}</div>")
        else:
            boxed.append(inner)
    toc = "".join(f"<li class='mt-sortable-listing'><a href='/Bookshelves/Chapter_{i}'>{i}.{j}: "
                  f"{esc(ctx.sentence()[:40])}</a></li>" for i in range(1, 4) for j in range(1, 9))
    title = blocks[0][1]
    head = ("<script type='text/x-mathjax-config'>MathJax.Hub.Config({tex2jax: {inlineMath: [['\\\\(','\\\\)']]}});</script>"
            "<script src='https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=TeX-AMS_HTML'></script>")
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)} - Mathematics LibreTexts</title>"
            f"{head}</head><body class='mt-page columbia-page-main'><div id='elm-header'>{_links(rng, 6, 'elm-nav')}</div>"
            f"<div class='elm-skin-container'><nav class='elm-nav-container'><ul>{toc}</ul></nav>"
            f"<div id='elm-main-content' class='elm-content-container'><h1 id='title'>{esc(title)}</h1>"
            f"<div class='mt-content-container'>{''.join(boxed)}</div>"
            f"<div class='mt-page-rating'>Was this article helpful? <a href='#'>Yes</a> <a href='#'>No</a></div>"
            f"<div class='mt-license'>This page titled {esc(title)} is shared under a CC BY-NC-SA 4.0 license and was "
            f"authored, remixed, and/or curated by the LibreTexts team.</div></div></div>"
            f"<footer class='elm-footer'>{_links(rng, 5)}</footer></body></html>")
    return page, truth_of(blocks)


_JAVADOC_ROOT = OUT / "javadoc-build"


def _javadoc_comment(ctx: Ctx, n_code: int, codes: list[str]) -> str:
    """A doc comment: sentences, and code examples in <pre>{@code ...}</pre> (lines kept as they are:
    `*` then the line, no space, so javadoc's margin strip leaves the indentation)."""
    lines = [esc(ctx.sentence()), ""]
    for _ in range(n_code):
        for _ in range(10):
            lang, src = ctx.rng.choice(ctx.code)
            if src.count("{") == src.count("}") and "*/" not in src and not re.search(r"(?m)^\s*@", src) \
                    and "\\u" not in src:
                break
        else:
            continue
        codes.append(src)
        lines += ["<p>" + esc(ctx.sentence()) + "</p>", "<pre>{@code", *src.split("\n"), "}</pre>"]
    lines += ["", "@param x " + esc(ctx.sentence()[:60]), "@return " + esc(ctx.sentence()[:60])]
    return "/**\n" + "\n".join("*" + line for line in lines) + "\n*/"


def fam_javadoc(ctx: Ctx) -> tuple[str, dict]:
    """A class page written by the JDK's own javadoc (the `javadoc` on PATH) from a class whose
    comments hold prose and `<pre>{@code ...}</pre>` examples: the member summary tables, signatures,
    navigation bars and inherited-method lists around them are javadoc's. Scored on the blocks that
    javadoc printed verbatim."""
    import shutil as _shutil

    if _shutil.which("javadoc") is None:
        raise SystemExit("the javadoc family needs a JDK's javadoc on PATH")
    rng = ctx.rng
    n = getattr(ctx, "javadoc_n", 0)
    ctx.javadoc_n = n + 1
    name = f"Sample{n}"
    src_dir = _JAVADOC_ROOT / f"src{n}" / "org" / "example"
    out_dir = _JAVADOC_ROOT / f"out{n}"
    _shutil.rmtree(_JAVADOC_ROOT / f"src{n}", ignore_errors=True)
    _shutil.rmtree(out_dir, ignore_errors=True)
    src_dir.mkdir(parents=True)
    codes: list[str] = []
    methods = []
    for m in range(rng.randint(2, 5)):
        methods.append(_javadoc_comment(ctx, rng.randint(0, 2), codes) +
                       f"\npublic static int method{m}(int x) {{ return x + {m}; }}\n")
    java = (f"package org.example;\n\n{_javadoc_comment(ctx, 1, codes)}\npublic final class {name} {{\n"
            f"private {name}() {{}}\n" + "\n".join(methods) + "}\n")
    (src_dir / f"{name}.java").write_text(java, encoding="utf-8")
    subprocess.run(["javadoc", "-quiet", "-Xdoclint:none", "-notimestamp", "-d", str(out_dir),
                    "-sourcepath", str(_JAVADOC_ROOT / f"src{n}"), "org.example"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    page = (out_dir / "org" / "example" / f"{name}.html").read_text(encoding="utf-8")
    from lxml import html as lxml_html

    printed = [pre.text_content().strip("\n") for pre in lxml_html.fromstring(page).iter("pre")]
    return page, {"formulas": [], "code": [c for c in codes if any(c in p for p in printed)]}


_JSP_NAMES = ("items", "users", "orders", "books", "rows", "products", "posts", "cities")


def _jsp(rng) -> str:
    """A JSP page as tutorial blogs print one: directives, JSTL tags and `${...}` expressions."""
    coll = rng.choice(_JSP_NAMES)
    var, field = coll[:-1], rng.choice(("name", "title", "id", "price", "email"))
    lines = ['<%@ page contentType="text/html; charset=UTF-8" pageEncoding="UTF-8" %>',
             '<%@ taglib prefix="c" uri="http://java.sun.com/jsp/jstl/core" %>', "<html>", "<body>",
             f"<h2>All {coll}</h2>", f'<c:if test="${{empty {coll}}}">', f"  <p>No {coll} found.</p>", "</c:if>",
             "<table>", f'<c:forEach var="{var}" items="${{{coll}}}" varStatus="loop">', "  <tr>",
             "    <td>${loop.index + 1}</td>", f"    <td><c:out value=\"${{{var}.{field}}}\"/></td>", "  </tr>",
             "</c:forEach>", "</table>", f"<% out.println(\"Total: \" + request.getAttribute(\"{coll}Count\")); %>",
             "</body>", "</html>"]
    return "\n".join(lines)


def _short_line(ctx: Ctx, intl: bool) -> str:
    """A line of a short post ("Install the tool", "然后检查依赖"): under a paragraph's length, no comma."""
    words = re.split(r"[,，。.]", ctx.sentence(intl))[0].split()
    return " ".join(words[:4]) if len(words) > 1 else words[0][:12] if words else "Then run"


def fam_single_code(ctx: Ctx) -> tuple[str, dict]:
    """Pages whose content is one or two code blocks and a few short lines: a JSP snippet on a blog
    (sidebar of popular posts with summaries, reader comments, a comment form with its hint), a
    cheat sheet of cards (a heading, one sentence, one block each, in a grid of generated class
    names), a short CJK or English post with commands under a comment form. The page's other text
    (summaries, hints, course teasers) outweighs the post's own lines."""
    rng = ctx.rng
    kind = rng.choice(["blog-jsp", "cheatsheet", "short-post"])
    intl = kind == "short-post" and rng.random() < 0.5
    teasers = "".join(f"<li><a href='/p/{rng.randint(1, 999)}'>{esc(ctx.sentence(intl)[:50])}</a>"
                      f"<div class='snippet'>{esc(ctx.sentence(intl))}</div></li>" for _ in range(4))
    hint = ("讨论应以学习和精进为目的。请勿发布不友善或者负能量的内容，与人为善，比聪明更重要！" if intl else
            "Comments are moderated, so please be kind, stay on topic, and do not post links to spam or ads.")
    hint_class = rng.choice(("ui message info", "alert alert-info", "form-hint"))  # Semantic UI, Bootstrap, none
    form = (f"<form class='comment-form' method='post' action='/comments'><div class='{hint_class}'>{hint}</div>"
            "<textarea name='comment'></textarea><input type='submit' value='Post'></form>")
    bp = boilerplate(ctx)
    title = ctx.sentence(intl)[:60]
    code: list[str] = []
    if kind == "blog-jsp":
        src = _jsp(rng)
        code.append(src)
        pre = rng.choice([f"<pre class='brush: xml; toolbar: false'>{esc(src)}</pre>",
                          f"<pre><code class='language-jsp'>{esc(src)}</code></pre>",
                          f"<pre class='prettyprint lang-html'>{esc(src)}</pre>"])
        post = (f"<p>{esc(_short_line(ctx, False))}:</p>{pre}<p>{esc(_short_line(ctx, False))}.</p>")
        comments = "".join(f"<li class='comment'><div class='comment-author'><a href='/u{i}'>reader{i}</a> said...</div>"
                           f"<p>{esc(ctx.sentence()[:70])}</p></li>" for i in range(rng.randint(0, 3)))
        page = (f"<div id='header'>{bp['nav']}</div><div class='main-outer'><div class='column-center'>"
                f"<div class='post hentry'><h3 class='post-title entry-title'>{esc(title)}</h3>"
                f"<div class='post-body entry-content'>{post}</div><div class='post-footer'>Posted by admin at 10:24 AM"
                f"</div></div><div class='comments'><h4>{len(comments)} comments:</h4><ol>{comments}</ol>{form}</div>"
                f"</div><div class='column-right sidebar'><h2>Popular Posts</h2><ul class='popular-posts'>{teasers}</ul>"
                f"</div></div><div class='footer-outer'>{bp['footer']}</div>")
    elif kind == "cheatsheet":
        cards = []
        for i in range(rng.randint(2, 6)):
            lang, src = rng.choice(ctx.code)
            code.append(src)
            cards.append(f"<div class='e1sajh0 gamut-{rng.randint(100, 999)}x-Box'><h3 class='e1k6h9x0'>"
                         f"{esc(_short_line(ctx, False))}</h3><div class='styles_markdown__{rng.randint(10, 99)}'>"
                         f"<p>{esc(ctx.sentence())}</p><pre><code class='language-{lang}'>{esc(src)}</code></pre></div></div>")
        page = (f"<header class='gamut-nav'>{bp['nav']}</header><main><div class='e1m0x7m0'><h1>{esc(title)}</h1>"
                f"<div class='gamut-grid'>{''.join(cards)}</div></div>"
                f"<div class='e1p2ea0 course-promo'><h2>Learn more</h2><ul>{teasers}</ul></div></main>"
                f"<footer>{bp['footer']}</footer>")
    else:
        blocks = []
        for _ in range(rng.randint(1, 2)):
            lang, src = rng.choice(ctx.code)
            if rng.random() < 0.6:  # a command to type, shorter than a paragraph: the post's code scores little
                name = (re.findall(r"def (\w+)", src) or ["depcheck"])[0].replace("_", "-")
                lang, src = "shell", rng.choice(("npm i -g {}", "pip install {}", "composer require acme/{}",
                                                 "go get github.com/acme/{}", "brew install {}")).format(name)
            code.append(src)
            blocks.append(f"<p>{esc(_short_line(ctx, intl))}</p><div style='position: relative;'>"
                          f"<pre class='language-{lang}'><code>{esc(src)}</code><button class='copy-code'>Copy</button></pre></div>")
        page = (f"<div class='navbar'>{bp['nav']}</div><div class='main-column'><div class='ui segment article-content'>"
                f"<h1>{esc(title)}</h1><div class='markdown-body'>{''.join(blocks)}<p>{esc(_short_line(ctx, intl))}</p></div>"
                f"</div><div class='ui comments'><div class='reply-count'>0 replies</div>{form}</div></div>"
                f"<div class='sidebar'><div class='course'><ul>{teasers}</ul></div></div>")
    html = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title></head><body>{page}</body></html>")
    return html, {"formulas": [], "code": code}


_NEUTRAL = ("col-md-4", "col-4", "e1q8v2k0", "widget-area", "right-col", "aside-col", "rail", "sb-wrap")


def _has_cjk(text: str) -> bool:
    return bool(re.search("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]", text))


def _teaser_widget(ctx: Ctx, intl: bool) -> str:
    """Other pages' teasers as blog themes print them: a title linked to the page and a summary cut
    to an excerpt's length each, as list items (Blogger's popular posts), cards of divs (WordPress
    related posts) or articles with a thumbnail link; under a heading or none."""
    rng = ctx.rng
    items = []
    shape = rng.choice(("li", "card", "article"))
    for _ in range(rng.randint(3, 8)):
        href = f"/{rng.choice(('p', '20' + str(rng.randint(10, 24)), 'blog', 'post'))}/{rng.randint(1, 9999)}"
        title = esc(ctx.sentence(intl)[:rng.randint(30, 70)].rstrip(" ,.;:"))
        summary = " ".join(ctx.sentence(intl) for _ in range(rng.randint(1, 2)))
        cut = rng.randint(60, 160) if _has_cjk(summary) else rng.randint(120, 400)  # as excerpt functions cut
        summary = esc(summary if len(summary) <= cut else summary[:cut].rstrip() + "…")
        if shape == "li":
            items.append(f"<li><a href='{href}'>{title}</a><div class='item-snippet'>{summary}</div></li>")
        elif shape == "card":
            items.append(f"<div class='rp-item'><h4><a href='{href}'>{title}</a></h4><p>{summary}</p></div>")
        else:
            items.append(f"<article class='card'><a href='{href}'><img src='/t/{rng.randint(1, 99)}.jpg' alt=''></a>"
                         f"<h3 class='card-title'><a href='{href}'>{title}</a></h3><p class='excerpt'>{summary}</p></article>")
    heading = rng.choice(("", "<h3>Popular Posts</h3>", "<h3>From the blog</h3>", "<h3>热门文章</h3>",
                          "<h2>You might also enjoy</h2>", "<h3>读者还看了</h3>"))
    body = f"<ul>{''.join(items)}</ul>" if shape == "li" else f"<div class='{rng.choice(_NEUTRAL)}-list'>{''.join(items)}</div>"
    return f"<div class='{rng.choice(_NEUTRAL)}'>{heading}{body}</div>"


def fam_post_teasers(ctx: Ctx) -> tuple[str, dict]:
    """A short post (one command, or one short block, and a line or two) beside one or two lists of
    other pages' teasers with long summaries (English or Chinese), in the layouts blogs use: the
    headline (h1, or Blogger's h3.post-title) inside the post's container or in a header above both
    columns, the teasers in a sidebar after or before the post, or under the post in its container.
    Class names say little (grid columns, generated names). The teasers outweigh the post."""
    rng = ctx.rng
    intl, teaser_intl = rng.random() < 0.5, rng.random() < 0.5
    code, blocks = [], []
    for _ in range(rng.choice((1, 1, 2))):
        lang, src = rng.choice(ctx.code)
        if rng.random() < 0.7:
            name = (re.findall(r"def (\w+)", src) or ["depcheck"])[0].replace("_", "-")
            lang, src = "shell", rng.choice(("npm i -g {}", "pip install {}", "cargo install {}", "apt-get install {}",
                                             "docker pull acme/{}", "gem install {}")).format(name)
        code.append(src)
        pre = rng.choice((f"<pre><code class='language-{lang}'>{esc(src)}</code></pre>", f"<pre>{esc(src)}</pre>",
                          f"<div class='highlight'><pre class='{lang}'>{esc(src)}</pre></div>"))
        blocks.append((f"<p>{esc(_short_line(ctx, intl))}</p>" if rng.random() < 0.7 else "") + pre)
    if rng.random() < 0.5:
        blocks.append(f"<p>{esc(_short_line(ctx, intl))}</p>")
    title = ctx.sentence(intl)[:rng.randint(25, 70)].rstrip(" ,.;:")
    head = rng.choice((f"<h1>{esc(title)}</h1>", f"<h1 class='entry-title'>{esc(title)}</h1>",
                       f"<h3 class='post-title entry-title'>{esc(title)}</h3>"))
    post = f"<div class='{rng.choice(('post-body', 'entry', 'markdown-body', 'c7x2p', 'text'))}'>{''.join(blocks)}</div>"
    widgets = "".join(_teaser_widget(ctx, teaser_intl) for _ in range(rng.choice((1, 1, 2))))
    bp = boilerplate(ctx)
    place, headline_out = rng.choice(("right", "left", "below")), rng.random() < 0.4
    main = f"<div class='{rng.choice(('col-md-8', 'main-col', 'e9k2m1', 'left-col'))}'>" + \
        ("" if headline_out else head) + post + (widgets if place == "below" else "") + "</div>"
    side = f"<div class='{rng.choice(_NEUTRAL)}'>{widgets}</div>" if place != "below" else ""
    columns = side + main if place == "left" else main + side
    page = (f"<div class='top-bar'>{bp['nav']}</div>" + (f"<div class='page-header'>{head}</div>" if headline_out else "")
            + f"<div class='row'>{columns}</div><div class='site-footer'>{bp['footer']}</div>")
    site = rng.choice(("Dev Notes", "码农笔记", "Acme Blog", "TechTips"))
    html = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}{rng.choice((' - ', ' | ', ' – '))}"
            f"{site}</title></head><body>{page}</body></html>")
    return html, {"formulas": [], "code": code}


def _instruction(ctx: Ctx) -> str:
    """A step's one-line instruction: a sentence cut to its first clause or a line's length."""
    words = ctx.sentence().split()
    line = ""
    for w in words:
        if len(line) + len(w) > ctx.rng.randint(50, 110):
            break
        line = f"{line} {w}" if line else w
    return line.rstrip(" ,;:-") + "."


def fam_howto_steps(ctx: Ctx) -> tuple[str, dict]:
    """How-to and recipe pages whose steps are each an image and a one-line instruction in a small
    container of their own (a div or paragraph beside the image, a list item), or numbered
    steps in divs without images (a recipe card). A step looks like a photo and its caption; the
    steps are the page's text. Truth: the instructions (`text`), each to be found in the output."""
    rng = ctx.rng
    kind = rng.choice(("image-div", "image-p", "image-li", "numbered-div"))
    cls = rng.choice(("step", "howto-step", "e3k9x1", "wp-block-group", "c-step"))
    steps, blocks = [], []
    for i in range(1, rng.randint(4, 9) + 1):
        text = _instruction(ctx)
        label = rng.choice(("", f"{i}. ", f"Step {i}: ")) if kind != "numbered-div" else ""
        steps.append(text)
        img = f"<img src='/img/howto-{rng.randint(1, 999)}-step-{i}.jpg' alt='' width='600' height='400'>"
        if kind == "image-div":
            blocks.append(f"<div class='{cls}'>{img}<div class='{cls}-text'>{esc(label + text)}</div></div>")
        elif kind == "image-p":
            blocks.append(f"<div class='{cls}'><p>{img}</p><p>{esc(label + text)}</p></div>")
        elif kind == "image-li":
            blocks.append(f"<li>{img}<p>{esc(label + text)}</p></li>")
        else:
            blocks.append(f"<div class='{cls}'><span class='{cls}-num'>{i}</span><div class='{cls}-text'>"
                          f"{esc(text)}</div></div>")
    steps_html = f"<ol class='steps'>{''.join(blocks)}</ol>" if kind == "image-li" else \
        f"<div class='{cls}s'>{''.join(blocks)}</div>"
    intro = "".join(f"<p>{esc(ctx.sentence())}</p>" for _ in range(rng.randint(1, 2)))
    outro = f"<p>{esc(ctx.sentence())}</p>" if rng.random() < 0.5 else ""
    heading = rng.choice(("<h2>Instructions</h2>", "<h2>How to do it</h2>", "<h3>Steps</h3>", ""))
    title = "How to " + ctx.sentence()[:rng.randint(25, 60)].rstrip(" ,.;:").lower()
    html = shell(ctx, title, intro + heading + steps_html + outro)
    return html, {"formulas": [], "code": [], "text": steps}


FAMILIES = {
    # math
    "pandoc-mathml": fam_pandoc("--mathml"),
    "pandoc-mathjax": fam_pandoc("--mathjax"),
    "pandoc-katex": fam_pandoc("--katex"),
    "pandoc-webtex": fam_pandoc("--webtex"),
    "markdown-math": fam_markdown_math,
    "docutils-mathjax": fam_docutils("MathJax"),
    "docutils-mathml": fam_docutils("MathML"),
    "latex2mathml": fam_latex2mathml,
    "katex-ssr": fam_katex,
    "mathjax3-ssr": fam_mathjax3,
    "mediawiki": fam_mediawiki,
    "tex-images": fam_tex_images,
    "mathjax-textbook": fam_mathjax_source,
    # code
    "pygments": fam_pygments,
    "markdown-code": fam_markdown_code,
    "pandoc-code": fam_pandoc_code,
    "docutils-code": fam_docutils_code,
    "highlightjs": fam_hljs,
    "forum-code": fam_forum_code,
    "legacy-code": fam_legacy_code,
    "tutorial-code": fam_tutorial,
    # issue #30
    "katex-autorender": fam_katex_autorender,
    "doctest": fam_doctest,
    "forum-divcode": fam_forum_divcode,
    "tables": fam_tables,
    "asciimath": fam_asciimath,
    "mathml-cdn": fam_mathml_cdn,
    "libretexts-long": fam_libretexts,
    "javadoc": fam_javadoc,
    "single-code": fam_single_code,
    "post-teasers": fam_post_teasers,
    "howto-steps": fam_howto_steps,
}


def generate(split: str, per_family: int, seed: int | None = None, families: list[str] | None = None) -> Path:
    ctx = Ctx(split, SEEDS[split] if seed is None else seed)
    out = OUT / split
    if out.exists():
        shutil.rmtree(out)
    truth = {}
    try:
        for family in families or FAMILIES:
            (out / family).mkdir(parents=True, exist_ok=True)
            for i in range(per_family):
                page, t = FAMILIES[family](ctx)
                name = f"{family}/{i:03d}.html"
                (out / name).write_text(page, encoding="utf-8")
                truth[name] = dict(t, family=family)
    finally:
        ctx.node.close()
    (out / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=sorted(SEEDS), default="dev")
    ap.add_argument("--per-family", type=int, default=12)
    ap.add_argument("--seed", type=int, default=None, help="default: the split's own seed")
    ap.add_argument("--family", action="append", help="only these families (repeatable)")
    args = ap.parse_args()
    out = generate(args.split, args.per_family, args.seed, args.family)
    truth = json.loads((out / "truth.json").read_text())
    print(f"wrote {len(truth)} pages to {out.relative_to(ROOT)}: "
          f"{sum(len(t['formulas']) for t in truth.values())} formulas, {sum(len(t['code']) for t in truth.values())} code blocks")


if __name__ == "__main__":
    main()
