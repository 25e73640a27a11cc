"""Filters: heuristic and model-based document filters and taggers."""
