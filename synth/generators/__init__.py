"""Deterministic generators: arithmetic, logic puzzles, multi-hop questions from knowledge graphs."""
from . import arith, kg, logic  # noqa: F401  (registers synth.arith, synth.kg, synth.logic)
