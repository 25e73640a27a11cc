"""The command lines the documentation shows, and a folder in which each of them can run as written.

`readme_examples()` and `help_examples()` extract every `assay ...` line from the README's code blocks
and from every command's `--help` (its Example section). `Workspace` holds what those lines read
(`runs/x/docs`, `crawl/*.warc.gz`, `~/src/flask`, `grades.jsonl`, ...), made once from the bundled
sample and the demo's outputs; `Workspace.run(line)` runs one line with bash in a fresh folder that
links every prepared input except the ones the line writes, so each example sees the same inputs
whatever ran before it. Only what cannot exist in a test is substituted: the documented server
address (a server the examples themselves start) and cluster addresses (local ones).
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BIN = Path(sys.executable).parent
DOCUMENTED_PORT = "8000"  # the port the examples use for `assay serve` and the clients pointed at it


@dataclass(frozen=True)
class Example:
    origin: str  # "README.md:312" or "assay synth arith --help"
    line: str  # as documented, prompt prefix and comment removed
    background: bool = False  # written with a trailing `&`

    @property
    def id(self) -> str:
        return self.line


def _clean(line: str) -> list[tuple[str, bool]]:
    """One documented line -> the assay commands in it: `.venv/bin/` dropped, `# comments` and
    `[optional parts]` removed, `a && b` split, a trailing `&` noted."""
    line = _uncomment(re.sub(r"^\.venv/bin/", "", line.strip()))
    line = re.sub(r"\s*\[[^\]']*\]", "", line)  # `[--engine spark|ray]`: optional, left out
    commands = []
    for part in line.split("&&"):
        part = part.strip()
        background = part.endswith("&")
        part = re.sub(r"\.venv/bin/", "", part.rstrip("&").strip())
        if part.startswith("assay "):
            commands.append((part, background))
    return commands


def _uncomment(line: str) -> str:
    """The line without its `# comment` (a # after a space and outside quotes, as bash reads it)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def readme_examples() -> list[Example]:
    out: list[Example] = []
    in_block = False
    for number, text in enumerate(README.read_text().splitlines(), 1):
        if text.startswith("```"):
            in_block = not in_block
            continue
        if in_block and re.match(r"\s*(\.venv/bin/)?assay ", text):
            out += [Example(f"README.md:{number}", cmd, bg) for cmd, bg in _clean(text)]
    return out


def help_examples() -> list[Example]:
    from assay.pipeline.cli import build_cli, populate

    cli = build_cli()
    populate(cli)
    out: list[Example] = []
    seen: set[str] = set()

    def walk(cmd, words: list[str]) -> None:
        if getattr(cmd, "commands", None):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, words + [name])
            return
        text = (cmd.help or "").split("Example", 1)[-1] if "Example" in (cmd.help or "") else ""
        for raw in re.findall(r"(?:^|\s|`|:\s)(assay [^`\n]+)", text):
            for line, background in _clean(raw.rstrip(".")):
                if line not in seen:
                    seen.add(line)
                    out.append(Example(f"assay {' '.join(words)} --help", line, background))

    walk(cli, [])
    return out


# ---- what the documented lines read --------------------------------------------------------------

def _jsonl_gz(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


class Workspace:
    """Inputs in `store/` (relative path -> file or folder), and one fresh folder per example."""

    def __init__(self, root: Path, demo: Path):
        self.root, self.demo, self.store = root, demo, root / "store"
        self.count = 0
        self.substitutions: dict[str, str] = {}
        self.entries: list[str] = []
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests"), os.environ.get("PYTHONPATH")]))}

    def add(self, rel: str, source: Path | None = None, text: str | None = None) -> Path:
        """An input named `rel` in every example folder: a copy of `source`, or `text`."""
        target = self.store / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if text is not None:
            target.write_text(text)
        elif source is not None and source.is_dir():
            shutil.copytree(source, target, symlinks=False)
        elif source is not None:
            shutil.copyfile(source, target)
        if rel not in self.entries:
            self.entries.append(rel)
        return target

    def folder(self, outputs: set[str]) -> Path:
        """A fresh folder with every stored input linked in, except `outputs` (what a line writes)."""
        self.count += 1
        where = self.root / f"ex{self.count:03d}"
        where.mkdir()
        for rel in self.entries:
            if any(rel == out or rel.startswith(out.rstrip("/") + "/") for out in outputs):
                continue
            link = where / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(self.store / rel)
        (where / "home").mkdir(exist_ok=True)
        return where

    def command(self, line: str) -> str:
        for old, new in self.substitutions.items():
            line = line.replace(old, new)
        return line

    def run(self, example: Example, timeout: float = 600) -> tuple[subprocess.CompletedProcess, Path, set[str]]:
        line = self.command(example.line)
        outputs = written_paths(line)
        where = self.folder(outputs)
        env = {**self.env, "HOME": str(where / "home")}  # `~/src/flask`: the store's home/src/flask
        result = subprocess.run(["bash", "-c", line], cwd=where, env=env, capture_output=True, text=True,
                                timeout=timeout)
        return result, where, outputs

    def start(self, example: Example) -> tuple[subprocess.Popen, Path]:
        """A background example (`assay serve ... &`): started, left running for the caller to stop."""
        line = self.command(example.line)
        where = self.folder(set())
        with open(where / "output.log", "w") as log:
            proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=where, env={**self.env, "HOME": str(where / "home")},
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return proc, where


def written_paths(line: str) -> set[str]:
    """What a command line writes, as its command declares it: the OUT argument of a stage command,
    or the `out` argument/option of the others (`mix inspect OUT` reads a built mixture)."""
    import click

    from assay.pipeline.cli import build_cli

    words = shlex.split(line)[1:]
    cmd: click.Command = build_cli()
    ctx = click.Context(cmd)
    while isinstance(cmd, click.Group) or hasattr(cmd, "list_commands"):
        rest = [w for w in words if not w.startswith("-")]
        if not rest:
            return set()
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return set()
        words = words[words.index(rest[0]) + 1:]
        cmd, ctx = sub, click.Context(sub, parent=ctx)
    params = cmd.make_context(cmd.name, list(words), resilient_parsing=True).params
    if cmd.name == "inspect":
        return set()
    found = {params.get("output_path"), params.get("out")}
    return {os.path.expanduser(str(p)) for p in found if p}


# ---- building the store --------------------------------------------------------------------------

def build_store(ws: Workspace) -> None:
    """Everything the documented lines read, from the bundled sample and the demo's outputs."""
    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.pipeline.stage import resolve_stage

    import pyarrow as pa

    sample, demo = REPO / "examples" / "sample", ws.demo
    # The demo's own outputs, as `make demo` leaves them in runs/demo.
    for stage_dir in sorted(p for p in demo.iterdir() if (p / "_manifest.json").exists()):
        ws.entries.append(f"runs/demo/{stage_dir.name}")
        (ws.store / "runs" / "demo").mkdir(parents=True, exist_ok=True)
        (ws.store / "runs" / "demo" / stage_dir.name).symlink_to(stage_dir)
    # The repository's example files, where the lines name them (relative paths inside resolve here).
    for sub in ("recipes", "mixtures", "train"):
        ws.add(f"examples/{sub}", REPO / "examples" / sub)
    for sub in ("sample", "synth"):
        ws.add(f"examples/{sub}", REPO / "examples" / sub)

    # Outside files the readers and extractors take.
    for page in sorted((sample / "html").glob("*.html.gz"))[:6]:
        ws.add(f"crawl/pages/{page.name}", page)
    for warc in sorted((sample / "warc").glob("*.warc.gz"))[:1]:
        ws.add(f"crawl/{warc.name}", warc)
    for pdf in sorted((sample / "pdf").glob("*.pdf"))[:2]:
        ws.add(f"papers/{pdf.name}", pdf)
    from epubs import sample_book

    (ws.store / "books").mkdir(exist_ok=True)
    sample_book(ws.store / "books" / "harbour.epub")
    ws.entries.append("books")
    ws.add("repo", sample / "code")
    texts = [r["text"] for r in Dataset(demo / "tiers").read().slice(0, 60).to_pylist()]
    _jsonl_gz(ws.store / "data" / "part-0.jsonl.gz", [{"content": t, "url": f"https://example.org/{i}"} for i, t in enumerate(texts)])
    ws.entries.append("data")
    import pyarrow.parquet as pq

    (ws.store / "hf_export").mkdir()
    pq.write_table(pa.table({"content": texts[:20]}), ws.store / "hf_export" / "train-00000.parquet")
    ws.entries.append("hf_export")
    events = (REPO / "tests" / "fixtures" / "history" / "gharchive-events.json").read_bytes()
    (ws.store / "gharchive").mkdir()
    (ws.store / "gharchive" / "2024-01-01-15.json.gz").write_bytes(gzip.compress(events))
    ws.entries.append("gharchive")
    (ws.store / "home" / "clones").mkdir(parents=True)
    ws.entries.append("home/clones")
    for name in ("flask", "requests"):
        ws.add(f"home/src/{name}", sample / "history" / "assay-extractors.git")
    swebench = REPO / "tests" / "fixtures" / "history" / "swebench-sample.jsonl"
    ws.add("swe-bench-lite.json", swebench)
    ws.add("swe-bench.json", swebench)
    ws.add("inventory.txt", REPO / "examples" / "recipes" / "inventory.txt")
    ws.add("solution_test.py", text="def add(a, b):\n    return a + b\n\nassert add(2, 3) == 5\nprint('ok')\n")
    good = [{"text": t} for t in texts[:30]]
    junk = [{"text": " ".join(["click here buy now"] * 20 + [str(i)])} for i in range(30)]
    ws.add("good.jsonl", text="".join(json.dumps(r) + "\n" for r in good))
    ws.add("crawl.jsonl", text="".join(json.dumps(r) + "\n" for r in junk))
    ws.add("grades.jsonl", text="".join(json.dumps({"text": r["text"], "grade": i % 4}) + "\n" for i, r in enumerate(good + junk)))
    ws.add("ut1-adult-domains.txt", text="# a user's blocklist, UT1's format\ncasino.example\nexample.org/ads/*\n")  # filter.url_blocklist
    for name in ("my_model.ftz", "my.ftz", "edu.ftz"):
        ws.add(name, REPO / "quality" / "models" / "edu.ftz")

    # Datasets the stage commands take: small, so model-backed stages stay quick.
    quiet = {"options": {"workers": 1}}
    small = ws.root / "made"
    tiers = Dataset(demo / "tiers").read()
    keep = tiers.slice(0, 16)  # small: the embedding examples encode every document
    docs = write_table(keep, small / "docs")
    # Two short documents for the line that rates documents with the served LLM.
    short = tiers.slice(0, 2)
    tiny = write_table(short.set_column(short.schema.get_field_index("text"), "text",
                                        pa.array([t[:600] for t in short.column("text").to_pylist()])), small / "tiny")
    for rel in ("in", "docs", "runs/x/docs", "runs/x/in", "runs/x/clean", "runs/x/scored", "runs/x/tiered", "runs/x/code"):
        ws.add(rel, docs)
    ws.add("runs/x/deduped", tiny)  # rated by an LLM in `quality annotate`
    ws.add("runs/x/raw_html", _html_records(sample, small))
    embeddings = run_stage(resolve_stage("semantic.embed")({"pooling": "first", "max_tokens": 64}), [docs],
                           small / "embeddings", **quiet).out
    ws.add("runs/x/embeddings", embeddings)
    clustered = run_stage(resolve_stage("semantic.cluster")({"clusters": 4}), [docs, embeddings], small / "clustered", **quiet).out
    ws.add("runs/x/clustered", clustered)
    flagged = run_stage(resolve_stage("semantic.decontam")({"mode": "flag"}), [docs], small / "decontam", **quiet).out
    ws.add("runs/x/decontam", flagged)
    signals = run_stage(resolve_stage("filter.signals")({}), [docs], small / "signals", **quiet).out
    ws.add("runs/x/signals", signals)
    # `filter calibrate` needs a language column and 200 documents of a language: the sample's
    # documents, repeated, through extract.lang_id; its thresholds file and the signals made with it
    # are what the next documented lines read.
    texts_all = tiers.column("text").to_pylist()
    many = make_docs([{"text": texts_all[i % len(texts_all)], "source": "sample"} for i in range(240)])
    lang = run_stage(resolve_stage("extract.lang_id")({}), [write_table(many, small / "many")], small / "lang", **quiet).out
    ws.add("runs/x/lang", lang)
    subprocess.run([str(BIN / "assay"), "filter", "calibrate", str(lang), str(ws.store / "my-thresholds.json"),
                    "--min-docs", "200"], check=True, capture_output=True, env=ws.env)
    ws.entries.append("my-thresholds.json")
    sig = run_stage(resolve_stage("filter.signals")({"calibration": str(ws.store / "my-thresholds.json")}), [lang],
                    small / "sig", **quiet).out
    ws.add("runs/x/sig", sig)
    ws.add("annotated", Path(demo / "near_dups"))
    ws.add("runs/x/commits", demo / "history")
    history = Dataset(demo / "history").read()
    ws.add("runs/x/prs", write_table(history.slice(0, 2), small / "prs"))  # rewritten by an LLM
    arith = run_stage(resolve_stage("synth.arith")({"count": 1, "seed": 7}), [], small / "arith", **quiet).out
    ws.add("runs/x/arith", arith)  # solved by an LLM, 8 candidates each
    ws.add("runs/s/arith", arith)
    # A built mixture for `mix inspect`, made by the documented build line.
    built = ws.folder(set())
    subprocess.run(["bash", "-c", "assay mix build examples/mixtures/step35-mini.yaml runs/demo/mix-step35 --no-report"],
                   cwd=built, env=ws.env, check=True, capture_output=True)
    ws.add("runs/demo/mix-step35", built / "runs" / "demo" / "mix-step35")
    subprocess.run([str(BIN / "assay"), "tokenizer", "train", str(docs), "--out", str(ws.store / "tokenizer.json"),
                    "--vocab-size", "512"], check=True, capture_output=True, env=ws.env)
    ws.entries.append("tokenizer.json")


def _html_records(sample: Path, where: Path) -> Path:
    """A dataset of raw HTML in an `html` column, as a crawl export holds it."""
    import pyarrow as pa

    from assay.pipeline.dataset import write_table
    from assay.pipeline.schema import make_docs

    pages = sorted((sample / "html").glob("*.html.gz"))[:4]
    docs = make_docs([{"text": "", "source": "crawl-export", "url": f"https://example.org/{p.name}"} for p in pages])
    docs = docs.append_column("html", pa.array([gzip.decompress(p.read_bytes()).decode("utf-8", "replace") for p in pages]))
    return write_table(docs, where / "raw_html")
