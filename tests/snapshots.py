"""Whole runs as plain Python values, to compare one engine's output with another's."""
from __future__ import annotations

from assay.pipeline.dataset import Dataset


def snapshot(run_dir, stage_ids):
    """Every stage's kept rows and rejects, sorted by id, as plain Python values."""
    snap = {}
    for sid in stage_ids:
        ds = Dataset(run_dir / sid)
        kept = ds.read()
        rejects = ds.read_rejects()
        snap[sid] = (
            sorted(kept.to_pylist(), key=lambda r: r["id"]),
            sorted(rejects.to_pylist(), key=lambda r: r["id"]) if rejects.num_rows else [],
        )
    return snap


def assert_same_demo(run_dir, local_dir, stage_ids):
    """Every value of every stage equal to the local run's, every column compared exactly (quality_lm
    too: its old 1e-3 tolerance went with issue #27 item 8; tests/test_quality_determinism.py checks
    that a document's scores do not depend on its batch, threads or scratch buffers)."""
    ours, ref = snapshot(run_dir, stage_ids), snapshot(local_dir, stage_ids)
    assert ours == ref, differences(ours, ref)[:5]


def differences(ours, ref) -> list[tuple]:
    """(stage, kept or rejects, id, column, ours, ref) of every value that differs; rows present on one
    side only have column None."""
    out = []
    for sid in ref:
        for part, a, b in zip(("kept", "rejects"), ours.get(sid, ([], [])), ref[sid]):
            mine, theirs = {r["id"]: r for r in a}, {r["id"]: r for r in b}
            for i in sorted(mine.keys() | theirs.keys()):
                if i not in mine or i not in theirs:
                    out.append((sid, part, i, None, i in mine, i in theirs))
                    continue
                out += [(sid, part, i, c, mine[i].get(c), theirs[i].get(c))
                        for c in sorted(mine[i].keys() | theirs[i].keys()) if mine[i].get(c) != theirs[i].get(c)]
    return out


def demo_matches_local(engine: str, options: dict, workdir, request) -> None:
    """Run the demo recipe on `engine`, then compare it with the session's local run of it."""
    from assay.pipeline.recipe import load_recipe
    from assay.pipeline.runner import run_recipe

    from conftest import DEMO_RECIPE

    recipe = load_recipe(DEMO_RECIPE)
    results = run_recipe(recipe, workdir=workdir, engine=engine, options=options, log=lambda *_: None)
    assert all(r.manifest["engine"].startswith(engine) for r in results if r.manifest["kind"] != "global")
    _, local_dir, _ = request.getfixturevalue("local_demo")  # after the run: another process builds it meanwhile
    assert_same_demo(workdir, local_dir, recipe.order())
