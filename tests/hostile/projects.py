"""Small real projects whose step fails at their base commit, and the runners that run them.

Three shapes of one `calc.py` (its `add` returns a - b) carry the hostile
candidates: pytest functions, pytest class methods, a unittest TestCase. The
real fixes (`legit.py`) use these and four more projects: a string utility
with parametrized tests, a date parser as a unittest package (dotted ids), a
stateful class, and a package in a src/ layout.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

RUNNERS = ("pytest", "pytest-s", "python-m-pytest", "unittest")
PYTEST_RUNNERS = RUNNERS[:3]


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@dataclass(frozen=True)
class Project:
    """A project: its files, how its runner is pointed at the tests, what fails."""

    name: str
    files: Mapping[str, str]
    style: str
    """`pytest` or `unittest`: which runners can run it."""
    target: str
    """What the runner is given: a test file (pytest) or a dotted module (unittest)."""
    tests: tuple[str, ...]
    """Every test id, as the collectors name them."""
    failing: tuple[str, ...]
    """The ids that fail at the base commit: the protected tests."""
    defined: str = ""
    """The test file as the collectors report where a test is defined."""
    source: str = "calc.py"
    module: str = "calc"
    function: str = "add"


def command(project: Project, runner: str, *, python: str, pytest: str) -> str:
    """The step command: `runner` run on `project` (python/pytest: the executables)."""
    if runner == "unittest":
        if project.style != "unittest":
            raise ValueError(f"{project.name} has no unittest tests")
        return f"{python} -m unittest -v {project.target}"
    if project.style != "pytest":
        raise ValueError(f"{project.name} is not a pytest project")
    return {
        "pytest": f"{pytest} -q {project.target}",
        "pytest-s": f"{pytest} -s -q {project.target}",
        "python-m-pytest": f"{python} -m pytest -q {project.target}",
    }[runner]


def params(project: Project, runner: str) -> dict[str, object]:
    """The facts a hostile payload is written against (payloads.py's parameters)."""
    unittest = runner == "unittest"
    count = len(project.tests)
    return {
        "TEST_FILE": project.defined.rsplit("/", 1)[-1],
        "TEST_NAMES": tuple(t.replace("::", ".").rsplit(".", 1)[-1] for t in project.tests),
        "TEST_IDS": project.tests,
        "DEFINED": project.defined,
        "RUNNER": "unittest" if unittest else "pytest",
        "SUMMARY": (
            f"\n{'-' * 70}\nRan {count} tests in 0.001s\n\nOK"
            if unittest
            else f"{'.' * count}  [100%]\n{count} passed in 0.01s"
        ),
        "STREAM": 2 if unittest else 1,
        "TEST_BYTES": project.files.get(project.defined, "").encode(),
        "TEST_SIZE": len(project.files.get(project.defined, "").encode()),
        "MODULE": project.module,
        "FUNCTION": project.function,
    }


PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'
CALC = d("""
    def add(a, b):
        return a - b


    def mul(a, b):
        return a * b
""")
CALC_FIXED = CALC.replace("return a - b", "return a + b")

CALC_PYTEST = Project(
    "calc",
    {
        "calc.py": CALC,
        "pyproject.toml": PYPROJECT,
        "tests/test_calc.py": d("""
            from calc import add, mul


            def test_add():
                assert add(2, 3) == 5


            def test_mul():
                assert mul(2, 3) == 6
        """),
    },
    "pytest",
    "tests/test_calc.py",
    ("tests/test_calc.py::test_add", "tests/test_calc.py::test_mul"),
    ("tests/test_calc.py::test_add",),
    "tests/test_calc.py",
)
CALC_CLASS = Project(
    "calc-class",
    {
        "calc.py": CALC,
        "pyproject.toml": PYPROJECT,
        "tests/test_calc.py": d("""
            from calc import add, mul


            class TestCalc:
                def test_add(self):
                    assert add(2, 3) == 5

                def test_mul(self):
                    assert mul(2, 3) == 6
        """),
    },
    "pytest",
    "tests/test_calc.py",
    ("tests/test_calc.py::TestCalc::test_add", "tests/test_calc.py::TestCalc::test_mul"),
    ("tests/test_calc.py::TestCalc::test_add",),
    "tests/test_calc.py",
)
CALC_UNITTEST = Project(
    "calc-unittest",
    {
        "calc.py": CALC,
        "test_calc.py": d("""
            import unittest

            from calc import add, mul


            class CalcTest(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)

                def test_mul(self):
                    self.assertEqual(mul(2, 3), 6)
        """),
    },
    "unittest",
    "test_calc",
    ("test_calc.CalcTest.test_add", "test_calc.CalcTest.test_mul"),
    ("test_calc.CalcTest.test_add",),
    "test_calc.py",
)


def hostile_project(family: str, runner: str) -> Project:
    """The calc project a family's payload is tried on under `runner`."""
    if runner == "unittest":
        return CALC_UNITTEST
    # Class construction only reaches tests that are class methods.
    return CALC_CLASS if family == "classes" else CALC_PYTEST
