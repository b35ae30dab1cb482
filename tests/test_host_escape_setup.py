"""Issue 17: dependency setup is limited like a step and never built from a candidate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image, python_project

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers, dockerapi, sandbox
from patchheal.workspace.worktrees import JobWorkspace

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PYPROJECT = (
    '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
    '[project]\nname = "tiny"\nversion = "0.1"\n[tool.setuptools]\npy-modules = ["tiny"]\n'
)
# The candidate's setup.py: runs during `pip install -e .` and plants a .pth in the venv.
HOSTILE_SETUP_PY = """
import glob, os
from setuptools import setup
for site in glob.glob("/opt/patchheal/venv/lib/python*/site-packages"):
    with open(os.path.join(site, "zz-evil.pth"), "w") as out:
        out.write("import sys; sys.stderr.write('PTH-RAN\\\\n')\\n")
setup()
"""
PROBE = (
    "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; "
    # cgroup v2 or v1, whichever the engine uses
    "echo pids=$(cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null) "
    "mem=$(cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null)"
)


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def test_a_candidate_setup_py_never_enters_the_dependency_image(
    python_def: HarnessDef, python_image: str, make_repo: Any, tmp_path: Path
) -> None:
    repo = python_project(make_repo, {"pyproject.toml": PYPROJECT, "marker.txt": str(tmp_path)})
    workspace = JobWorkspace(repo, "HEAD", "escape-setup", root=tmp_path / "wt-root")
    workspace.open()
    tree = workspace.worktree("verify")
    (tree / "setup.py").write_text(HOSTILE_SETUP_PY)  # the candidate, uncommitted
    said: list[str] = []
    harness = DockerHarness(
        python_def,
        job_id=f"escape-setup-{os.getpid()}",
        setup=["pip install -e .", PROBE],
        say=said.append,
    )
    try:
        step = harness.run(
            "python -c 'import tiny; print(tiny.double(2))'; "
            "ls /opt/patchheal/venv/lib/*/site-packages",
            tree,
            timeout=120,
            idle_timeout=120,
        )
        image = harness.run_image(tree)
    finally:
        harness.close()
    try:
        assert "PTH-RAN" not in step.output, step.output
        assert "zz-evil.pth" not in step.output
        assert "4" in step.output.split(), step.output  # the base's editable install works
        # The setup container ran with the step's limits.
        probe = "\n".join(said)
        assert "NoNewPrivs:\t1" in probe, probe
        cap_eff = next(line for line in probe.splitlines() if line.startswith("CapEff"))
        assert int(cap_eff.split()[1], 16) & ~(1 << 0) == 0, cap_eff  # CHOWN at most
        assert f"pids={python_def.sandbox.pids}" in probe
        memory = int(probe.rsplit("mem=", 1)[1].split()[0])
        assert memory <= sandbox.size_bytes(python_def.sandbox.memory), probe
    finally:
        containers.remove_image(harness.client if harness._client else _engine(), image)


def _engine() -> Any:

    return dockerapi.engine()
