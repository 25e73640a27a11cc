"""The demo recipe on Ray gives the local engine's output, stage by stage. A file of its own, so that
`make test`'s two pytest processes run the Spark and the Ray demo at the same time."""
import pytest

from conftest import RAY_OPTIONS
from snapshots import demo_matches_local


@pytest.mark.ray
@pytest.mark.slow  # the whole demo again (2 min of CPU); the engines agree stage by stage in test_pipeline_contract/engines
def test_demo_on_ray_matches_local(ray_engine, tmp_path, request):
    demo_matches_local("ray", RAY_OPTIONS, tmp_path, request)
