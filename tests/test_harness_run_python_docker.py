"""`patchheal harness run` runs on the Python `heal` would choose (issue 32, item 5).

Before, a repository with `.python-version` 3.9 got 3.9 from `harness explain`
while `harness run python --repo q -- python --version` ran the default 3.11,
and `harness run` had no `--python`. Real CLI process, real engine; the 3.9
image is built offline from bullseye the first time (a few minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine

__all__ = ["engine"]

# The first run builds the 3.9 image from bullseye (minutes on a shared machine).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]


def _harness_run(repo: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "patchheal", "harness", "run", "python", "--repo", str(repo)]
    return subprocess.run(
        [*argv, *options, "--", "python", "--version"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )


def test_harness_run_runs_the_python_version_file_and_python_overrides_it(
    engine: Any, make_repo: Any
) -> None:
    # A nonce in a dependency file: the run's dependency image is made, not reused.
    pyproject = f'[project]\nname = "q"\nversion = "0.1"\n# {uuid.uuid4().hex}\n'
    repo = make_repo({".python-version": "3.9\n", "pyproject.toml": pyproject})
    inferred = _harness_run(repo)
    assert inferred.returncode == 0, inferred.stderr[-3000:]
    assert inferred.stdout.strip().startswith("Python 3.9."), inferred.stdout
    assert "python: Python 3.9: .python-version names 3.9" in inferred.stderr
    named = _harness_run(repo, "--python", "3.11")
    assert named.returncode == 0, named.stderr[-3000:]
    assert named.stdout.strip().startswith("Python 3.11."), named.stdout
    refused = _harness_run(repo, "--python", "3.10")
    assert refused.returncode == 2, refused.stderr
    assert "--python 3.10 asks for Python 3.10" in refused.stderr
    assert "nearest is 3.11" in refused.stderr
