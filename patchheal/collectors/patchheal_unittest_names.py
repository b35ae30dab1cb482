"""Full dotted names for unittest's stand-ins of tests it could not load.

`python -m unittest test.test_utils` on a module that fails to import runs a
stand-in whose id is `unittest.loader._FailedTest.test_utils`: the last part
of the name only. After a fix, the same module's tests pass as
`test.test_utils.TestUtil.test_x`, and a verdict cannot tell which module a
bare `test_utils` was. The loader's by-name lookup is wrapped here, so each
stand-in it returns is recorded under the full dotted name it stood for
(`unittest.loader._FailedTest.test.test_utils`, the form discovery already
uses). Stand-ins the loader makes elsewhere keep their own id.
"""

from __future__ import annotations

import sys
import unittest.loader
from typing import Any

_FAILED = "unittest.loader._FailedTest."
# id(stand-in) -> (the stand-in, kept alive so its id is not reused; its full id)
_aliases: dict[int, tuple[Any, str]] = {}


def test_id(test: Any) -> str:
    alias = _aliases.get(id(test))
    return alias[1] if alias is not None and alias[0] is test else str(test.id())


def full_name(short: str, name: str, module: Any = None) -> str:
    """The dotted name `short` (a stand-in's method name) was the last part of, in `name`."""
    parts = name.split(".")
    base = str(getattr(module, "__name__", "")) if module is not None else ""
    if not base:
        # The loader imports the longest prefix it can; the stand-in names the next part.
        known = max(
            (i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in sys.modules),
            default=0,
        )
        if known < len(parts) and parts[known] == short:
            return ".".join(parts[: known + 1])
    if short in parts:
        return ".".join(filter(None, (base, *parts[: parts.index(short) + 1])))
    return short


def _stand_ins(suite: Any) -> list[Any]:
    found: list[Any] = []
    stack = [suite]
    while stack and len(found) < 1000:
        item = stack.pop()
        if isinstance(item, unittest.TestSuite):
            stack.extend(item)
        elif type(item).__name__ == "_FailedTest":
            found.append(item)
    return found


def _name(suite: Any, name: str, module: Any) -> None:
    if not isinstance(name, str):
        return
    for test in _stand_ins(suite):
        short = str(getattr(test, "_testMethodName", ""))
        full = full_name(short, name, module) if short else ""
        if full and full != short:
            _aliases[id(test)] = (test, _FAILED + full)


def install(guard: Any) -> None:
    """Wrap `TestLoader.loadTestsFromName` (unittest.main and most runners call it); its
    part runs under the collector's `guard` (patchheal_guard.Guard)."""
    original = unittest.loader.TestLoader.loadTestsFromName

    def loadTestsFromName(self: Any, name: Any, module: Any = None) -> Any:
        suite = original(self, name, module)
        guard.run(_name, suite, name, module)
        return suite

    unittest.loader.TestLoader.loadTestsFromName = loadTestsFromName  # type: ignore[method-assign]
