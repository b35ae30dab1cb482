"""The impossible twin made in memory at import (collectors/patchheal_twin.py), real runs.

A real project is run by real pytest (plain, `-s`, `python -m pytest`) and
unittest with the harness's results channel: once as any run, once as the
twin (its blob carrying the changes `oracle/` planned), once more as any run.
The twin's protected test fails, the others do not; the test file's bytes,
size, times and inode are the same after every run; the run after the twin
passes again (no twin's code was cached to disk); the blob is gone from the
test's environment and looks alike in every run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any

import pytest

from patchheal.harness.results import twinchannel
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import COLLECTORS
from patchheal.loop.twins import told
from patchheal.models import TestResults
from patchheal.oracle.mutate import Target, twin_file
from tests.collector_matrix import PYTEST_VERSIONS, venv_with_pytest

CALC = "def add(a, b):\n    return a + b\n"
MATRIX_CACHE = Path(tempfile.gettempdir()) / "patchheal-collector-matrix"
PYTEST_TESTS = (
    "import os\n"
    "from calc import add\n\n\n"
    "def test_add():\n"
    "    assert add(2, 3) == 5\n\n\n"
    "def test_environment():\n"
    "    assert not [k for k in os.environ if k.startswith('PATCHHEAL_TWIN')]\n"
)
UNITTEST_TESTS = (
    "import os\nimport unittest\n\nfrom calc import add\n\n\n"
    "class CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_environment(self):\n"
    "        self.assertFalse([k for k in os.environ if k.startswith('PATCHHEAL_TWIN')])\n"
)
RUNNERS = {
    "pytest": [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_calc.py",
    ],
    "pytest-s": [sys.executable, "-m", "pytest", "-s", "-q", "tests/test_calc.py"],
    "python-m-pytest": [sys.executable, "-m", "pytest", "-q", "tests/test_calc.py"],
    "unittest": [sys.executable, "-m", "unittest", "-v", "test_calc"],
}


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, COLLECTORS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _collector() -> ModuleType:
    """patchheal_twin as the step imports it (the collectors' folder is not on this
    process's path: the module it imports by name is given for the time of its import)."""
    sys.modules["patchheal_twin_kept"] = _load("patchheal_twin_kept")
    try:
        return _load("patchheal_twin")
    finally:
        del sys.modules["patchheal_twin_kept"]


def test_the_blob_has_the_same_length_in_every_run_and_decodes_as_the_collector_reads_it() -> None:
    """A twin's blob and an empty one: same length, different every time, and the
    collector reads back exactly the payload; one that does not fit is refused."""
    collector = _collector()
    files = [{"rel": "tests/test_calc.py", "edits": [[1, 0, 1, 1, "x"]], "tail": "t" * 500}]
    with twinchannel.wanting(["tests/test_calc.py"]):
        with twinchannel.carrying(twinchannel.payload(files)):
            twin = twinchannel.blob()
        other = twinchannel.blob()
    empty = twinchannel.blob()
    assert len(twin) == len(empty) == len(other)
    assert len({twin, empty, other}) == 3
    # The files whose evidence is wanted, and whose code reads are watched: the same in the
    # twin and the runs beside it; every test file's in a run that names none.
    named = {"evidence": ["tests/test_calc.py"], "reads": "named"}
    assert collector.decode(twin) == {"files": files, **named}
    assert collector.decode(other) == {"files": [], **named}
    assert collector.decode(empty) == {"files": [], "evidence": [], "reads": "all"}
    with twinchannel.no_twin():
        regression = twinchannel.blob()
    assert collector.decode(regression) == {"files": [], "evidence": [], "reads": "none"}
    with pytest.raises(twinchannel.TooLarge):
        twinchannel.payload([{"tail": "x" * twinchannel.SIZE}])


def _tree(tmp_path: Path, runner: str) -> tuple[Path, str, str]:
    unittest = runner == "unittest"
    rel = "test_calc.py" if unittest else "tests/test_calc.py"
    tree = tmp_path / runner
    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
    (tree / "calc.py").write_text(CALC)
    (tree / rel).write_text(UNITTEST_TESTS if unittest else PYTEST_TESTS)
    (tree / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return tree, rel, "unittest" if unittest else "pytest"


# As in a verification's runs of the failing step: its test file's evidence is wanted.
WANTED = ("tests/test_calc.py", "test_calc.py")


def _payload(files: list[dict[str, object]]) -> bytes:
    with twinchannel.wanting(WANTED):
        return twinchannel.payload(files)


def _run(tree: Path, runner: str | list[str], payload: bytes | None) -> TestResults:
    channel = ResultsChannel()
    try:
        base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHHEAL_")}
        base.pop("PYTHONPATH", None)
        with twinchannel.wanting(WANTED), twinchannel.carrying(payload or b""):
            env = channel.environment(
                base, results_dir=str(channel.host_dir), collectors=str(COLLECTORS)
            )
        command = RUNNERS[runner] if isinstance(runner, str) else runner
        subprocess.run(command, cwd=tree, env=env, capture_output=True, timeout=120)
        tests = channel.collect(tree)
        assert tests is not None
        return tests
    finally:
        channel.close()


def _stat(path: Path) -> tuple[bytes, int, int, int, int]:
    st = path.stat()
    return path.read_bytes(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


@pytest.mark.slow
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_the_twin_is_made_in_memory_and_no_file_tells_it_apart(tmp_path: Path, runner: str) -> None:
    tree, rel, style = _tree(tmp_path, runner)
    content = (tree / rel).read_bytes()
    classes = ("CalcTest",) if style == "unittest" else ()
    twin = twin_file(content.decode(), [Target("t", classes, "test_add")], Random(7))
    assert not isinstance(twin, str)
    assert twin.mutations
    payload = _payload([told(rel, content, twin)])

    before = _stat(tree / rel)
    first = _run(tree, runner, None)
    in_twin = _run(tree, runner, payload)
    after = _run(tree, runner, None)

    add = [t for t in first.outcomes if t.endswith("test_add")]
    assert len(add) == 1, first.outcomes
    assert first.outcomes[add[0]] == "passed"
    assert in_twin.outcomes[add[0]] == "failed", in_twin.outcomes
    assert sorted(in_twin.outcomes) == sorted(first.outcomes)  # no test added
    assert after.outcomes[add[0]] == "passed"  # no twin's code was cached to disk
    for tests in (first, in_twin, after):  # the blob never reached the test's environment
        env_test = [t for t in tests.outcomes if t.endswith("test_environment")]
        assert env_test
        assert tests.outcomes[env_test[0]] == "passed", tests.outcomes
    assert _stat(tree / rel) == before  # bytes, size, mtime, ctime, inode


def _plan(files: list[dict[str, object]]) -> Any:
    """The twin's plan as the monitor's hook holds it (patchheal_twin_plan.make_plan, run
    with patchheal_twin_kept's code beside it), with this process's path resolver."""
    import hashlib

    namespace: dict[str, Any] = {"__name__": "patchheal_twin_plan"}
    for name in ("patchheal_twin_kept", "patchheal_twin_plan"):
        path = COLLECTORS / f"{name}.py"
        exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["make_plan"](
        files, os.path.realpath, hashlib.sha256, namespace["keep_originals"]
    )


def test_a_file_that_is_not_the_planned_one_is_left_as_it_is(tmp_path: Path) -> None:
    """The plan changes a module only when its bytes hash as planned and its twin hashes
    as the planner's: a file the step changed, or another file whose path ends alike, is
    compiled as it is; outside the twin (no files) nothing is changed."""
    content = PYTEST_TESTS.encode()
    twin = twin_file(PYTEST_TESTS, [Target("t", (), "test_add")], Random(3))
    assert not isinstance(twin, str)
    planned = json.loads(json.dumps(told("tests/test_calc.py", content, twin)))
    made = _plan([planned])
    path = str(tmp_path / "tests" / "test_calc.py")
    found = made(path, content)
    assert found is not None
    assert found[0].decode() == twin.source
    assert made(path, content + b"\n") is None
    assert made(str(tmp_path / "other.py"), content) is None
    assert _plan([])(path, content) is None


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_between_two_runs_the_twin_shows_a_test_that_fails_as_it_is(
    tmp_path: Path, runner: str
) -> None:
    """A twin placed between two runs runs the changed assertion as it is, after the
    impossible one (a plain assert, or `self.assertEqual`): pytest's assertion-pass hook or
    the unittest helper shows the monitor it passed (a real fix) or not (the bug is still
    there, or a test that fails every other run failed here), and `still_failing` says
    which."""
    from patchheal.verdict.twin import still_failing

    tree, rel, style = _tree(tmp_path, runner)
    content = (tree / rel).read_bytes()
    classes = ("CalcTest",) if style == "unittest" else ()
    twin = twin_file(content.decode(), [Target("t", classes, "test_add")], Random(7))
    assert not isinstance(twin, str)
    line, kind = twin.mutations[0].line, twin.mutations[0].as_is
    assert kind == runner
    payload = _payload([told(rel, content, twin, [line])])
    test = "test_calc.CalcTest.test_add" if style == "unittest" else f"{rel}::test_add"
    fixed = _run(tree, runner, payload)
    assert fixed.outcomes[test] == "failed"
    assert still_failing(fixed, {test: (rel, line, kind)}) == ""
    (tree / "calc.py").write_text(CALC.replace("a + b", "a - b"))
    buggy = _run(tree, runner, payload)
    assert buggy.outcomes[test] == "failed"
    assert f"at line {line}" in still_failing(buggy, {test: (rel, line, kind)})


def test_the_assert_run_as_it_is_evaluates_its_shared_operand_once(tmp_path: Path) -> None:
    """The impossible assert and the kept one share the operand a call computes: it runs
    once, as in any run (a call with side effects is not repeated); the impossible one
    fails for an honest result, compared or negated, and comes first; a value that holds
    only on its first comparison or truth test holds against it, and the test passes."""
    text = (
        "calls = []\n\n\n"
        "class Once:\n"
        "    used = 0\n\n"
        "    def __eq__(self, other):\n"
        "        self.used += 1\n"
        "        return self.used == 1\n\n"
        "    def __bool__(self):\n"
        "        self.used += 1\n"
        "        return self.used == 1\n\n\n"
        "def f(value=5):\n"
        "    calls.append(1)\n"
        "    return value\n\n\n"
        "def test_compared():\n"
        "    assert f() == 5\n\n\n"
        "def test_negated():\n"
        "    assert f()\n\n\n"
        "def test_compared_once():\n"
        "    assert f(Once()) == 5\n"
        "    raise RuntimeError('never reached')\n"
    )
    names = ("test_compared", "test_negated", "test_compared_once")
    twin = twin_file(text, [Target(name, (), name) for name in names], Random(11))
    assert not isinstance(twin, str)
    lines = [m.line for m in twin.mutations]
    found = _plan([told("t.py", text.encode(), twin, lines)])(str(tmp_path / "t.py"), text.encode())
    assert found is not None
    import ast

    for function in found[1].body:
        if isinstance(function, ast.FunctionDef) and function.name.startswith("test_"):
            tried = [s for s in function.body if isinstance(s, ast.Try)]
            asserts = [s for s in function.body if isinstance(s, ast.Assert)]
            assert (len(tried), len(asserts)) == (1, 1), function.name
            if tried:  # the impossible assert, alone in the try, before the one as it is
                assert isinstance(tried[0].body[0], ast.Assert), function.name
    module: dict[str, object] = {}
    exec(compile(found[1], "t.py", "exec"), module)
    for name in ("test_compared", "test_negated"):
        before = len(module["calls"])  # type: ignore[arg-type]
        with pytest.raises(AssertionError):
            module[name]()  # type: ignore[operator]
        assert len(module["calls"]) == before + 1  # type: ignore[arg-type]
    module["test_compared_once"]()  # type: ignore[operator]


@pytest.mark.slow
@pytest.mark.parametrize("version", PYTEST_VERSIONS)
def test_the_twin_is_made_in_memory_by_every_pytest_of_the_matrix(
    tmp_path: Path, version: str
) -> None:
    """pytest 4.6 to 8 (this machine's is 9, above): the twin's test fails, the file is
    untouched, and the run after the twin compiles the file as it is again."""
    # pytest < 6 cannot rewrite asserts on Python >= 3.10: those on 3.9, as in the matrix.
    python = sys.executable if version >= "6" else _python_3_9()
    if python is None:
        pytest.skip("no Python 3.9 on this machine")
    venv = venv_with_pytest(MATRIX_CACHE, python, version)
    command = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "tests/test_calc.py"]
    tree, rel, _style = _tree(tmp_path, "pytest")
    content = (tree / rel).read_bytes()
    twin = twin_file(content.decode(), [Target("t", (), "test_add")], Random(5))
    assert not isinstance(twin, str)
    payload = _payload([told(rel, content, twin, [twin.mutations[0].line])])
    before = _stat(tree / rel)
    test = "tests/test_calc.py::test_add"
    assert _run(tree, command, None).outcomes[test] == "passed"
    assert _run(tree, command, payload).outcomes[test] == "failed"
    assert _run(tree, command, None).outcomes[test] == "passed"
    assert _stat(tree / rel) == before


def _python_3_9() -> str | None:
    versions = Path(sys.executable).resolve().parents[2]
    found = sorted(versions.glob("3.9.*/bin/python3"))
    return str(found[0]) if found else shutil.which("python3.9")


CHILD_TEST = (
    "import subprocess\nimport sys\n\n\n"
    "def test_a_child_imports_the_test_module():\n"
    "    code = \"import sys; sys.path[:0] = ['tests', '.']; import test_calc; \"\n"
    '    code += "test_calc.test_add()"\n'
    "    assert subprocess.run([sys.executable, '-c', code]).returncode == 0\n"
)


@pytest.mark.slow
def test_a_child_process_imports_the_twin_too(tmp_path: Path) -> None:
    """A Python child the step's process starts with the inherited environment (as
    pytest-xdist starts its workers) compiles the protected module from its twin too:
    the blob is in the C-level environment it inherits, not in the parent's os.environ."""
    tree, rel, _style = _tree(tmp_path, "pytest")
    (tree / "tests" / "test_child.py").write_text(CHILD_TEST)
    content = (tree / rel).read_bytes()
    twin = twin_file(content.decode(), [Target("t", (), "test_add")], Random(9))
    assert not isinstance(twin, str)
    payload = _payload([told(rel, content, twin)])
    command = [sys.executable, "-m", "pytest", "-q", "tests/test_child.py"]
    child = "tests/test_child.py::test_a_child_imports_the_test_module"
    assert _run(tree, command, None).outcomes[child] == "passed"
    assert _run(tree, command, payload).outcomes[child] == "failed"
    assert _run(tree, command, None).outcomes[child] == "passed"
