"""`assay mix inspect OUT`: what a built mixture holds, read from manifests and a few shard rows.

Per stage: shards, rows, tokens, realized against target shares, epochs, masked fractions, packing
waste (best fit and greedy on the same draw); then sample rows decoded piece by piece, with the
metadata prefix, masked spans and FIM pieces marked.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from assay.pipeline import storage
from assay.pipeline.dataset import read_json, read_json_safe
from assay.pipeline.errors import UserError
from assay.pipeline.tokens import LOSS, META, PAD, TokenDataset

from .tokenizer import Vocab


def stage_dirs(out: Path) -> list[Path]:
    """The packed stages under a mixture directory (or OUT itself when it is one); a folder or a URL."""
    out = storage.as_path(out)
    manifest = read_json_safe(out / "_manifest.json")
    if manifest is not None:
        if manifest.get("stage") != "mix.pack":
            raise UserError(f"{out}: a {manifest.get('stage')} dataset, not a built mixture stage (mix.pack)")
        return [out]
    run = read_json(out / "_run.json") or {}
    dirs = [out / name for name in run.get("order", [])]
    found = [d for d in dirs if (read_json(d / "_manifest.json") or {}).get("stage") == "mix.pack"]
    if not found:
        raise UserError(f"{out}: no built mixture stages here (run `assay mix build MIXTURE {out}`)")
    return found


def summary_rows(mix: dict) -> list[list[str]]:
    rows = []
    for slot in mix["slots"]:
        label = slot["source"] + (f" (replay of {slot['origin']})" if slot["replay"] else "")
        rows.append([label, f"{slot['share']:.2%}", f"{slot['realized_share']:.2%}", f"{slot['tokens']:,}",
                     f"{slot['realized_epochs']:.2f}", f"{slot['max_epochs']:g}", str(slot["fim_pieces"])])
    return rows


SUMMARY_HEADERS = ["source", "target", "realized", "tokens", "epochs", "max", "FIM pieces"]


def show(out: Path, stage: str | None, rows: int, console) -> None:
    from rich.table import Table

    for path in stage_dirs(out):
        if stage and path.name != stage:
            continue
        ds = TokenDataset(path)
        mix = ds.manifest["mix"]
        lay = ds.layout
        shards = ds.shard_indexes()
        n_rows = sum(len(ds.tokens(i)) for i in shards)
        console.print(f"[bold]{path.name}[/bold]: {len(shards)} shard(s), {n_rows:,} rows × {lay.seq_len} "
                      f"({lay.dtype.name}), {mix['tokens']:,} document tokens (target {mix['target_tokens']:,}), "
                      f"vocab {lay.vocab_size}, tokenizer sha256 {lay.tokenizer_sha256[:12]}")
        table = Table(*SUMMARY_HEADERS)
        for row in summary_rows(mix):
            table.add_row(*row)
        console.print(table)
        m, fit, greedy = mix["masks"], mix["packing"]["best_fit"], mix["packing"]["greedy"]
        console.print(f"masks: loss on {m['loss_fraction']:.1%} of tokens ({m['loss_fraction_prefix_masked']:.1%} with "
                      f"the prefix masked); meta prefix {m['meta_fraction']:.1%}; role-masked {m['role_masked_fraction']:.1%}")
        console.print(f"packing waste: best fit {fit['waste_fraction']:.2%} ({fit['cropped_tokens']:,} cropped + "
                      f"{fit['padded_tokens']:,} padded); greedy {greedy['waste_fraction']:.2%} "
                      f"({greedy['cropped_tokens']:,} cropped + {greedy['padded_tokens']:,} padded)"
                      + (f"; {fit['cut_tokens']:,} tokens of documents cut where a share ended ({fit['cut_fraction']:.1%})"
                         if fit.get("cut_tokens") else ""))
        if rows and shards:
            vocab = Vocab.load(ds.tokenizer_path)
            for r in range(min(rows, len(ds.tokens(shards[0])))):
                console.print(f"[bold]row {r}[/bold]")
                for line in render_row(ds, shards[0], r, vocab):
                    console.print(line)
        console.print()


def render_row(ds: TokenDataset, shard: int, row: int, vocab: Vocab, width: int = 240) -> list[str]:
    """One row decoded piece by piece: [cyan] metadata prefix, [dim] masked tokens, plain trained text."""
    from rich.markup import escape

    tokens, mask = ds.tokens(shard)[row], ds.mask(shard)[row]
    docs = ds.docs(shard).to_pandas()
    lines = []
    for piece in docs[docs.row == row].itertuples():
        t = tokens[piece.start:piece.start + piece.length]
        m = mask[piece.start:piece.start + piece.length]
        head = (f"  ▸ {piece.doc_id[:10]} {piece.source} {piece.content_type} {piece.length} tokens"
                + (" FIM" if piece.fim else "") + (f" cropped {piece.cropped}" if piece.cropped else "")
                + (f" replay of {piece.replay_of}" if piece.replay_of else ""))
        body = []
        for start, end, flags in _runs(m):
            text = escape(vocab.decode(t[start:end]))
            text = text if len(text) <= width else text[: width - 1] + "…"
            style = "cyan" if flags & META else "dim" if not flags & LOSS else ""
            body.append(f"[{style}]{text}[/{style}]" if style else text)
        lines += [head, "    " + "".join(body).replace("\n", "⏎ ")]
    pad = int(np.count_nonzero(mask & PAD))
    if pad:
        lines.append(f"  ▸ {pad} padding tokens")
    return lines


def _runs(mask: np.ndarray):
    """(start, end, flags) of runs of equal mask values."""
    if not len(mask):
        return
    edges = np.flatnonzero(np.diff(mask.astype(np.int16))) + 1
    bounds = [0, *edges.tolist(), len(mask)]
    for a, b in zip(bounds, bounds[1:]):
        yield a, b, int(mask[a])
