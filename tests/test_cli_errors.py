"""One error path for the whole command line: every usage error (unknown command, unknown stage, bad
or missing option or argument) is one `error:` line and exit 2, with "did you mean" where a close name
exists; a traceback only under -vv. Ctrl-C exits 130 and SIGTERM 143, each with one "interrupted" line."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ASSAY = [sys.executable, "-m", "assay.pipeline.cli"]


def assay(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ASSAY + list(args), capture_output=True, text=True, cwd=cwd, timeout=300)


# (argv, words the one error line must hold)
USAGE_ERRORS = {
    "unknown command": (["rnu"], ["'rnu'", "did you mean 'run'?"]),
    "run without a recipe": (["run"], ["run", "RECIPE"]),
    "unknown option": (["run", "--bogus"], ["--bogus"]),
    "unknown command with --help": (["lang", "--help"], ["'lang'", "did you mean 'extract lang_id'?"]),
    "unknown stage": (["stages", "filter.lenght"], ["'filter.lenght'", "did you mean 'filter.length'?"]),
    "bad choice": (["run", "x.yaml", "--engine", "flink"], ["flink", "local, spark or ray"]),
    "unknown stage command": (["filter", "lenght"], ["'lenght'", "did you mean 'length'?"]),
    "stage command, unknown option": (["filter", "length", "a", "b", "--min-char", "3"], ["--min-char", "--min-chars"]),
    "stage command, missing output": (["filter", "length"], ["INPUTS"]),
    "stage command, bad type": (["filter", "length", "a", "b", "--min-chars", "lots"], ["--min-chars", "lots"]),
    "family command, missing argument": (["mix", "plan"], ["MIXTURE"]),
    "unknown family command": (["mix", "bild"], ["'bild'", "did you mean 'build'?"]),
    "engine close to a known one": (["run", "x.yaml", "--engine", "rey"], ["'rey'", "did you mean 'ray'?"]),
    "stage command, engine close to a known one": (["filter", "length", "a", "b", "--engine", "sprak"],
                                                    ["'sprak'", "did you mean 'spark'?"]),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_usage_errors_are_one_line_and_exit_2(case):
    argv, words = USAGE_ERRORS[case]
    result = assay(*argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_vv_shows_the_traceback_of_a_user_error():
    result = assay("-vv", "stages", "filter.lenght")
    assert result.returncode == 2
    assert "Traceback" in result.stderr and result.stderr.strip().splitlines()[-1].startswith("error: ")


def test_help_and_no_arguments_exit_0():
    assert assay("--help").returncode == 0
    bare = assay()
    assert bare.returncode == 0 and "Usage:" in bare.stdout and "run" in bare.stdout
    assert assay("filter", "length", "--help").returncode == 0


SLOW_RECIPE = """
name: slow
inputs:
  raw: {uses: read.jsonl, params: {paths: [in.jsonl]}}
stages:
  - {id: slow, uses: "stages_for_tests:SlowUpper", inputs: [raw], params: {seconds_per_batch: 60}}
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_exits_130_and_terminate_143_with_one_line(tmp_path, sig, code):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(10)))
    (tmp_path / "r.yaml").write_text(SLOW_RECIPE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(ASSAY + ["run", str(tmp_path / "r.yaml"), "--workdir", str(tmp_path / "w"), "--workers", "1",
                                     "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and not (tmp_path / "w" / "raw" / "_manifest.json").exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # the slow stage is in its first batch
    assert proc.poll() is None
    children = psutil.Process(proc.pid).children(recursive=True)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C in a terminal reaches the whole foreground group
    else:
        proc.send_signal(sig)  # `kill PID` reaches only the command
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted") and "Traceback" not in err, err
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


# ---- what the machine refuses: one line, exit 2 ------------------------------------------------------

def _random_jsonl(path: Path, rows: int = 2000) -> None:
    import random
    import string

    rng = random.Random(1)  # incompressible text: the output really takes space
    path.write_text("".join(json.dumps({"text": "".join(rng.choice(string.ascii_letters) for _ in range(500))}) + "\n"
                            for _ in range(rows)))


def _in_small_mounts(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """Run `script` with a 256 KiB tmpfs at $FULL and a read-only one at $RO, in a private mount
    namespace (a user namespace too, so it needs no root)."""
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for private tmpfs mounts")
    (tmp_path / "full").mkdir()
    (tmp_path / "ro").mkdir()
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"user namespaces are off here: {probe.stderr.decode().strip()}")
    wrapped = (f"mount -t tmpfs -o size=256k tmpfs {tmp_path / 'full'} && mount -t tmpfs -o ro tmpfs {tmp_path / 'ro'}"
               f" && {script}")
    return subprocess.run(["unshare", "-rm", "sh", "-c", wrapped], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FULL": str(tmp_path / "full"), "RO": str(tmp_path / "ro")})


@pytest.mark.parametrize("where,words", [("$FULL/out", ["No space left on device"]),
                                         ("$RO/out", ["Read-only file system"])])
def test_disk_full_and_read_only_output_are_one_line(tmp_path, where, words):
    _random_jsonl(tmp_path / "in.jsonl")
    cmd = " ".join(ASSAY) + f" read jsonl {tmp_path / 'in.jsonl'} {where} --workers 1"
    result = _in_small_mounts(tmp_path, cmd)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_file_size_limit_is_one_line(tmp_path):
    _random_jsonl(tmp_path / "in.jsonl")
    cmd = " ".join(ASSAY) + f" read jsonl {tmp_path / 'in.jsonl'} {tmp_path / 'out'} --workers 1"
    result = subprocess.run(["sh", "-c", f"ulimit -f 200; exec {cmd}"], capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "File too large" in lines[0] and "ulimit -f" in lines[0]


def test_stage_id_dot_or_dotdot_is_refused_before_any_stage_runs(tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": "some text here"}) + "\n")
    for bad in (".", ".."):
        (tmp_path / "r.yaml").write_text(f"""
name: dots
inputs:
  raw: {{uses: read.jsonl, params: {{paths: [in.jsonl]}}}}
stages:
  - {{id: fine, uses: filter.length, inputs: [raw]}}
  - {{id: "{bad}", uses: filter.length, inputs: [fine]}}
""")
        for command in ("validate", "run"):
            result = assay(command, str(tmp_path / "r.yaml"), *(["--workdir", str(tmp_path / "w")] if command == "run" else []))
            assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
            assert f"id {bad!r}" in result.stderr or f"'{bad}'" in result.stderr, result.stderr
        assert not (tmp_path / "w").exists()  # nothing ran, not even the reader


def _one_error_line(result: subprocess.CompletedProcess, *words: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    for word in words:
        assert word in lines[0], (word, lines[0])


PAGES = "<html><body><p>Page {i} has enough words in it to be kept by the extractor, surely it does.</p></body></html>"


def _pages(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for i in range(3):
        (tmp_path / "in" / f"p{i}.html").write_text(PAGES.format(i=i))


def test_a_stage_id_naming_the_report_is_refused_before_anything_runs(tmp_path):
    _pages(tmp_path)
    (tmp_path / "r.yaml").write_text('name: r\nworkdir: runs\nstages:\n'
                                     '  - {id: report.html, uses: extract.html, params: {paths: ["in/*.html"]}}\n')
    _one_error_line(assay("run", "r.yaml", cwd=tmp_path), "'report.html'", "choose another id")
    assert not (tmp_path / "runs").exists()


def test_a_dollar_sign_in_a_source_name_is_drawn_as_text(tmp_path):
    _pages(tmp_path)
    (tmp_path / "r.yaml").write_text('name: r\nworkdir: runs\nstages:\n'
                                     '  - {id: pages, uses: extract.html, params: {paths: ["in/*.html"], source: "a$x^$b"}}\n')
    result = assay("run", "r.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "a$x^$b" in (tmp_path / "runs" / "report.html").read_text()


def test_an_empty_checkpoint_and_a_folder_that_is_no_model_are_one_line(tmp_path):
    (tmp_path / "empty.pt").write_bytes(b"")
    _one_error_line(assay("eval", "empty.pt", "--tasks", "default", cwd=tmp_path), "empty.pt", "not a readable checkpoint")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a model")
    _one_error_line(assay("serve", "--model-path", "notes", "--port", "0", cwd=tmp_path), "notes", "not a model")


def test_a_service_that_keeps_failing_is_one_line(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": f"text {i}"}) + "\n" for i in range(3)))
    (tmp_path / "r.yaml").write_text(
        "name: r\nworkdir: runs\ninputs: {docs: {params: {paths: [docs.jsonl]}}}\nstages:\n"
        f"  - {{id: echo, uses: 'stages_for_tests:EchoService', inputs: [docs], params: {{url: 'http://127.0.0.1:{port}/', "
        "retries: 1, backoff_s: 0.01, cache_dir: cache}}\n")
    result = subprocess.run(ASSAY + ["run", "r.yaml", "--workers", "1"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300, env=dict(os.environ, PYTHONPATH=str(Path(__file__).parent)))
    _one_error_line(result, "still failed after 1 retries", "rerun")


def test_from_close_to_a_stage_says_which(tmp_path):
    _pages(tmp_path)
    (tmp_path / "r.yaml").write_text('name: r\nworkdir: runs\nstages:\n'
                                     '  - {id: pages, uses: extract.html, params: {paths: ["in/*.html"]}}\n')
    _one_error_line(assay("run", "r.yaml", "--from", "page", cwd=tmp_path), "--from 'page'", "did you mean 'pages'?")


def test_inspect_on_a_plain_folder_says_so_and_fails(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine")
    result = assay("inspect", "notes", cwd=tmp_path)
    _one_error_line(result, "not an Assay dataset")
    assert "interrupted" not in result.stderr + result.stdout


# What an engine (its JVM, log4j, Ray's logging) prints when it talks on its own: none of it in a quiet run.
ENGINE_LINE = re.compile(r"WARNING: |WARN |INFO |log4j|SLF4J|incubator|NativeCodeLoader|Setting default log level"
                         r"|setLogLevel|\bRay\b|raylet|\(pid=\d+")


@pytest.mark.spark
def test_a_quiet_run_on_spark_prints_no_jvm_or_spark_line(tmp_path):
    """Without -v a Spark run prints Assay's own lines only: not the JVM's "WARNING: Using incubator
    modules: jdk.incubator.vector" nor any log4j line of Spark's."""
    _pages(tmp_path)
    (tmp_path / "r.yaml").write_text('name: r\nworkdir: runs\nstages:\n'
                                     '  - {id: pages, uses: extract.html, params: {paths: ["in/*.html"]}}\n')
    result = assay("run", "r.yaml", "--engine", "spark", "--workers", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    leaked = [line for line in (result.stderr + result.stdout).splitlines() if ENGINE_LINE.search(line)]
    assert not leaked, leaked


@pytest.mark.ray
def test_a_quiet_run_on_ray_prints_no_ray_log_line(tmp_path):
    """Without -v the terminal shows Assay's own lines only: Ray's "Started a local Ray instance."
    (its INFO logger) stays out."""
    _pages(tmp_path)
    (tmp_path / "r.yaml").write_text('name: r\nworkdir: runs\nstages:\n'
                                     '  - {id: pages, uses: extract.html, params: {paths: ["in/*.html"]}}\n')
    result = assay("run", "r.yaml", "--engine", "ray", "--workers", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Ray" not in result.stderr and "INFO" not in result.stderr + result.stdout, result.stderr
    leaked = [line for line in (result.stderr + result.stdout).splitlines() if ENGINE_LINE.search(line)]
    assert not leaked, leaked
