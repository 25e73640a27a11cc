"""The `assay` command line: run recipes, list stages, inspect datasets, write reports, and one
sub-command per registered stage (`filter.length` becomes `assay filter length IN... OUT`)."""
from __future__ import annotations

import errno
import gc
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any, Optional

import click
import typer

from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Assay: curate LLM pretraining data and measure what the curation is worth.\n\n"
                  "Relative paths: inside a recipe (inputs, `workdir:`) they are relative to the recipe "
                  "file; on the command line, to where you run assay.")

@app.callback()
def _global_options(
    verbose: int = typer.Option(0, "--verbose", "-v", count=True,
                                help="-v: per-shard progress lines and engine warnings; -vv: debug detail"),
) -> None:
    from .logs import set_verbosity

    set_verbosity(verbose)


def _user_errors() -> tuple[type[BaseException], ...]:
    # Only errors raised *as* user errors: a FileNotFoundError from inside a stage is a bug and keeps
    # its traceback. A service still failing after its retries is the service's state, not a bug:
    # its message says what happened and that a rerun resumes.
    from .errors import UserError
    from .service import ShardUnfinished

    return (UserError, ShardUnfinished)


def _fail(message: str) -> None:
    from .redact import redact

    typer.secho(f"error: {redact(message)}", fg="red", err=True)
    raise typer.Exit(2)


def _engine_options(workers: int, spark_master: Optional[str], ray_address: Optional[str]) -> dict:
    opts: dict[str, Any] = {}
    if workers:
        opts["workers"] = workers
    if spark_master:
        opts["spark_master"] = spark_master
    if ray_address:
        opts["ray_address"] = ray_address
    return opts


@app.command()
def run(
    recipe: str = typer.Argument(..., help="Pipeline recipe (YAML, a local file)"),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="local, spark or ray (overrides the recipe)"),
    workdir: Optional[str] = typer.Option(None, "--workdir", "-w", help="Where stage outputs go (a folder, or a URL such as s3://bucket/runs/x); default: the recipe's `workdir:` (relative to the recipe file), else runs/<name> (relative to here)"),
    start: Optional[str] = typer.Option(None, "--from", help="Re-run this stage and everything downstream of it"),
    until: Optional[str] = typer.Option(None, "--until", help="Stop after this stage (runs only what it needs)"),
    workers: int = typer.Option(0, "--workers", help="Parallel tasks; 0 = all cores"),
    spark_master: Optional[str] = typer.Option(None, "--spark-master", help="e.g. spark://127.0.0.1:7077"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="e.g. 127.0.0.1:6379"),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html into the workdir"),
    force: bool = typer.Option(False, "--force", help="Take over a workdir that another recipe's runs are in"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say which stages would run and why; run nothing"),
) -> None:
    """Run a pipeline recipe as a DAG; unchanged stages are skipped, killed ones resume.

    \b
    Example:
      assay run examples/recipes/demo.yaml --engine spark --workdir runs/demo-spark
    """
    from .recipe import load_recipe, preflight
    from .runner import run_recipe

    if engine and engine not in ("local", "spark", "ray"):
        import difflib

        close = difflib.get_close_matches(engine, ["local", "spark", "ray"], n=1)
        _fail(f"--engine {engine!r}: expected local, spark or ray" + (f"; did you mean {close[0]!r}?" if close else ""))
    parsed = load_recipe(recipe)
    problems = preflight(parsed)  # fail before the first stage, not after running the others
    if problems:
        raise UserError(f"{recipe}: {problems[0]}")
    from .storage import as_path

    root = as_path(workdir or parsed.workdir)
    if dry_run:
        from .runner import dry_run as plan

        for stage_id, runs, why in plan(parsed, root):
            typer.echo(f"  {stage_id:<20} {'would run: ' + why if runs else 'would skip (unchanged)'}")
        return
    typer.echo(f"assay: running {parsed.name} ({recipe}) into {root} on {engine or parsed.engine}")
    run_recipe(parsed, workdir=root, engine=engine, options=_engine_options(workers, spark_master, ray_address),
               start=start, until=until, progress=sys.stderr.isatty(), log=typer.echo, replace=force)
    if report:
        from .report import write_report

        path = write_report(root)
        typer.echo(f"report: {path}")


@app.command()
def validate(recipe: str = typer.Argument(..., help="Pipeline recipe (YAML, a local file)")) -> None:
    """Check a recipe (keys, stage names, params, inputs, cycles) without running it.

    \b
    Example:
      assay validate examples/recipes/demo.yaml
    """
    from .recipe import load_recipe, preflight

    parsed = load_recipe(recipe)
    problems = preflight(parsed)
    if problems:
        raise UserError(f"{recipe}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    typer.echo(f"{recipe}: ok ({len(parsed.order())} stages: {' -> '.join(parsed.order())})")


@app.command()
def stages(name: Optional[str] = typer.Argument(None, help="Show one stage in full")) -> None:
    """List registered stages with their kind, params and documentation.

    \b
    Example:
      assay stages filter.length
    """
    from rich.console import Console
    from rich.table import Table

    import inspect as inspect_module

    from .stage import _ALIASES, registry, resolve_stage

    console = Console()
    if name:
        try:
            cls = resolve_stage(name)
        except (KeyError, ImportError, AttributeError, TypeError) as exc:
            from .recipe import _uses_error

            raise UserError(_uses_error(exc)) from None
        alias = f"; {name} is an alias of {cls.name}" if _ALIASES.get(name) == cls.name else ""
        console.print(f"[bold]{cls.name}[/bold] ({cls.kind} stage, {cls.cardinality}, writes {cls.output_kind}{alias})\n")
        console.print(inspect_module.cleandoc(cls.__doc__ or "") + "\n")
        columns = {**cls.columns, **cls.lineage_columns()}
        if columns:
            console.print("adds columns: " + ", ".join(f"{n} ({t})" for n, t in columns.items()))
        res = cls.resources
        console.print(f"resources per worker: {res.cpus:g} cpu, {res.gpus:g} gpu"
                      + (f", {res.memory_gb:g} GiB" if res.memory_gb else "")
                      + (f"; workers: {cls.workers}" if cls.workers else "")
                      + (f"; needs: {', '.join(cls.requires)}" if cls.requires else "") + "\n")
        from .identity import describe_inputs

        console.print("reads (its identity: a change to any of these re-runs it):")
        for line in describe_inputs(cls):
            console.print(f"  {line}", highlight=False)
        console.print()
        table = Table("param", "type", "default", "description")
        for pname, field in cls.Params.model_fields.items():
            default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
            table.add_row(pname, _type_name(field.annotation), default, field.description or "")
        console.print(table)
        return
    table = Table("stage", "kind", "adds", "summary")
    for sname, cls in registry().items():
        table.add_row(sname, cls.kind, ", ".join(cls.columns), _first_sentence(cls.__doc__ or ""))
    console.print(table)
    old_names = sorted(_ALIASES.items())
    if old_names:
        console.print("Aliases (old names recipes may still use): "
                      + ", ".join(f"{old} = {new}" for old, new in old_names))


@app.command()
def inspect(
    dataset: str = typer.Argument(..., help="A dataset directory (or URL)"),
    rows: int = typer.Option(3, "--rows", "-n", help="How many rows to show"),
    rejects: bool = typer.Option(False, "--rejects", help="Show rejected rows instead of kept ones"),
    columns: Optional[str] = typer.Option(None, "--columns", "-c", help="Comma-separated columns to show (default: all)"),
    width: int = typer.Option(0, "--width", help="Characters shown per value (default: fit the terminal)"),
) -> None:
    """Show a dataset's schema, ledger (rows/bytes in, out, rejected by reason) and a few rows.

    Rows are shown one field per line, every column included (reject reasons and details first), so
    nothing disappears when stages have added many columns.

    \b
    Example:
      assay inspect runs/demo/length --rows 5 --rejects --columns id,text,reject_reason
    """
    import shutil

    from rich.console import Console
    from rich.markup import escape

    from . import storage
    from .dataset import Dataset, is_assay_dataset
    from .schema import REJECT_DETAIL, REJECT_REASON, REJECT_STAGE

    ds = Dataset(dataset)
    if not storage.is_dir(ds.path):
        raise UserError(f"{dataset}: no such dataset directory")
    if not is_assay_dataset(ds.path):  # no manifest, no lease, no run file: nothing Assay wrote
        raise UserError(f"{dataset}: a folder, not an Assay dataset (no _manifest.json, and no run ever wrote "
                        "here); give a stage's output folder, e.g. runs/demo/length")
    console = Console()
    manifest = ds.manifest
    if manifest is None:
        console.print(f"[yellow]{dataset}: incomplete (no _manifest.json): a run was interrupted here[/yellow]")
    else:
        c = manifest["counts"]
        console.print(f"[bold]{escape(str(dataset))}[/bold]  stage {manifest['stage']} ({manifest['stage_id']}), "
                      f"engine {manifest['engine']}, {manifest['shards']} shards, {manifest['wall_seconds']}s")
        console.print(f"rows: {c['rows_in']} in, {c['rows_out']} out, {c['rows_rejected']} rejected; "
                      f"bytes: {c['bytes_in']} in, {c['bytes_out']} out")
        for reason, slot in c["rejected"].items():
            console.print(f"  rejected {escape(reason)}: {slot['rows']} rows, {slot['bytes']} bytes")
        if manifest.get("fused_into"):
            console.print(f"rows of this stage live in {manifest['fused_into']} (fused chain)")
    try:
        console.print(f"schema: {', '.join(f'{f.name}: {f.type}' for f in ds.schema)}")
    except FileNotFoundError:
        pass
    table = ds.read_rejects() if rejects else ds.read()
    if table.num_rows == 0:
        console.print("(no rows)")
        return
    first = [n for n in (REJECT_REASON, REJECT_DETAIL, REJECT_STAGE) if n in table.column_names]
    names = first + [n for n in table.column_names if n not in first]
    if columns:
        wanted = [c.strip() for c in columns.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in table.column_names]
        if unknown:
            raise UserError(f"--columns: no column {unknown[0]!r}; columns are {', '.join(table.column_names)}")
        names = wanted
    label = max(len(n) for n in names)
    room = width or max(20, shutil.get_terminal_size((100, 24)).columns - label - 3)
    for i, row in enumerate(table.slice(0, rows).to_pylist()):
        console.print(f"[bold]── row {i + 1} " + "─" * 20 + "[/bold]")
        for name in names:
            console.print(f"{name:>{label}} │ {escape(_short(row[name], room))}", soft_wrap=True)


@app.command()
def export(
    dataset: str = typer.Argument(..., help="A dataset directory (or URL)"),
    out: str = typer.Argument(..., help="Output file (or URL): .jsonl, .jsonl.gz, .jsonl.zst or .parquet (one file)"),
    rejects: bool = typer.Option(False, "--rejects", help="Export the rejected rows instead of the kept ones"),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it is a file this command wrote before"),
) -> None:
    """Write a dataset as JSON Lines (one object per row, all columns), for tools that read
    datatrove/Dolma-style JSONL.gz (`meta` is written as a JSON object, not a string), or as one
    Parquet file; the format follows OUT's suffix.

    \b
    Example:
      assay export runs/demo/curated demo.jsonl.gz
      assay export runs/demo/curated demo.parquet --rejects
    """
    from .export import export_jsonl

    rows = export_jsonl(dataset, out, rejects=rejects, force=force)
    typer.echo(f"{out}: {rows} rows")


@app.command()
def report(
    run_dir: str = typer.Argument(..., help="A run's workdir (holds one dataset per stage; a folder or a URL)"),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Output HTML (default RUN_DIR/report.html)"),
) -> None:
    """Write a self-contained HTML report: funnel, rejects by reason, timings, and stage sections.

    \b
    Example:
      assay report runs/demo -o demo-report.html
    """
    from .report import write_report

    from .storage import is_dir

    if not is_dir(run_dir):
        raise UserError(f"{run_dir}: no such run directory")
    try:
        written = write_report(run_dir, out)
    except FileNotFoundError:  # a store's manifests are read from a local copy: name what was asked
        raise UserError(f"{run_dir}: no completed stages (no */_manifest.json) to report on; give a run's "
                        "workdir, not one dataset") from None
    typer.echo(f"report: {written}")


def _first_sentence(doc: str) -> str:
    """The docstring's first paragraph up to its first full stop, never cut mid-sentence."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


def _short(value: Any, width: int = 80) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", "⏎ ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


# ---- one command per stage ---------------------------------------------------------------------

def _click_type(annotation: Any) -> tuple[Any, bool, bool]:
    """(click type, multiple, is_flag) for a pydantic field annotation, or (None, ...) if complex."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _click_type(args[0])
    if origin is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(annotation)]), False, False
    if origin is list and len(args) == 1:  # a repeatable option: `--types email --types phone`
        inner, multiple, _ = _click_type(args[0])
        if inner is not None and not multiple:
            return inner, True, False
    if annotation is bool:
        return bool, False, True
    if annotation in (str, int, float):
        return annotation, False, False
    return None, False, False


def _stage_command(cls) -> click.Command:
    from .stage import SourceStage

    is_source = issubclass(cls, SourceStage)
    params: list[click.Parameter] = [
        # Internal names that no stage parameter uses (the mixer's pack stage has an `inputs` param).
        click.Argument(["input_paths"], nargs=-1, required=True, metavar="INPUTS..."),
        click.Argument(["output_path"], nargs=1, metavar="OUT"),
    ]
    for name, field in cls.Params.model_fields.items():
        if is_source and name == "paths":
            continue
        ctype, multiple, is_flag = _click_type(field.annotation)
        flag = "--" + name.replace("_", "-")
        help_text = field.description or ""
        if ctype is None:
            params.append(click.Option([flag], default=None, help=help_text + " (YAML/JSON value)"))
        elif is_flag:
            params.append(click.Option([f"{flag}/--no-{name.replace('_', '-')}"], default=None, help=help_text))
        else:
            params.append(click.Option([flag], type=ctype, multiple=multiple, default=None, help=help_text))
    params += [
        click.Option(["--engine", "-e"], type=click.Choice(["local", "spark", "ray"]), default="local", help="Engine"),
        click.Option(["--workers"], type=int, default=0, help="Parallel tasks; 0 = all cores"),
        click.Option(["--spark-master"], default=None, help="Spark master URL, e.g. spark://127.0.0.1:7077"),
        click.Option(["--ray-address"], default=None, help="Ray cluster address, e.g. 127.0.0.1:6379"),
        click.Option(["--force"], is_flag=True, default=False,
                     help="Recompute even if OUT is up to date (replaces only an Assay dataset)"),
    ]

    def callback(input_paths, output_path, engine, workers, spark_master, ray_address, force, **values):
        inputs, out = input_paths, output_path
        from .runner import run_stage

        chosen: dict[str, Any] = {}
        for name, value in values.items():
            if value is None or value == ():
                continue
            field = cls.Params.model_fields[name]
            if _click_type(field.annotation)[0] is None and isinstance(value, str):
                import yaml  # only for an option click cannot type (a list or a mapping as YAML)

                value = yaml.safe_load(value)
            chosen[name] = list(value) if isinstance(value, tuple) else value
        from .io import resolve_path_params

        if is_source:
            chosen["paths"] = list(inputs)
        chosen = resolve_path_params(chosen, cls.path_params, Path.cwd())
        stage = _build_stage(cls, chosen)
        result = run_stage(stage, [] if is_source else list(inputs), out, engine=engine,
                           options=_engine_options(workers, spark_master, ray_address) or None, force=force,
                           progress=sys.stderr.isatty())
        c = result.manifest["counts"]
        status = "up to date, skipped" if result.skipped else f"{result.manifest['wall_seconds']}s"
        click.echo(f"{out}: {c['rows_in']} in, {c['rows_out']} out, {c['rows_rejected']} rejected ({status})")
        for reason, slot in c["rejected"].items():
            click.echo(f"  {reason}: {slot['rows']}")

    from inspect import cleandoc

    doc = cleandoc(cls.__doc__ or "")  # every stage documents a hand-written example (tested)
    doc = doc.replace("\n\n", "\n\n\b\n")
    in_help = "IN... are input files/globs" if is_source else "IN... are input dataset directories"
    return click.Command(cls.name.split(".", 1)[-1], params=params, callback=callback,
                         help=f"{doc}\n\n{in_help}; OUT is the output dataset directory.")


def _build_stage(cls, params: dict):
    from pydantic import ValidationError

    try:
        return cls(params)
    except ValidationError as exc:
        from .recipe import RecipeError  # here: recipe.py brings PyYAML, 15 ms of a command's start-up

        err = exc.errors()[0]
        raise RecipeError(f"--{'-'.join(str(p) for p in err['loc']).replace('_', '-')}: {err['msg']}") from None


class LazyRoot(typer.core.TyperGroup):
    """The root command: family groups and declared commands are listed without importing any
    family; a family's package is imported when its group is used, and everything is loaded only
    for a word nobody declared (so `assay --help` and `assay extract html ...` start fast)."""

    all_loaded = False

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and not self.all_loaded:
            populate(self)
            command = super().get_command(ctx, name)
        if not isinstance(command, LazyFamilyGroup):
            _resume_collector()
        return command


class LazyFamilyGroup(click.Group):
    """`assay <family>`: the family's stages and commands, imported on first use."""

    def __init__(self, name: str, root: click.Group):
        super().__init__(name, help=f"{name} stages and commands (see `assay stages`)")
        self.root, self.loaded = root, False

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        self.load()
        _resume_collector()
        return super().get_command(ctx, name)

    def load(self) -> None:
        if not self.loaded:
            self.loaded = True
            populate(self.root, only_family=self.name)


def build_cli() -> click.Group:
    """The typer app, one lazy group per stage family (`assay <family> <stage>`) and the commands
    families declare under the `assay.commands` entry points (`assay train`, `assay tokenizer`)."""
    from .families import CORE_FAMILY, declared_commands, family_names

    group = typer.main.get_command(app)
    group.__class__ = LazyRoot  # typer builds the group; only its lookup changes
    for name in sorted(family_names() | {CORE_FAMILY}):
        if name not in group.commands:
            group.add_command(LazyFamilyGroup(name, group))
    for name, command in declared_commands().items():
        group.add_command(command, name)
    return group


def populate(root: click.Group, only_family: str | None = None) -> None:
    """Import one family (or all of them) and add its stage commands and its own commands."""
    from .families import CORE_FAMILY, load_families, load_family
    from .stage import _REGISTRY, registry

    if only_family is None:
        families = list(load_families().values())
        stages = registry()
        root.all_loaded = True
    else:
        one = load_family(only_family)
        families = [one] if one is not None else []
        if one is None and only_family != CORE_FAMILY:
            return
        stages = {name: cls for name, cls in sorted(_REGISTRY.items()) if name.startswith(only_family + ".")}
    for name, cls in stages.items():
        if not cls.command:
            continue
        if "." not in name:
            root.add_command(_stage_command(cls), name)
            continue
        sub = _family_group(root, name.split(".", 1)[0])
        if isinstance(sub, LazyFamilyGroup):
            sub.loaded = True
        sub.add_command(_stage_command(cls))
    for family in families:
        family.register_commands(root)


def _family_group(cli: click.Group, family: str) -> click.Group:
    sub = cli.commands.get(family)
    if sub is None:
        sub = click.Group(family, help=f"{family} stages and commands (see `assay stages`)")
        cli.add_command(sub)
    return sub


_SIGNALLED: list[int] = []  # the signal that stopped the command, when it was not Ctrl-C


def _terminate_as_interrupt(signum, frame) -> None:
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt  # SIGTERM stops like Ctrl-C: workers ended, nothing committed half-way


def _skip_pandas_probe() -> None:
    """pyarrow imports pandas (a quarter of a second, a fifth of a short command's start-up) the first
    time it converts a Python list, only to ask whether the list is a pandas object. Assay never hands
    it one, so the probe is answered "no pandas" once, with the import blocked for that call. pyarrow's
    own pandas functions (`to_pandas`, `from_pandas`) still import pandas when they are called."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    class NoPandas:
        @staticmethod
        def find_spec(name: str, path=None, target=None):
            if name == "pandas":
                raise ImportError("pandas import skipped for pyarrow's probe")
            return None

    blocker = NoPandas()
    sys.meta_path.insert(0, blocker)  # `import pandas` fails for this one call
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(blocker)


def _keep_freed_memory() -> None:
    """glibc hands a freed block of 128 KiB or more back to the kernel at once (munmap) and trims
    the heap's free top past 128 KiB: a command that reads, pickles and parses pages of 100 KiB-1 MiB
    then takes a fresh, zeroed page fault per 4 KiB of each, page after page (26,000 faults and ~3% of
    `assay extract html`'s CPU on the extraction benchmark's 579 held-out pages). Up to 32 MiB blocks and
    128 MiB of free heap are kept for reuse instead; forked children (the extraction watchdog's)
    inherit the setting. A no-op off glibc."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 128 << 20)


# Families whose commands do no linear algebra in the command's own process (parsing, extraction, I/O).
_NO_BLAS_FAMILIES = ("extract",)


def _one_blas_thread(args: list[str]) -> None:
    """Every command loads numpy (pyarrow imports it; the writer counts rows with it), and numpy's
    OpenBLAS starts a thread per core at load that spins for work for about 0.1 s before it sleeps:
    ~0.05-0.1 CPU-s of nothing, a fifth of `assay extract html`'s start-up on two cores. A command of
    a family that does no linear algebra (`assay [-v] extract ...`) gets one BLAS thread; a value the
    user set in OPENBLAS_NUM_THREADS stands, and every other command keeps OpenBLAS's default."""
    command = next((arg for arg in args if not arg.startswith("-")), None)
    if command in _NO_BLAS_FAMILIES and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


_COLLECTOR_PAUSED: list[bool] = []


def _pause_collector() -> None:
    """Start-up (pyarrow, pydantic, the family's stages) builds about 60,000 objects that live as long
    as the program, and no garbage: the cyclic collector walked them 136 times for nothing, 50 ms of
    `assay extract html`'s 0.45 s start-up. It is paused until the command is found."""
    if gc.isenabled():
        gc.disable()
        _COLLECTOR_PAUSED.append(True)


def _resume_collector() -> None:
    """The command is found: what start-up built is frozen (never walked again, nor written to by a
    collection in a forked worker) and the collector runs as usual from here."""
    if _COLLECTOR_PAUSED:
        _COLLECTOR_PAUSED.clear()
        gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    import signal

    if argv is None:  # the real program, not a caller embedding the CLI (tests, notebooks)
        _pause_collector()
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
        _keep_freed_memory()
        _one_blas_thread(sys.argv[1:])
        _skip_pandas_probe()
    code = run_cli(build_cli(), argv)
    if code:  # a caller embedding the CLI gets None on success, SystemExit otherwise, as before
        sys.exit(code)


def run_cli(cli: click.Group, argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status; the one place errors and signals are
    reported. Usage errors, unknown names and user errors are one `error:` line and status 2 (with
    the traceback under -vv); Ctrl-C is 130 and SIGTERM 143, each with one line. Commands are built
    both by typer (with its own copy of click) and by click itself, so both kinds of exception are
    caught here rather than in either library's `main`, whose ways of returning a status differ."""
    from .logs import verbosity

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        with cli.make_context("assay", args) as ctx:
            cli.invoke(ctx)
        return 0
    except KeyboardInterrupt:
        return _interrupted()
    except _HELP_REQUESTS as exc:  # a group called without a command: its help, as asked
        click.echo(exc.format_message())
        return 0
    except _EXITS as exc:
        return exc.exit_code
    except _ABORTS:  # a prompt answered with Ctrl-C or end of input
        return _interrupted()
    except _CLICK_ERRORS as exc:
        return _error(_usage_message(exc), 2 if isinstance(exc, _USAGE_ERRORS) else exc.exit_code or 1, verbosity())
    except _user_errors() as exc:
        return _error(str(exc), 2, verbosity())
    except OSError as exc:  # what the machine refuses (a full disk, a size limit) is the user's to fix
        message = _machine_refused(exc)
        if message is None:
            raise
        return _error(message, 2, verbosity())


def _interrupted() -> int:
    import signal

    signum = _SIGNALLED[-1] if _SIGNALLED else signal.SIGINT
    name = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    click.echo(f"interrupted{name}: stopped; rerun the same command to resume", err=True)
    return 128 + signum


# errno -> what to do about it, for the OS errors that are the machine's answer, not a bug of Assay.
_REFUSALS = {
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EDQUOT: "free some of your quota or write elsewhere",
    errno.EFBIG: "a file outgrew the file-size limit (ulimit -f) or what the file system allows",
    errno.EROFS: "write the output somewhere writable",
    errno.EACCES: "check the permissions of the output (or input) folder",
}


def _machine_refused(exc: BaseException) -> str | None:
    """One line for an OSError that says the disk is full, a limit was reached, a place is not
    writable or a cluster cannot be reached (raised here or in a worker, possibly as the cause of
    another error); None otherwise."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectionError):  # a cluster or server that is not there (or went away)
            return f"{exc.strerror or exc}: check the address, and that it is up and reachable from here"
        if isinstance(exc, OSError) and exc.errno in _REFUSALS:
            where = f"{exc.filename}: " if exc.filename else ""
            return f"{where}{os.strerror(exc.errno)}: {_REFUSALS[exc.errno]}; rerun the same command to resume"
        exc = exc.__cause__ or exc.__context__
    return None


def _error(message: str, code: int, verbose: int) -> int:
    if verbose >= 2:
        import traceback

        traceback.print_exc()
    from .redact import redact

    click.secho(f"error: {redact(' '.join(message.split()))}", fg="red", err=True)
    return code


def _both(name: str) -> tuple[type[BaseException], ...]:
    """click's exception class `name` and typer's copy of it (typer >= 0.26 ships its own click)."""
    import typer._click.exceptions as typer_click
    import typer.exceptions

    return tuple({getattr(module, name) for module in (click.exceptions, typer_click, typer.exceptions)
                  if hasattr(module, name)})


_HELP_REQUESTS = _both("NoArgsIsHelpError")
_EXITS = _both("Exit")
_ABORTS = _both("Abort")
_USAGE_ERRORS = _both("UsageError")
_CLICK_ERRORS = _both("ClickException")


def _usage_message(exc: Exception) -> str:
    """One line in Assay's words for a usage error of either click: what was wrong, the closest
    known name when there is one, and where the help is."""
    import difflib
    import re

    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "assay"
    kind = type(exc).__name__
    unknown = re.match(r"No such command '(.+?)'", exc.format_message())
    if unknown and ctx is not None:
        word = unknown.group(1)
        close = _closest_command(ctx, word)
        message = f"no such command {word!r}" + (f"; did you mean {close!r}?" if close else "")
    elif kind == "NoSuchOption":
        close = difflib.get_close_matches(exc.option_name, sorted(exc.possibilities or ()), n=1)
        message = f"no such option {exc.option_name}" + (f"; did you mean {close[0]}?" if close else "")
    elif kind == "MissingParameter" and getattr(exc, "param", None) is not None:
        param = exc.param
        if param.param_type_name == "argument":
            message = f"missing argument {param.metavar or param.name.upper()}"
        else:
            message = f"missing option {param.opts[0]}"
    elif kind == "BadParameter" and isinstance(getattr(getattr(exc, "param", None), "type", None), click.Choice):
        message = exc.format_message().rstrip(".")
        close = difflib.get_close_matches(_bad_value(message) or "", [str(c) for c in exc.param.type.choices], n=1)
        message += f"; did you mean {close[0]!r}?" if close else ""
    else:
        message = exc.format_message().rstrip(".")
    message = message[:1].lower() + message[1:]
    return f"{where}: {message} (see '{where} --help')"


def _bad_value(message: str) -> str | None:
    """The value a Choice refused, from click's message ("... 'rey' is not one of ...")."""
    import re

    found = re.search(r"'([^']*)' is not one of", message)
    return found.group(1) if found else None


def _closest_command(ctx: click.Context, word: str) -> str | None:
    """The known command closest to a mistyped one: first among the group's own commands, then, at
    the top level, among the stage commands (`lang` -> `extract lang_id`)."""
    import difflib

    group = ctx.command
    names = group.list_commands(ctx) if isinstance(group, (click.Group, typer.core.TyperGroup)) else []
    close = difflib.get_close_matches(word, names, n=1)
    if close:
        return close[0]
    if ctx.parent is not None:
        return None
    from .stage import registry

    spelled = {}
    for name in registry():
        family, _, short = name.partition(".")
        if short:
            spelled[short] = spelled[name] = f"{family} {short}"
    close = difflib.get_close_matches(word, list(spelled), n=1)
    return spelled[close[0]] if close else None


if __name__ == "__main__":
    main()
