// Renders formulas and code the way sites do it server-side, with the real JavaScript libraries:
// KaTeX (renderToString), MathJax 3 (CHTML output with its assistive MathML, as mathjax-full's
// node examples emit it; MathML from TeX or AsciiMath input) and highlight.js. Reads one JSON job per line on stdin, writes one JSON
// HTML string per line (null when the library refused the input). Used by extraction_pages.py.
const {mathjax} = require('mathjax-full/js/mathjax.js');
const {TeX} = require('mathjax-full/js/input/tex.js');
const {CHTML} = require('mathjax-full/js/output/chtml.js');
const {liteAdaptor} = require('mathjax-full/js/adaptors/liteAdaptor.js');
const {RegisterHTMLHandler} = require('mathjax-full/js/handlers/html.js');
const {AssistiveMmlHandler} = require('mathjax-full/js/a11y/assistive-mml.js');
const {AllPackages} = require('mathjax-full/js/input/tex/AllPackages.js');
const {AsciiMath} = require('mathjax-full/js/input/asciimath.js');
const {SerializedMmlVisitor} = require('mathjax-full/js/core/MmlTree/SerializedMmlVisitor.js');
const {STATE} = require('mathjax-full/js/core/MathItem.js');
const katex = require('katex');
const hljs = require('highlight.js');

const adaptor = liteAdaptor();
AssistiveMmlHandler(RegisterHTMLHandler(adaptor));
const mjdoc = mathjax.document('', {
  InputJax: new TeX({packages: AllPackages}),
  OutputJax: new CHTML({fontURL: 'https://cdn.example.org/mathjax/fonts'}),
});

// MathML as MathJax builds it from TeX or AsciiMath (no output jax): what a page serves when it
// ships MathML and a CDN script renders it, and what MathJax reads AsciiMath as.
const texdoc = mathjax.document('', {InputJax: new TeX({packages: AllPackages.filter((p) => p !== 'bussproofs')})});
const amdoc = mathjax.document('', {InputJax: new AsciiMath({})});
const mmlVisitor = new SerializedMmlVisitor();
function mml(doc, src, display) {
  return mmlVisitor.visitTree(doc.convert(src, {display: display, end: STATE.CONVERT}));
}

function render(job) {
  try {
    if (job.kind === 'katex') {
      return katex.renderToString(job.tex, {displayMode: job.display, throwOnError: true});
    }
    if (job.kind === 'mathjax') {
      const node = mjdoc.convert(job.tex, {display: job.display});
      return adaptor.outerHTML(node);
    }
    if (job.kind === 'tex2mml') {
      const out = mml(texdoc, job.tex, job.display);
      return out.includes('merror') || out.includes('mathcolor="red"') ? null : out;  // TeX it does not know
    }
    if (job.kind === 'am2mml') {
      return mml(amdoc, job.tex, job.display);
    }
    if (job.kind === 'hljs') {
      return hljs.highlight(job.code, {language: job.lang, ignoreIllegals: true}).value;
    }
  } catch (e) {
    return null;
  }
  return null;
}

// One job per line in, one JSON answer per line out: the generator keeps one process for all pages.
const rl = require('readline').createInterface({input: process.stdin});
rl.on('line', (line) => { process.stdout.write(JSON.stringify(render(JSON.parse(line))) + '\n'); });
