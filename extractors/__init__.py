"""Extraction: WARC/HTML (math and code kept), PDF, language ID, URL normalisation.

Importing this package registers the stages; heavy libraries load lazily inside them.
"""
from . import langid, pdf, site_boilerplate, stages  # noqa: F401  (extract.lang_id, extract.pdf, extract.site_boilerplate, extract.html|warc|records)
