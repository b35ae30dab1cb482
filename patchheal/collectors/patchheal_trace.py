"""What a test executed: the project functions it called and the frames it failed in.

Used by patchheal's pytest collector around each test's call phase. A profile
hook (`sys.setprofile`, current thread) counts the calls of functions whose
code lives under the project root and outside its tests and virtual
environments; a trace hook (`sys.settrace`, local to those functions only)
records the lines each of them ran, unless another tracer (coverage, a
debugger) is already installed, which is left alone. On a failure, the
exception's traceback frames are kept too. Only the traces of tests that fail
are written, for localization (evidence shown to a proposer), each function
with its contrast: how many passing tests ran it, and how many ran the least
shared of its lines that the failing test ran (statement-level spectrum: a
function every test calls may still hold a branch only the failing one takes).
The step controls everything here and could forge it, so it is never used by
the verdict, and it is bounded here and again where it is read.
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
MAX_LINES = 50_000  # distinct (function, line) pairs recorded per test
MAX_RARE_LINES = 30  # a function's least shared lines written per failing test
# A step whose suite is too slow traced line by line can keep the contrast per function.
_LINES_WANTED = os.environ.get("PATCHHEAL_TRACE_LINES", "1") != "0"
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*\.py$|_test\.py$|conftest")
_ENV_PARTS = ("/site-packages/", "/dist-packages/", "/.venv/", "/venv/", "/.tox/", "/.nox/")
# Set by the first internal error of a hook below: tracing stops for the rest of the process
# (its traces are dropped), and the test it happened in goes on as if never traced. An
# exception raised by a profile or trace function would surface inside the test itself.
_broken = ""


def broken() -> str:
    return _broken


class TestTrace:
    """The trace of one test's call phase."""

    __test__ = False  # keep pytest from collecting this class

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") + "/"
        self._wanted: dict[CodeType, str | None] = {}
        self.functions: dict[CodeType, list[int]] = {}  # code -> [calls, order, depth]
        self.lines: dict[CodeType, set[int]] = {}
        self._line_count = 0
        self.frames: list[list[Any]] = []
        self._depth = 0
        self._previous: Any = None
        self._previous_trace: Any = None
        self._tracing_lines = False
        self._running = False

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

    def _is_project(self, code: CodeType) -> bool:
        """Whether `code` is project source, decided once per code object (both hooks ask)."""
        wanted = self._wanted.get(code, "")
        if wanted == "":
            wanted = self._wanted[code] = self._relative(code)
        return wanted is not None

    def _give_up(self, exc: Exception) -> None:
        global _broken
        _broken = _broken or f"{type(exc).__name__}: {exc}"[:300]
        self.stop()

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if _broken:
            return
        try:
            self._on_profile(frame, event, arg)
        except Exception as exc:
            self._give_up(exc)

    def _on_profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "return":
            self._depth -= 1
            return
        if event != "call":
            return
        self._depth += 1
        code = frame.f_code
        if not self._is_project(code):
            return
        seen = self.functions.get(code)
        if seen is not None:
            seen[0] += 1
        elif len(self.functions) < MAX_FUNCTIONS:
            self.functions[code] = [1, len(self.functions), self._depth]

    def _trace_call(self, frame: FrameType, event: str, _arg: Any) -> Any:
        """The global trace hook: line events only inside project functions."""
        if event != "call" or _broken:
            return None
        try:
            return self._trace_line if self._is_project(frame.f_code) else None
        except Exception as exc:
            self._give_up(exc)
            return None

    def _trace_line(self, frame: FrameType, event: str, _arg: Any) -> Any:
        if _broken:
            return None
        try:
            if event == "line" and self._line_count < MAX_LINES:
                lines = self.lines.setdefault(frame.f_code, set())
                if frame.f_lineno not in lines:
                    lines.add(frame.f_lineno)
                    self._line_count += 1
        except Exception as exc:
            self._give_up(exc)
            return None
        return self._trace_line

    def start(self) -> None:
        self._depth = 0
        self._previous = sys.getprofile()
        self._previous_trace = sys.gettrace()
        # Another tracer (coverage, a debugger) keeps its hook: the contrast then stays at
        # the function level rather than the step's own tooling being broken.
        self._tracing_lines = self._previous_trace is None and _LINES_WANTED
        if self._tracing_lines:
            sys.settrace(self._trace_call)
        sys.setprofile(self._profile)
        self._running = True

    def stop(self) -> None:
        if not self._running:  # stopped already (an internal error gave up mid-test)
            return
        self._running = False
        sys.setprofile(self._previous)
        if self._tracing_lines:
            sys.settrace(self._previous_trace)

    @property
    def traced_lines(self) -> bool:
        return self._tracing_lines

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
            function: dict[str, Any] = {
                "file": self._wanted.get(code) or "",
                "name": getattr(code, "co_qualname", code.co_name),
                "line": code.co_firstlineno,
                "calls": calls,
                "order": order,
                "depth": depth,
                "passed_by": spectrum.passed_by.get(code, 0),
            }
            lines = self.lines.get(code)
            if lines and spectrum.lines_traced:
                by_line = {line: spectrum.line_passed_by.get((code, line), 0) for line in lines}
                rarest = min(by_line.values())
                function["line_passed_by"] = rarest
                rare = sorted(line for line, n in by_line.items() if n == rarest)
                function["rare_lines"] = rare[:MAX_RARE_LINES]
            functions.append(function)
        frames = [{"file": f, "line": line, "name": name} for f, line, name in self.frames]
        return {"functions": functions, "frames": frames, "passed_tests": spectrum.passed_tests}


class Spectrum:
    """How many passing tests of the session executed each project function: the contrast
    that tells the code only a failing test runs from code every test runs."""

    def __init__(self) -> None:
        self.passed_tests = 0
        self.passed_by: dict[CodeType, int] = {}
        self.line_passed_by: dict[tuple[CodeType, int], int] = {}
        # False once a passing test ran without line tracing: its lines are unknown, so
        # no line can be said to be run by fewer passing tests than its function.
        self.lines_traced = True

    def passed(self, trace: TestTrace) -> None:
        self.passed_tests += 1
        for code in trace.functions:
            self.passed_by[code] = self.passed_by.get(code, 0) + 1
        self.lines_traced = self.lines_traced and trace.traced_lines
        for code, lines in trace.lines.items():
            for line in lines:
                key = (code, line)
                self.line_passed_by[key] = self.line_passed_by.get(key, 0) + 1
