"""The python harness runs a step on the Python the job chooses (issue 26, item 2)."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import pytest
from harness_support import engine, outcomes_by_id

from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers
from patchheal.harness.images import build as images
from patchheal.harness.inference import pythons
from patchheal.workspace.worktrees import JobWorkspace

__all__ = ["engine"]


@pytest.mark.docker
@pytest.mark.slow
def test_a_job_on_python_3_9_runs_its_step_on_debian_bullseyes_3_9(
    engine: Any, make_repo: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Invariant: `python = "3.9"` gives a harness whose image (built offline from
    bullseye, or reused by its content tag) runs the step, after a real dependency setup
    (venv, console scripts), on Python 3.9 — not the default 3.11."""
    defn, why = pythons.choose(load_harness("python"), make_repo({"a.py": ""}), "main", "3.9")
    assert defn.image.suite == "bullseye", why
    started = time.monotonic()
    image = images.ensure_image(engine, defn)
    with capsys.disabled():
        print(f"\n3.9 image {image}: ready in {time.monotonic() - started:.1f} s")
    # Dynamic metadata read by the build backend in the metadata sandbox, then an
    # editable install: both need a pip newer than bullseye's 20.3.4.
    repo = make_repo(
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61", "wheel"]\n'
            'build-backend = "setuptools.build_meta"\n',
            "setup.py": "from setuptools import setup\n"
            "setup(name='old', version=open('VERSION').read().strip(), py_modules=['old'],\n"
            "      python_requires='>=3.8')\n",
            "VERSION": "1.0\n",
            "old.py": "def f():\n    return 1\n",
            "test_old.py": "from old import f\n\n\ndef test_f():\n    assert f() == 1\n\n\n"
            "def test_g():\n    assert f() == 2\n",
        }
    )
    workspace = JobWorkspace(repo, "main", f"py39-{os.getpid()}")
    workspace.open()
    tree = workspace.worktree("verify")
    setup = [f"pip install -e . && echo {uuid.uuid4().hex}"]
    h = DockerHarness(defn, job_id=workspace.job_id, setup=setup)
    try:
        h.prepare(tree)
        version = h.run("python --version", tree, timeout=120, idle_timeout=120)
        assert version.exit_code == 0, version.output
        assert version.output.split()[-1].startswith("3.9."), version.output
        # The project's code imports in the venv on that Python.
        code = h.run(
            "cd /tmp && python -c 'import importlib.metadata as m, old, sys; "
            'print(old.f(), m.version("old"), sys.version_info[:2])\'',
            tree,
            timeout=120,
            idle_timeout=120,
        )
        assert "1 1.0 (3, 9)" in code.output, code.output
        # And its tests run under bullseye's pytest (6.0, no config.rootpath) with the
        # collectors loaded: outcomes by id, as on the default Python.
        outcomes = outcomes_by_id(h, tree, "python -m pytest -q test_old.py", exit_code=1)
        assert outcomes == {"test_old.py::test_f": "passed", "test_old.py::test_g": "failed"}
        containers.remove_image(h.client, h.run_image(tree))
    finally:
        h.close()
        workspace.destroy()
