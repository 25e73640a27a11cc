"""What each ablation arm trains on, by source and by domain, and a warning where two arms' mixes
differ so much that a BPB gap says more about the mix than about the data's quality (issue #42).

A curated arm that cut a manual from 17% of its tokens to 4% scores worse on the manual's held-out
text because it saw less of it, whatever its quality; the ablation's verdict must say so. Shares are
read from the arm's doc index (`source`, `content_type` and `length` of every piece, prefix included),
the same labels the held-out per-source BPB uses, so any token dataset can be checked, not only a
built mixture.

`match_mix` writes an arm that holds another arm's per-source shares: a row-level resample of its
packed rows (rows are drawn whole, so the held-out overlap checks and the doc index stay valid),
dropping rows of over-represented sources until every source is at its quota. It only removes rows,
so the matched arm holds fewer unique tokens than its source; the manifest says how many.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline import storage
from assay.pipeline.dataset import (MANIFEST, Lease, atomic_write_bytes, check_output, finalize, prepare_output,
                                    read_json_safe)
from assay.pipeline.errors import UserError
from assay.pipeline.schema import REJECT_DETAIL, REJECT_REASON
from assay.pipeline.tokens import TokenShardWriter

from .data import open_tokens

KINDS = (("sources", "source"), ("domains", "content_type"))  # mix key, doc-index column
DROPPED = "not_in_matched_mix"  # the reject reason of a piece whose row the resample left out


def arm_mix(path: str | Path) -> dict:
    """Training tokens of a token dataset per source and per domain (content type), and in all."""
    dataset = open_tokens(path)
    out: dict = {"tokens": 0, "sources": {}, "domains": {}}
    for shard in dataset.shard_indexes():
        docs = dataset.docs(shard)
        out["tokens"] += int(pc.sum(docs.column("length")).as_py() or 0)
        for key, column in KINDS:
            for row in docs.group_by(column).aggregate([("length", "sum")]).to_pylist():
                name = row[column] if row[column] is not None else "(none)"
                out[key][name] = out[key].get(name, 0) + int(row["length_sum"])
    for key, _ in KINDS:
        out[key] = dict(sorted(out[key].items()))
    return out


def shares(mix: dict, key: str = "sources") -> dict[str, float]:
    total = sum(mix[key].values())
    return {name: n / total for name, n in mix[key].items()} if total else {}


def mix_differences(mixes: dict[str, dict], tolerance) -> list[dict]:
    """Every (pair of arms, source or domain) whose token shares differ beyond `tolerance`
    (config.MixTolerance), in spec order: arm `b` is compared with arm `a`."""
    found = []
    for a, b in itertools.combinations(mixes, 2):
        sources_alike = {}  # a domain that is one source says nothing the source's entry does not
        for key, _ in KINDS:
            sa, sb = shares(mixes[a], key), shares(mixes[b], key)
            if key == "sources":
                sources_alike = {n: (sa.get(n, 0.0), sb.get(n, 0.0)) for n in set(sa) | set(sb)}
            for name in sorted(set(sa) | set(sb)):
                x, y = sa.get(name, 0.0), sb.get(name, 0.0)
                hi, lo = max(x, y), min(x, y)
                far = hi - lo > tolerance.points
                ratio = hi >= tolerance.min_share and (lo == 0 or hi / lo > tolerance.ratio)
                if (far or ratio) and not (key == "domains" and sources_alike.get(name) == (x, y)):
                    kind = key[:-1] if key == "sources" else "domain"
                    found.append({"kind": kind, "name": name, "a": a, "b": b, "share_a": round(x, 4),
                                  "share_b": round(y, 4), "message": _message(kind, name, a, b, x, y)})
    return found


def _message(kind: str, name: str, a: str, b: str, x: float, y: float) -> str:
    verb = "cut" if y < x else "raised"
    return (f"{b} {verb} {kind} {name} from {x:.1%} of the tokens ({a}) to {y:.1%}: a BPB gap on {name}'s "
            "held-out text reflects the mix, not quality")


def match_mix(path: str | Path, reference: dict, out: str | Path, seed: int = 0) -> Path:
    """A packed token dataset at `out`: rows of `path` drawn so that its per-source token shares are
    `reference`'s (an `arm_mix` result). Deterministic in (the data, the reference shares, seed); an
    output already written from them is kept as it is."""
    dataset = open_tokens(path)
    layout = dataset.layout
    if not layout.seq_len:
        raise UserError(f"{path}: match_mix resamples packed rows; this is a flat token stream")
    target = shares(reference)
    out = storage.as_path(out)
    spec = json.dumps({"data": dataset.manifest.get("fingerprint") or str(storage.resolve(dataset.path)),
                       "target": target, "seed": seed}, sort_keys=True)
    fingerprint = "match-mix-" + hashlib.sha256(spec.encode()).hexdigest()[:24]
    check_output(out)
    if (read_json_safe(out / MANIFEST) or {}).get("fingerprint") == fingerprint:
        return out
    shards = dataset.shard_indexes()
    docs = {s: dataset.docs(s) for s in shards}
    keep = _draw(docs, {s: len(dataset.tokens(s)) for s in shards}, target, seed, path)
    with Lease(out, fingerprint) as lease:
        prepare_output(out, fingerprint, lease.previous_fingerprint())
        if layout.tokenizer:  # the tokenizer file travels with the rows (checkpoints carry it on)
            storage.makedirs((out / layout.tokenizer).parent)
            atomic_write_bytes(out / layout.tokenizer, dataset.tokenizer_path.read_bytes())
        for i, s in enumerate(shards):
            rows = keep[s]
            index = docs[s]
            chosen = np.isin(index.column("row").to_numpy(), rows)
            renumber = np.full(len(dataset.tokens(s)), -1, np.int64)
            renumber[rows] = np.arange(len(rows))
            kept = index.filter(pa.array(chosen))
            kept = kept.set_column(kept.schema.get_field_index("row"), "row",
                                   pa.array(renumber[kept.column("row").to_numpy()]))
            writer = TokenShardWriter(out, i, layout, "match_mix")
            writer.write(np.asarray(dataset.tokens(s)[rows]), np.asarray(dataset.mask(s)[rows]), kept)
            dropped = index.filter(pa.array(~chosen))
            if dropped.num_rows:
                writer.write(pa.table({"id": dropped.column("doc_id"), "source": dropped.column("source"),
                                       "content_type": dropped.column("content_type"),
                                       REJECT_REASON: pa.array([DROPPED] * dropped.num_rows, pa.string()),
                                       REJECT_DETAIL: pa.nulls(dropped.num_rows, pa.string()),
                                       "bytes": dropped.column("bytes")}))
                writer.counts.rejected[DROPPED]["bytes"] = int(pc.sum(dropped.column("bytes")).as_py() or 0)
            writer.counts.rows_in = index.num_rows  # pieces of the source arm: kept or rejected
            writer.counts.rows_out = kept.num_rows
            writer.counts.bytes_in = int(pc.sum(index.column("bytes")).as_py() or 0)
            writer.counts.bytes_out = int(pc.sum(kept.column("bytes")).as_py() or 0)
            writer.commit()
        finalize(out, {"stage": "match_mix", "stage_id": "match_mix", "kind": "input", "output_kind": "tokens",
                       "fingerprint": fingerprint, "engine": "none", "wall_seconds": 0, "tokens": layout.to_json(),
                       "matched": {"from": str(dataset.path), "target_shares": target, "seed": seed,
                                   "rows_in": int(sum(len(dataset.tokens(s)) for s in shards)),
                                   "rows_kept": int(sum(len(keep[s]) for s in shards))}},
                 len(shards))
    return out


def _draw(docs: dict[int, pa.Table], n_rows: dict[int, int], target: dict[str, float], seed: int, path) -> dict[int, np.ndarray]:
    """Rows to keep per shard. Each row's tokens per source come from its pieces; the most a source
    allows is T * share, T = min over the reference's sources of (tokens available / share), and rows
    are taken in a seeded random order while none of their sources would pass its quota. A source
    the reference lacks has quota 0: rows holding it are left out."""
    names = sorted(target)
    col = {n: j for j, n in enumerate(names)}
    rows, counts = [], []
    for s, index in docs.items():
        row = index.column("row").to_numpy()
        src = [col.get(x, len(names)) if x is not None else len(names) for x in index.column("source").to_pylist()]
        c = np.zeros((n_rows[s], len(names) + 1), np.int64)  # last column: sources the reference lacks
        np.add.at(c, (row, np.asarray(src, np.int64)), index.column("length").to_numpy())
        rows += [(s, r) for r in range(n_rows[s])]
        counts.append(c)
    c = np.concatenate(counts) if counts else np.zeros((0, len(names) + 1), np.int64)
    have = c[:, :-1].sum(0)
    want = np.array([target[n] for n in names])
    missing = [n for n, h, w in zip(names, have, want) if w > 0 and h == 0]
    if missing:
        raise UserError(f"{path}: holds no tokens of source(s) {', '.join(missing)} that the reference arm trains "
                        "on, so it cannot hold that arm's mix")
    total = min(h / w for h, w in zip(have, want) if w > 0)
    quota = np.append(want * total, 0) + 1e-9
    taken = np.zeros(len(names) + 1)
    keep: dict[int, list[int]] = {s: [] for s in docs}
    for i in np.random.default_rng(seed).permutation(len(rows)):
        if np.all(taken + c[i] <= quota):
            taken += c[i]
            keep[rows[i][0]].append(rows[i][1])
    return {s: np.array(sorted(r), np.int64) for s, r in keep.items()}
