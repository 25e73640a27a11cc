"""Extraction: WARC/HTML (math and code kept), PDF, language ID, URL normalisation.

Importing this package registers the stages; heavy libraries load lazily inside them.
"""
from . import pdf, stages  # noqa: F401  (extract.pdf, extract.html, extract.warc, extract.records)
