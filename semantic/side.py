"""Documents joined with their embeddings: the side dataset `semantic.embed` writes, read shard by shard.

`semantic.embed` is a one-to-one map stage, so its shard i holds the vectors of the documents in
shard i of its input. A stage that takes `[documents, embeddings]` pairs shard i with shard i and
joins by `id`: no shuffle, and the documents may be any one-to-one descendant of the embedded
dataset (a filter drops rows, never moves them between shards). A document without a vector is an
error that names the cause.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline import storage
from assay.pipeline.errors import UserError
from assay.pipeline.stage import Task, add_columns

EMBEDDING = "embedding"


def vectors(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A list<float16|float32> column as an (n, dim) float32 matrix."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0:
        return np.zeros((0, 0), np.float32)
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return flat.reshape(len(column), -1).astype(np.float32)


def vector_column(matrix: np.ndarray, dtype: str = "float16") -> pa.Array:
    """An (n, dim) matrix as a list<float16> (or float32) column."""
    n, dim = matrix.shape
    flat = pa.array(np.ascontiguousarray(matrix, dtype=np.dtype(dtype)).reshape(-1))
    return pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * dim), flat)


class WithEmbeddings:
    """Mixin for map and fit-apply stages whose inputs are `[documents, embeddings]`. While a batch is
    processed, `self.batch_vectors` holds its rows' vectors (float32, in row order)."""

    batch_vectors: np.ndarray

    def tasks(self, inputs: Sequence) -> list[Task]:
        if len(inputs) != 2:
            raise UserError(f"stage {self.stage_id!r} takes two inputs: the documents and their embeddings "
                            f"(a semantic.embed output); got {len(inputs)}")
        docs, emb = inputs
        if EMBEDDING not in emb.schema.names:
            raise UserError(f"stage {self.stage_id!r}: its second input {emb.path} has no {EMBEDDING!r} column "
                            "(expected a semantic.embed output)")
        doc_shards, emb_shards = docs.shards(), emb.shards()
        if len(doc_shards) != len(emb_shards):
            raise UserError(f"stage {self.stage_id!r}: {docs.path} has {len(doc_shards)} shards but {emb.path} has "
                            f"{len(emb_shards)}; embed the documents (or an ancestor with the same shards) first")
        return [Task(i, (str(d), str(e))) for i, (d, e) in enumerate(zip(doc_shards, emb_shards))]

    def output_schema(self, input_schemas: Sequence[pa.Schema]) -> pa.Schema:
        return add_columns(input_schemas[0], {**self.columns, **self.lineage_columns()})

    def read_batches(self, task: Task, writer) -> Iterator[pa.Table]:
        from assay.pipeline.schema import text_bytes

        doc_path, emb_path = task.inputs
        side = storage.read_parquet(emb_path, columns=["id", EMBEDDING])
        matrix = vectors(side.column(EMBEDDING))
        ids = side.column("id")
        note = getattr(writer, "note_inputs", None)
        for batch in storage.parquet_file(doc_path).iter_batches(batch_size=self.batch_rows):
            table = pa.Table.from_batches([batch])
            if note is not None:
                note(table)
            else:
                writer.rows_in += table.num_rows
                writer.bytes_in += text_bytes(table)
            rows = pc.index_in(table.column("id"), value_set=ids)
            if rows.null_count:
                missing = table.column("id").filter(pc.is_null(rows))[0].as_py()
                raise UserError(f"stage {self.stage_id!r}: document {missing!r} of {Path(doc_path).name} has no "
                                f"embedding in {emb_path}; the embeddings come from another dataset")
            self.batch_vectors = matrix[rows.to_numpy(zero_copy_only=False)] if len(matrix) else matrix
            yield table
