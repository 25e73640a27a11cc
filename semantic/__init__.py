"""Semantic curation: embeddings, k-means cluster rebalancing, knowledge mining and benchmark
decontamination, one family so they share one encoder, one embedding store and one report.

Importing this package registers the stages (semantic.embed, semantic.cluster, semantic.rebalance,
semantic.semdedup, semantic.mine, semantic.decontam, semantic.decontam_apply); torch, sentence-transformers and faiss
are imported only inside the stages that use them.
"""
from . import cluster, embed, mine, rebalance, semdedup  # noqa: F401
from .decontam import stage as _decontam  # noqa: F401

REPORT_SECTIONS = ["assay.semantic.report:report_section"]

SHORTCUTS = ("embed", "cluster", "rebalance", "mine", "decontam")


def register_commands(cli) -> None:
    """Top-level shortcuts: `assay decontam IN OUT` is `assay semantic decontam IN OUT` (and likewise
    embed, cluster, rebalance, mine), as the stage commands are built before family hooks run."""
    group = cli.commands.get("semantic")
    for name in SHORTCUTS:
        if group is not None and name in group.commands and name not in cli.commands:
            cli.add_command(group.commands[name], name)
