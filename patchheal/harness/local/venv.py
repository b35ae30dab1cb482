"""The local harness's own virtual environment for a job's setup.

Without Docker, a job's setup (`pip install -e .[test]`) must not run in the
environment patchheal itself runs in: it would install the user's project
into patchheal's venv. It runs in a venv of the job's own instead, under the
worktree root, keyed by the worktree, the setup commands, the dependency files
and the interpreter, so a dependency change gets a fresh venv and an
unchanged one is reused across attempts and runs. A marker file written after
the last setup command says the venv is complete; a venv without it (an
interrupted setup) is rebuilt. The venv is not moved into place after setup
because its scripts carry its absolute path.

Setup runs in the worktree itself, so what it writes there (a hatch-vcs or
setuptools-scm version file, an `*.egg-info`) is captured as the Docker
harness captures it (`setup/generated.py`) and stored in the venv beside the
marker: the worktree is reset (`clean -ffdx`) between attempts, and the
harness lays those files over it again before every run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from patchheal import proc
from patchheal.errors import HarnessError
from patchheal.harness.setup import generated
from patchheal.harness.setup.deps import DEPENDENCY_GLOBS

READY_MARKER = ".patchheal-ready"
# What setup generated in the worktree (generated.py's archive), written before the marker.
GENERATED_ARCHIVE = ".patchheal-generated.tar"


def venv_key(worktree: Path, setup: Sequence[str]) -> str:
    """What the venv depends on: the worktree, the setup, the dependency files, the python."""
    digest = hashlib.sha256()
    for part in (str(worktree.resolve()), sys.version, *setup):
        digest.update(part.encode() + b"\0")
    for pattern in DEPENDENCY_GLOBS:
        for path in sorted(worktree.glob(pattern)):
            if path.is_file():
                digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def venv_environment(venv: Path, base: Mapping[str, str]) -> dict[str, str]:
    """`base` with the venv activated (its bin/ first on PATH), as `source activate` would."""
    env = dict(base)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *filter(None, [base.get("PATH")])])
    env.pop("PYTHONHOME", None)
    return env


def ensure_job_venv(
    root: Path,
    worktree: Path,
    setup: Sequence[str],
    *,
    base_env: Mapping[str, str],
    timeout: float,
    say: Callable[[str], None] = lambda _message: None,
) -> Path:
    """The job's venv under `root`, created and set up unless a complete one exists."""
    venv = root / venv_key(worktree, setup)
    if (venv / READY_MARKER).is_file():
        return venv
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    say(f"setup: creating the job's venv {venv}")
    created = proc.run([sys.executable, "-m", "venv", str(venv)], timeout=timeout)
    if not created.passed:
        raise HarnessError(f"cannot create the job's venv {venv}:\n{created.output[-4000:]}")
    env = venv_environment(venv, base_env)
    before = generated.listing(worktree)
    for command in setup:
        say(f"setup: {command}")
        result = proc.run(command, cwd=worktree, env=env, timeout=timeout)
        if not result.passed:
            raise HarnessError(
                f"setup command failed in the local harness: {command}\n{result.output[-4000:]}"
            )
    files = generated.capture(worktree, before, say)
    (venv / GENERATED_ARCHIVE).write_bytes(generated.to_tar(files))
    (venv / READY_MARKER).write_text("ok\n", encoding="utf-8")
    return venv


def generated_files(venv: Path) -> list[generated.Generated]:
    """What the job's setup generated in its worktree (none for a venv made before the
    capture existed: its setup is not run again for it)."""
    archive = venv / GENERATED_ARCHIVE
    return generated.from_tar(archive.read_bytes()) if archive.is_file() else []
