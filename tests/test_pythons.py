"""Which Python a job runs on: the job's word, the failing CI job's, then the repository's.

The repository files below are written in the shapes real projects use (a
`matrix.include` of `{python: '3.12'}` entries with a `pypy-3.10` and a
`'3.x'` job, as pallets/click's tests workflow; a tox envlist mixing `py27`,
`pypy3` and non-Python envs, as python-attrs/attrs' tox.ini; a setup.py with
`python_requires` and a classifier tuple, as psf/requests'), plus this
repository's own pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchheal.config import repo_defaults
from patchheal.errors import SpecError
from patchheal.harness import pythons
from patchheal.harness.config import HarnessDef
from patchheal.harness.definitions import load_harness
from patchheal.harness.pythonsource import evidence_at, tox_versions, workflow_versions

CLICK_LIKE_WORKFLOW = """name: Tests
on: [push]
jobs:
  tests:
    name: ${{ matrix.name || matrix.python }}
    strategy:
      fail-fast: false
      matrix:
        include:
          - {python: '3.12'}
          - {name: Windows, python: '3.12', os: windows-latest}
          - {python: '3.11'}
          - {python: '3.10'}
          - {python: '3.9'}
          - {python: '3.8'}
          - {name: PyPy, python: 'pypy-3.10', tox: pypy310}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - run: pip install tox
      - run: tox run -e py
  typing:
    steps:
      - uses: actions/setup-python@v5
        with:
          python-version: '3.x'
      - run: tox run -e typing
"""
ATTRS_LIKE_TOX = """[pytest]
addopts = -ra

[tox]
envlist = typing,lint,py27,py35,py36,py37,py38,pypy,pypy3,manifest,docs,coverage-report
isolated_build = True

[testenv]
commands = python -m pytest {posargs}
"""
REQUESTS_LIKE_SETUP = """from setuptools import setup
setup(
    name="oldpkg",
    python_requires=">=2.7, !=3.0.*, !=3.1.*, !=3.2.*, !=3.3.*",
    classifiers=(
        'Programming Language :: Python :: 2.7',
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.6',
        'Programming Language :: Python :: 3.7',
        'Programming Language :: Python :: Implementation :: PyPy',
    ),
)
"""


@pytest.fixture
def python_def() -> HarnessDef:
    return load_harness("python")


def test_the_bundled_python_harness_offers_bullseye_bookworm_and_trixie(
    python_def: HarnessDef,
) -> None:
    assert python_def.pythons == {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
    assert pythons.default(python_def) == "3.11"


def test_workflow_and_tox_versions_read_real_shapes() -> None:
    assert workflow_versions(CLICK_LIKE_WORKFLOW) == [
        "3.12",
        "3.11",
        "3.10",
        "3.9",
        "3.8",
        "pypy-3.10",
        "3.x",
    ]
    assert tox_versions(ATTRS_LIKE_TOX) == ["3.5", "3.6", "3.7", "3.8"]
    # YAML reads an unquoted 3.10 as the float 3.1.
    assert workflow_versions(
        "jobs:\n  t:\n    strategy:\n      matrix:\n        python-version: [3.9, 3.10]\n"
    ) == ["3.9", "3.10"]


def test_a_matrix_naming_the_default_keeps_it(make_repo: Any, python_def: HarnessDef) -> None:
    repo = make_repo({".github/workflows/tests.yaml": CLICK_LIKE_WORKFLOW, "setup.py": ""})
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert defn.image.suite == "bookworm"
    assert "Python 3.11" in why
    assert "tests.yaml" in why


def test_a_python_version_file_pins_the_python(make_repo: Any, python_def: HarnessDef) -> None:
    """Invariant: `.python-version` (pyenv's pin, patch level allowed) outranks the CI
    matrix and the package's claims."""
    repo = make_repo(
        {
            ".python-version": "3.9.18\n",
            ".github/workflows/tests.yaml": CLICK_LIKE_WORKFLOW,
            "pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.9"\n',
        }
    )
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert defn.image.suite == "bullseye"
    assert why.startswith("Python 3.9: .python-version")


def test_the_failing_ci_jobs_python_outranks_the_repository(
    make_repo: Any, python_def: HarnessDef
) -> None:
    repo = make_repo({".python-version": "3.9\n"})
    defn, why = pythons.choose(python_def, repo, "main", None, workflow_python="3.13")
    assert defn.image.suite == "trixie"
    assert "failing CI job" in why
    # ... and the job's own word outranks both.
    defn, why = pythons.choose(python_def, repo, "main", "3.11", workflow_python="3.13")
    assert defn.image.suite == "bookworm"
    assert "the job names python" in why


def test_requires_python_keeps_the_default_or_takes_the_newest_it_allows(
    make_repo: Any, python_def: HarnessDef
) -> None:
    own = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    repo = make_repo({"pyproject.toml": own})  # patchheal's own: >=3.11
    assert pythons.choose(python_def, repo, "main", None)[0].image.suite == "bookworm"
    repo = make_repo({"setup.cfg": "[options]\npython_requires = >=3.6, <3.10\n"})
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert defn.image.suite == "bullseye", why
    repo = make_repo({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.12"\n'})
    assert pythons.choose(python_def, repo, "main", None)[0].image.suite == "trixie"


@pytest.mark.parametrize(
    ("files", "asked", "nearest"),
    [
        ({"tox.ini": ATTRS_LIKE_TOX}, "3.8", "3.9"),
        ({"setup.py": REQUESTS_LIKE_SETUP}, "3.7", "3.9"),
        ({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.14"\n'}, "3.14", "3.13"),
        ({".python-version": "3.12.1\n"}, "3.12", "3.13"),
    ],
)
def test_a_python_not_offered_is_refused_naming_the_nearest(
    make_repo: Any, python_def: HarnessDef, files: dict[str, str], asked: str, nearest: str
) -> None:
    """Invariant: never a silent substitute — a repository whose Pythons are all outside
    the offered ones gets a one-line error naming the Python it asked for and the nearest."""
    repo = make_repo(files)
    with pytest.raises(SpecError) as caught:
        pythons.choose(python_def, repo, "main", None)
    message = str(caught.value)
    assert f"Python {asked}," in message
    assert f"the nearest is {nearest}" in message
    assert "\n" not in message


def test_the_job_may_name_only_an_offered_python(make_repo: Any, python_def: HarnessDef) -> None:
    repo = make_repo({"a.py": ""})
    with pytest.raises(SpecError, match=r"3\.10.*offered: 3\.9, 3\.11, 3\.13.*nearest is 3\.11"):
        pythons.choose(python_def, repo, "main", "3.10")
    with pytest.raises(SpecError, match="not a version"):
        pythons.choose(python_def, repo, "main", "latest")
    generic = load_harness("generic")
    with pytest.raises(SpecError, match="offers one Python"):
        pythons.choose(generic, repo, "main", "3.9")
    assert pythons.choose(generic, repo, "main", None) == (generic, "")


def test_nothing_said_means_the_default(make_repo: Any, python_def: HarnessDef) -> None:
    repo = make_repo({"requirements.txt": "attrs\n"})
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert defn == python_def
    assert "default" in why


def test_tool_patchheal_python_is_the_jobs(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.patchheal]\npython = "3.9"\n')
    assert repo_defaults(tmp_path)["job"] == {"python": "3.9"}


def test_evidence_is_read_at_the_base_commit(make_repo: Any) -> None:
    """The working tree's edits say nothing; the failing commit's files do."""
    repo = make_repo({".python-version": "3.9\n"})
    (repo / ".python-version").write_text("3.13\n")
    assert [e.versions for e in evidence_at(repo, "main")] == [["3.9"]]
