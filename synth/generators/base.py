"""The shape every deterministic generator shares: items -> chat documents with `segments`.

A generator makes item `i` from its own random stream (`Random("<stage>:<seed>:<i>")`), so an item
does not depend on how many shards there are or which worker made it: the same seed gives the same
items on every engine. Each item becomes one document whose text is the question, a blank line and a
worked solution ending in `Answer: ...`, with segments user (question) and assistant (solution), so
the mixer can mask the user turn. `meta` carries the question, the reference answer and its kind (how
`synth.solve` verifies a model's answer) and the structure an independent checker needs.

Generators read no files (the knowledge-graph one reads its triples): their own code is their input,
so the stage fingerprint changes when the generator does.
"""
from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pydantic import Field

from assay.pipeline.schema import DOC_SCHEMA, dumps_meta, row_id
from assay.pipeline.stage import Params, SourceStage, Task, add_columns

from ..llm.stage import SEGMENTS_TYPE


@dataclass
class Item:
    question: str
    solution: str  # a worked solution whose last line is "Answer: <answer>"
    answer: str
    kind: str  # how to compare answers: integer, sequence, assignment, grid, entity_set, ...
    meta: dict = field(default_factory=dict)


class GeneratorParams(Params):
    count: int = Field(100, ge=1, description="Items to generate")
    seed: int = Field(0, description="Same seed, same items (on any engine, with any number of shards)")
    shards: int = Field(1, ge=1, description="Output shards (tasks)")
    source: str | None = Field(None, description="The documents' source (default synth-<generator>)")
    paths: list[str] = Field(default_factory=list, description="Unused: generators read no files")


class GeneratorStage(SourceStage):
    Params = GeneratorParams
    columns = {"segments": SEGMENTS_TYPE}
    reads = {}
    task_name = "item"  # meta.task

    def make(self, rng: random.Random, index: int) -> Item:
        raise NotImplementedError

    def matched_files(self) -> list[str]:
        return [str(Path(inspect.getfile(type(self))).resolve())]

    def tasks(self, inputs=()) -> list[Task]:
        count, shards = self.params.count, min(self.params.shards, self.params.count)
        bounds = [count * s // shards for s in range(shards + 1)]
        return [Task(s, (), (("range", (bounds[s], bounds[s + 1])),)) for s in range(shards)]

    def output_schema(self, input_schemas=()) -> pa.Schema:
        return add_columns(DOC_SCHEMA, self.columns)

    def item(self, index: int) -> Item:
        return self.make(random.Random(f"{self.name}:{self.params.seed}:{index}"), index)

    def document(self, item: Item, index: int) -> dict:
        source = self.params.source or f"synth-{self.name.split('.')[-1]}"
        user = item.question + "\n\n"
        text = user + item.solution
        meta = {"task": self.task_name, "question": item.question, "answer": item.answer, "answer_kind": item.kind,
                "seed": self.params.seed, "index": index, **item.meta}
        return {"id": row_id(f"{self.name}:{self.params.seed}", index), "text": text, "source": source,
                "content_type": "synthetic", "url": None, "lang": "en", "domain": None, "meta": dumps_meta(meta),
                "segments": [{"role": "user", "text": user}, {"role": "assistant", "text": item.solution}]}

    def run_task(self, task: Task, writer) -> Iterator[pa.Table]:
        self.ensure_setup()
        counts = getattr(writer, "counts", writer)
        start, stop = task.get("range")
        rows = [self.document(self.item(i), i) for i in range(start, stop)]
        counts.rows_in += len(rows)
        yield pa.Table.from_pylist(rows, schema=self.output_schema())
