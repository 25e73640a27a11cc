"""Deduplication: URL, exact and MinHash-LSH near-duplicates, with local and Spark plans.

Importing this package registers the stages (dedup.url, dedup.exact, dedup.minhash, dedup.remove);
pyspark and datasketch are imported only inside the plans and benchmarks that use them.
"""
from . import exact, near, remove, url  # noqa: F401

REPORT_SECTIONS = ["assay.dedup.report:report_section"]
