"""The one atomic writer for files a library writes by name (models, caches, exports): a reader sees
the old file or the new one, never half of one, and a failed write leaves nothing behind."""
import numpy as np
import pytest

from assay.pipeline.dataset import atomic_path


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "model.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half of the new")
            raise RuntimeError("the library gave up")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]


def test_a_clean_write_replaces_the_file_under_its_own_name(tmp_path):
    target = tmp_path / "deeper" / "tables.npz"  # its folder is made; numpy adds no second suffix
    with atomic_path(target) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, lower=np.arange(5))
    assert sorted(p.name for p in target.parent.iterdir()) == ["tables.npz"]
    with np.load(target) as saved:
        assert saved["lower"].tolist() == [0, 1, 2, 3, 4]


def test_the_quality_corpus_rebuilds_byte_for_byte(tmp_path):
    """write_jsonl_gz goes through the shared writer and still gives the committed files' bytes."""
    from pathlib import Path

    from assay.quality.corpus import read_jsonl_gz, write_jsonl_gz

    committed = Path(__file__).resolve().parents[1] / "quality" / "data" / "contrast-calib.jsonl.gz"
    write_jsonl_gz(tmp_path / committed.name, read_jsonl_gz(committed))
    assert (tmp_path / committed.name).read_bytes() == committed.read_bytes()
