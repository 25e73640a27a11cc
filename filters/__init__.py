"""Filters and quality: heuristic signals and rules, code rules, PII, scorers, calibrated tiers, topics.

Importing this package registers its stages (filter.*, quality.*); `register_commands` adds
`assay quality train | annotate | build-models`."""
from . import basic, code_rules, default, pii, rules, scorers, signals, tiers  # noqa: F401
from .commands import register_commands  # noqa: F401

REPORT_SECTIONS = ["assay.filters.report:report_section"]
