"""The pytest collector's trace of a failing test: what it executed, where it raised.

Real pytest runs through the local and the Docker harness (the collector is
loaded by PYTEST_PLUGINS, as in every harness run), and the results channel
given hostile records.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results.channel import MAX_TRACED_TESTS, ResultsChannel

__all__ = ["engine", "python_def", "python_image"]

CORE = (
    "def helper(x):\n    return x * 2\n\n\n"
    "def compute(x):\n    return helper(x) + 1\n\n\n"
    "def untouched():\n    return 0\n\n\n"
    "class Box:\n    def open(self):\n        raise ValueError('stuck')\n"
)
TESTS = (
    "from pkg.core import Box, compute\n\n\n"
    "def _local_helper():\n    return 1\n\n\n"
    "def test_ok():\n    assert compute(1) == 3\n\n\n"
    "def test_wrong_value():\n    assert compute(2) + _local_helper() == 4\n\n\n"
    "def test_raises():\n    Box().open()\n"
)
PROJECT = {"pkg/__init__.py": "", "pkg/core.py": CORE, "tests/test_core.py": TESTS}


def _run_local(repo: Path, command: str = "python -m pytest -q tests", trace: bool = True) -> Any:
    result = LocalHarness().run(command, repo, timeout=120, idle_timeout=120, trace=trace)
    assert result.tests is not None, result.output
    return result.tests


def test_only_failing_tests_are_traced_with_the_project_functions_they_ran(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    tests = _run_local(make_repo(PROJECT))
    assert tests.outcomes["tests/test_core.py::test_ok"] == "passed"
    assert set(tests.traces) == {
        "tests/test_core.py::test_wrong_value",
        "tests/test_core.py::test_raises",
    }
    wrong = tests.traces["tests/test_core.py::test_wrong_value"]
    ran = [(c.file, c.name, c.line, c.calls) for c in wrong.functions]
    # In call order; the test's own helper and anything outside the project are left out.
    assert ran == [("pkg/core.py", "compute", 5, 1), ("pkg/core.py", "helper", 1, 1)]
    # Contrasted with the passing test, which ran both too.
    assert wrong.passed_tests == 1
    assert [c.passed_by for c in wrong.functions] == [1, 1]
    assert wrong.functions[1].depth == wrong.functions[0].depth + 1
    raised = tests.traces["tests/test_core.py::test_raises"]
    assert [c.name for c in raised.functions] == ["Box.open"]
    # The traceback from the test to where it raised, innermost last, project files only.
    assert [(f.file, f.name) for f in raised.frames] == [
        ("tests/test_core.py", "test_raises"),
        ("pkg/core.py", "open"),
    ]
    assert raised.frames[-1].line == 15
    # Evidence only: never written with the results a verdict is persisted with.
    assert "traces" not in tests.model_dump()


def test_only_a_run_that_asks_for_it_is_traced(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    """Verification runs are not slowed down by a trace nobody reads."""
    tests = _run_local(make_repo(PROJECT), trace=False)
    assert tests.outcomes["tests/test_core.py::test_wrong_value"] == "failed"
    assert tests.traces == {}


def test_a_trace_is_bounded_to_the_earliest_functions(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    many = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(600))
    test = "import pkg.many as m\n\n\ndef test_all():\n"
    test += "    assert sum(getattr(m, f'f{i}')() for i in range(600)) == -1\n"
    repo = make_repo({"pkg/__init__.py": "", "pkg/many.py": many, "tests/test_many.py": test})
    trace = _run_local(repo).traces["tests/test_many.py::test_all"]
    assert len(trace.functions) == 400
    assert trace.functions[0].name == "f0"
    assert trace.functions[-1].name == "f399"


def _signed(channel: ResultsChannel, body: dict[str, object]) -> str:
    payload = json.dumps({"runner": "pytest", "finished": True, **body})
    mac = hmac.new(channel.token.encode(), payload.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"payload": payload, "mac": mac})


def test_a_forged_or_oversized_trace_is_dropped_and_the_outcomes_stay() -> None:
    """The step runs in the collector's process and can write anything into the trace."""
    call = {"file": "pkg/a.py", "name": "f", "line": 1, "calls": 1, "order": 0, "depth": 1}
    traces: dict[str, object] = {
        "t::huge": {"functions": [call] * 401},
        "t::garbage": {"functions": "rm -rf /"},
        "t::negative": {"functions": [{**call, "line": -5}]},
        "t::many_lines": {"functions": [{**call, "rare_lines": list(range(31))}]},
        "t::negative_line": {"functions": [{**call, "line_passed_by": -1, "rare_lines": [-3]}]},
        "t::fine": {"functions": [call]},
    }
    traces |= {f"t::extra{i}": {"functions": [call]} for i in range(40)}
    channel = ResultsChannel()
    try:
        outcomes = {"t::huge": "failed", "t::fine": "failed", "t::ok": "passed"}
        (channel.host_dir / "pytest-1.json").write_text(
            _signed(channel, {"outcomes": outcomes, "traces": traces})
        )
        results = channel.collect()
    finally:
        channel.close()
    assert results is not None
    assert results.outcomes == outcomes
    assert results.rejected == ()
    assert "t::fine" in results.traces
    dropped = {"t::huge", "t::garbage", "t::negative", "t::many_lines", "t::negative_line"}
    assert not dropped & set(results.traces)
    assert len(results.traces) == MAX_TRACED_TESTS


@pytest.mark.docker
@pytest.mark.slow
def test_the_docker_harness_brings_back_the_trace_of_a_failing_test(
    python_image: str,
    python_def: HarnessDef,
    make_repo: Callable[[dict[str, str]], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    repo = make_repo(PROJECT)
    harness = DockerHarness(python_def, job_id=f"t-trace-{os.getpid()}")
    try:
        result = harness.run(
            "python -m pytest -q tests", repo, timeout=120, idle_timeout=120, trace=True
        )
    finally:
        harness.close()
    assert result.harness == "docker:python"
    assert result.tests is not None, result.output
    traces = result.tests.traces
    # Paths are relative to the project root inside the container, as on the host.
    assert [c.name for c in traces["tests/test_core.py::test_wrong_value"].functions] == [
        "compute",
        "helper",
    ]
    assert traces["tests/test_core.py::test_raises"].frames[-1].file == "pkg/core.py"
    assert "tests/test_core.py::test_ok" not in traces


# Every test constructs a Config and runs `total`; only the failing one takes the
# `legacy` branch, the other lines are shared by every test.
SHARED = (
    "class Config:\n"
    "    def __init__(self, legacy=False):\n"
    "        self.rate = 2\n"
    "        if legacy:\n"
    "            self.rate = 3  # line 5: only the failing test runs it\n"
    "\n\n"
    "def total(config, x):\n"
    "    return x * config.rate\n"
)
SHARED_TESTS = (
    "from pkg.shared import Config, total\n\n\n"
    "def test_plain():\n    assert total(Config(), 1) == 2\n\n\n"
    "def test_plain_again():\n    assert total(Config(), 2) == 4\n\n\n"
    "def test_legacy():\n    assert total(Config(legacy=True), 1) == 2\n"
)


def test_the_contrast_reaches_the_line_only_the_failing_test_ran(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    """Function-level contrast cannot tell `Config.__init__` from `total`: every passing test
    ran both. Its lines can: the branch only the failing test took was run by none."""
    repo = make_repo(
        {"pkg/__init__.py": "", "pkg/shared.py": SHARED, "tests/test_shared.py": SHARED_TESTS}
    )
    trace = _run_local(repo).traces["tests/test_shared.py::test_legacy"]
    assert trace.passed_tests == 2
    by_name = {c.name: c for c in trace.functions}
    assert {n: c.passed_by for n, c in by_name.items()} == {"Config.__init__": 2, "total": 2}
    assert by_name["Config.__init__"].line_passed_by == 0
    assert by_name["Config.__init__"].rare_lines == (5,)
    assert by_name["total"].line_passed_by == 2  # its one line is shared by every test
    assert by_name["total"].rare_lines == (9,)


def test_a_tracer_already_installed_is_left_alone_and_the_contrast_stays_per_function(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    """Coverage or a debugger owns `sys.settrace`: the trace must not take it over."""
    conftest = (
        "import sys\n\n\ndef _tracer(frame, event, arg):\n    return None\n\n\n"
        "sys.settrace(_tracer)\n\n\n"
        "def test_tracer_still_installed():\n    assert sys.gettrace() is _tracer\n"
    )
    repo = make_repo(
        {
            "pkg/__init__.py": "",
            "pkg/shared.py": SHARED,
            "tests/test_shared.py": SHARED_TESTS,
            "tests/test_tracer.py": conftest,
        }
    )
    tests = _run_local(repo)
    assert tests.outcomes["tests/test_tracer.py::test_tracer_still_installed"] == "passed"
    trace = tests.traces["tests/test_shared.py::test_legacy"]
    assert {c.name: c.passed_by for c in trace.functions} == {"Config.__init__": 2, "total": 2}
    assert all(c.line_passed_by is None and c.rare_lines == () for c in trace.functions)


def test_a_step_can_keep_the_contrast_per_function(
    make_repo: Callable[[dict[str, str]], Path],
) -> None:
    """PATCHHEAL_TRACE_LINES=0 in the step's environment: calls are traced, lines are not."""
    repo = make_repo(
        {"pkg/__init__.py": "", "pkg/shared.py": SHARED, "tests/test_shared.py": SHARED_TESTS}
    )
    tests = _run_local(repo, "PATCHHEAL_TRACE_LINES=0 python -m pytest -q tests")
    trace = tests.traces["tests/test_shared.py::test_legacy"]
    assert {c.name: c.passed_by for c in trace.functions} == {"Config.__init__": 2, "total": 2}
    assert all(c.line_passed_by is None and c.rare_lines == () for c in trace.functions)
