"""Code history as training data: commits, pull requests and SWE-bench instances become change
records (validated against their diffs), guarded against SWE-bench leakage, and rendered by two
Agentless-style templates into PR-Dialogue documents with role `segments`.

Importing this package registers the synth.commits / prs / swebench / verify / leakage / templates
stages; pygit2 is imported only when a repository is read.
"""
from . import stages  # noqa: F401

REPORT_SECTIONS = ["assay.synth.history.report:report_section"]
