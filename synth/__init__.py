"""Synthesis: LLM backends (an OpenAI-compatible HTTP client, a local transformers model and
`assay serve`), rewriters and a solver with verify-and-reject loops, a sandbox for model-written
code, and deterministic generators (arithmetic, logic puzzles, knowledge-graph walks); and, in
`synth.history`, code history as training data (issue 15).

Importing this package registers the stages synth.rewrite, synth.solve, synth.arith, synth.logic and
synth.kg, and history's synth.commits / prs / swebench / verify / leakage / templates; torch and
transformers are imported only when a local model is loaded.
"""
from . import generators, rewrite, solve  # noqa: F401  (registers the stages)
from .cli import register_commands  # noqa: F401
from .history import REPORT_SECTIONS as _HISTORY_SECTIONS

REPORT_SECTIONS = [*_HISTORY_SECTIONS, "assay.synth.report:report_section"]
