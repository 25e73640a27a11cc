import pytest

from assay.extractors.urls import normalize_url, normalize_urls, url_domain


@pytest.mark.parametrize(
    "raw, want",
    [
        ("HTTP://Example.COM:80/a/b?b=2&a=1#frag", "http://example.com/a/b?a=1&b=2"),
        ("https://example.com:443", "https://example.com/"),
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        ("https://ex.com/p?utm_source=x&utm_medium=y&id=7&fbclid=abc&gclid=q", "https://ex.com/p?id=7"),
        ("https://ex.com/p?utm_campaign=z", "https://ex.com/p"),
        ("https://ex.com/a/./b/../c", "https://ex.com/a/c"),
        ("https://ex.com/%7euser", "https://ex.com/~user"),
        ("https://bücher.de/", "https://xn--bcher-kva.de/"),
        ("  https://ex.com/x  ", "https://ex.com/x"),
        ("https://ex.com/q?a=&b=1", "https://ex.com/q?a=&b=1"),
        ("http://[2001:DB8::1]:80/", "http://[2001:db8::1]/"),
    ],
)
def test_normalize_url(raw, want):
    assert normalize_url(raw) == want


@pytest.mark.parametrize("garbage", ["", "   ", "not a url", "http://", "http://ex.com:notaport/", "mailto:x@y"])
def test_garbage_never_raises(garbage):
    assert normalize_url(garbage) == garbage.strip()


def test_equivalent_spellings_collide():
    spellings = [
        "http://example.com/page?id=3&lang=en",
        "HTTP://EXAMPLE.com:80/page?lang=en&id=3&utm_source=twitter#comments",
        "http://example.com/page?lang=en&id=3&fbclid=IwAR0",
    ]
    assert len(set(normalize_urls(spellings))) == 1


def test_normalize_urls_keeps_none_and_order():
    assert normalize_urls(["https://A.com", None, "x"]) == ["https://a.com/", None, "x"]


def test_url_domain():
    assert url_domain("https://www.Example.com/x") == "example.com"
    assert url_domain(None) is None and url_domain("garbage") is None
