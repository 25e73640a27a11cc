"""The one document schema every stage reads and writes, and how document ids are made."""
from __future__ import annotations

import json
from typing import Any, Iterable

import pyarrow as pa
import xxhash

CONTENT_TYPES = ("web", "book", "paper", "code", "pr", "qa", "synthetic")

DOC_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("source", pa.string()),
        pa.field("content_type", pa.string()),
        pa.field("url", pa.string()),
        pa.field("lang", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("meta", pa.string()),  # JSON object as a string: free-form per-source fields
    ]
)

# Columns a stage adds to rows it rejects; everything else in a reject row is the row as the stage saw it.
REJECT_REASON = "reject_reason"
REJECT_DETAIL = "reject_detail"
REJECT_STAGE = "reject_stage"

# Lineage of created rows: a one-to-many stage's output carries the id of the row it came from, a
# many-to-many stage's the ids of all of them.
PARENT_ID = "parent_id"
PARENT_IDS = "parent_ids"


def row_id(origin: str, position: int | str) -> str:
    """The id of a row read from outside: where it came from (a file, a generator and its seed) and its
    position there (a byte offset, a record number). Unique by construction: two identical records in
    one file still get two ids. Stable on every run and engine."""
    h = xxhash.xxh3_128()
    h.update(origin.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(str(position).encode())
    return h.hexdigest()[:24]


def child_id(parent: str, ordinal: int | str) -> str:
    """The id of the `ordinal`-th row a stage creates from the row `parent`: unique when parent ids are."""
    return row_id(f"child:{parent}", ordinal)


def doc_id(text: str | None, source: str | None = "", url: str | None = "") -> str:
    """A hash of content: the same (source, url, text) gives the same value on every run and engine.
    Row ids come from `row_id`/`child_id`; this is for what is keyed by content (held-out overlap)."""
    h = xxhash.xxh3_128()
    h.update((source or "").encode())
    h.update(b"\x00")
    h.update((url or "").encode())
    h.update(b"\x00")
    h.update((text or "").encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:24]


def dumps_meta(meta: dict[str, Any] | None) -> str:
    """Meta as canonical JSON (sorted keys) so equal meta gives equal bytes on every engine."""
    return json.dumps(meta or {}, ensure_ascii=False, sort_keys=True, default=str)


def loads_meta(value: str | None) -> dict[str, Any]:
    return json.loads(value) if value else {}


def make_docs(rows: Iterable[dict[str, Any]], schema: pa.Schema = DOC_SCHEMA) -> pa.Table:
    """Build a document table from dicts, filling ids and meta; unknown keys are an error, not a silent drop."""
    cols: dict[str, list] = {name: [] for name in schema.names}
    for row in rows:
        extra = set(row) - set(cols)
        if extra:
            raise KeyError(f"unknown document fields {sorted(extra)}; put free-form fields in 'meta'")
        meta = row.get("meta")
        for name in cols:
            value = row.get(name)
            if name == "meta" and not isinstance(meta, str):
                value = dumps_meta(meta)
            cols[name].append(value)
        if cols["id"][-1] is None:
            cols["id"][-1] = doc_id(row.get("text"), row.get("source"), row.get("url"))
    return pa.table(cols, schema=schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Reorder/cast `table` to `schema`, adding missing nullable columns as nulls."""
    arrays = []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            arrays.append(col if col.type == field.type else col.cast(field.type))
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def text_bytes(table: pa.Table | pa.RecordBatch) -> int:
    """UTF-8 bytes of the text column: the unit the ledger counts besides rows."""
    if "text" not in table.schema.names:
        return 0
    import pyarrow.compute as pc

    total = pc.sum(pc.binary_length(table.column("text"))).as_py()
    return int(total or 0)
