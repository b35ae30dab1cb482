"""Where a test id's function may be defined: pytest node ids and unittest dotted ids.

A pytest node id names its file (`tests/test_x.py::TestCase::test_y[param]`,
relative to pytest's rootdir); a unittest id names a module
(`pkg.test_x.TestCase.test_y`), which is a file under the project root or
under `src/`. Only the candidates are listed here; which one exists is the
caller's to find. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# unittest's stand-ins for a module it could not import (3.x `_FailedTest`, older ones).
_IMPORT_FAILURE = ("unittest.loader._FailedTest.", "unittest.loader.ModuleImportFailure.")


@dataclass(frozen=True)
class Location:
    """A test function: the file it may be in, its enclosing classes and its name."""

    file: str
    classes: tuple[str, ...]
    function: str
    style: str
    """'pytest' (a node id) or 'unittest' (a dotted id): how its id names it."""


def _identifier(name: str) -> bool:
    return name.isidentifier()


def locations(test_id: str) -> list[Location]:
    """The places `test_id`'s function may be defined, most likely first; empty when the id
    names no test function (a module or class that failed to collect, a node test's name,
    an Airflow task instance)."""
    if "::" in test_id:
        head = test_id.split("[", 1)[0]  # parameters may hold anything; names hold no '['
        path, *names = head.split("::")
        if not path.endswith(".py") or not names or not all(map(_identifier, names)):
            return []
        return [Location(path, tuple(names[:-1]), names[-1], "pytest")]
    dotted = test_id.split(" ", 1)[0]  # a subtest's id: `mod.Class.test (i=1)`
    parts = dotted.split(".")
    if len(parts) < 3 or not all(map(_identifier, parts)) or test_id.startswith(_IMPORT_FAILURE):
        return []
    found = []
    # The longest module first: `a.b.C.test` is a/b.py's C.test before a.py's b.C.test.
    for cut in range(len(parts) - 2, 0, -1):
        module, rest = parts[:cut], parts[cut:]
        base = "/".join(module)
        for root in ("", "src/"):
            for file in (f"{root}{base}.py", f"{root}{base}/__init__.py"):
                found.append(Location(file, tuple(rest[:-1]), rest[-1], "unittest"))
    return found


def children(outcomes: Mapping[str, str], collector: str) -> list[str]:
    """The ids under a collector id (a module or class that failed to collect or import):
    `path.py::...` for pytest, `module....` for unittest; unittest's import-failure stand-in
    names only the module's last part, so it matches any module of that name."""
    for prefix in _IMPORT_FAILURE:
        if collector.startswith(prefix):
            name = collector.removeprefix(prefix)
            return sorted(t for t in outcomes if t.startswith(f"{name}.") or f".{name}." in f".{t}")
    return sorted(t for t in outcomes if t.startswith((f"{collector}::", f"{collector}.")))
