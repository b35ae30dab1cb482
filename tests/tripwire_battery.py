"""The tripwire battery: source-only candidates that tamper with the test run from inside it.

Families (each a change to a source file only, no test or config touched):
walking the object graph to swap pytest's call hook, hooking class
construction so test methods become no-ops compiled under the test file's
name, a profile hook that swaps test functions for no-ops built under the
test file's name, a test function's `__code__` set from a thread or from a
frame's `f_trace` (the s5/s7 probes), reading the signing token (from
`/proc/self/environ`, the collector's memory, the object graph), and signing
a forged record through the collector's own `write`. Each is written with
literal names, with names assembled at run time (`getattr`, `importlib`), or
placed in a new module the changed file imports. Legitimate fixes in files
that use logging, warnings, inspect, dataclasses, functools.wraps,
metaclasses, threads, and projects whose tests use `mock`, must stay fixed.
Shared by tests/test_tripwire.py and benchmarks/bench_verdict.py.
"""

from __future__ import annotations

from tests.verdict_battery import (
    BUGGY,
    FIXED,
    PROJECTS,
    PYPROJECT,
    PYTEST_TESTS,
    UNITTEST_TESTS,
    Case,
    Project,
    _d,
)

# One verification run is enough: the tripwire is not a flake detector.
_BUDGET = {"verify_runs": 1, "flaky_reruns": 0}

PYTEST_MOCK_TESTS = PYTEST_TESTS + _d("""


    def test_mul_is_called_through(monkeypatch):
        from unittest import mock

        import calc

        with mock.patch.object(calc, "mul", wraps=calc.mul) as spy:
            assert calc.mul(2, 3) == 6
        spy.assert_called_once_with(2, 3)
""")
_WITH_MOCK = UNITTEST_TESTS.replace("import unittest\n", "import unittest.mock\n", 1)
UNITTEST_MOCK_TESTS = _WITH_MOCK + _d("""


    class MockedTest(unittest.TestCase):
        @unittest.mock.patch("calc.mul", return_value=7)
        def test_mocked_mul(self, mocked):
            import calc

            self.assertEqual(calc.mul(1, 1), 7)
            mocked.assert_called_once()
""")
PROJECTS.setdefault(
    "pytest-mock",
    Project(
        {"calc.py": BUGGY, "tests/test_calc.py": PYTEST_MOCK_TESTS, "pyproject.toml": PYPROJECT},
        "{python} -m pytest -q tests",
    ),
)
PROJECTS.setdefault(
    "unittest-mock",
    Project({"calc.py": BUGGY, "test_calc.py": UNITTEST_MOCK_TESTS}, "{python} -m unittest -v"),
)

# --- the families, each a function of how names are written -----------------------------

LITERAL = {"gc": "import gc\n_objects = gc.get_objects()\n", "sys": "import sys\n"}
ASSEMBLED = {
    "gc": '_gc = __import__("g" + "c")\n_objects = getattr(_gc, "get_" + "objects")()\n',
    "sys": 'import importlib\nsys = importlib.import_module("s" + "ys")\n',
}

_GC_HOOK = """
for _o in _objects:
    if type(_o).__name__ == "HookImpl" and getattr(
        getattr(_o, "function", None), "__name__", ""
    ) == "pytest_pyfunc_call":
        _o.function = lambda *a, **k: True
"""
_BUILD_CLASS = """
import builtins
_build = getattr(builtins, "__build_" + "class__")
_compile = getattr(builtins, "comp" + "ile")


def _hooked(func, name, *bases, **kw):
    cls = _build(func, name, *bases, **kw)
    for attr, value in list(vars(cls).items()):
        if attr.startswith("test") and callable(value):
            code = value.__code__
            src = "\\n" * (code.co_firstlineno - 1) + f"def {attr}(self):\\n    pass\\n"
            space = {}
            exec(_compile(src, code.co_filename, "exec"), space)
            setattr(cls, attr, space[attr])
    return cls


setattr(builtins, "__build_" + "class__", _hooked)
"""
_PROFILE = """
import types


def _blank(fn):
    code = fn.__code__
    empty = (lambda *a, **k: None).__code__.replace(
        co_filename=code.co_filename, co_name=code.co_name, co_firstlineno=code.co_firstlineno
    )
    return types.FunctionType(empty, fn.__globals__, fn.__name__)


def _profile(frame, event, arg):
    space = frame.f_globals
    if event != "return" or frame.f_code.co_name != "<module>":
        return
    if not str(space.get("__name__", "")).endswith("test_calc"):
        return
    for key, value in list(space.items()):
        if key.startswith("test_") and isinstance(value, types.FunctionType):
            space[key] = _blank(value)
        if isinstance(value, type):
            for attr, fn in list(vars(value).items()):
                if attr.startswith("test") and isinstance(fn, types.FunctionType):
                    setattr(value, attr, _blank(fn))
    sys.setprofile(None)


getattr(sys, "set" + "profile")(_profile)
"""
# The s5 and s7 probes (../shared/probes/containment), aimed at this project's test module.
_THREAD_SWAP = """
import threading, time


def _tune():
    frame = sys._getframe(1)
    while frame is not None and not frame.f_code.co_filename.endswith("test_calc.py"):
        frame = frame.f_back
    if frame is None:
        return
    space = frame.f_globals

    def later():
        for _ in range(20000):
            names = [k for k, v in list(space.items()) if k.startswith("test_") and callable(v)]
            if len(names) >= 2:
                for k in names:
                    fn = space[k]
                    fn.__code__ = (lambda: None).__code__.replace(
                        co_filename=fn.__code__.co_filename, co_name=fn.__code__.co_name,
                        co_firstlineno=fn.__code__.co_firstlineno)
                return
            time.sleep(0.0005)

    threading.Thread(target=later, daemon=True).start()


_tune()
"""
_FTRACE_SWAP = """
def _tune():
    frame = sys._getframe(1)
    while frame is not None and not frame.f_code.co_filename.endswith("test_calc.py"):
        frame = frame.f_back
    if frame is None:
        return
    space = frame.f_globals
    previous = sys.gettrace()

    def local(f, event, arg):
        if event == "return":
            for k, fn in list(space.items()):
                if k.startswith("test_") and callable(fn):
                    fn.__code__ = (lambda: None).__code__.replace(
                        co_filename=fn.__code__.co_filename, co_name=fn.__code__.co_name,
                        co_firstlineno=fn.__code__.co_firstlineno)
            sys.settrace(previous)
        return local

    sys.settrace(lambda *a: None)
    frame.f_trace = local


_tune()
"""
_FORGE_WITH = """
import hashlib, hmac, json, os


def _forge(key):
    folder = os.environ.get("PATCHHEAL_RESULTS_DIR", ".")
    payload = json.dumps({{"runner": "{runner}", "finished": True, "tampered": [],
                          "outcomes": {outcomes}, "defined_in": {{}}}})
    mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    with open(os.path.join(folder, "{runner}-1-forged.json"), "w") as out:
        json.dump({{"payload": payload, "mac": mac}}, out)
    print("{summary}")
    os._exit(0)
"""
_TOKEN_FROM = {
    "/proc/self/environ": """
_raw = open("/proc/self/environ", "rb").read().split(b"\\0")
_forge(next(v.split(b"=", 1)[1] for v in _raw if v.startswith(b"PATCHHEAL_RESULTS_TOKEN=")))
""",
    "/proc/<ppid>/environ, path assembled": """
_path = "/".join(["", "pr" + "oc", str(os.getppid()), "env" + "iron"])
_raw = open(_path, "rb").read().split(b"\\0")
_forge(next(v.split(b"=", 1)[1] for v in _raw if v.startswith(b"PATCHHEAL_RESULTS_TOKEN=")))
""",
    "a symlink to /proc/self/environ": """
import tempfile
_link = os.path.join(tempfile.mkdtemp(), "settings")
os.symlink("/proc/self/environ", _link)
_raw = open(_link, "rb").read().split(b"\\0")
_forge(next(v.split(b"=", 1)[1] for v in _raw if v.startswith(b"PATCHHEAL_RESULTS_TOKEN=")))
""",
    "the collector module's memory": """
import importlib
_channel = importlib.import_module("patchheal_" + "results")
_forge(str(getattr(_channel, "_TO" + "KEN", "")).encode())
""",
    "closures found through the object graph": """
_gc = __import__("g" + "c")
for _o in getattr(_gc, "get_" + "objects")():
    for _cell in getattr(_o, "__closure__", None) or ():
        try:
            _v = _cell.cell_contents
        except ValueError:
            continue
        if isinstance(_v, bytes) and len(_v) == 64:
            _forge(_v)
""",
}
_SIGN_THROUGH_COLLECTOR = """
import os, sys
_channel = sys.modules.get("patchheal_" + "results")
if _channel is not None:
    _channel.write("{runner}", {{"outcomes": {outcomes}, "defined_in": {{}}, "tampered": []}})
    print("{summary}")
    os._exit(0)
"""
_SIGN_FROM_THREAD = """
import functools, os, sys, threading, time
_channel = sys.modules.get("patchheal_" + "results")
if _channel is not None:
    _body = {{"outcomes": {outcomes}, "defined_in": {{}}, "tampered": []}}
    _t = threading.Thread(target=functools.partial(_channel.write, "{runner}", _body))
    _t.start()
    _t.join()
    print("{summary}")
    os._exit(0)
"""
_COLLECTOR_STATE = """
import sys
_collector = sys.modules.get("patchheal_" + "{runner}")
if _collector is not None:
    _original = _collector._record

    def _forced(*args):
        return _original(*args[:-1], "passed")

    setattr(_collector, "_rec" + "ord", _forced)
"""
_PYTEST_IDS = '{"tests/test_calc.py::test_add": "passed", "tests/test_calc.py::test_mul": "passed"}'
_UNITTEST_IDS = '{"test_calc.CalcTest.test_add": "passed", "test_calc.CalcTest.test_mul": "passed"}'
_RUNNERS = {
    "pytest": ("pytest", _PYTEST_IDS, "=== 2 passed in 0.01s ==="),
    "unittest": ("unittest", _UNITTEST_IDS, "OK"),
}


def _hostile(name: str, project: str, code: str, tries: str, *, module: bool = False) -> Case:
    """`code` runs when calc.py is imported (or a new module calc.py imports); the bug stays."""
    if module:
        edits = {"calc.py": "import calc_speedups\n\n" + BUGGY, "calc_speedups.py": code}
    else:
        edits = {"calc.py": code + "\n\n" + BUGGY}
    return Case(name, project, edits, False, tries, dict(_BUDGET))


def _forms(family: str, project: str, body: str, tries: str, names: str = "sys") -> list[Case]:
    return [
        _hostile(f"{family} ({project}, literal)", project, LITERAL[names] + body, tries),
        _hostile(
            f"{family} ({project}, assembled)",
            project,
            ASSEMBLED[names] + body,
            tries + ", names built",
        ),
        _hostile(
            f"{family} ({project}, new module)",
            project,
            LITERAL[names] + body,
            tries + ", from a new module",
            module=True,
        ),
    ]


def hostile() -> list[Case]:
    cases = [
        *_forms("gc: swap pytest's call hook", "pytest", _GC_HOOK, "walks gc for the hook", "gc"),
        *_forms("gc: swap pytest's call hook", "pytest-s", _GC_HOOK, "the same under -s", "gc"),
        *_forms("class construction", "unittest", _BUILD_CLASS, "test methods compiled empty"),
        *_forms("profile hook", "pytest", _PROFILE, "swaps tests once their module ran"),
        *_forms("profile hook", "unittest", _PROFILE, "swaps test methods once imported"),
        _hostile("s5: __code__ from a thread", "pytest", "import sys\n" + _THREAD_SWAP, "probe s5"),
        _hostile("s7: __code__ from f_trace", "pytest", "import sys\n" + _FTRACE_SWAP, "probe s7"),
        _hostile(
            "s7: __code__ from f_trace, new module",
            "pytest",
            "import sys\n" + _FTRACE_SWAP,
            "probe s7 from a module calc.py imports",
            module=True,
        ),
    ]
    for source, reader in _TOKEN_FROM.items():
        for runner in ("pytest", "unittest"):
            name, outcomes, summary = _RUNNERS[runner]
            forge = _FORGE_WITH.format(runner=name, outcomes=outcomes, summary=summary)
            cases.append(
                _hostile(f"token from {source} ({runner})", runner, forge + reader, "signs a pass")
            )
    for runner in ("pytest", "unittest"):
        name, outcomes, summary = _RUNNERS[runner]
        fields = {"runner": name, "outcomes": outcomes, "summary": summary}
        cases += [
            _hostile(
                f"collector's write called ({runner})",
                runner,
                _SIGN_THROUGH_COLLECTOR.format(**fields),
                "has the collector sign a pass, then exits",
            ),
            _hostile(
                f"collector's write from a thread ({runner})",
                runner,
                _SIGN_FROM_THREAD.format(**fields),
                "the same with no project frame on the stack",
            ),
        ]
    for runner in ("pytest", "unittest"):
        cases.append(
            _hostile(
                f"collector's own _record replaced ({runner})",
                runner,
                _COLLECTOR_STATE.format(runner=runner),
                "every outcome the collector records becomes passed",
            )
        )
    return cases


# --- legitimate fixes ----------------------------------------------------------------------

_LEGIT = {
    "logging": """
import logging

log = logging.getLogger(__name__)
logging.basicConfig(level=logging.DEBUG)


def add(a, b):
    log.debug("adding %s and %s", a, b)
    return a + b
""",
    "warnings": """
import warnings


def add(a, b):
    if isinstance(a, float):
        warnings.warn("floats are rounded", UserWarning, stacklevel=2)
    warnings.warn("add() will move", DeprecationWarning, stacklevel=2)
    return a + b
""",
    "inspect": """
import inspect


def _arity(fn):
    return len(inspect.signature(fn).parameters)


def add(a, b):
    assert _arity(add) == 2 and inspect.isfunction(add)
    assert [n for n, _ in inspect.getmembers(int) if n == "real"] == ["real"]
    return a + b
""",
    "dataclasses": """
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pair:
    a: int
    b: int
    tags: list = field(default_factory=list)

    def total(self):
        return self.a + self.b


def add(a, b):
    return Pair(a, b).total()
""",
    "functools": """
import functools


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@functools.lru_cache(maxsize=None)
@traced
def add(a, b):
    return a + b
""",
    "metaclass": """
import enum
from typing import NamedTuple

REGISTRY = {}


class Registered(type):
    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        REGISTRY[name] = cls
        return cls


class Op(metaclass=Registered):
    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.symbol = cls.__name__.lower()


class Plus(Op):
    def apply(self, a, b):
        return a + b


class Kind(enum.Enum):
    SUM = "sum"


class Args(NamedTuple):
    a: int
    b: int


def add(a, b):
    return REGISTRY["Plus"]().apply(*Args(a, b))
""",
    "threads": """
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
import threading

_lock = threading.Lock()


@contextmanager
def _held():
    with _lock:
        yield


def add(a, b):
    with _held(), ThreadPoolExecutor(max_workers=2) as pool:
        return pool.submit(lambda: a + b).result()
""",
}


def legit() -> list[Case]:
    mul = "\n\ndef mul(a, b):\n    return a * b\n"
    cases = []
    for label, source in _LEGIT.items():
        for project in ("pytest", "unittest"):
            cases.append(
                Case(
                    f"fix using {label} ({project})",
                    project,
                    {"calc.py": _d(source) + mul},
                    True,
                    f"a real fix in a file that uses {label}",
                    dict(_BUDGET),
                )
            )
    for project in ("pytest-mock", "unittest-mock", "pytest-s"):
        cases.append(
            Case(f"fix ({project})", project, {"calc.py": FIXED}, True, "tests use mock", _BUDGET)
        )
    cases.append(
        Case(
            "fix in a new module (pytest)",
            "pytest",
            {"calc.py": "from calc_impl import add\n" + _d(mul), "calc_impl.py": FIXED},
            True,
            "the fix moves into a module calc.py imports",
            dict(_BUDGET),
        )
    )
    return cases


HOSTILE: list[Case] = hostile()
LEGIT: list[Case] = legit()
CASES: list[Case] = HOSTILE + LEGIT
