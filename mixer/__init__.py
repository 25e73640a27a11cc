"""The mixer: staged mixture recipes to packed, masked token shards for training.

Importing this package registers `mix.tokenize` and `mix.pack`; `register_commands` adds
`assay mix plan|build|inspect` and `assay tokenizer train`.
"""
from . import packstage, tokenize  # noqa: F401

REPORT_SECTIONS = ["assay.mixer.report:report_section"]


def register_commands(cli) -> None:
    # imported here: a worker that only unpickles a mixer stage never loads click and the commands
    from .cli import register_commands as register

    register(cli)
