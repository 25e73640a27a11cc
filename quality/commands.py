"""`assay quality` commands that are not a stage: train, annotate, build-models."""
from __future__ import annotations

import json
from pathlib import Path

import click

from assay.pipeline import storage
from assay.pipeline.errors import UserError


def _read_texts(path: str, limit: int | None = None) -> list[dict]:
    """Rows with `text` from a JSON Lines file (.gz too) or an Assay dataset directory (either a URL too)."""
    if storage.is_dir(path):
        from assay.pipeline.dataset import Dataset

        table = Dataset(path).read()
        rows = table.to_pylist()
    elif storage.exists(path):
        from assay.pipeline.io import open_binary

        with storage.local_copy(path) as local, open_binary(local) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    else:
        raise UserError(f"{path}: no such file or dataset")
    rows = [r for r in rows if r.get("text")]
    return rows[:limit] if limit else rows


def _refuse_overwrite(out: str, force: bool) -> None:
    """A file already at OUT is the user's until they say otherwise: refused without --force."""
    if not force and storage.exists(out):
        raise UserError(f"{out}: exists; refusing to overwrite it (pass --force to replace it, or choose another path)")


def register_commands(cli: click.Group) -> None:
    group = cli.commands.get("quality")
    if group is None:
        group = click.Group("quality", help="quality scorers, calibration and tiers (see `assay stages`)")
        cli.add_command(group)

    @group.command("train")
    @click.argument("out")  # files and folders here may be URLs (s3://...): a click.Path would fold `//`
    @click.option("--positive", help="Good documents (JSONL or dataset)")
    @click.option("--negative", help="Bad documents (JSONL or dataset)")
    @click.option("--labelled", help="JSONL with text and a label field")
    @click.option("--label-key", default="grade", show_default=True, help="The label field of --labelled")
    @click.option("--epoch", default=20, show_default=True)
    @click.option("--dim", default=16, show_default=True)
    @click.option("--force", is_flag=True, help="Replace OUT if it exists")
    def train_cmd(out, positive, negative, labelled, label_key, epoch, dim, force):
        """Train a fastText scorer (DCLM-style) into OUT (.ftz, quantized).

        \b
        Examples:
          assay quality train my.ftz --positive good.jsonl --negative crawl.jsonl
          assay quality train edu.ftz --labelled grades.jsonl --label-key grade
          assay quality fasttext runs/x/in runs/x/scored --model my.ftz --name mine
        """
        from .ftmodel import train

        _refuse_overwrite(out, force)
        if labelled:
            rows = _read_texts(labelled)
            missing = [i for i, r in enumerate(rows) if r.get(label_key) is None]
            rows = [r for r in rows if r.get(label_key) is not None]
            texts, labels = [r["text"] for r in rows], [str(r[label_key]) for r in rows]
            if missing:
                click.echo(f"{len(missing)} rows without {label_key!r} left out")
        elif positive and negative:
            pos, neg = _read_texts(positive), _read_texts(negative)
            texts, labels = [r["text"] for r in pos + neg], ["hq"] * len(pos) + ["lq"] * len(neg)
        else:
            raise UserError("give --positive and --negative, or --labelled")
        if len(set(labels)) < 2:
            raise UserError("training needs at least two labels")
        target = storage.as_path(out)
        if storage.is_remote(target):  # fastText writes a local file: trained in scratch, uploaded whole
            scratch = storage.staging_dir("assay-ftz-")
            try:
                train(texts, labels, scratch / target.name, epoch=epoch, dim=dim)
                storage.put_file(scratch / target.name, target)
            finally:
                import shutil

                shutil.rmtree(scratch, ignore_errors=True)
        else:
            train(texts, labels, target, epoch=epoch, dim=dim)
        click.echo(f"{out}: {len(texts)} documents, labels {sorted(set(labels))}")

    @group.command("annotate")
    @click.argument("inp")  # a file, a dataset, or a URL of either
    @click.argument("out")
    @click.option("--backend", type=click.Choice(["openai", "heuristic"]), default="heuristic", show_default=True)
    @click.option("--base-url", default="http://127.0.0.1:8000/v1", show_default=True, help="OpenAI-compatible server")
    @click.option("--model", default="default", show_default=True, help="Model name the server knows")
    @click.option("--api-key", envvar="OPENAI_API_KEY", default=None, help="Bearer token (or $OPENAI_API_KEY)")
    @click.option("--sample", default=1000, show_default=True, help="Documents to rate")
    @click.option("--force", is_flag=True, help="Replace OUT if it exists")
    def annotate_cmd(inp, out, backend, base_url, model, api_key, sample, force):
        """Rate documents 0-5 with the educational rubric (FineWeb-Edu recipe); writes JSONL {text, grade}.

        \b
        Examples:
          assay quality annotate runs/x/deduped grades.jsonl --backend openai --base-url http://127.0.0.1:8000/v1 --model smollm2
          assay quality train edu.ftz --labelled grades.jsonl
        """
        from .annotate import heuristic_grades, openai_grades

        _refuse_overwrite(out, force)
        rows = _read_texts(inp, sample)
        texts = [r["text"] for r in rows]
        try:
            grades = openai_grades(texts, base_url, model, api_key) if backend == "openai" else heuristic_grades(texts)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:  # the server: down, slow, or not OpenAI's API
            if backend != "openai":
                raise
            raise UserError(f"rating with {base_url} failed: {type(exc).__name__}: {exc}") from None
        from assay.pipeline.dataset import atomic_write_text

        atomic_write_text(storage.as_path(out), "".join(json.dumps({"text": t, "grade": g}, ensure_ascii=False) + "\n" for t, g in zip(texts, grades)), redacted=False)
        click.echo(f"{out}: {len(texts)} rated ({backend})")

    @group.command("build-models")
    @click.option("--out", default=None,
                  help="A local folder (the models are source files of the package); default: the package's quality/models")
    def build_cmd(out):
        """Rebuild the shipped models and calibration from quality/data (the repository alone).

        \b
        Example:
          assay quality build-models --out models/
        """
        from .build import BUILT, build
        from .scorers import MODELS

        if out and storage.is_url(out):
            raise UserError(f"--out {out}: build-models writes a local folder (the package's models are files of "
                            "the repository); build here, then copy the folder to the store")
        if out and Path(out).exists():
            if not Path(out).is_dir():
                raise UserError(f"--out {out}: exists and is not a folder")
            others = sorted(p.name for p in Path(out).iterdir() if p.name not in BUILT)
            if others:
                raise UserError(f"--out {out}: holds files build-models does not write ({', '.join(others[:3])}"
                                f"{', ...' if len(others) > 3 else ''}); choose an empty or new folder")
        build(Path(out) if out else MODELS, log=click.echo)
