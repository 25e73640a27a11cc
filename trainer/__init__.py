"""Trainer family: MoE proxy pretraining on token shards, held-out bits-per-byte, data ablations.

Commands (registered on the top-level CLI): `assay train CONFIG`, `assay eval CHECKPOINT --data ...`,
`assay ablate SPEC`. Importing this package stays cheap: torch loads only when a command runs.
"""
from __future__ import annotations

REPORT_SECTIONS = ["assay.trainer.report:report_section"]
REPORT_SUMMARY = ["assay.trainer.report:report_summary"]


def register_commands(cli) -> None:
    from .cli import ablate_command, eval_command, train_command

    for command in (train_command, eval_command, ablate_command):
        cli.add_command(command)
