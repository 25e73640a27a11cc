"""The demo recipe on Ray gives the local engine's output, stage by stage. (A file of its own, so that
`make test`'s two processes run the Spark and the Ray demo at the same time.)"""
from __future__ import annotations

import pytest

from assay.pipeline.recipe import load_recipe
from assay.pipeline.runner import run_recipe

from conftest import DEMO_RECIPE, RAY_OPTIONS
from snapshots import assert_same_demo

pytestmark = pytest.mark.ray


def test_demo_on_ray_matches_local(ray_engine, tmp_path, request):
    recipe = load_recipe(DEMO_RECIPE)
    results = run_recipe(recipe, workdir=tmp_path, engine="ray", options=RAY_OPTIONS, log=lambda *_: None)
    assert all(r.manifest["engine"].startswith("ray") for r in results if r.manifest["kind"] != "global")
    _, local_dir, _ = request.getfixturevalue("local_demo")  # after the run: the other process builds it meanwhile
    assert_same_demo(tmp_path, local_dir, recipe.order())
