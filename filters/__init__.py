"""Filters: length, script and language filters, heuristic quality signals and rules (thresholds per
language), PII.

Importing this package registers its stages (filter.*). The quality family (assay.quality) builds its
scorers and tiers on these signals."""
from . import basic, lang_mix, pii, pii_ner, rules, signals, toxicity, urls  # noqa: F401
from .commands import register_commands  # noqa: F401

REPORT_SECTIONS = ["assay.filters.report:report_section"]
