"""A family installed from its own package adds a stage, a command and a report section without any
change to pipeline/: the entry point (as pip would write it) is all the core sees."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TOY = '''
"""A toy family: one stage, one command, one report section."""
import click
import pyarrow as pa
import pyarrow.compute as pc

from assay.pipeline.stage import MapStage, register, set_column


@register("toy.shout")
class Shout(MapStage):
    """Upper-case every text. Example: assay toy shout in/ out/"""

    columns = {"shouted": pa.bool_()}

    def process(self, table):
        table = set_column(table, "text", pc.utf8_upper(table.column("text")))
        return set_column(table, "shouted", [True] * table.num_rows, pa.bool_())


@click.command("toy-hello")
@click.argument("name")
def hello(name):
    """Greet. Example: assay toy-hello world"""
    click.echo(f"hello {name} from the toy family")


def register_commands(cli):
    cli.add_command(hello)


REPORT_SECTIONS = ["toyfam.report:section"]
'''

REPORT = '''
def section(run_dir):
    return "<h2>Toy section</h2><p>toy family was here</p>"
'''


def test_a_family_plugs_in_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    (site / "toyfam").mkdir(parents=True)
    (site / "toyfam" / "__init__.py").write_text(TOY)
    (site / "toyfam" / "report.py").write_text(REPORT)
    dist = site / "toyfam-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfam\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[assay.families]\ntoy = toyfam\n")
    env = dict(os.environ, PYTHONPATH=str(site) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def assay(*args):
        return subprocess.run([sys.executable, "-m", "assay.pipeline.cli", *args], capture_output=True, text=True,
                              env=env, timeout=120)

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"quiet words {i}"}) + "\n" for i in range(4)))
    run = tmp_path / "run"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: toy\ninputs:\n  raw: {{uses: read.jsonl, params: {{paths: ['{src}']}}}}\n"
                      "stages:\n  - {id: loud, uses: toy.shout, inputs: [raw]}\n")
    result = assay("run", str(recipe), "--workdir", str(run))
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq

    table = pq.read_table(run / "loud" / "part-00000.parquet")
    assert table.column("text").to_pylist()[0] == "QUIET WORDS 0" and all(table.column("shouted").to_pylist())
    assert "Toy section" in (run / "report.html").read_text()
    assert "hello world from the toy family" in assay("toy-hello", "world").stdout
    assert assay("toy", "shout", str(run / "raw"), str(tmp_path / "loud2")).returncode == 0
    assert "toy.shout" in assay("stages").stdout
    # the core has no list of families: nothing under pipeline/ names this one
    pipeline = Path(__file__).resolve().parents[1] / "pipeline"
    assert not any("toy" in p.read_text() for p in pipeline.rglob("*.py"))


_LOADED_PROBE = (
    "import sys\nfrom assay.pipeline.cli import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    "print('LOADED', sorted(m for m in sys.modules if m.count('.') == 1 and m.startswith('assay.') or m in ('torch', 'pyspark', 'ray')))")


def _loaded(*words: str) -> str:
    out = subprocess.run([sys.executable, "-c", _LOADED_PROBE, *words], capture_output=True, text=True, timeout=120)
    assert "Usage: assay" in out.stdout, out.stderr[-2000:]
    return out.stdout.split("LOADED", 1)[1]


def test_the_command_line_imports_only_the_family_it_needs():
    """`assay --help` imports no family; `assay extract ...` the extract family alone (no torch, no
    Spark, no Ray); the declared top-level commands (`assay train`) come from a light module."""
    root = _loaded("--help")
    for absent in ("assay.extractors", "assay.filters", "assay.dedup", "assay.mixer", "assay.synth", "torch", "pyspark"):
        assert f"'{absent}'" not in root, root
    extract = _loaded("extract", "html", "--help")
    assert "'assay.extractors'" in extract
    for absent in ("assay.filters", "assay.dedup", "assay.mixer", "assay.synth", "torch", "pyspark", "ray"):
        assert f"'{absent}'" not in extract, extract
