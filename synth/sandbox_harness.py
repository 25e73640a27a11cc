"""Runs an item's tests against a model-written solution so that the solution cannot pass by ending
early, by lying about equality, or by printing what a pass prints. Standard library only: it runs
inside the sandbox (as a job file) with the program's interpreter.

    python _assay_harness.py TESTS_FILE MODULE       the tests' process (what the sandbox runs)
    python _assay_harness.py --serve MODULE          the solution's process (the tests start it)

The tests run in their own process; `import MODULE` there gives a stand-in whose every use (an
attribute, a call, an operator) is answered by a second process that imported the real solution.
Only plain data (None, bool, int, float, complex, str, bytes, and lists, tuples, sets and dicts of
them) crosses as values, rebuilt with the builtin types; anything else stays in the solution's
process and is used through a reference. So:

* `sys.exit(0)` or `os._exit(0)` in the solution ends only the solution's process; the tests' next
  use of it raises `SolutionExited` (a BaseException: `except Exception` in a test cannot swallow it);
* a returned object that claims to equal anything is a reference, and a reference is never equal to
  plain data (comparisons between two references are the solution's own);
* after its last statement the tests' process prints a per-run secret it read from fd 3 before the
  solution's process existed. The sandbox counts a run as passed only when that secret appears and
  the tests' process exited 0. The solution cannot read the secret: the tests' process is not
  dumpable (no /proc/PID/mem, environ or fd for a process of the same uid without CAP_SYS_PTRACE),
  ptrace is refused by the sandbox's seccomp filter, and the tests file is deleted once read.

Callables the tests hand to the solution (a key function, a callback) stay in the tests' process and
are called there on the solution's behalf; nothing else of the tests' process can be reached. The
tests run as the main module (`unittest.main()` finds its cases), and the zero-argument `test*`
functions a file defines are called after it ran (pytest-style files). Lists,
dicts, sets and bytearrays the tests pass are copied, and their new contents copied back after the
call (in-place functions work). What does not carry over: `isinstance(x, int)` for a value that is a
solution object, catching a solution-defined exception class (it arrives as its nearest builtin base),
and a solution's prints captured by the tests (they go straight to the output).
"""
from __future__ import annotations

import builtins
import json
import operator
import os
import sys
import threading

MARK = "$"


class SolutionExited(BaseException):
    """The solution's process ended or broke the protocol: the tests cannot go on."""


class SolutionError(Exception):
    """An exception of the solution's with no builtin base class other than Exception."""


# ---- the wire: JSON lines of plain data and references --------------------------------------------

class Channel:
    """One side of a strictly alternating request/reply pipe pair. While it waits for a reply it
    serves the other side's requests (a callback during a call), which may nest."""

    def __init__(self, rfd: int, wfd: int, side: str, serve):
        self.reader = os.fdopen(rfd, "rb")
        self.wfd = wfd
        self.side = side  # "s" (solution) or "t" (tests): whose objects `self.objects` holds
        self.serve = serve  # (op, args) -> result, for the other side's requests
        self.objects: dict[int, list] = {}  # id -> [object, references handed out and not yet released]
        self.released: list[int] = []
        self.lock = threading.RLock()  # one exchange at a time (tests may use threads); callbacks nest

    # values
    def encode(self, x, depth: int = 0):
        if depth > 200:
            raise ValueError("value nested too deeply to pass")
        if isinstance(x, Remote) and x._channel is self:
            return {MARK: "ref", "side": "t" if self.side == "s" else "s", "id": x._id}
        if x is None or type(x) in (bool, float, str) or type(x) is int and x.bit_length() < 3000:
            return x
        sub = lambda v: self.encode(v, depth + 1)  # noqa: E731
        if isinstance(x, bool):
            return bool(x)
        if isinstance(x, int):  # huge ints in hex: decimal conversion is capped at 4,300 digits
            return int(x) if x.bit_length() < 3000 else {MARK: "int", "v": hex(x)}
        if isinstance(x, float):
            return float(x)
        if isinstance(x, str):
            return str.__str__(x)
        if isinstance(x, complex):
            return {MARK: "complex", "v": [x.real, x.imag]}
        if isinstance(x, (bytes, bytearray)):
            return {MARK: type(x).__name__ if type(x) in (bytes, bytearray) else "bytes", "v": bytes(x).hex()}
        if isinstance(x, tuple):
            fields = getattr(type(x), "_fields", None)
            if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields) and len(fields) == len(x):
                return {MARK: "namedtuple", "name": type(x).__name__, "fields": list(fields), "v": [sub(v) for v in x]}
            return {MARK: "tuple", "v": [sub(v) for v in x]}
        if isinstance(x, list):
            return [sub(v) for v in x]
        if isinstance(x, (set, frozenset)):
            return {MARK: "frozenset" if isinstance(x, frozenset) else "set", "v": [sub(v) for v in x]}
        if isinstance(x, dict):
            return {MARK: "dict", "v": [[sub(k), sub(v)] for k, v in x.items()]}
        key = id(x)
        self.objects.setdefault(key, [x, 0])[1] += 1
        return {MARK: "ref", "side": self.side, "id": key}

    def decode(self, x):
        if isinstance(x, list):
            return [self.decode(v) for v in x]
        if not isinstance(x, dict):
            return x
        kind, v = x.get(MARK), x.get("v")
        if kind == "ref":
            if x["side"] == self.side:
                return self.objects[x["id"]][0]
            return Remote._make(self, int(x["id"]))
        if kind == "tuple":
            return tuple(self.decode(i) for i in v)
        if kind == "namedtuple":
            return _namedtuple(x["name"], tuple(x["fields"]))(*(self.decode(i) for i in v))
        if kind in ("set", "frozenset"):
            return (set if kind == "set" else frozenset)(self.decode(i) for i in v)
        if kind == "dict":
            return {self.decode(k): self.decode(val) for k, val in v}
        if kind == "int":
            return int(v, 16)
        if kind == "complex":
            return complex(float(v[0]), float(v[1]))
        if kind in ("bytes", "bytearray"):
            return (bytes if kind == "bytes" else bytearray)(bytes.fromhex(v))
        raise SolutionExited(f"unknown value kind {kind!r} from the other process")

    # messages
    def _send(self, message: dict) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.wfd, view):]
            except OSError as exc:
                raise SolutionExited(f"the solution's process is gone ({exc.strerror})") from None

    def _receive(self) -> dict:
        line = self.reader.readline()
        if not line.endswith(b"\n"):
            raise SolutionExited("the solution's process ended")
        try:
            message = json.loads(line)
        except ValueError:
            raise SolutionExited("the solution's process broke the protocol") from None
        if not isinstance(message, dict):
            raise SolutionExited("the solution's process broke the protocol")
        return message

    def request(self, op: str, *args):
        with self.lock:
            released, self.released = self.released, []
            self._send({"op": op, "args": [self.encode(a) for a in args], "release": released})
            return self.wait()

    def wait(self):
        while True:
            message = self._receive()
            if "op" in message:
                self.answer(message)
                continue
            try:
                if "error" in message:
                    error = _exception(*self.decode(message["error"]))
                elif "value" in message:
                    return self.decode(message["value"]), message.get("after")
                else:
                    raise ValueError(message)
            except Exception:  # noqa: BLE001 - what the other side sent makes no sense
                raise SolutionExited("the solution's process broke the protocol") from None
            raise error

    def answer(self, message: dict) -> None:
        for key in message.get("release") or ():
            held = self.objects.get(key)
            if held is not None:
                held[1] -= 1
                if held[1] <= 0:
                    del self.objects[key]
        try:
            args = [self.decode(a) for a in message["args"]]
            value, after = self.serve(message["op"], args)
            reply = {"value": self.encode(value)}
            if after:
                reply["after"] = {i: self.encode(v) for i, v in after.items()}
        except Exception as exc:  # noqa: BLE001 - the exception is the answer
            base = next(c for c in type(exc).__mro__ if c.__module__ == "builtins")
            try:
                reply = {"error": self.encode([base.__name__, [a for a in exc.args]])}
            except Exception:  # noqa: BLE001 - arguments that cannot travel travel as text
                reply = {"error": [base.__name__, [str(exc)]]}
        self._send(reply)

    def serve_forever(self) -> None:
        while True:
            self.answer(self._receive())


_NAMEDTUPLES: dict = {}


def _namedtuple(name: str, fields: tuple):
    from collections import namedtuple

    key = (name, fields)
    if key not in _NAMEDTUPLES:
        _NAMEDTUPLES[key] = namedtuple(name if name.isidentifier() else "Record", fields, rename=True)
    return _NAMEDTUPLES[key]


def _exception(name, args) -> BaseException:
    cls = getattr(builtins, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or cls is Exception:
        cls = SolutionError
    try:
        return cls(*args)
    except Exception:  # noqa: BLE001 - a builtin that wants other arguments (UnicodeError and kin)
        return cls(*map(str, args)) if cls is not SolutionError else SolutionError(str(args))


# ---- the tests' side: stand-ins for the solution's objects ---------------------------------------

class Remote:
    """An object of the other process. In the tests' process: anything the solution made that is not
    plain data. In the solution's process: a callable the tests passed (only calling it works)."""

    __slots__ = ("_channel", "_id", "__weakref__")

    @classmethod
    def _make(cls, channel: Channel, key: int):
        proxy = object.__new__(cls if channel.side == "t" else Callback)
        object.__setattr__(proxy, "_channel", channel)
        object.__setattr__(proxy, "_id", key)
        return proxy

    def _do(self, op: str, *args):
        return self._channel.request(op, self, *args)[0]

    def __del__(self):
        try:
            self._channel.released.append(self._id)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __getattr__(self, name):
        return self._do("getattr", name)

    def __setattr__(self, name, value):
        self._do("setattr", name, value)

    def __delattr__(self, name):
        self._do("delattr", name)

    def __call__(self, *args, **kwargs):
        value, after = self._channel.request("call", self, list(args), kwargs)
        for index, new in (after or {}).items():  # the new contents of mutable arguments
            _refill(args[int(index)], self._channel.decode(new))
        return value

    def __exit__(self, *exc):
        return self._do("exit", *(None if e is None else repr(e) for e in exc))

    def __reduce__(self):
        raise TypeError("objects of the solution's process cannot be pickled")


def _forward(op):
    return lambda self, *args: self._do(op, *args)


def _compare(name):
    def method(self, other):  # a solution object equals (or orders against) only solution objects
        return self._do(name, other) if isinstance(other, Remote) else NotImplemented
    return method


def _binary(name, reflected=False):
    def method(self, other):
        return self._channel.request(name, other, self)[0] if reflected else self._do(name, other)
    return method


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or", "xor",
           "matmul")
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _compare(_name))
for _name in _BINARY:
    setattr(Remote, f"__{_name}__", _binary(_name))
    setattr(Remote, f"__r{_name}__", _binary(_name, reflected=True))
for _name in ("repr", "str", "format", "bool", "len", "hash", "iter", "next", "reversed", "contains", "getitem",
              "setitem", "delitem", "enter", "dir", "index", "int", "float", "round", "divmod", "neg", "pos", "abs",
              "invert"):
    setattr(Remote, f"__{_name}__", _forward(_name))
Remote.__instancecheck__ = _forward("isinstance")
Remote.__subclasscheck__ = _forward("issubclass")


class Callback(Remote):
    """In the solution's process: a callable of the tests'. Only calling it reaches the tests."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._channel.request("call", self, list(args), kwargs)[0]

    def __getattr__(self, name):
        raise AttributeError(name)

    def __repr__(self):
        return f"<callable of the tests #{self._id}>"

    __str__ = __repr__

    def __hash__(self):
        return self._id

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other


def _refill(target, new) -> None:
    if isinstance(target, list) and isinstance(new, list):
        target[:] = new
    elif isinstance(target, dict) and isinstance(new, dict):
        target.clear()
        target.update(new)
    elif isinstance(target, set) and isinstance(new, set):
        target.clear()
        target.update(new)
    elif isinstance(target, bytearray) and isinstance(new, (bytes, bytearray)):
        target[:] = new


# ---- what each side answers ------------------------------------------------------------------------

_OPS = {
    "getattr": getattr, "setattr": setattr, "delattr": delattr, "repr": repr, "str": str, "format": format,
    "bool": bool, "len": len, "hash": hash, "iter": iter, "next": next, "reversed": reversed,
    "contains": operator.contains, "getitem": operator.getitem, "setitem": operator.setitem,
    "delitem": operator.delitem, "isinstance": lambda cls, obj: isinstance(obj, cls),
    "issubclass": lambda cls, sub: issubclass(sub, cls), "dir": lambda obj: sorted(dir(obj)),
    "index": operator.index, "int": int, "float": float, "round": round, "divmod": divmod,
    "enter": lambda obj: type(obj).__enter__(obj), "exit": lambda obj, *exc: type(obj).__exit__(obj, *exc),
    "neg": operator.neg, "pos": operator.pos, "abs": abs, "invert": operator.invert,
    **{name: getattr(operator, name) for name in ("eq", "ne", "lt", "le", "gt", "ge")},
    **{name: getattr(operator, name + "_" if name in ("and", "or") else name) for name in _BINARY},
}


def _serve_solution(op: str, args: list):
    if op == "import":
        import importlib

        return importlib.import_module(args[0]), None
    if op == "call":
        fn, positional, keywords = args
        value = fn(*positional, **keywords)
        # lists, dicts, sets and bytearrays the tests passed are copies: send their new contents back
        after = {i: a for i, a in enumerate(positional) if type(a) in (list, dict, set, bytearray)}
        return value, after
    if op not in _OPS:
        raise TypeError(f"unknown operation {op!r}")
    return _OPS[op](*args), None


def _serve_tests(op: str, args: list):
    if op != "call" or isinstance(args[0], Remote) or not callable(args[0]):
        raise TypeError("the solution may only call what the tests handed it")
    fn, positional, keywords = args
    return fn(*positional, **keywords), None


class _Module(type(sys)):
    """`import MODULE` in the tests: attributes come from the solution's module."""

    def __init__(self, name: str, remote: Remote):
        super().__init__(name)
        object.__setattr__(self, "_remote", remote)

    def __getattr__(self, name):
        if name == "__all__":
            names = getattr(self._remote, "__all__", None) if "__all__" in dir(self._remote) else None
            return list(names) if names is not None else [n for n in dir(self._remote) if not n.startswith("_")]
        if name.startswith("__") and name.endswith("__") and name not in ("__doc__", "__version__", "__file__"):
            raise AttributeError(name)
        return getattr(self._remote, name)

    def __setattr__(self, name, value):
        setattr(self._remote, name, value)


def _not_dumpable() -> None:
    """No /proc/PID/{mem,environ,fd} and no ptrace of this process for the solution (same uid, no
    CAP_SYS_PTRACE)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def run_tests(tests_file: str, module: str) -> None:
    import subprocess

    _not_dumpable()
    with os.fdopen(3, "rb") as fh:  # the run's secret, from the sandbox's supervisor
        secret = fh.read().decode()
    with open(tests_file, encoding="utf-8") as fh:
        source = fh.read()
    os.unlink(tests_file)  # the solution does not get to read the expected answers
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # nothing the solution writes is imported
    code = compile(source, tests_file, "exec")
    to_solution, from_tests = os.pipe()
    to_tests, from_solution = os.pipe()
    solution = subprocess.Popen([sys.executable, "-E", "-s", os.path.abspath(__file__), "--serve", module],
                                stdin=subprocess.DEVNULL, pass_fds=(to_solution, from_solution), start_new_session=True,
                                env={**os.environ, "ASSAY_HARNESS_FDS": f"{to_solution},{from_solution}"})
    os.close(to_solution)
    os.close(from_solution)
    channel = Channel(to_tests, from_tests, "t", _serve_tests)
    sys.modules[module] = _Module(module, channel.request("import", module)[0])
    main = type(sys)("__main__")  # the tests are the main module: unittest.main() looks for its cases there
    main.__file__ = tests_file
    sys.modules["__main__"] = main
    sys.argv = [tests_file]  # as if run as `python test_solution.py` (unittest.main() reads it)
    try:
        exec(code, main.__dict__)
        # pytest-style files only define test_* functions: call them, or a file of them would pass anything
        for name, fn in list(main.__dict__.items()):
            if name.startswith("test") and type(fn) is type(run_tests) and fn.__code__.co_filename == tests_file \
                    and fn.__code__.co_argcount == 0:
                fn()
    except SystemExit as exc:  # the tests' own sys.exit (unittest.main ends with one)
        if exc.code not in (None, 0):
            raise
    finally:
        try:
            os.killpg(solution.pid, 9)
        except OSError:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, f"\n{secret}\n".encode())
    os._exit(0)


def serve(module: str) -> None:
    rfd, wfd = (int(fd) for fd in os.environ.pop("ASSAY_HARNESS_FDS").split(","))
    Channel(rfd, wfd, "s", _serve_solution).serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        run_tests(sys.argv[1], sys.argv[2])
