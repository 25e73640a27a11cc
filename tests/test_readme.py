"""The README's "Writing a stage" example is real code: it runs and does what the text says."""
from __future__ import annotations

import re
from pathlib import Path

from assay.pipeline.dataset import Dataset, write_table
from assay.pipeline.runner import run_stage
from assay.pipeline.schema import make_docs

README = Path(__file__).resolve().parents[1] / "README.md"


def test_writing_a_stage_example_runs(tmp_path):
    section = README.read_text().split("## Writing a stage", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    stage = namespace["NoShouting"]({"max_upper_share": 0.5})
    docs = write_table(make_docs([{"text": "QUIET PLEASE", "source": "s"}, {"text": "a calm sentence", "source": "s"}]),
                       tmp_path / "in")
    result = run_stage(stage, [docs], tmp_path / "out", options={"workers": 1})
    assert result.manifest["counts"]["rejected"]["shouting"]["rows"] == 1
    assert Dataset(tmp_path / "out").read().column("upper_share").to_pylist() == [0.0]
    assert sum(result.manifest["statistics"]["histograms"]["upper_share"]["counts"]) == 2
    # the file it reads is part of its identity: editing it re-runs the stage, as the text says
    acronyms = tmp_path / "acronyms.txt"
    acronyms.write_text("NASA\n")
    docs2 = write_table(make_docs([{"text": "NASA launched it", "source": "s"}]), tmp_path / "in2")
    params = {"max_upper_share": 0.2, "acronyms": str(acronyms)}
    first = run_stage(namespace["NoShouting"](params), [docs2], tmp_path / "out2", options={"workers": 1})
    assert first.manifest["counts"]["rows_rejected"] == 0
    acronyms.write_text("ESA\n")
    again = run_stage(namespace["NoShouting"](params), [docs2], tmp_path / "out2", options={"workers": 1})
    assert not again.skipped and again.manifest["counts"]["rejected"]["shouting"]["rows"] == 1
