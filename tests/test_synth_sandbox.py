"""The sandbox, with real processes: what it must contain (an infinite loop, a memory bomb, a fork bomb,
the network, writes outside its directory, a huge file, an output flood, privilege), that a correct
solution passes while a wrong one fails, and that the program cannot reach its caller, forge its
verdict or outlive its caller (issue 28). Run as root, the last test runs this whole file again as
`nobody` (tests/as_user.py): a non-root caller takes the user-namespace path."""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import as_user
import pytest

from assay.synth import sandbox, verify
from assay.synth.sandbox import Limits, run_python

REPO = Path(__file__).resolve().parents[1]

ISOLATED, WHY = sandbox.isolation_available()
needs_isolation = pytest.mark.skipif(not ISOLATED, reason=f"no namespaces here: {WHY}")
ISOLATION = "auto" if ISOLATED else "none"  # tests that hold without namespaces too say so
FAST = Limits(timeout_s=2, memory_mb=256, processes=8)

SOLUTION = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
TESTS = "from solution import add\nassert add(2, 3) == 5\nassert add(-1, 1) == 0\nprint('tests passed')\n"


def _tests(code: str, tests: str = TESTS):
    return sandbox.run_tests(code, tests, limits=FAST, isolation=ISOLATION)


def test_correct_solution_passes_and_wrong_one_fails():
    good, bad = _tests(SOLUTION), _tests(WRONG)
    assert good.verdict == "ok" and good.exit_code == 0 and "tests passed" in good.stdout_tail
    assert bad.verdict == "failed" and bad.exit_code == 1 and "AssertionError" in bad.stderr_tail
    assert good.isolation == ("namespaces" if ISOLATED else "none")


RICH_SOLUTION = """
from collections import namedtuple
Pair = namedtuple("Pair", "x y")
class Stack:
    def __init__(self):
        self.items = []
    def push(self, x):
        self.items.append(x)
    def pop(self):
        if not self.items:
            raise IndexError("empty stack")
        return self.items.pop()
    def __len__(self):
        return len(self.items)
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __eq__(self, other):
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)
    def __hash__(self):
        return hash((self.x, self.y))
class ParseError(ValueError):
    pass
def evens(n):
    yield from range(0, n, 2)
def sort_in_place(xs):
    xs.sort()
def apply(f, xs):
    return [f(x) for x in xs]
def parse(text):
    if not text.isdigit():
        raise ParseError(f"not a number: {text}")
    return int(text)
def pair():
    return Pair(1, 2)
def tally(words):
    return {w: words.count(w) for w in set(words)}
def power(base, exponent):
    return base ** exponent
"""
RICH_TESTS = """
import solution
from solution import *
s = Stack()
s.push(1)
s.push(2)
assert len(s) == 2 and s.pop() == 2 and s.items == [1]
try:
    Stack().pop()
    raise AssertionError("no IndexError")
except IndexError as exc:
    assert "empty" in str(exc)
try:
    parse("x1")
    raise AssertionError("no ValueError")
except ValueError as exc:
    assert "not a number" in str(exc)
assert parse("42") == 42 and list(evens(7)) == [0, 2, 4, 6]
xs = [3, 1, 2]
sort_in_place(xs)
assert xs == [1, 2, 3]
assert apply(lambda x: x * 10, [1, 2]) == [10, 20]
assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1) and len({Point(1, 2), Point(1, 2)}) == 1
assert isinstance(Point(0, 0), solution.Point)
assert pair() == (1, 2) and pair().y == 2
assert tally(["a", "b", "a"]) == {"a": 2, "b": 1}
assert sum(parse(str(i)) for i in range(300)) == sum(range(300))
assert power(7, 5000) == 7 ** 5000 and power(2 ** 4000, 2) == 2 ** 8000
print("rich tests passed")
"""


def test_the_harness_runs_ordinary_tests_against_classes_generators_and_callbacks():
    """Tests and solution in two processes still behave as one: objects, methods, exceptions by their
    builtin base, generators, in-place changes to a list, callbacks, namedtuples, dicts."""
    result = _tests(RICH_SOLUTION, RICH_TESTS)
    assert result.verdict == "ok", result.stderr_tail
    assert result.stdout_tail == "rich tests passed\n"  # the run's secret is taken out of what is shown


UNITTEST = ("import unittest\nfrom solution import add\n\nclass AddTest(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nunittest.main()\n")
PYTEST = "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.mark.parametrize("style", ["unittest", "pytest"])
def test_tests_in_unittest_and_pytest_style_run(style):
    """unittest.main() finds its cases (the tests are the main module); a file of test_* functions
    has them called: a wrong solution fails both, where a plain run of such a file passes anything."""
    tests = UNITTEST if style == "unittest" else PYTEST
    assert _tests(SOLUTION, tests).verdict == "ok"
    assert _tests(WRONG, tests).verdict == "failed"


def test_infinite_loop_is_stopped():
    started = time.monotonic()
    result = run_python("while True:\n    pass\n", limits=Limits(timeout_s=1.5, cpu_s=1), isolation=ISOLATION)
    assert result.verdict == "timeout" and result.limit in ("cpu", "wall"), result
    assert time.monotonic() - started < 30  # stopped, not left to run (a loaded machine is slow to start one)


def test_memory_bomb_is_stopped():
    """Its MemoryError is the program's own text: a hint, not a verdict (a program could print it)."""
    result = run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))\n", limits=FAST,
                        isolation=ISOLATION)
    assert result.verdict == "failed" and result.hint == "memory" and "MemoryError" in result.stderr_tail


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
    assert result.verdict == "failed" and result.hint == "network" and not accepted
    assert dns.verdict == "failed" and dns.hint == "network"


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
    result = run_python(code, limits=Limits(timeout_s=5, file_mb=4), isolation=ISOLATION)
    assert result.verdict == "failed" and result.hint == "file_size"


def test_output_flood_is_killed():
    result = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", limits=Limits(timeout_s=5, max_output_mb=1),
                        isolation=ISOLATION)
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
                           "1", "--memory-mb", "128", "--isolation", ISOLATION], capture_output=True, text=True, timeout=60)
    verdict = json.loads(done.stdout)
    assert done.returncode == 1 and verdict["verdict"] == "timeout"
    assert {"exit_code", "signal", "stdout_tail", "stderr_tail", "isolation"} <= set(verdict)


def test_without_isolation_the_limits_still_hold_and_it_says_so():
    spin = run_python("while True:\n    pass\n", limits=Limits(timeout_s=1, cpu_s=1), isolation="none")
    bomb = run_python("x = bytearray(8 << 30)\n", limits=FAST, isolation="off")  # the older name of none
    assert spin.verdict == "timeout" and (bomb.verdict, bomb.hint) == ("failed", "memory")
    assert spin.isolation == "none" and bomb.isolation == "none" and "NOT ISOLATED" in spin.note


# ---- honesty: the program against its caller, its supervisor and its verdict (issue 28) -------------------------


@needs_isolation
def test_program_cannot_read_the_callers_environment(monkeypatch):
    secret = "sk-assay-canary-" + secrets.token_hex(8)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code = ("import glob, os\nfound = []\n"
            "for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/task/*/environ') + glob.glob('/proc/*/cmdline'):\n"
            "    try:\n        data = open(path, 'rb').read()\n    except OSError:\n        continue\n"
            f"    if b'OPENAI_API_KEY' in data or {secret.encode()!r} in data:\n        found.append(path)\n"
            "found += [k for k in os.environ if 'OPENAI' in k]\nprint('FOUND', found)\n"
            "print('FDS', sorted(set(map(int, os.listdir('/proc/self/fd'))) - {3}))\n")  # 3: the listing's own
    result = run_python(code, limits=FAST)
    assert result.verdict == "ok", result.stderr_tail
    assert "FOUND []" in result.stdout_tail and secret not in result.stdout_tail
    assert "FDS [0, 1, 2]" in result.stdout_tail  # nothing of the supervisor's beyond stdio


FORGE = """
import glob, marshal, os, resource, signal, sys
forged = marshal.dumps({'exit': 0, 'cpu_s': 0.0})
for path in glob.glob('/proc/*/fd/*'):  # the supervisor's report pipe, if it can be reached
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, forged)
    except OSError:
        pass
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):  # end the supervisor early
    try:
        os.kill(1, sig)
    except OSError:
        pass
try:
    resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3))
except (OSError, ValueError):
    pass
sys.stderr.write('MemoryError\\nCannot allocate memory\\nsandbox setup failed\\n')
sys.exit(1)
"""


@needs_isolation
def test_program_cannot_forge_its_verdict():
    """A failing program that writes a forged report, signals its supervisor and prints what a memory
    error or a setup failure prints is still `failed`; one that kills itself with SIGXCPU is `killed`."""
    result = run_python(FORGE, limits=FAST)
    assert (result.verdict, result.exit_code) == ("failed", 1), result.to_json()
    fake_cpu = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n", limits=FAST)
    assert fake_cpu.verdict == "killed" and fake_cpu.limit != "cpu", fake_cpu.to_json()


PTRACE = """
import ctypes, glob, os, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_TRACEME, PTRACE_SEIZE = 0, 0x4206
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
pids = {int(p.split('/')[2]) for p in glob.glob('/proc/[0-9]*')} - {os.getpid()}
attached = [pid for pid in sorted(pids | {child}) if libc.ptrace(PTRACE_SEIZE, pid, 0, 0) == 0]
traced = os.fork()
if traced == 0:
    os._exit(0 if libc.ptrace(PTRACE_TRACEME, 0, 0, 0) == 0 else 3)
_, status = os.waitpid(traced, 0)
buf = ctypes.create_string_buffer(8)
local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = (ctypes.c_void_p * 2)(id(buf), 8)  # an address in the forked child (same layout)
read = libc.process_vm_readv(child, local, 1, remote, 1, 0)
os.kill(child, 9)
print('attached', attached, 'traceme', os.waitstatus_to_exitcode(status), 'vm_read', read)
assert not attached and os.waitstatus_to_exitcode(status) == 3 and read == -1
"""


@needs_isolation
def test_program_cannot_ptrace_anything():
    result = run_python(PTRACE, limits=FAST)
    assert result.verdict == "ok", result.stdout_tail + result.stderr_tail


@pytest.mark.parametrize("where", ["module", "function"])
@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "os._exit(0)"])
def test_wrong_solution_that_exits_early_fails(exit_call, where):
    body = f"def add(a, b):\n    return a - b\n{exit_call}\n" if where == "module" else \
        f"def add(a, b):\n    {exit_call}\n"
    check, verdict = verify.code_tests(f"```python\nimport os, sys\n{body}```", TESTS, limits=FAST, isolation=ISOLATION)
    assert not check.ok and verdict["verdict"] == "failed", verdict


def test_wrong_solution_cannot_fake_equality():
    code = "class Anything:\n    def __eq__(self, other):\n        return True\n\ndef add(a, b):\n    return Anything()\n"
    check, verdict = verify.code_tests(f"```python\n{code}```", TESTS, limits=FAST, isolation=ISOLATION)
    assert not check.ok and verdict["verdict"] == "failed", verdict


THREADED = ("import threading, time\nthreads = [threading.Thread(target=time.sleep, args=(3,)) for _ in range(4)]\n"
            "for t in threads:\n    t.start()\nfor t in threads:\n    t.join()\nprint('done')\n")


def test_eight_concurrent_programs_with_four_threads_each_all_pass():
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: run_python(THREADED, limits=Limits(timeout_s=60), isolation=ISOLATION),
                                range(8)))
    assert [r.verdict for r in results] == ["ok"] * 8, [r.stderr_tail[-300:] for r in results if not r.ok]


def _descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below `pid`."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append((int(entry), fields[19]))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def _alive(procs: set[tuple[int, str]]) -> set[tuple[int, str]]:
    alive = set()
    for pid, start in procs:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            alive.add((pid, start))
    return alive


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL", "supervisor SIGKILL"])
def test_sandbox_dies_with_its_caller(tmp_path, how):
    """Killing `assay sandbox run` (or the sandbox's own supervisor) ends the program and removes its
    temporary folders within 5 s, long before its timeout."""
    marker = "assay-caller-marker-" + secrets.token_hex(4)
    program = tmp_path / "sleep.py"
    program.write_text("import time\ntime.sleep(120)\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch))
    caller = subprocess.Popen([sys.executable, "-m", "assay.pipeline.cli", "sandbox", "run", str(program), marker,
                               "--timeout-s", "120", "--isolation", ISOLATION], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any(marker in _cmdline(pid) for pid, _ in _descendants(caller.pid)):
            assert caller.poll() is None and time.monotonic() < deadline, caller.communicate()
            time.sleep(0.1)
        below = _descendants(caller.pid)
        if how == "supervisor SIGKILL":
            [supervisor] = [pid for pid, _ in below if _parent(pid) == caller.pid]
            os.kill(supervisor, signal.SIGKILL)
        else:
            os.kill(caller.pid, getattr(signal, how))
        deadline = time.monotonic() + 5
        while (_alive(below) or list(scratch.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(below), [_cmdline(pid) for pid, _ in _alive(below)]
        assert not list(scratch.iterdir())
        if how == "supervisor SIGKILL":
            caller.wait(timeout=10)
            assert json.loads(caller.stdout.read())["verdict"] == "killed"
    finally:
        caller.kill()
        caller.wait()
        for pid, _ in _alive(below if "below" in locals() else set()):
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_auto_isolation_refuses_to_run_code_unisolated(tmp_path):
    """Without namespaces (here: no `unshare` on PATH) `auto` refuses with one line saying how to get
    them, and runs nothing; `none` runs the program unisolated because the user said so."""
    program = tmp_path / "touch.py"
    witness = tmp_path / "ran"
    program.write_text(f"open({str(witness)!r}, 'w').close()\n")
    env = dict(os.environ, PATH=str(tmp_path))  # the interpreter is named by its full path
    refused = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "sandbox", "run", str(program)], env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and not witness.exists(), refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("error:") and "namespaces" in line and "isolation: none" in line
    allowed = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "sandbox", "run", str(program),
                              "--isolation", "none"], env=env, capture_output=True, text=True, timeout=120)
    assert allowed.returncode == 0 and witness.exists() and json.loads(allowed.stdout)["isolation"] == "none"


def test_synth_solve_refuses_to_run_code_unisolated(tmp_path):
    """`isolation: auto` is synth.solve's default: without namespaces a code item stops the run with
    the same one line, before any model-written code runs."""
    from assay.pipeline.dataset import write_table
    from assay.pipeline.schema import make_docs
    from assay.synth.llm.scripted import ScriptedServer

    witness = tmp_path / "ran"
    items = write_table(make_docs([{"text": "Write add(a, b).", "source": "t", "meta": {
        "question": "Write add(a, b).", "tests": "from solution import add\nassert add(2, 3) == 5\n"}}]), tmp_path / "items")
    answer = f"```python\nopen({str(witness)!r}, 'w').close()\ndef add(a, b):\n    return a + b\n```"
    with ScriptedServer(lambda request: answer) as server:
        done = subprocess.run([sys.executable, "-m", "assay.pipeline.cli", "synth", "solve", str(tmp_path / "items"),
                               str(tmp_path / "out"), "--url", server.url, "--model", "scripted", "--candidates", "1",
                               "--cache-dir", str(tmp_path / "cache")],
                              env=dict(os.environ, PATH=str(tmp_path)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and not witness.exists(), done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error:") and "isolation: none" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run these tests as another user")
def test_the_sandbox_tests_pass_for_a_non_root_caller(tmp_path):
    """This file again, as `nobody`: a non-root caller takes the user-namespace path, where the
    supervisor shares the program's uid."""
    os.chmod(tmp_path, 0o777)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs", str(Path(__file__)),
            "--basetemp", str(tmp_path / "base")]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(as_user.command(argv, as_user.interpreter_paths() + [str(REPO), str(tmp_path)]), env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    skipped = re.search(r"(\d+) skipped", done.stdout.strip().splitlines()[-1])
    assert not ISOLATED or int(skipped.group(1)) == 1, done.stdout[-2000:]  # this test itself, inside
