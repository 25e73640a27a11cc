"""Quality: code rules, fast scorers, calibrated ensemble and tiers, topic and format tags.

Importing this package registers its stages (quality.*); `register_commands` adds `assay quality
train | annotate | build-models`. The heuristic signals, rules and PII stages it builds on are the
filter family's (filter.signals, filter.rules, filter.pii in assay.filters)."""
from . import code_rules, default, scorers, tiers, topics  # noqa: F401
from .commands import register_commands  # noqa: F401

REPORT_SECTIONS = ["assay.quality.report:report_section"]
