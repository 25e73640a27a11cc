"""A stage used only by tests: a real map stage that is slow on purpose, so a run can be killed mid-way."""
from __future__ import annotations

import time

import pyarrow as pa
from pydantic import Field

from assay.pipeline.stage import MapStage, Params, Resources, set_column, with_rejects


class SlowParams(Params):
    seconds_per_batch: float = Field(0.5, description="Sleep per batch")


class SlowUpper(MapStage):
    """Upper-cases text slowly; rejects texts containing 'reject'."""

    Params = SlowParams

    def process(self, table: pa.Table) -> pa.Table:
        time.sleep(self.params.seconds_per_batch)
        texts = table.column("text").to_pylist()
        table = set_column(table, "text", [t.upper() for t in texts])
        return with_rejects(table, ["has_reject" if "reject" in t else None for t in texts])


SETUP_CALLS = 0


class CountSetups(MapStage):
    """Records, per row, the worker's pid and how many times setup() ran in that worker."""

    resources = Resources(cpus=1, memory_gb=0.25)  # a model-holding stage says what a worker needs
    columns = {"worker_pid": pa.int64(), "setup_calls": pa.int64()}

    def setup(self) -> None:
        global SETUP_CALLS
        SETUP_CALLS += 1

    def process(self, table: pa.Table) -> pa.Table:
        import os

        table = set_column(table, "worker_pid", [os.getpid()] * table.num_rows, pa.int64())
        return set_column(table, "setup_calls", [SETUP_CALLS] * table.num_rows, pa.int64())


class SharedBuild(MapStage):
    """Records, per row, which process built its `shared` lookup table and which one used it."""

    columns = {"built_by": pa.int64(), "worker_pid": pa.int64()}
    shared = ("table",)
    table = None

    def prepare(self) -> None:
        import os

        if self.table is None:
            self.table = {"built_by": os.getpid()}

    def setup(self) -> None:
        self.prepare()  # a no-op when the driver's table was loaded

    def process(self, table: pa.Table) -> pa.Table:
        import os

        table = set_column(table, "built_by", [self.table["built_by"]] * table.num_rows, pa.int64())
        return set_column(table, "worker_pid", [os.getpid()] * table.num_rows, pa.int64())


# ---- stages of every cardinality and output kind (tests/test_pipeline_contract.py) -------------

from assay.pipeline.schema import child_id  # noqa: E402
from assay.pipeline.stage import FitApplyStage  # noqa: E402


class Sentences(MapStage):
    """One-to-many: each document becomes one row per sentence; documents saying 'reject' are rejected."""

    cardinality = "one_to_many"
    columns = {"position": pa.int32()}

    def process(self, table: pa.Table) -> pa.Table:
        rows, kept_ids = [], []
        for row in table.to_pylist():
            if "reject" in row["text"]:
                rows.append(dict(row, reject_reason="has_reject", parent_id=row["id"], position=None))
                continue
            for i, sentence in enumerate(s for s in row["text"].split(". ") if s):
                rows.append(dict(row, id=child_id(row["id"], i), text=sentence,
                                 parent_id=row["id"], position=i, reject_reason=None))
        schema = table.schema.append(pa.field("reject_reason", pa.string())).append(
            pa.field("parent_id", pa.string())).append(pa.field("position", pa.int32()))
        return pa.Table.from_pylist(rows, schema=schema)


class Resample(MapStage):
    """Many-to-many with repeats: a document is dropped (not_sampled), kept once or repeated by a
    hash of its id; each batch also yields one merged row whose parents are its first two documents."""

    cardinality = "many_to_many"
    columns = {"repeat": pa.int32()}

    def process(self, table: pa.Table) -> pa.Table:
        import xxhash

        rows = []
        docs = table.to_pylist()
        for row in docs:
            copies = xxhash.xxh64_intdigest(row["id"].encode()) % 3
            if copies == 0 and row is not docs[0] and (len(docs) < 2 or row is not docs[1]):
                rows.append(dict(row, reject_reason="not_sampled", parent_ids=None, repeat=None))
            for r in range(copies):
                rows.append(dict(row, id=f"{row['id']}-r{r}", parent_ids=[row["id"]], repeat=r, reject_reason=None))
        if len(docs) >= 2:
            merged = docs[0]["text"] + " " + docs[1]["text"]
            rows.append(dict(docs[0], id=child_id("|".join(sorted([docs[0]["id"], docs[1]["id"]])), "merged"), text=merged, parent_ids=[docs[0]["id"], docs[1]["id"]],
                             repeat=0, reject_reason=None))
        schema = table.schema.append(pa.field("reject_reason", pa.string())).append(
            pa.field("parent_ids", pa.list_(pa.string()))).append(pa.field("repeat", pa.int32()))
        return pa.Table.from_pylist(rows, schema=schema)


class LengthCentered(FitApplyStage):
    """Fit: count, sum and a sketch of text lengths per shard; reduce: the mean; apply: length - mean."""

    columns = {"length_centered": pa.float64()}

    def fit(self, table, state):
        lengths = pa.compute.utf8_length(table.column("text")).to_numpy(zero_copy_only=False)
        self.stats.sketch("length", lengths)
        self.stats.histogram("length", lengths, [0, 10, 20, 40, 80, 1000])
        n, total = state or (0, 0)
        return n + len(lengths), total + int(lengths.sum())

    def reduce(self, states):
        n = sum(s[0] for s in states if s)
        return {"mean": sum(s[1] for s in states if s) / max(n, 1), "n": n}

    def apply(self, table, artifact):
        lengths = pa.compute.utf8_length(table.column("text")).to_numpy(zero_copy_only=False)
        return set_column(table, "length_centered", lengths - artifact["mean"], pa.float64())


class TreeLengthCentered(LengthCentered):
    """LengthCentered whose partial states combine (so it is reduced as a tree on the workers); the
    artifact records how many states the driver's reduce was handed."""

    def combine(self, states):
        return (sum(s[0] for s in states if s), sum(s[1] for s in states if s))

    def reduce(self, states):
        return dict(super().reduce(states), states_reduced=len(states))


class CharCounts(MapStage):
    """A side dataset keyed by id: just `id` and `n_chars`, no text."""

    output_kind = "side"
    columns = {"n_chars": pa.int64()}

    def output_schema(self, input_schemas):
        return pa.schema([pa.field("id", pa.string()), pa.field("n_chars", pa.int64())])

    def process(self, table):
        n = pa.compute.utf8_length(table.column("text")).cast(pa.int64())
        return pa.table({"id": table.column("id"), "n_chars": n})


class ByteTokens(MapStage):
    """Token shards: UTF-8 bytes packed into rows of 16 (vocab 258: bytes, BOS=256, PAD=257);
    documents saying 'reject' are rejected."""

    output_kind = "tokens"
    cardinality = "many_to_many"
    SEQ = 16

    def layout(self):
        from assay.pipeline.tokens import TokenLayout

        return TokenLayout(vocab_size=258, seq_len=self.SEQ, bos_id=256, pad_id=257)

    def open_writer(self, out_root, task, schema):
        from assay.pipeline.tokens import TokenShardWriter

        return TokenShardWriter(out_root, task.index, self.layout(), self.stage_id)

    def describe_output(self, out_root):
        return {"tokens": self.layout().to_json()}

    def process(self, table):
        import numpy as np

        from assay.pipeline.tokens import LOSS, PAD

        docs = table.to_pylist()
        rejected = [d for d in docs if "reject" in d["text"]]
        if rejected:
            yield pa.Table.from_pylist([dict(d, reject_reason="has_reject") for d in rejected],
                                       schema=table.schema.append(pa.field("reject_reason", pa.string())))
        stream, index = [], []
        for d in docs:
            if "reject" in d["text"]:
                continue
            ids = [256] + list(d["text"].encode())
            index.append({"row": len(stream) // self.SEQ, "start": len(stream) % self.SEQ, "length": len(ids),
                          "prefix_length": 0, "doc_id": d["id"], "source": d["source"],
                          "content_type": d["content_type"], "bytes": len(ids) - 1})
            stream += ids
        pad = -len(stream) % self.SEQ
        tokens = np.array(stream + [257] * pad, dtype=np.int64).reshape(-1, self.SEQ)
        mask = np.array([LOSS] * len(stream) + [PAD] * pad, dtype=np.uint8).reshape(-1, self.SEQ)
        yield tokens, mask, pa.Table.from_pylist(index)

    def run_task(self, task, writer):
        self.ensure_setup()
        for table in self.read_batches(task, writer):
            yield from self.process(table)


class Lifecycle(MapStage):
    """Appends a line per setup() and teardown() (with the pid) to `log`; records how many models of
    the *previous* stage are still loaded in this process when a batch runs."""

    LIVE = 0
    columns = {"live_before": pa.int64()}

    class Params(Params):
        log: str = Field(description="File that collects setup/teardown lines")

    def setup(self) -> None:
        import os

        Lifecycle.LIVE += 1
        self._model = bytearray(50 * 1024 * 1024)  # stands in for a model
        with open(self.params.log, "a") as fh:
            fh.write(f"setup {os.getpid()} {self.stage_id}\n")

    def teardown(self) -> None:
        import os

        Lifecycle.LIVE -= 1
        self._model = None
        with open(self.params.log, "a") as fh:
            fh.write(f"teardown {os.getpid()} {self.stage_id}\n")

    def process(self, table: pa.Table) -> pa.Table:
        return set_column(table, "live_before", [Lifecycle.LIVE - 1] * table.num_rows, pa.int64())


# ---- a stage that calls an HTTP service (tests/test_pipeline_service.py) ------------------------

from assay.pipeline.service import ServiceParams, ServiceStage, post_json  # noqa: E402


class EchoParams(ServiceParams):
    url: str = Field(description="POST endpoint answering {'answer': ...}")


class EchoService(ServiceStage):
    """Asks a service to answer each text; the answer goes to `answer`."""

    Params = EchoParams
    columns = {"answer": pa.string()}

    def request(self, row):
        return {"text": row["text"]} if row["text"] else None

    def call(self, request):
        return post_json(self.params.url, request, self.params.timeout_s)

    def parse(self, row, response):
        return {"answer": response["answer"]}


class SmallTaskSentences(Sentences):
    """Sentences with a tiny task size: its input shards are re-sharded by row groups."""

    task_bytes = 40_000


class LimitParams(Params):
    limit_file: str = Field(description="A text file holding the most characters a document keeps")
    cache_dir: str | None = Field(None, description="A folder the stage may cache into (not part of its identity)")


class TruncateFromFile(MapStage):
    """Cuts every text to the number of characters named in a file it reads (a 'model' of one number)."""

    Params = LimitParams
    reads = {"limit_file": "file", "cache_dir": "place"}

    def setup(self) -> None:
        with open(self.params.limit_file) as handle:
            self.limit = int(handle.read().strip())

    def process(self, table: pa.Table) -> pa.Table:
        self.ensure_setup()
        table = set_column(table, "text", [t[: self.limit] for t in table.column("text").to_pylist()])
        return with_rejects(table, [None] * table.num_rows)


class Occupancy(MapStage):
    """Records, per row, the worker's pid, when its batch started and ended (it sleeps in between) and
    the CUDA_VISIBLE_DEVICES it ran with: how many workers ran at once, and on which devices."""

    Params = SlowParams
    columns = {"worker_pid": pa.int64(), "started": pa.float64(), "ended": pa.float64(), "devices": pa.string()}

    def process(self, table: pa.Table) -> pa.Table:
        import os

        started = time.time()
        time.sleep(self.params.seconds_per_batch)
        n = table.num_rows
        table = set_column(table, "worker_pid", [os.getpid()] * n, pa.int64())
        table = set_column(table, "started", [started] * n, pa.float64())
        table = set_column(table, "ended", [time.time()] * n, pa.float64())
        return set_column(table, "devices", [os.environ.get("CUDA_VISIBLE_DEVICES")] * n, pa.string())
