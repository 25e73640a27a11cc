"""Commands: `assay mix plan|build|inspect` and `assay tokenizer train`."""
from __future__ import annotations

from pathlib import Path

import click

from assay.pipeline import storage

ENGINES = click.Choice(["local", "spark", "ray"])


def _engine_opts(f):
    f = click.option("--ray-address", default=None, help="Ray cluster address, e.g. 127.0.0.1:6379")(f)
    f = click.option("--spark-master", default=None, help="Spark master URL, e.g. spark://127.0.0.1:7077")(f)
    f = click.option("--workers", type=int, default=0, help="Parallel tokenize and pack tasks; 0 = all cores")(f)
    return click.option("--engine", "-e", type=ENGINES, default="local", help="Engine for tokenization and packing")(f)


def _options(workers, spark_master, ray_address) -> dict | None:
    from assay.pipeline.cli import _engine_options

    return _engine_options(workers, spark_master, ray_address) or None


@click.command("plan")
@click.argument("mixture")  # a local file (its paths are relative to it)
@click.option("--out", "-o", default=None,  # a folder or a URL: a click.Path would fold `//`
              help="The mixture directory (or URL) `mix build` will write: the tokenized sources are kept there and the "
                   "build reuses them (default: the mixture's `workdir:` if it names one, else a temporary folder)")
@_engine_opts
def plan_cmd(mixture, out, engine, workers, spark_master, ray_address):
    """Tokenize the sources and print what each source gives each stage, with epochs.

    \b
    Refuses, in one line, a stage whose budget cannot be met within a source's max_epochs.
    Example:
      assay mix plan examples/mixtures/step35-mini.yaml
    """
    import tempfile

    from rich.console import Console
    from rich.table import Table

    from .build import plan
    from .plan import PLAN_HEADERS, plan_rows
    from .recipe import load_mixture

    mix = load_mixture(mixture)
    with tempfile.TemporaryDirectory(prefix="assay-plan-") as scratch:  # no folder left that no build reads
        where = storage.as_path(out) if out else (Path(mix.workdir) if mix.workdir else Path(scratch))
        named = "--out" if out else "the mixture's workdir:"
        slots, _ = plan(mix, where, engine, _options(workers, spark_master, ray_address), log=click.echo, named=named)
    kept = f"tokenized sources in {where}" if where != Path(scratch) else "tokenized sources not kept: --out OUT keeps them for `mix build`"
    table = Table(*PLAN_HEADERS, title=f"{mix.name}: plan ({kept})")
    for row in plan_rows(mix, slots):
        table.add_row(*row)
    import sys

    Console(width=None if sys.stdout.isatty() else 160).print(table)


@click.command("build")
@click.argument("mixture")  # a local file (its paths are relative to it)
@click.argument("out")  # a folder or a URL (s3://bucket/mix): a click.Path would fold `//`
@_engine_opts
@click.option("--report/--no-report", default=True, help="Write OUT/report.html")
def build_cmd(mixture, out, engine, workers, spark_master, ray_address, report):
    """Build every stage of a mixture into OUT/<stage>: packed, masked token shards.

    \b
    Example:
      assay mix build examples/mixtures/step35-mini.yaml runs/demo/mix-step35 --engine spark
    """
    from .build import build
    from .recipe import load_mixture

    mix = load_mixture(mixture)
    click.echo(f"assay: building mixture {mix.name} ({mixture}) into {out}")
    build(mix, out, engine, _options(workers, spark_master, ray_address), log=click.echo)
    if report:
        from assay.pipeline.report import write_report

        click.echo(f"report: {write_report(out)}")


@click.command("inspect")
@click.argument("out")  # a folder or a URL
@click.option("--stage", default=None, help="Only this stage")
@click.option("--rows", "-n", type=int, default=2, help="Rows to decode per stage")
def inspect_cmd(out, stage, rows):
    """Show a built mixture: shards, realized shares, masks, waste, and decoded rows.

    \b
    Example:
      assay mix inspect runs/demo/mix-step35 --stage anneal -n 1
    """
    from rich.console import Console

    from .inspect import show

    show(out, stage, rows, Console())


@click.command("train")
@click.argument("datasets", nargs=-1, required=True)  # folders or URLs
@click.option("--out", "-o", required=True, help="tokenizer.json to write (a file or a URL)")
@click.option("--vocab-size", type=int, default=8192, show_default=True)
@click.option("--sample-docs", type=int, default=20_000, show_default=True, help="Documents sampled by id hash")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--force", is_flag=True, default=False, help="Replace an existing --out file")
def train_cmd(datasets, out, vocab_size, sample_docs, seed, force):
    """Train a byte-level BPE (with BOS/EOS/PAD, FIM and metadata tokens) on a sample of datasets.

    \b
    Example:
      assay tokenizer train runs/demo/deduped --out tokenizer.json --vocab-size 4096
    """
    from assay.pipeline.dataset import Dataset, atomic_write_text
    from assay.pipeline.errors import UserError

    from .tokenizer import sample_texts, train_bpe

    out = storage.as_path(out)
    for path in datasets:
        if not Dataset(path).complete:
            raise UserError(f"{path}: not a complete dataset (no _manifest.json)")
    if storage.is_dir(out):
        raise UserError(f"--out {out}: is a directory; give a file name such as tokenizer.json")
    if storage.exists(out) and not force:
        raise UserError(f"--out {out}: exists; refusing to overwrite it (add --force to replace it)")
    texts = sample_texts(list(datasets), sample_docs, seed)
    tok = train_bpe(texts, vocab_size)
    atomic_write_text(out, tok.to_str(), redacted=False)
    click.echo(f"{out}: byte-level BPE, vocab {tok.get_vocab_size()}, trained on {len(texts)} documents")


def register_commands(cli: click.Group) -> None:
    group = cli.commands.get("mix")
    if group is None:
        group = click.Group("mix", help="mix stages and commands")
        cli.add_command(group)
    for command in (plan_cmd, build_cmd, inspect_cmd):
        group.add_command(command)
    tokenizer = click.Group("tokenizer", help="Tokenizers for mixtures")
    tokenizer.add_command(train_cmd)
    cli.add_command(tokenizer)
