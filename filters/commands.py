"""`assay filter calibrate`: per-language thresholds for the heuristic rules, from a user's corpus."""
from __future__ import annotations

import json

import click

from assay.pipeline import storage
from assay.pipeline.errors import UserError


def register_commands(cli: click.Group) -> None:
    group = cli.commands.get("filter")
    if group is None:
        group = click.Group("filter", help="filters and heuristic rules (see `assay stages`)")
        cli.add_command(group)

    @group.command("calibrate")
    @click.argument("dataset")
    @click.argument("out")
    @click.option("--anchor", default="en", show_default=True, help="The language whose published thresholds the others follow")
    @click.option("--min-docs", default=50, show_default=True, help="Languages with fewer documents are left out")
    @click.option("--stop-words", default=8, show_default=True, help="Stop words per language")
    @click.option("--lang-column", default="lang", show_default=True)
    def calibrate_cmd(dataset, out, anchor, min_docs, stop_words, lang_column):
        """Write per-language thresholds for `filter.rules` (and stop words for `filter.signals`) to OUT
        (JSON), calibrated on DATASET: an Assay dataset with `text` and a language column
        (extract.lang_id writes one). Each language's threshold hits the same share of its documents as
        the anchor's threshold hits of the anchor's (see filters/calibrate.py).

        \b
        Example:
          assay extract lang_id runs/x/clean runs/x/lang
          assay filter calibrate runs/x/lang my-thresholds.json --min-docs 200
          assay filter signals runs/x/lang runs/x/sig --calibration my-thresholds.json
          assay filter rules runs/x/sig runs/x/rules --calibration my-thresholds.json --drop
        """
        from assay.pipeline.dataset import Dataset

        from .calibrate import calibrate

        if not storage.is_dir(dataset):
            raise UserError(f"{dataset}: not a dataset folder")
        table = Dataset(dataset).read()
        if lang_column not in table.column_names or "text" not in table.column_names:
            raise UserError(f"{dataset}: needs `text` and `{lang_column}` columns (run extract.lang_id first)")
        if "reject_reason" in table.column_names:
            import pyarrow.compute as pc

            table = table.filter(pc.is_null(table.column("reject_reason")))
        texts = [t or "" for t in table.column("text").to_pylist()]
        langs = [lang or "und" for lang in table.column(lang_column).to_pylist()]
        if all(lang == "und" for lang in langs):
            raise UserError(f"{dataset}: no row has a language in `{lang_column}` (run extract.lang_id first)")
        try:
            cal = calibrate(texts, langs, anchor=anchor, min_docs=min_docs, stop_words=stop_words, source=str(dataset))
        except ValueError as e:
            raise UserError(str(e)) from e
        from assay.pipeline.dataset import atomic_write_bytes

        payload = (json.dumps(cal.to_json(), indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode()
        if storage.is_remote(out):
            storage.write_bytes(out, payload)
        else:
            from pathlib import Path

            atomic_write_bytes(Path(out), payload)
        click.echo(f"{len(cal.languages)} languages ({', '.join(sorted(cal.languages))}), {len(cal.scripts)} scripts -> {out}")
