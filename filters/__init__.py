"""Filters and quality: heuristic signals and rules, code rules, PII, scorers, calibrated tiers, topics.

Importing this package registers its stages (filter.*, quality.*) and the `assay quality` commands."""
from . import basic, code_rules, pii, rules, signals  # noqa: F401
