"""The sandbox, with real processes: what it must contain (an infinite loop, a memory bomb, a fork bomb,
the network, writes outside its directory, a huge file, an output flood, privilege), and that a
correct solution passes while a wrong one fails."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from assay.synth import sandbox
from assay.synth.sandbox import Limits, run_python

ISOLATED, WHY = sandbox.isolation_available()
needs_isolation = pytest.mark.skipif(not ISOLATED, reason=f"no namespaces here: {WHY}")
FAST = Limits(timeout_s=2, memory_mb=256, processes=8)

SOLUTION = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
TESTS = "from solution import add\nassert add(2, 3) == 5\nassert add(-1, 1) == 0\nprint('tests passed')\n"


def _tests(code: str):
    return sandbox.run([sys.executable, "-E", "-s", "test_solution.py"], {"solution.py": code, "test_solution.py": TESTS},
                       limits=FAST)


def test_correct_solution_passes_and_wrong_one_fails():
    good, bad = _tests(SOLUTION), _tests(WRONG)
    assert good.verdict == "ok" and good.exit_code == 0 and "tests passed" in good.stdout_tail
    assert bad.verdict == "failed" and bad.exit_code == 1 and "AssertionError" in bad.stderr_tail
    assert good.isolation == ("namespaces" if ISOLATED else "none")


def test_infinite_loop_is_stopped():
    started = time.monotonic()
    result = run_python("while True:\n    pass\n", limits=Limits(timeout_s=1.5, cpu_s=1))
    assert result.verdict == "timeout" and result.limit in ("cpu", "wall")
    assert time.monotonic() - started < 6


def test_memory_bomb_gets_memory_verdict():
    result = run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))\n", limits=FAST)
    assert result.verdict == "memory" and "MemoryError" in result.stderr_tail


@needs_isolation
def test_fork_bomb_is_bounded_and_leaves_nothing_behind():
    marker = "assay-fork-bomb-marker-7f3a"
    code = (f"# {marker}\nimport os, time\n"
            "while True:\n"
            "    try:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(60)\n"
            "        os.write(1, b'+')\n"
            "    except OSError:\n"
            "        time.sleep(0.01)\n")
    result = run_python(code, limits=Limits(timeout_s=1.5, processes=8))
    assert result.verdict == "timeout"
    assert 0 < result.stdout_tail.count("+") < 8  # the process limit held
    time.sleep(0.3)
    survivors = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    own = subprocess.run(["pgrep", "-f", "pgrep"], capture_output=True, text=True).stdout.split()
    assert not set(survivors) - set(own), "processes of the fork bomb outlived the sandbox"


@needs_isolation
def test_network_is_unreachable():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    port = listener.getsockname()[1]
    result = run_python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n", limits=FAST)
    dns = run_python("import socket\nprint(socket.getaddrinfo('pypi.org', 443))\n", limits=FAST)
    listener.close()
    assert result.verdict == "failed" and result.limit == "network" and not accepted
    assert dns.verdict == "failed" and dns.limit == "network"


@needs_isolation
def test_writes_outside_the_working_directory_fail(tmp_path):
    outside = tmp_path / "escaped.txt"
    repo_file = Path(__file__).resolve().parent / "escaped-from-sandbox.txt"
    code = ("import os\nresults = []\n"
            f"for path in [{str(outside)!r}, {str(repo_file)!r}, '/usr/escaped.txt', '/etc/escaped.txt', '../escaped.txt']:\n"
            "    try:\n        open(path, 'w').write('x')\n        results.append('WROTE ' + path)\n"
            "    except OSError as exc:\n        results.append(type(exc).__name__)\n"
            "open('inside.txt', 'w').write('fine')\nopen('/tmp/also-inside.txt', 'w').write('fine')\n"
            "print(results)\nassert not any(r.startswith('WROTE') for r in results), results\n")
    result = run_python(code, limits=FAST)
    assert result.verdict == "ok", result.stderr_tail  # writing its own directory and /tmp works
    assert not outside.exists() and not repo_file.exists()
    assert not Path("/usr/escaped.txt").exists() and not Path("/etc/escaped.txt").exists()


@needs_isolation
def test_home_and_repository_are_not_visible():
    home, repo = str(Path.home()), str(Path(__file__).resolve().parent)
    code = f"import os\nprint(sorted(os.listdir({home!r})) if os.path.isdir({home!r}) else 'absent', os.path.exists({repo!r}))\n"
    result = run_python(code, limits=FAST)
    assert result.verdict == "ok"
    assert result.stdout_tail.strip().endswith("False")  # the test suite (the repository) is not there


@needs_isolation
def test_allow_listed_paths_under_tmp_stay_visible_and_read_only(tmp_path):
    """The program's /tmp is private, but an allow-listed path under /tmp (an interpreter in a checkout
    there, a CI runner's venv) must stay visible: a fresh clone in /tmp failed every sandbox run."""
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / "data.txt").write_text("visible")
    code = (f"print(open({str(tool / 'data.txt')!r}).read())\n"
            f"try:\n    open({str(tool / 'new.txt')!r}, 'w')\n    print('WROTE')\n"
            "except OSError:\n    print('read-only')\n")
    result = sandbox.run([sys.executable, "-E", "-s", "main.py"], {"main.py": code}, limits=FAST, ro_paths=(str(tool),))
    assert result.verdict == "ok", result.stderr_tail
    assert result.stdout_tail.split() == ["visible", "read-only"] and not (tool / "new.txt").exists()


def test_huge_file_is_stopped():
    code = "f = open('big.bin', 'wb')\nwhile True:\n    f.write(b'0' * (1 << 20))\n"
    result = run_python(code, limits=Limits(timeout_s=5, file_mb=4))
    assert result.verdict == "failed" and result.limit == "file_size"


def test_output_flood_is_killed():
    result = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", limits=Limits(timeout_s=5, max_output_mb=1))
    assert result.verdict == "killed" and result.limit == "output"
    assert len(result.stdout_tail) <= 8 * 1024


@needs_isolation
def test_no_privileges_inside():
    code = ("import subprocess\n"
            "caps = [l for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd'))]\n"
            "print(caps)\nassert all(l.split()[1] == '0000000000000000' for l in caps)\n"
            "r = subprocess.run(['mount', '-o', 'remount,rw', '/'], capture_output=True)\nassert r.returncode != 0\n")
    result = run_python(code, limits=FAST)
    assert result.verdict == "ok", result.stderr_tail + result.stdout_tail


def test_cli_prints_a_json_verdict(tmp_path):
    program = tmp_path / "spin.py"
    program.write_text("while True:\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "sandbox", "run", str(program), "--timeout-s",
                           "1", "--memory-mb", "128"], capture_output=True, text=True, timeout=60)
    verdict = json.loads(done.stdout)
    assert done.returncode == 1 and verdict["verdict"] == "timeout"
    assert {"exit_code", "signal", "stdout_tail", "stderr_tail", "isolation"} <= set(verdict)


def test_without_isolation_the_limits_still_hold_and_it_says_so():
    spin = run_python("while True:\n    pass\n", limits=Limits(timeout_s=1, cpu_s=1), isolation="off")
    bomb = run_python("x = bytearray(8 << 30)\n", limits=FAST, isolation="off")
    assert spin.verdict == "timeout" and bomb.verdict == "memory"
    assert spin.isolation == "none" and bomb.isolation == "none"
