"""Errors that are the user's to fix: the CLI prints them as one `error:` line and exits 2.
Anything else that escapes is a bug and keeps its traceback."""
from __future__ import annotations


class UserError(ValueError):
    """A mistake in what the user asked for (a path, a recipe, a param), explained in one line."""
