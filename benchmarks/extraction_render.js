// Renders formulas and code the way sites do it server-side, with the real JavaScript libraries:
// KaTeX (renderToString), MathJax 3 (CHTML output with its assistive MathML, as mathjax-full's
// node examples emit it) and highlight.js. Reads one JSON job per line on stdin, writes one JSON
// HTML string per line (null when the library refused the input). Used by extraction_pages.py.
const {mathjax} = require('mathjax-full/js/mathjax.js');
const {TeX} = require('mathjax-full/js/input/tex.js');
const {CHTML} = require('mathjax-full/js/output/chtml.js');
const {liteAdaptor} = require('mathjax-full/js/adaptors/liteAdaptor.js');
const {RegisterHTMLHandler} = require('mathjax-full/js/handlers/html.js');
const {AssistiveMmlHandler} = require('mathjax-full/js/a11y/assistive-mml.js');
const {AllPackages} = require('mathjax-full/js/input/tex/AllPackages.js');
const katex = require('katex');
const hljs = require('highlight.js');

const adaptor = liteAdaptor();
AssistiveMmlHandler(RegisterHTMLHandler(adaptor));
const mjdoc = mathjax.document('', {
  InputJax: new TeX({packages: AllPackages}),
  OutputJax: new CHTML({fontURL: 'https://cdn.example.org/mathjax/fonts'}),
});

function render(job) {
  try {
    if (job.kind === 'katex') {
      return katex.renderToString(job.tex, {displayMode: job.display, throwOnError: true});
    }
    if (job.kind === 'mathjax') {
      const node = mjdoc.convert(job.tex, {display: job.display});
      return adaptor.outerHTML(node);
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
