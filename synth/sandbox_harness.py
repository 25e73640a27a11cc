"""Runs an item's tests against a model-written solution so that the solution cannot pass by ending
early, by answering the tests' own questions, or by printing what a pass prints. Standard library
only: it runs inside the sandbox (as a job file) with the program's interpreter.

    python _assay_harness.py TESTS_FILE MODULE       the tests' process (what the sandbox runs)
    python _assay_harness.py --serve MODULE          the solution's process (the tests start it)

The tests run in their own process; `import MODULE` there gives a stand-in whose every use is
answered by a second process that imported the real solution. Values cross as plain data (None,
bool, int, float, complex, str, bytes, range, and lists, tuples, sets, dicts and dict views of them;
Fraction, Decimal and enum members too), rebuilt in the tests' process with the builtin types (an
enum member as an `EnumValue`, equal by enum and member name), so every comparison
the tests make runs the tests' own types. Anything else stays in the solution's process and is held
through a reference, which the tests' process alone decides what may be done with (the solution's
process runs the solution's code: whatever it claims about an object is not believed):

* a dataclass instance a function returns crosses with its fields as plain data: they can be read,
  and two such results (or one and an object the tests built) compare field by field, here;
* a function's (or method's, or operator's) result is plain data or something only to iterate over:
  an object it returns answers no operator, method or comparison, so a result that claims to equal
  anything, to be within `eps` of anything (`__sub__`/`__abs__`), to contain anything or to start
  with anything is an error, not a pass; `x in result` iterates it with the tests' `==`;
* the only objects that answer methods and operators are the ones the tests build themselves by
  calling a class the solution defines with a top-level `class` statement named as PEP 8 names
  classes (a capital first letter: a function the tests call cannot be swapped for a class whose
  instances answer everything); what their attributes give is plain data or a callable;
* a StopIteration (or StopAsyncIteration) escaping a call into the solution is a RuntimeError in the
  tests, as PEP 479 has it for generators: it cannot end the tests' `all(map(...))` or `for` loop early
  (only an iterator's own `next` ends with it);
* `sys.exit(0)` or `os._exit(0)` in the solution ends only the solution's process; the tests' next
  use of it raises `SolutionExited` (a BaseException: `except Exception` in a test cannot swallow it);
* after its last statement the tests' process prints a per-run secret it read from fd 3 before the
  solution's process existed. The sandbox counts a run as passed only when that secret appears and
  the tests' process exited 0. The solution cannot read the secret: the tests' process is not
  dumpable (no /proc/PID/mem, environ or fd for a process of the same uid without CAP_SYS_PTRACE),
  ptrace is refused by the sandbox's seccomp filter, and the tests file is deleted once read.

Callables the tests hand to the solution (a key function, a callback) stay in the tests' process and
are called there on the solution's behalf; nothing else of the tests' process can be reached. The
tests run as the main module (`unittest.main()` finds its cases), and the zero-argument `test*`
functions a file defines are called after it ran (pytest-style files). Lists, dicts, sets and
bytearrays the tests pass are copied, and their new contents copied back after the call (in-place
functions work). What does not carry over: `isinstance(x, int)` for a value that is a solution
object, catching a solution-defined exception class (it arrives as its nearest builtin base), a
solution's prints captured by the tests (they go straight to the output), a function expected to
raise StopIteration, and objects of the solution's classes that the tests did not build themselves
(a function returning a linked list's head, `node.next.val`, `Vector(1, 2) + Vector(3, 4)`): the
tests can pass them back to the solution, iterate them and print them, nothing else. What it cannot
tell: a function the tests call by a capitalised name, which the solution may define as a class.
"""
from __future__ import annotations

import ast
import builtins
import json
import operator
import os
import sys
import threading

MARK = "$"
# What the tests' process lets a reference do, by how the tests came to hold it.
MODULE = "module"  # the solution's module: its attributes
CLASS = "class"  # a top-level, capitalised class of the solution's: call it (an OBJECT), read its attributes
CALLABLE = "callable"  # a function, a method, or an attribute that is neither plain data nor a method
OBJECT = "object"  # what the tests built by calling a CLASS: methods, operators and comparisons are its own
RESULT = "result"  # what a call, an operator or an iteration gave that is not plain data: iterate it, print it
PLAIN = None  # plain data only: a reference is refused (str(), len(), comparisons' answers)


class SolutionExited(BaseException):
    """The solution's process ended or broke the protocol: the tests cannot go on."""


class SolutionError(Exception):
    """An exception of the solution's with no builtin base class other than Exception."""


class _NotPlain(Exception):
    """A reference where the tests accept plain data only."""


PLAIN_TYPES = ("plain data (None, bool, int, float, complex, str, bytes, range, Fraction, Decimal and lists, "
               "tuples, sets, dicts of them)")


# ---- the wire: JSON lines of plain data and references --------------------------------------------

_VIEWS = {type({}.keys()): "keys", type({}.values()): "values", type({}.items()): "items"}


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
        self.module: str | None = None  # the solution's module (its side): enum members are looked up there

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
        if type(x) is range:
            return {MARK: "range", "v": [sub(x.start), sub(x.stop), sub(x.step)]}
        if type(x) in _VIEWS:
            return {MARK: _VIEWS[type(x)], "v": [sub(v) for v in x]}
        fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
        if fractions is not None and isinstance(x, fractions.Fraction):
            return {MARK: "fraction", "v": [sub(int(x.numerator)), sub(int(x.denominator))]}
        if decimal is not None and isinstance(x, decimal.Decimal):
            return {MARK: "decimal", "v": str(decimal.Decimal.__str__(x))}
        if isinstance(x, EnumValue):
            return {MARK: "enum", "type": x.enum, "name": x.name, "v": sub(x.value)}
        enum = sys.modules.get("enum")
        if enum is not None and isinstance(x, enum.Enum):
            return {MARK: "enum", "type": str(type(x).__name__)[:80], "name": str(x.name), "v": sub(x.value)}
        key = id(x)
        self.objects.setdefault(key, [x, 0])[1] += 1
        ref = {MARK: "ref", "side": self.side, "id": key, "type": str(type(x).__name__)[:80]}
        dataclasses = sys.modules.get("dataclasses")
        if dataclasses is not None and not isinstance(x, type) and dataclasses.is_dataclass(x):
            ref["fields"] = [[str(f.name), sub(getattr(x, f.name))] for f in dataclasses.fields(x)]
        return ref

    def decode(self, x, kind=RESULT):
        """Rebuild a value with the builtin types; references of the other side's become stand-ins
        allowed what `kind` allows (PLAIN: none is accepted)."""
        if isinstance(x, list):
            return [self.decode(v, kind) for v in x]
        if not isinstance(x, dict):
            return x
        sub = lambda v: self.decode(v, kind)  # noqa: E731
        tag, v = x.get(MARK), x.get("v")
        if tag == "ref":
            if x["side"] == self.side:
                return self.objects[x["id"]][0]
            if kind is PLAIN:
                self.released.append(int(x["id"]))
                raise _NotPlain(str(x.get("type", "object"))[:80])
            fields = {str(k): sub(val) for k, val in x["fields"]} if isinstance(x.get("fields"), list) else None
            return Remote._make(self, int(x["id"]), kind, str(x.get("type", "object"))[:80], fields)
        if tag == "tuple":
            return tuple(map(sub, v))
        if tag == "namedtuple":
            return _namedtuple(x["name"], tuple(x["fields"]))(*map(sub, v))
        if tag in ("set", "frozenset"):
            return (set if tag == "set" else frozenset)(map(sub, v))
        if tag == "dict":
            return {sub(k): sub(val) for k, val in v}
        if tag == "keys":
            return dict.fromkeys(map(sub, v)).keys()
        if tag == "values":
            return dict(enumerate(map(sub, v))).values()
        if tag == "items":
            return dict(tuple(sub(pair)) for pair in v).items()
        if tag == "range":
            return range(*(_exact(sub(i), int) for i in v))
        if tag == "enum":
            if self.side == "s":  # back in the solution's process: its own member again
                cls = getattr(sys.modules.get(self.module or ""), str(x["type"]), None)
                member = getattr(cls, "__members__", {}).get(str(x["name"])) if isinstance(cls, type) else None
                if member is not None:
                    return member
            return EnumValue(str(x["type"]), str(x["name"]), sub(v))
        if tag == "int":
            return int(v, 16)
        if tag == "complex":
            return complex(float(v[0]), float(v[1]))
        if tag in ("bytes", "bytearray"):
            return (bytes if tag == "bytes" else bytearray)(bytes.fromhex(v))
        if tag == "fraction":
            import fractions

            return fractions.Fraction(*(_exact(sub(i), int) for i in v))
        if tag == "decimal":
            import decimal

            return decimal.Decimal(_exact(v, str))
        raise SolutionExited(f"unknown value kind {tag!r} from the other process")

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

    def request(self, op: str, *args, kind=RESULT):
        """Ask the other side to do `op`; references in the reply are allowed what `kind` allows."""
        with self.lock:
            released, self.released = self.released, []
            self._send({"op": op, "args": [self.encode(a) for a in args], "release": released})
            return self.wait(op, kind)

    def wait(self, op: str | None = None, kind=RESULT):
        while True:
            message = self._receive()
            if "op" in message:
                self.answer(message)
                continue
            try:
                if "error" in message:
                    error = _exception(*self.decode(message["error"]))
                elif "value" in message:
                    return self.decode(message["value"], kind), message.get("after")
                else:
                    raise ValueError(message)
            except _NotPlain as refused:
                error = (AttributeError if op == "getattr" else TypeError)(
                    f"the solution gave the tests a {refused} where they take {PLAIN_TYPES}")
            except Exception:  # noqa: BLE001 - what the other side sent makes no sense
                raise SolutionExited("the solution's process broke the protocol") from None
            if self.side == "t" and op != "next" and isinstance(error, (StopIteration, StopAsyncIteration)):
                error = RuntimeError(f"the solution raised {type(error).__name__}{error.args!r} (outside an "
                                     "iterator's next(), where it would end the tests' loop early)")
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


class EnumValue:
    """An enum member of the solution's, as plain data: equal to a member of the same enum and name."""

    __slots__ = ("enum", "name", "value")

    def __init__(self, enum: str, name: str, value):
        object.__setattr__(self, "enum", enum)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "value", value)

    def __setattr__(self, name, value):
        raise AttributeError("an enum member is read-only")

    def __eq__(self, other):
        return isinstance(other, EnumValue) and (self.enum, self.name) == (other.enum, other.name)

    def __hash__(self):
        return hash((self.enum, self.name))

    def __repr__(self):
        return f"<{self.enum}.{self.name}: {self.value!r}>"

    def __str__(self):
        return f"{self.enum}.{self.name}"


def _fields(obj):
    import dataclasses

    if isinstance(obj, type) or not dataclasses.is_dataclass(obj):
        return None
    return [[f.name, getattr(obj, f.name)] for f in dataclasses.fields(obj)]


def _exact(value, cls):
    if type(value) is not cls:
        raise ValueError(f"expected {cls.__name__}")
    return value


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
    plain data, allowed what its kind allows (see the module's docstring). In the solution's process:
    a callable the tests passed (only calling it works)."""

    __slots__ = ("_channel", "_id", "_kind", "_type", "_fields", "__weakref__")

    @classmethod
    def _make(cls, channel: Channel, key: int, kind=RESULT, type_name: str = "object", fields: dict | None = None):
        proxy = object.__new__(cls if channel.side == "t" else Callback)
        for name, value in (("_channel", channel), ("_id", key), ("_kind", kind), ("_type", type_name),
                            ("_fields", fields)):
            object.__setattr__(proxy, name, value)
        return proxy

    def _record(self):
        """A dataclass instance's (type, fields) as plain data: what its last crossing held for a
        result, asked again for an object the tests hold (its fields may have changed since)."""
        if self._kind == OBJECT:
            fields = self._do("fields")
            return (self._type, tuple((k, v) for k, v in fields)) if fields is not None else None
        return (self._type, tuple(self._fields.items())) if self._fields is not None else None

    def _do(self, op: str, *args, kind=RESULT):
        return self._channel.request(op, self, *args, kind=kind)[0]

    def _refuse(self, what: str, error=TypeError):
        if self._kind == RESULT:
            raise error(f"the tests {what} a {self._type} the solution gave them: what the solution's functions, "
                            f"methods and operators give is {PLAIN_TYPES}, or something to iterate over, and nothing "
                            "of the solution's answers the tests' comparisons")
        raise error(f"the tests {what} the solution's {self._type} ({self._kind}): only objects the tests build "
                        "from a capitalised class the solution defines answer methods and operators; their attributes "
                        f"are {PLAIN_TYPES} or callables")

    def _attribute(self, name: str, kind):
        return self._do("getattr", name, kind=kind)

    def __del__(self):
        try:
            self._channel.released.append(self._id)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __getattr__(self, name):
        if self._kind == RESULT and self._fields is not None and name in self._fields:
            return self._fields[name]  # a dataclass result's field, as it crossed
        kind = _ATTRIBUTE_KIND.get(self._kind, False)
        if kind is False:  # an AttributeError: hasattr() and the like probe with getattr
            self._refuse(f"read .{name} of", AttributeError)
        return self._attribute(name, kind)

    def __setattr__(self, name, value):
        if self._kind not in (OBJECT, MODULE):
            self._refuse(f"set .{name} of")
        self._do("setattr", name, value, kind=PLAIN)

    def __delattr__(self, name):
        if self._kind not in (OBJECT, MODULE):
            self._refuse(f"deleted .{name} of")
        self._do("delattr", name, kind=PLAIN)

    def __call__(self, *args, **kwargs):
        if self._kind not in (CLASS, CALLABLE, OBJECT):
            self._refuse("called")
        value, after = self._channel.request("call", self, list(args), kwargs,
                                             kind=OBJECT if self._kind == CLASS else RESULT)
        for index, new in (after or {}).items():  # the new contents of mutable arguments
            _refill(args[int(index)], self._channel.decode(new))
        return value

    def __contains__(self, item):
        if self._kind == OBJECT:
            return self._do("contains", item, kind=PLAIN)
        if self._kind != RESULT:
            self._refuse("looked for a value in")
        return any(value is item or value == item for value in self)  # the tests' own ==

    def __hash__(self):
        return self._do("hash", kind=PLAIN) if self._kind == OBJECT else object.__hash__(self)

    def __exit__(self, *exc):
        if self._kind != OBJECT:
            self._refuse("used `with` on")
        return self._do("exit", *(None if e is None else repr(e) for e in exc), kind=PLAIN)

    def __reduce__(self):
        raise TypeError("objects of the solution's process cannot be pickled")


_ATTRIBUTE_KIND = {MODULE: CALLABLE, CLASS: CALLABLE, OBJECT: CALLABLE, CALLABLE: PLAIN}


def _forward(op, allowed, kind, what):
    def method(self, *args):
        if self._kind not in allowed:
            self._refuse(what)
        return self._do(op, *args, kind=kind)
    return method


def _compare(name, symbol):
    def method(self, other):  # a solution object compares only with objects the tests built
        if isinstance(other, Remote) and self._kind == other._kind == OBJECT:
            return self._do(name, other, kind=PLAIN)
        if name in ("eq", "ne") and isinstance(other, Remote) and RESULT in (self._kind, other._kind):
            mine, theirs = self._record(), other._record()  # dataclasses: field by field, here
            if mine is not None and theirs is not None:
                return (mine == theirs) == (name == "eq")
        if name in ("eq", "ne"):
            return NotImplemented  # equal only to itself
        self._refuse(f"compared with `{symbol}`")
    return method


def _binary(name, symbol, reflected=False):
    def method(self, other):
        for operand in (self, other):
            if isinstance(operand, Remote) and operand._kind != OBJECT:
                operand._refuse(f"used `{symbol}` on")
        return self._channel.request(name, other, self)[0] if reflected else self._do(name, other)
    return method


ANY, ITERABLE, BUILT = (MODULE, CLASS, CALLABLE, OBJECT, RESULT), (OBJECT, RESULT), (OBJECT,)
_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "lshift": "<<", "rshift": ">>", "and": "&", "or": "|", "xor": "^", "matmul": "@"}
for _name, _symbol in {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}.items():
    setattr(Remote, f"__{_name}__", _compare(_name, _symbol))
for _name, _symbol in _BINARY.items():
    setattr(Remote, f"__{_name}__", _binary(_name, _symbol))
    setattr(Remote, f"__r{_name}__", _binary(_name, _symbol, reflected=True))
for _name, _allowed, _kind in (
        # what cannot carry a value of the tests' to the solution: any reference may answer it
        ("repr", ANY, PLAIN), ("str", ANY, PLAIN), ("bool", ANY, PLAIN), ("len", ANY, PLAIN), ("dir", ANY, PLAIN),
        ("format", ANY, PLAIN), ("iter", ITERABLE, RESULT), ("next", ITERABLE, RESULT),
        ("reversed", ITERABLE, RESULT),
        # the rest: only objects the tests built
        ("getitem", BUILT, RESULT), ("setitem", BUILT, PLAIN), ("delitem", BUILT, PLAIN), ("enter", BUILT, OBJECT),
        ("index", BUILT, PLAIN), ("int", BUILT, PLAIN), ("float", BUILT, PLAIN), ("round", BUILT, RESULT),
        ("divmod", BUILT, RESULT), ("neg", BUILT, RESULT), ("pos", BUILT, RESULT), ("abs", BUILT, RESULT),
        ("invert", BUILT, RESULT)):
    setattr(Remote, f"__{_name}__", _forward(_name, _allowed, _kind, f"used {_name}() on"))
Remote.__instancecheck__ = _forward("isinstance", (CLASS,), PLAIN, "used isinstance() with")
Remote.__subclasscheck__ = _forward("issubclass", (CLASS,), PLAIN, "used issubclass() with")


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
    "fields": _fields, "enter": lambda obj: type(obj).__enter__(obj), "exit": lambda obj, *exc: type(obj).__exit__(obj, *exc),
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

    def __init__(self, name: str, remote: Remote, classes: frozenset):
        super().__init__(name)
        object.__setattr__(self, "_remote", remote)
        object.__setattr__(self, "_classes", classes)

    def __getattr__(self, name):
        if name == "__all__":
            names = getattr(self._remote, "__all__", None) if "__all__" in dir(self._remote) else None
            return list(names) if names is not None else [n for n in dir(self._remote) if not n.startswith("_")]
        if name.startswith("__") and name.endswith("__") and name not in ("__doc__", "__version__", "__file__"):
            raise AttributeError(name)
        return self._remote._attribute(name, CLASS if name in self._classes else CALLABLE)

    def __setattr__(self, name, value):
        setattr(self._remote, name, value)


def declared_classes(source: str) -> frozenset:
    """Names the solution's source binds with a top-level `class` statement (also under a top-level
    if/try/with) and capitalises as PEP 8 names classes: read by the tests' process from the file
    itself, before the solution runs, so nothing the solution does at run time changes it."""
    try:
        body = list(ast.parse(source).body)
    except (SyntaxError, ValueError):
        return frozenset()
    names = set()
    while body:
        node = body.pop()
        if isinstance(node, ast.ClassDef) and node.name[:1].isupper():
            names.add(node.name)
        for field in ("body", "orelse", "finalbody", "handlers"):
            body.extend(n for n in getattr(node, field, ()) if not isinstance(
                node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(names)


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
    try:
        with open(f"{module}.py", encoding="utf-8") as fh:
            classes = declared_classes(fh.read())
    except (OSError, UnicodeDecodeError):
        classes = frozenset()
    to_solution, from_tests = os.pipe()
    to_tests, from_solution = os.pipe()
    solution = subprocess.Popen([sys.executable, "-E", "-s", os.path.abspath(__file__), "--serve", module],
                                stdin=subprocess.DEVNULL, pass_fds=(to_solution, from_solution), start_new_session=True,
                                env={**os.environ, "ASSAY_HARNESS_FDS": f"{to_solution},{from_solution}"})
    os.close(to_solution)
    os.close(from_solution)
    channel = Channel(to_tests, from_tests, "t", _serve_tests)
    sys.modules[module] = _Module(module, channel.request("import", module, kind=MODULE)[0], classes)
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
    channel = Channel(rfd, wfd, "s", _serve_solution)
    channel.module = module
    channel.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        run_tests(sys.argv[1], sys.argv[2])
