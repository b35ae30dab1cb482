"""What the harness lacks is named, not blamed on the project (issue 32, item 6).

Every log here is a real pytest run (a subprocess over a project written to
tmp_path), in the shapes the issue measured: a collection error for a project
module its setup generates (`No module named 'humanize._version'`), a program a
test runs that the environment lacks, a time zone missing from the database, a
shared library that is not there. Each is an environment failure whose evidence
names the missing thing and whose next action says how to provide it; a
verification run showing it judges no candidate (`verdict.environment`). The
hostile shapes stay the project's: a misspelt import of its own module, a
misspelt time-zone key, a missing data file it opens.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from patchheal.failure.analysis import analyze
from patchheal.failure.classify import classify
from patchheal.models import Classification, CommandResult, FailureClass
from patchheal.verdict.environment import environmental

HUMANIZE_PYPROJECT = """\
[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "humanize"
dynamic = ["version"]

[tool.hatch.build.hooks.vcs]
version-file = "src/humanize/_version.py"
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _pytest(root: Path, env: dict[str, str] | None = None) -> CommandResult:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    environ = {**os.environ, "PYTHONPATH": str(root / "src"), **(env or {})}
    done = subprocess.run(argv, cwd=root, env=environ, capture_output=True, text=True)
    output = done.stdout + done.stderr
    return CommandResult(
        command=" ".join(argv), exit_code=done.returncode, output=output, duration_seconds=1.0
    )


def _classified(result: CommandResult, root: Path) -> Classification:
    assert result.exit_code != 0, result.output
    return classify(
        analyze(result.output), result.output, exit_code=result.exit_code, repo_root=str(root)
    )


def _humanize(root: Path, init: str, gitignore: str = "") -> Path:
    return _write(
        root,
        {
            "pyproject.toml": HUMANIZE_PYPROJECT,
            ".gitignore": gitignore,
            "src/humanize/__init__.py": init,
            "src/humanize/number.py": "def metric(x):\n    return str(x)\n",
            "tests/test_number.py": "from humanize.number import metric\n\n\n"
            "def test_metric():\n    assert metric(1) == '1'\n",
        },
    )


def test_a_generated_version_module_missing_from_the_tree_is_the_environments(
    tmp_path: Path,
) -> None:
    root = _humanize(tmp_path, "from humanize._version import __version__\n")
    result = _pytest(root)
    assert "No module named 'humanize._version'" in result.output
    got = _classified(result, root)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert any("humanize._version" in e and "pyproject.toml names" in e for e in got.evidence)
    assert 'setup = ["pip install -e ."]' in got.next_actions[0]
    # A verification run showing it judges no candidate.
    assert "humanize._version" in environmental(result, root)


def test_a_gitignored_module_or_an_unbuilt_extension_is_the_environments_too(
    tmp_path: Path,
) -> None:
    # No build config names it, but the project ignores it: a file its setup writes.
    root = _humanize(
        tmp_path / "ignored",
        "from humanize._version import __version__\n",
        gitignore="# generated\n_version.py\n",
    )
    (root / "pyproject.toml").write_text('[project]\nname = "humanize"\nversion = "1"\n')
    got = _classified(_pytest(root), root)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert any(".gitignore" in e for e in got.evidence), got.evidence
    # An extension module whose source is in the tree, not built.
    root = _humanize(tmp_path / "ext", "from humanize._speedups import fast\n")
    (root / "src/humanize/_speedups.pyx").write_text("def fast():\n    return 1\n")
    got = _classified(_pytest(root), root)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert any("_speedups.pyx" in e for e in got.evidence), got.evidence


def test_a_misspelt_import_of_the_projects_own_module_stays_a_code_bug(tmp_path: Path) -> None:
    # Hostile: the same shape (package in the tree, submodule absent) in a project that does
    # generate a version file, but nothing makes this module: the code misspells `number`.
    root = _humanize(
        tmp_path,
        "from humanize.numbr import metric\n",
        gitignore="*.pyc\nbuild/\nsrc/humanize/_version.py\n",
    )
    result = _pytest(root)
    assert "No module named 'humanize.numbr'" in result.output, result.output
    got = _classified(result, root)
    assert got.failure_class is FailureClass.CODE_BUG, got
    assert environmental(result, root) == ""


def test_a_program_a_test_runs_that_the_environment_lacks_is_named(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "src/pager.py": "import subprocess\n\n\ndef page(text):\n"
            "    subprocess.run(['zz-patchheal-pager'], input=text.encode(), check=True)\n",
            "tests/test_pager.py": "from pager import page\n\n\n"
            "def test_page():\n    page('hello')\n",
        },
    )
    result = _pytest(root)
    assert "No such file or directory: 'zz-patchheal-pager'" in result.output
    got = _classified(result, root)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert "zz-patchheal-pager" in got.evidence[0]
    assert "zz-patchheal-pager" in environmental(result, root)


def test_a_system_pager_names_its_debian_package() -> None:
    log = (
        "    self._execute_child(args, executable, preexec_fn, close_fds,\n"
        "E   FileNotFoundError: [Errno 2] No such file or directory: 'less'\n"
    )
    got = classify(analyze(log), log)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert 'packages = ["less"]' in got.next_actions[0]


def test_a_missing_data_file_the_code_opens_stays_the_projects(tmp_path: Path) -> None:
    # Hostile: `No such file or directory: 'settings'` without a program being run.
    root = _write(
        tmp_path,
        {
            "src/conf.py": "def load():\n    return open('settings').read()\n",
            "tests/test_conf.py": "from conf import load\n\n\ndef test_load():\n    load()\n",
        },
    )
    result = _pytest(root)
    assert "No such file or directory: 'settings'" in result.output
    assert _classified(result, root).failure_class is not FailureClass.ENV_MISMATCH
    assert environmental(result, root) == ""


def _zone_project(root: Path, key: str) -> Path:
    return _write(
        root,
        {
            "tests/conftest.py": f"import zoneinfo\n\nCHICAGO = zoneinfo.ZoneInfo({key!r})\n",
            "tests/test_t.py": "def test_t():\n    assert True\n",
        },
    )


def test_a_time_zone_missing_from_the_database_is_the_environments(tmp_path: Path) -> None:
    empty = tmp_path / "no-zones"
    empty.mkdir()
    root = _zone_project(tmp_path / "p", "America/Chicago")
    # The run's own database is empty, as in an image without tzdata.
    result = _pytest(root, {"PYTHONTZPATH": str(empty)})
    assert "No time zone found with key America/Chicago" in result.output
    got = _classified(result, root)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert "America/Chicago" in got.evidence[0]
    assert 'packages = ["tzdata"]' in got.next_actions[0]
    assert "time-zone database" in environmental(result, root)


def test_a_misspelt_time_zone_key_stays_the_projects(tmp_path: Path) -> None:
    root = _zone_project(tmp_path, "America/Chicgo")
    result = _pytest(root)
    assert "America/Chicgo" in result.output
    assert _classified(result, root).failure_class is not FailureClass.ENV_MISMATCH
    assert environmental(result, root) == ""


def test_a_missing_shared_library_is_named(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "tests/test_lib.py": "import ctypes\n\n\ndef test_lib():\n"
            "    ctypes.CDLL('libpatchheal-absent.so.1')\n",
        },
    )
    result = _pytest(root)
    got = _classified(result, root)
    assert got.failure_class is FailureClass.ENV_MISMATCH
    assert "libpatchheal-absent.so.1" in got.evidence[0]
    assert "packages = " in got.next_actions[0]


def test_a_bare_file_name_beside_a_mention_of_subprocess_stays_the_projects() -> None:
    # Hostile: the test's name says subprocess, but the error is the code's own open().
    log = (
        "FAILED tests/test_run.py::test_subprocess_settings\n"
        "    def load():\n>       return open('settings').read()\n"
        "E   FileNotFoundError: [Errno 2] No such file or directory: 'settings'\n"
        "src/conf.py:2: FileNotFoundError\n"
    )
    got = classify(analyze(log), log)
    assert got.failure_class is not FailureClass.ENV_MISMATCH, got
