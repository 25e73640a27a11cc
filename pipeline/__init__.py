"""Assay's shared core: document schema, datasets, stages, engines, runner, recipes, CLI, report."""
__version__ = "0.1.0"
