from .history import REPORT_SECTIONS  # noqa: F401  (importing registers the synth.commits/prs/swebench/verify/leakage/templates stages)
