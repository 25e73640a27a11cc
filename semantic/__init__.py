"""Semantic curation: embeddings, k-means cluster rebalancing, knowledge mining and benchmark
decontamination, one family so they share one encoder, one embedding store and one report.

Importing this package registers the stages (semantic.embed, semantic.cluster, semantic.rebalance,
semantic.mine, semantic.decontam, semantic.decontam_apply); torch, sentence-transformers and faiss
are imported only inside the stages that use them.
"""
from .decontam import stage as _decontam  # noqa: F401

REPORT_SECTIONS: list[str] = []
