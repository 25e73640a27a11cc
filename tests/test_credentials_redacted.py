"""No credential an input URL carries (`user:pass@host`, a presigned query's X-Amz-Signature /
X-Amz-Credential, `sig=`, `token=`) reaches a file Assay writes (shards' meta, markers, manifests,
the report) or an error line; the web is read only where allowed by name (ASSAY_REMOTE_SCHEMES), and
`file://` paths are paths."""
from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from assay.pipeline.errors import UserError
from assay.pipeline.io import expand_paths
from assay.pipeline.redact import redact
from assay.pipeline.report import write_report
from assay.pipeline.runner import run_stage
from assay.pipeline.stage import resolve_stage

SECRETS = ("hunter2", "deadbeefsignature", "AKIAEXAMPLEKEY", "sv-token-123")
PAGE = "<html><body><p>" + "A page long enough to be kept by the extractor, with words. " * 4 + "</p></body></html>"


@pytest.fixture
def site(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "a.html").write_text(PAGE)
    (tmp_path / "site" / "b.html").write_text(PAGE.replace("page", "sheet"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "site"))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_redact_masks_userinfo_and_secret_query_values_only():
    assert redact("https://bob:hunter2@host/x.html") == "https://***@host/x.html"
    assert redact("s3://b/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc&X-Amz-Expires=60") == \
        "s3://b/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60"
    assert redact("https://a.blob/c?sv=2020&sig=xyz&amp;token=t1") == "https://a.blob/c?sv=2020&sig=***&amp;token=***"
    assert redact('{"path": "https://h/p?access_token=zz"}') == '{"path": "https://h/p?access_token=***"}'
    for plain in ("https://example.com/a?page=2", "s3://bucket/key.parquet", "a = b", "user@example.com"):
        assert redact(plain) == plain


def test_no_credential_of_an_input_url_reaches_any_file_assay_writes(site, tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_REMOTE_SCHEMES", "http")
    urls = [f"http://bob:hunter2@{site}/a.html",
            f"http://{site}/b.html?X-Amz-Credential=AKIAEXAMPLEKEY&X-Amz-Signature=deadbeefsignature&token=sv-token-123"]
    stage = resolve_stage("extract.html")({"paths": urls}, stage_id="pages")
    result = run_stage(stage, [], tmp_path / "run" / "pages", options={"workers": 1})
    assert result.manifest["counts"]["rows_out"] == 2  # both were read, credentials and all
    write_report(tmp_path / "run")
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert any(p.name == "report.html" for p in written) and any(p.name == "_manifest.json" for p in written)
    leaks = [(p.name, s) for p in written for s in SECRETS if s.encode() in p.read_bytes()]
    assert leaks == []


def test_the_web_is_not_a_storage_scheme_unless_allowed(site, tmp_path, monkeypatch):
    monkeypatch.delenv("ASSAY_REMOTE_SCHEMES", raising=False)
    with pytest.raises(UserError, match="ASSAY_REMOTE_SCHEMES=http") as refused:
        expand_paths([f"http://bob:hunter2@{site}/a.html"])
    assert "hunter2" not in str(refused.value)
    # the CLI's one line names no credential either
    out = tmp_path / "out"
    cli = subprocess.run([str(Path(sys.executable).parent / "assay"), "extract", "html",
                          f"http://bob:hunter2@{site}/a.html", str(out)],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert cli.returncode == 2 and "Traceback" not in cli.stderr, cli.stderr
    assert "hunter2" not in cli.stderr + cli.stdout and "ASSAY_REMOTE_SCHEMES" in cli.stderr


def test_file_urls_are_paths(tmp_path):
    (tmp_path / "a.html").write_text(PAGE)
    assert expand_paths([f"file://{tmp_path}/*.html"]) == [str(tmp_path / "a.html")]
