"""Filters: length, script and language filters, heuristic quality signals and rules, PII.

Importing this package registers its stages (filter.*). The quality family (assay.quality) builds its
scorers and tiers on these signals."""
from . import basic, pii, rules, signals  # noqa: F401
