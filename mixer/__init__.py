"""The mixer: staged mixture recipes to packed, masked token shards for training.

Importing this package registers `mix.tokenize` and `mix.pack`; `register_commands` adds
`assay mix plan|build|inspect` and `assay tokenizer train`.
"""
from . import packstage, tokenize  # noqa: F401
from .cli import register_commands  # noqa: F401

REPORT_SECTIONS = ["assay.mixer.report:report_section"]
