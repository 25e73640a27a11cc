"""Filters: heuristic and model-based document filters and taggers.

Importing this package registers its stages (filter.unicode, filter.length, filter.script, ...)."""
from . import basic  # noqa: F401
