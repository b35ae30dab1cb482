"""What a test executed: the project functions it called and the frames it failed in.

Used by patchheal's pytest collector around each test's call phase. A profile
hook (`sys.setprofile`, current thread) counts the calls of functions whose
code lives under the project root and outside its tests and virtual
environments; on a failure, the exception's traceback frames are kept too. Only
the traces of tests that fail are written, for localization (evidence shown to
a proposer). The step controls everything here and could forge it, so it is
never used by the verdict, and it is bounded here and again where it is read.
"""

from __future__ import annotations

import os
import re
import sys
from types import CodeType, FrameType, TracebackType
from typing import Any

MAX_FUNCTIONS = 400  # distinct functions kept per test (the earliest called)
MAX_FRAMES = 60  # traceback frames kept per test (the innermost)
MAX_TESTS = 20  # failing tests whose trace is written
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*\.py$|_test\.py$|conftest")
_ENV_PARTS = ("/site-packages/", "/dist-packages/", "/.venv/", "/venv/", "/.tox/", "/.nox/")


class TestTrace:
    """The trace of one test's call phase."""

    __test__ = False  # keep pytest from collecting this class

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") + "/"
        self._wanted: dict[CodeType, str | None] = {}
        self.functions: dict[CodeType, list[int]] = {}  # code -> [calls, order, depth]
        self.frames: list[list[Any]] = []
        self._depth = 0
        self._previous: Any = None

    def _relative(self, code: CodeType) -> str | None:
        """The code's file relative to the root, if it is project source (not tests)."""
        path = code.co_filename
        if not path.startswith("/"):  # <frozen os>, <string>: no file of the project
            return None
        path = os.path.abspath(path)  # noqa: PTH100
        if not path.startswith(self.root) or any(p in path for p in _ENV_PARTS):
            return None
        rel = path[len(self.root) :]
        return None if _TEST_PATH.search(rel) else rel

    def _profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "return":
            self._depth -= 1
            return
        if event != "call":
            return
        self._depth += 1
        code = frame.f_code
        wanted = self._wanted.get(code, "")
        if wanted == "":
            wanted = self._wanted[code] = self._relative(code)
        if wanted is None:
            return
        seen = self.functions.get(code)
        if seen is not None:
            seen[0] += 1
        elif len(self.functions) < MAX_FUNCTIONS:
            self.functions[code] = [1, len(self.functions), self._depth]

    def start(self) -> None:
        self._depth = 0
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)

    def stop(self) -> None:
        sys.setprofile(self._previous)

    def failed_with(self, tb: TracebackType | None) -> None:
        """Keep the traceback's frames in project files (the tests' own too)."""
        frames: list[list[Any]] = []
        while tb is not None:
            code = tb.tb_frame.f_code
            path = code.co_filename
            if path.startswith("/") and not any(p in path for p in _ENV_PARTS):
                path = os.path.abspath(path)  # noqa: PTH100
                if path.startswith(self.root):
                    frames.append([path[len(self.root) :], tb.tb_lineno, code.co_name])
            tb = tb.tb_next
        self.frames = frames[-MAX_FRAMES:]

    def record(self, spectrum: Spectrum) -> dict[str, Any]:
        """A JSON-ready record: functions in call order (with how many passing tests ran
        each), then the frames."""
        functions = []
        for code, (calls, order, depth) in sorted(self.functions.items(), key=lambda kv: kv[1][1]):
            functions.append(
                {
                    "file": self._wanted.get(code) or "",
                    "name": getattr(code, "co_qualname", code.co_name),
                    "line": code.co_firstlineno,
                    "calls": calls,
                    "order": order,
                    "depth": depth,
                    "passed_by": spectrum.passed_by.get(code, 0),
                }
            )
        frames = [{"file": f, "line": line, "name": name} for f, line, name in self.frames]
        return {"functions": functions, "frames": frames, "passed_tests": spectrum.passed_tests}


class Spectrum:
    """How many passing tests of the session executed each project function: the contrast
    that tells the code only a failing test runs from code every test runs."""

    def __init__(self) -> None:
        self.passed_tests = 0
        self.passed_by: dict[CodeType, int] = {}

    def passed(self, trace: TestTrace) -> None:
        self.passed_tests += 1
        for code in trace.functions:
            self.passed_by[code] = self.passed_by.get(code, 0) + 1
