"""A job without the setup it needs is the environment's problem, and says what to add.

Issue 27: a src/ project whose tests import it only once installed was
classified `code_bug`; every patch, the right one too, was then "not judged:
the environment failed", and the next actions never said "add setup".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchheal.failure.analysis import analyze
from patchheal.failure.classify import classify
from patchheal.models import PATCHABLE_CLASSES, FailureClass
from tests.healjobs import git

PYPROJECT = textwrap.dedent("""\
    [project]
    name = "inventory"
    version = "0.1.0"

    [build-system]
    requires = ["setuptools>=61"]
    build-backend = "setuptools.build_meta"
""")
PROJECT = {
    "pyproject.toml": PYPROJECT,
    "src/inventory/__init__.py": "def restock(level, amount):\n    return level - amount\n",
    "tests/test_stock.py": (
        "from inventory import restock\n\n\n"
        "def test_restock_adds():\n    assert restock(2, 3) == 5\n"
    ),
}
IMPORT_ERROR = (
    "ImportError while importing test module 'tests/test_stock.py'.\n"
    "Traceback:\n"
    "tests/test_stock.py:1: in <module>\n"
    "    from inventory import restock\n"
    "E   ModuleNotFoundError: No module named 'inventory'\n"
    "=========================== short test summary info ============================\n"
    "ERROR tests/test_stock.py\n"
)
_SPEC_LINE = re.compile(r"`(setup = \[.*?\])`")


def _classify(log: str, repo: Path | None = None):  # type: ignore[no-untyped-def]
    root = str(repo) if repo else None
    return classify(analyze(log, repo_root=root), log, repo_root=root)


def test_a_project_module_that_is_not_installed_is_the_environment(make_repo) -> None:  # type: ignore[no-untyped-def]
    """Invariant: a module of the project that is in the tree but not importable is never
    patched (env_mismatch, not retryable) and the next action is the setup line to write;
    a module the tree does not have stays a code bug."""
    repo = make_repo(PROJECT)
    got = _classify(IMPORT_ERROR, repo)
    assert got.failure_class is FailureClass.ENV_MISMATCH, got.evidence
    assert got.failure_class not in PATCHABLE_CLASSES
    assert not got.retryable
    assert any("src/inventory" in e for e in got.evidence)
    assert 'setup = ["pip install -e ."]' in got.next_actions[0]
    # Not in the tree: the code imports something that does not exist (a code bug).
    missing = IMPORT_ERROR.replace("'inventory'", "'inventory.ledger'")
    assert _classify(missing, repo).failure_class is FailureClass.CODE_BUG


def test_the_setup_line_follows_the_project(make_repo) -> None:  # type: ignore[no-untyped-def]
    """Invariant: the install line names the project's test extra when it has one, and a
    project without packaging metadata is told to put its source root on the path."""
    extra = PYPROJECT.replace(
        "[build-system]", '[project.optional-dependencies]\ntest = ["pytest"]\n\n[build-system]'
    )
    with_extra = _classify(IMPORT_ERROR, make_repo({**PROJECT, "pyproject.toml": extra}))
    assert """setup = ["pip install -e '.[test]'"]""" in with_extra.next_actions[0]
    bare = _classify(IMPORT_ERROR, make_repo({**PROJECT, "pyproject.toml": "[tool.x]\n"}))
    assert bare.failure_class is FailureClass.ENV_MISMATCH
    assert "PYTHONPATH=src" in bare.next_actions[0]
    assert 'pythonpath = ["src"]' in bare.next_actions[0]


@pytest.mark.parametrize(
    ("log", "fix"),
    [
        ("sh: 1: ruff: not found\n", 'setup = ["pip install ruff"]'),
        ("bash: line 1: mypy: command not found\n", 'setup = ["pip install mypy"]'),
        ("/bin/sh: 1: npm: not found\n", 'harness = "node"'),
        ("zsh: command not found: jest\n", 'setup = ["npm ci"]'),
        ("/usr/bin/python3: No module named pytest\n", 'setup = ["pip install pytest"]'),
        ("sh: 1: frobnicate: not found\n", 'setup = ["pip install frobnicate"]'),
    ],
)
def test_a_missing_tool_names_the_line_that_installs_it(log: str, fix: str) -> None:
    """Invariant: a tool the harness lacks is env_mismatch and the first next action holds the
    spec line that provides it."""
    got = _classify(log)
    assert got.failure_class is FailureClass.ENV_MISMATCH, got.evidence
    assert fix in got.next_actions[0], got.next_actions


def _project(root: Path) -> Path:
    repo = root / "inventory"
    for rel, text in PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "inventory")
    (repo / "src/inventory/__init__.py").write_text(
        "def restock(level, amount):\n    return level + amount\n"
    )
    fix = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True, check=True)
    (root / "fix.patch").write_text(fix.stdout)
    git(repo, "checkout", "-q", "--", ".")
    return repo


def _job(root: Path, repo: Path, harness: str, command: str, setup: str = "") -> Path:
    job = root / "job.toml"
    job.write_text(
        textwrap.dedent(f"""\
            [job]
            id = "inventory-setup"
            repo = "{repo}"
            harness = "{harness}"
            {setup}

            [[steps]]
            name = "unit"
            command = "{command}"

            [proposer]
            kind = "patchfiles"
            paths = ["{root / "fix.patch"}"]
        """)
    )
    return job


def _heal(job: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", "heal", str(job), *args],
        cwd=job.parent,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )


def test_a_heal_without_setup_stops_and_says_what_to_add(tmp_path: Path) -> None:
    """Invariant: a real heal of a src/ project without setup stops before any patch runs
    (not_patchable, env_mismatch, requeue no) and `heal` prints the spec line to add."""
    repo = _project(tmp_path)
    job = _job(tmp_path, repo, "local", f"{sys.executable} -m pytest -q -p no:cacheprovider tests")
    result = _heal(job, "--db", str(tmp_path / "s.sqlite3"))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "next: Install the project in the job's setup" in result.stdout, result.stdout
    assert 'setup = ["pip install -e ."]' in result.stdout
    report_md = next((tmp_path / "reports" / "inventory-setup").glob("*/report.md"))
    report = json.loads(report_md.with_name("report.json").read_text())
    assert report["status"] == "not_patchable"
    assert report["totals"]["attempts"] == 0
    step = report["steps"][0]
    assert step["classification"]["failure_class"] == "env_mismatch"
    assert 'setup = ["pip install -e ."]' in report["next_actions"][0]


@pytest.mark.docker
@pytest.mark.slow
def test_the_printed_setup_line_heals_the_job(tmp_path: Path) -> None:
    """Invariant: the setup line the next action prints, written under [job] as printed,
    makes the same job heal in the Docker harness (the fix then verifies)."""
    repo = _project(tmp_path)
    job = _job(tmp_path, repo, "python", "python -m pytest -q tests/test_stock.py")
    first = _heal(job, "--db", str(tmp_path / "s.sqlite3"))
    assert first.returncode == 1, first.stderr[-3000:]
    line = _SPEC_LINE.search(first.stdout)
    assert line is not None, first.stdout
    job = _job(tmp_path, repo, "python", "python -m pytest -q tests/test_stock.py", line[1])
    second = _heal(job, "--db", str(tmp_path / "s.sqlite3"))
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
