"""Extraction: WARC/HTML (math and code kept), PDF, language ID, URL normalisation.

Importing this package registers the stages; heavy libraries load lazily inside them.
"""
from . import langid, pdf, stages  # noqa: F401  (extract.lang_id, extract.pdf, extract.html|warc|records)
