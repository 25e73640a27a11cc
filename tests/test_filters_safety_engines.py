"""filter.toxicity, filter.lang_mix, filter.pii_ner and semantic.decontam --segment give the same rows
(and rejects) on the local engine, Spark and Ray: their models load in each worker. Slow: it starts
Spark and Ray (`make test-all` runs it)."""
import pytest

from conftest import LOCAL_OPTIONS, RAY_OPTIONS, SPARK_OPTIONS

TEXTS = ["You are a fucking idiot. Shut up, you worthless piece of shit.",
         "Please send the signed form to John Smith at 42 Baker Street, London NW1 6XE before Friday.",
         "今天我们讨论了明年的预算，委员会最后批准了新的图书馆建设计划。\n"
         "We use cookies to improve your experience on our website. By continuing you agree to our use of cookies.",
         "The committee met on Tuesday to discuss the budget for next year."] * 3
STAGES = [("filter.toxicity", {"drop": True}), ("filter.lang_mix", {"drop": True}), ("filter.pii_ner", {}),
          ("semantic.decontam", {"segment": True, "only": ["gsm8k"]})]


def _rows(engine_name, options, tmp_path):
    from assay.pipeline.dataset import Dataset, write_table
    from assay.pipeline.engines import get_engine
    from assay.pipeline.runner import run_stage
    from assay.pipeline.schema import make_docs
    from assay.pipeline.stage import resolve_stage

    src = write_table(make_docs([{"text": t, "source": "test"} for t in TEXTS]), tmp_path / engine_name / "in", shards=3)
    out = {}
    for name, params in STAGES:
        result = run_stage(resolve_stage(name)(params), [src], tmp_path / engine_name / name,
                           engine=get_engine(engine_name, options))
        ds = Dataset(result.out)
        kept = sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in ds.read().to_pylist())
        rejected = sorted((r["id"], r["reject_reason"]) for r in ds.read_rejects().to_pylist())
        out[name] = (kept, rejected)
    return out


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.ray
def test_safety_stages_are_the_same_on_local_spark_and_ray(tmp_path, spark_engine, ray_engine):
    local = _rows("local", LOCAL_OPTIONS, tmp_path)
    assert len(local["filter.toxicity"][1]) == 3 and len(local["filter.lang_mix"][1]) == 3
    assert _rows("spark", SPARK_OPTIONS, tmp_path) == local
    assert _rows("ray", RAY_OPTIONS, tmp_path) == local
