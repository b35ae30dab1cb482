"""The collectors never change an outcome, on every pytest version and Python they support.

Each cell runs a clean project with every kind of outcome through a real
pytest from PyPI (a venv per version, cached under the temp dir), once plainly
and once with the harness's results channel: the exit codes, pytest's own
verbose lines, and the outcomes by id (pytest's JUnit XML without the
collectors against the collector's signed record with them) must be
identical. The same for `python -m unittest` and the unittest collector.
`PATCHHEAL_COLLECTOR_MATRIX=full` runs every pytest version on every Python
found (the table in docs/verdict.md, "Collector compatibility").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.collector_matrix import (
    EXPECTED_PYTEST,
    PYTEST_VERSIONS,
    Cell,
    pytest_cell,
    unittest_cell,
    venv_with_pytest,
)

pytestmark = pytest.mark.slow

CACHE = Path(tempfile.gettempdir()) / "patchheal-collector-matrix"
# pytest 4.6 does not start on Python >= 3.12 (measured: exit 1, with or without collectors).
_RUNS_ON = {"4.6.11": ((3, 0), (3, 11))}


def _python(minor: int) -> str | None:
    """An interpreter 3.`minor` on this machine that runs: this one, one beside it under
    pyenv, or one on PATH (a pyenv shim on PATH may not run without pyenv's setup)."""
    if sys.version_info[:2] == (3, minor):
        return sys.executable
    versions = Path(sys.executable).resolve().parents[2]
    found = [str(p) for p in sorted(versions.glob(f"3.{minor}.*/bin/python3"))]
    found += filter(None, [shutil.which(f"python3.{minor}")])
    for candidate in found:
        done = subprocess.run([candidate, "-c", "import venv"], capture_output=True, check=False)
        if done.returncode == 0:
            return candidate
    return None


def _runs(version: str, minor: int) -> bool:
    low, high = _RUNS_ON.get(version, ((3, 0), (3, 99)))
    return low <= (3, minor) <= high


_FULL = os.environ.get("PATCHHEAL_COLLECTOR_MATRIX") == "full"
# By default: every version on the harness's Python (3.11), the old ones also where they
# rewrite assertions (3.9), the newest on the newest Python; `full`: everything found.
_DEFAULT = [(11, v) for v in PYTEST_VERSIONS] + [(9, "4.6.11"), (9, "5.4.3"), (13, "8.4.2")]
_CELLS = [
    (minor, version)
    for minor, version in (
        [(m, v) for m in (9, 10, 11, 12, 13) for v in PYTEST_VERSIONS] if _FULL else _DEFAULT
    )
    if _runs(version, minor)
]


def _explain(cell: Cell) -> str:
    recorded = cell.recorded.outcomes if cell.recorded else None
    differ = {
        t: (cell.reference.get(t), (recorded or {}).get(t))
        for t in sorted(set(cell.reference) | set(recorded or {}))
        if cell.reference.get(t) != (recorded or {}).get(t)
    }
    return (
        f"{cell.runner} on Python {cell.python}: exit {cell.exit_plain} plain, "
        f"{cell.exit_collected} with the collectors; collector errors "
        f"{cell.recorded.collector_errors if cell.recorded else 'no record'}; "
        f"by id (pytest's, the collector's): {differ}; verbose lines equal: "
        f"{cell.verbose_plain == cell.verbose_collected}"
    )


@pytest.mark.parametrize("trace", [False, True], ids=["verify", "reproduce-traced"])
@pytest.mark.parametrize(
    ("minor", "version"), _CELLS, ids=[f"py3.{m}-pytest{v}" for m, v in _CELLS]
)
def test_pytest_collector_changes_no_outcome(
    minor: int, version: str, trace: bool, tmp_path: Path
) -> None:
    """On a clean project, the pytest collector (traced as at reproduction, or not) leaves
    every outcome and the exit code as pytest gives them, and records exactly those."""
    python = _python(minor)
    if python is None:
        pytest.skip(f"no Python 3.{minor} on this machine")
    venv = venv_with_pytest(CACHE, python, version)
    cell = pytest_cell(python, venv, version, tmp_path / "project", trace=trace)
    # This pytest itself works on this Python (else the cell proves nothing).
    assert cell.reference == EXPECTED_PYTEST, f"pytest {version} misbehaves on 3.{minor}"
    assert cell.identical, _explain(cell)


@pytest.mark.parametrize("minor", [9, 10, 11, 12, 13])
def test_unittest_collector_changes_no_outcome(minor: int, tmp_path: Path) -> None:
    """Under `python -m unittest`, the unittest collector leaves every outcome and the exit
    code as unittest gives them and records exactly those (a by-name stand-in under the
    module's full dotted name)."""
    python = _python(minor)
    if python is None:
        pytest.skip(f"no Python 3.{minor} on this machine")
    cell = unittest_cell(python, tmp_path / "project")
    assert cell.reference["unittest.loader._FailedTest.tests.test_broken"] == "error"
    assert len(cell.reference) == 8  # tests/test_gc.py's GcCase among them
    assert cell.identical, _explain(cell)
