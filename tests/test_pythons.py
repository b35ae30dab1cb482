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
from patchheal.harness.config import HarnessDef
from patchheal.harness.definitions import load_harness
from patchheal.harness.inference import pythons
from patchheal.harness.inference.pythonsource import evidence_at, tox_versions, workflow_versions

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
        ({".python-version": "3.12.1\n"}, "3.12", "3.13"),
        (
            {
                ".python-version": "3.12\n",
                "pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.10,<3.13"\n',
            },
            "3.12",
            "3.11",
        ),
    ],
)
def test_a_python_not_offered_becomes_the_nearest_offered_within_the_range_said_so(
    make_repo: Any, python_def: HarnessDef, files: dict[str, str], asked: str, nearest: str
) -> None:
    """Issue 32: what CI wants but the harness lacks becomes the nearest offered Python that
    `requires-python` allows (3.13 is nearer 3.12 than 3.11 on a tie, but `<3.13` excludes
    it), and the sentence the report and `harness explain` show says so in one line.
    Before, such a repository was refused."""
    repo = make_repo(files)
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert pythons.of(defn) == nearest, why
    assert why.startswith(f"Python {nearest}: ")
    assert f"{asked} is not offered (offered: 3.9, 3.11, 3.13), so the nearest offered" in why
    assert why.endswith(f": {nearest}")
    assert "\n" not in why


def test_refused_only_when_no_offered_python_satisfies_requires_python(
    make_repo: Any, python_def: HarnessDef
) -> None:
    """Invariant: never a silent substitute for what the package allows. A range that
    allows none of the offered Pythons is refused in one line naming the nearest."""
    repo = make_repo({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.14"\n'})
    with pytest.raises(SpecError) as caught:
        pythons.choose(python_def, repo, "main", None)
    message = str(caught.value)
    assert "'>=3.14' allows none of the Pythons harness 'python' offers" in message
    assert "the oldest it allows is 3.14" in message
    assert 'the nearest is 3.13: set python = "3.13" in [job]' in message
    assert "\n" not in message
    # The failing CI job's own wish cannot override the package's bound either.
    with pytest.raises(SpecError, match="allows none"):
        pythons.choose(python_def, repo, "main", None, workflow_python="3.13")


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


HUMANIZE_LIKE_BENCHMARK = """name: Benchmark
on: [push, pull_request]
jobs:
  benchmarks:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Set up Python 3.14
        uses: actions/setup-python@v6
        with:
          python-version: "3.14"
          allow-prereleases: true
      - run: pip install -e ".[tests]"
      - uses: CodSpeedHQ/action@v4
        with:
          mode: simulation
          run: pytest tests/test_benchmarks.py --codspeed
"""
HUMANIZE_LIKE_TEST = """name: Test
on: [push, pull_request]
jobs:
  test:
    runs-on: ${{ matrix.os }}
    strategy:
      matrix:
        python-version: ["pypy3.10", "3.10", "3.11", "3.12", "3.13", "3.14"]
        os: [windows-latest, macos-latest, ubuntu-latest]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v6
        with:
          python-version: ${{ matrix.python-version }}
      - run: python -m pip install -U tox
      - run: tox -e py
"""
HUMANIZE_LIKE_DOCS = """name: Docs
on: [push]
jobs:
  docs:
    steps:
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - run: mkdocs build
"""
HUMANIZE_LIKE_PYPROJECT = '[project]\nname = "humanize"\nrequires-python = ">=3.10"\n'


def test_the_workflow_that_runs_the_tests_decides_not_the_benchmark(
    make_repo: Any, python_def: HarnessDef
) -> None:
    """humanize (issue 32): benchmark.yml asks for 3.14 and sorts before test.yml; it used
    to decide, and 3.14 was refused. The job that runs the tests (tox) decides: 3.11."""
    repo = make_repo(
        {
            ".github/workflows/benchmark.yml": HUMANIZE_LIKE_BENCHMARK,
            ".github/workflows/docs.yml": HUMANIZE_LIKE_DOCS,
            ".github/workflows/test.yml": HUMANIZE_LIKE_TEST,
            "pyproject.toml": HUMANIZE_LIKE_PYPROJECT,
        }
    )
    defn, why = pythons.choose(python_def, repo, "main", None, command="python -m pytest")
    assert pythons.of(defn) == "3.11", why
    assert "test.yml (job test), which runs the tests," in why
    assert "benchmark" not in why
    assert "docs.yml" not in why
    assert "(the harness's default among them)" in why


def test_a_benchmark_docs_or_lint_workflow_alone_says_nothing(
    make_repo: Any, python_def: HarnessDef
) -> None:
    """Hostile: a repository whose only workflows are a benchmark and docs, both on a
    Python the harness lacks, is neither refused nor run on 3.13: requires-python speaks."""
    repo = make_repo(
        {
            ".github/workflows/benchmark.yml": HUMANIZE_LIKE_BENCHMARK,
            ".github/workflows/docs.yml": HUMANIZE_LIKE_DOCS,
            ".github/workflows/lint.yml": HUMANIZE_LIKE_DOCS.replace("mkdocs build", "ruff ."),
            "pyproject.toml": HUMANIZE_LIKE_PYPROJECT,
        }
    )
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert pythons.of(defn) == "3.11"
    assert why == "Python 3.11: pyproject.toml's requires-python '>=3.10' allows the default 3.11"


SPLIT_CI = """name: CI
on: [push]
jobs:
  unit:
    strategy:
      matrix:
        python-version: ["3.9"]
    steps:
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python-version }}
      - run: pip install -e .[test]
      - run: python -m pytest -q tests/unit
  integration:
    steps:
      - uses: actions/setup-python@v5
        with:
          python-version: "3.13"
      - run: pip install -e .
      - run: make integration
"""


@pytest.mark.parametrize(
    ("command", "expected", "rank"),
    [
        ("make integration", "3.13", "runs the failing command"),
        ("python -m pytest -q tests/unit", "3.9", "runs the failing command"),
        ("pytest -x tests/unit/test_a.py", "3.9", "runs the tests"),
        (None, "3.9", "runs the tests"),
    ],
)
def test_the_workflow_job_that_runs_the_failing_command_decides(
    make_repo: Any, python_def: HarnessDef, command: str | None, expected: str, rank: str
) -> None:
    """The job whose steps run the failing command verbatim speaks; else the jobs that run
    a test command do (`make integration` is none)."""
    repo = make_repo({".github/workflows/ci.yml": SPLIT_CI, "setup.py": ""})
    defn, why = pythons.choose(python_def, repo, "main", None, command=command)
    assert pythons.of(defn) == expected, why
    assert rank in why


def test_a_test_job_in_a_lint_and_test_workflow_still_speaks(
    make_repo: Any, python_def: HarnessDef
) -> None:
    """Legitimate: the workflow's name says lint, but its `test` job runs the tests; its
    `lint` job (3.13) does not decide."""
    renamed = SPLIT_CI.replace("  unit:", "  test:").replace("  integration:", "  lint:")
    workflow = renamed.replace("name: CI", "name: Lint and test")
    repo = make_repo({".github/workflows/lint-and-test.yml": workflow, "setup.py": ""})
    defn, why = pythons.choose(python_def, repo, "main", None, command="make integration")
    assert pythons.of(defn) == "3.9", why
    assert "(job test), which runs the tests," in why


def test_tox_envs_narrow_the_workflow_that_runs_tox(make_repo: Any, python_def: HarnessDef) -> None:
    """CI runs `tox -e py` on a matrix; tox's envlist names the envs that exist, so a
    matrix Python tox has no env for is not what the tests run on."""
    workflow = HUMANIZE_LIKE_TEST.replace(
        '["pypy3.10", "3.10", "3.11", "3.12", "3.13", "3.14"]', '["3.9", "3.11", "3.13"]'
    )
    tox = "[tox]\nenvlist = py39, lint\n"
    repo = make_repo({".github/workflows/test.yml": workflow, "tox.ini": tox, "setup.py": ""})
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert pythons.of(defn) == "3.9", why
    assert "of which tox.ini's envlist has 3.9" in why
    # Without the workflow, tox's envlist is itself a source.
    repo = make_repo({"tox.ini": "[tox]\nenvlist = py313,docs\n"})
    assert pythons.of(pythons.choose(python_def, repo, "main", None)[0]) == "3.13"


def test_nox_sessions_name_the_python(make_repo: Any, python_def: HarnessDef) -> None:
    noxfile = (
        "import nox\n\nPYTHON_VERSIONS = ['3.9']\n\n"
        "@nox.session(python=PYTHON_VERSIONS)\ndef tests(session):\n"
        "    session.run('pytest')\n\n@nox.session(python=\"3.9\")\ndef lint(session):\n"
        "    pass\n"
    )
    repo = make_repo({"noxfile.py": noxfile})
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert pythons.of(defn) == "3.9"
    assert why == "Python 3.9: noxfile.py's sessions names 3.9"


def test_requires_python_bounds_what_the_workflow_names(
    make_repo: Any, python_def: HarnessDef
) -> None:
    """A matrix still testing 3.9 on a package that now requires >=3.10: the default is not
    named, 3.9 is outside the range, so the newest named one inside it (3.13) runs."""
    workflow = HUMANIZE_LIKE_TEST.replace(
        '["pypy3.10", "3.10", "3.11", "3.12", "3.13", "3.14"]', '["3.9", "3.13"]'
    )
    repo = make_repo(
        {".github/workflows/test.yml": workflow, "pyproject.toml": HUMANIZE_LIKE_PYPROJECT}
    )
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert pythons.of(defn) == "3.13", why
    # Legitimate: without the bound, the newest offered one the matrix names as well.
    repo = make_repo({".github/workflows/test.yml": workflow, "setup.py": ""})
    assert pythons.of(pythons.choose(python_def, repo, "main", None)[0]) == "3.13"
    # A bound the pin file breaks: the pin is out of range, so the workflow speaks.
    repo = make_repo(
        {
            ".python-version": "3.9\n",
            ".github/workflows/test.yml": HUMANIZE_LIKE_TEST,
            "pyproject.toml": HUMANIZE_LIKE_PYPROJECT,
        }
    )
    assert pythons.of(pythons.choose(python_def, repo, "main", None)[0]) == "3.11"


def test_harness_explain_prints_the_python_and_a_run_line_carrying_it(make_repo: Any) -> None:
    """`harness explain` says which Python and why, and the `harness run` it prints runs
    on it (before, explain said 3.9 and `harness run` ran 3.11)."""
    import json
    import subprocess
    import sys

    repo = make_repo({".python-version": "3.9\n", "setup.py": ""})
    argv = [sys.executable, "-m", "patchheal", "harness", "explain", "--repo", str(repo)]
    done = subprocess.run(
        [*argv, "--command", "pytest -q", "--json"], capture_output=True, text=True, check=True
    )
    choice = json.loads(done.stdout)
    assert choice["python"] == "Python 3.9: .python-version names 3.9"
    assert choice["run"] == (
        f"patchheal harness run python --python 3.9 --repo {repo} --ref HEAD -- sh -c 'pytest -q'"
    )
    text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert "run it: patchheal harness run python --python 3.9 " in text
    assert text.rstrip().endswith("-- COMMAND")


def test_a_python_version_file_named_by_setup_python_is_read(
    make_repo: Any, python_def: HarnessDef
) -> None:
    """structlog's shape: a test job whose setup-python reads `python-version-file`."""
    workflow = (
        "name: CI\non: [push]\njobs:\n  tests:\n    steps:\n"
        "      - uses: actions/setup-python@v5\n        with:\n"
        "          python-version-file: .python-version-default\n"
        "      - run: python -m pytest\n"
    )
    repo = make_repo(
        {".github/workflows/ci.yml": workflow, ".python-version-default": "3.9\n", "setup.py": ""}
    )
    defn, why = pythons.choose(python_def, repo, "main", None)
    assert pythons.of(defn) == "3.9", why
    assert "ci.yml (job tests), which runs the tests, names 3.9" in why
