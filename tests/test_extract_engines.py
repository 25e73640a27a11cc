"""extract.html with mode=native gives the same rows on the local engine, Spark and Ray (#30): the
local engine runs each page in its watchdog child, Spark's and Ray's daemonic workers in-process, so
this also holds the selector to the same answer with and without the child. Slow: it starts Spark
and Ray (`make test-all` runs it)."""
import pytest

from conftest import LOCAL_OPTIONS, RAY_OPTIONS, SPARK_OPTIONS

FILLER = "This sentence is one of the ordinary words that make a paragraph look like the text of an article. "

PAGES = {
    "article.html": f"""<html><head><title>Notes</title></head><body><nav><a href='/'>Home</a></nav><main>
        <h1>Notes on sums</h1><p>The sum is <script type="math/tex">\\sum_i x_i</script>. {FILLER * 3}</p>
        <pre><code class="language-python">def f(x):\n    return x + 1\n</code></pre><p>{FILLER * 2}</p>
        <table><tr><th>n</th><th>t</th></tr><tr><td>1</td><td>2 ms</td></tr></table></main>
        <div class="sidebar"><a href='/a'>Related story one</a> <a href='/b'>Related story two</a></div></body></html>""",
    "thread.html": "<html><body><h1>A question</h1>" + "".join(
        f"<div class='comment'><div class='comment-body'><p>Reply {i}. {FILLER}</p></div></div>" for i in range(4))
        + "</body></html>",
    "cjk.html": "<html><body><div class='post'>" + "<p>今天终于放假了，大家好好休息，年后继续努力。</p>" * 5 + "</div></body></html>",
    "asciimath.html": "<html><head><script src='https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js?config=AM_CHTML'>"
        f"</script></head><body><article><p>Energy `E=mc^2` and `sqrt(x)/2`. {FILLER * 3}</p></article></body></html>",
}


def _rows(engine_name, options, tmp_path):
    from assay.extractors.stages import ExtractHtmlFiles
    from assay.pipeline.dataset import Dataset
    from assay.pipeline.engines import get_engine
    from assay.pipeline.runner import run_stage

    src = tmp_path / "pages"
    src.mkdir(exist_ok=True)
    for name, html in PAGES.items():
        (src / name).write_text(html, encoding="utf-8")
    stage = ExtractHtmlFiles({"paths": [str(src)], "mode": "native"})
    out = run_stage(stage, [], tmp_path / engine_name, engine=get_engine(engine_name, options))
    table = Dataset(out.out).read().select(["id", "text", "meta"]).to_pylist()
    return sorted((r["id"], r["text"], r["meta"]) for r in table)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.ray
def test_native_extraction_is_the_same_on_local_spark_and_ray(tmp_path, spark_engine, ray_engine):
    local = _rows("local", LOCAL_OPTIONS, tmp_path)
    assert len(local) == len(PAGES) and all(text for _, text, _ in local)
    assert any("$\\sum_i x_i$" in text for _, text, _ in local)
    assert any("$E=mc^{2}$" in text for _, text, _ in local)
    assert _rows("spark", SPARK_OPTIONS, tmp_path) == local
    assert _rows("ray", RAY_OPTIONS, tmp_path) == local
