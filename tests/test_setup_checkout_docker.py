"""Setup sees the checkout CI has, and the step gets what setup made (issue 32, item 2).

A setuptools-scm project (the backend pinned, installed offline from the host's
wheelhouse) whose repository has a tag `v1.4.2` and three commits after it,
whose requirements are dynamic (read by its backend in the metadata sandbox,
which has no git metadata) and whose setup writes `src/shapes/_version.py`
(`write_to`), which its tests import; and the same with hatchling + hatch-vcs
(`version-file`). In the harness: its version is
`1.4.3.dev3+g<hash>` as in CI's checkout, the generated file reaches every run,
and it never enters a candidate's diff, a commit or the published branch.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from harness_support import engine, outcomes_by_id, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers
from patchheal.workspace import tracked
from patchheal.workspace.worktrees import JobWorkspace, worktree_diff

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

PYPROJECT = """\
[build-system]
requires = ["setuptools==69.5.1", "setuptools-scm==8.0.4"]
build-backend = "setuptools.build_meta"

[project]
name = "shapes"
dynamic = ["version", "dependencies"]

[tool.setuptools.dynamic]
dependencies = {file = ["requirements.in"]}

[tool.setuptools_scm]
write_to = "src/shapes/_version.py"
"""
# hatch-vcs calls setuptools-scm without the distribution's name: the unscoped override.
HATCH_PYPROJECT = """\
[build-system]
requires = ["hatchling==1.21.1", "hatch-vcs==0.4.0"]
build-backend = "hatchling.build"

[project]
name = "shapes"
dynamic = ["version"]

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.hooks.vcs]
version-file = "src/shapes/_version.py"

[tool.hatch.build.targets.wheel]
packages = ["src/shapes"]
"""
TESTS = (
    "from shapes._version import version\n"
    "from shapes.rect import area\n\n\n"
    "def test_version_is_ci_s():\n    assert version.startswith('1.4.3.dev3+g')\n\n\n"
    "def test_area():\n    assert area(2, 3) == 6\n"
)
PROBE = (
    'cd /tmp && python -c \'import importlib.metadata as m; print("shapes", m.version("shapes"))\''
)


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def _tagged_project(make_repo: Any, pyproject: str) -> Path:
    repo: Path = make_repo(
        {
            "pyproject.toml": pyproject,
            "requirements.in": "",
            "src/shapes/__init__.py": "",
            "src/shapes/rect.py": "def area(width, height):\n    return width + height\n",
            "tests/test_rect.py": TESTS,
            "CHANGES": "0\n",
        }
    )
    git(repo, "tag", "v1.4.2")
    for n in range(3):
        (repo / "CHANGES").write_text(f"{n + 1}\n")
        git(repo, "commit", "-qam", f"change {n + 1}")
    return repo


@pytest.mark.parametrize(
    "pyproject", [PYPROJECT, HATCH_PYPROJECT], ids=["setuptools-scm", "hatch-vcs"]
)
def test_version_from_tags_and_the_generated_version_file_reach_the_step_not_the_patch(
    python_image: str, python_def: HarnessDef, make_repo: Any, pyproject: str
) -> None:
    repo = _tagged_project(make_repo, pyproject)
    short = git(repo, "rev-parse", "--short", "HEAD")
    workspace = JobWorkspace(repo, "main", f"scm-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    workspace.open()
    tree = workspace.worktree("attempt")
    setup = ["pip install 'pytest==8.0.2'", "pip install -e ."]
    h = DockerHarness(python_def, job_id=workspace.job_id, setup=setup, repo=repo)
    try:
        # The metadata read (dynamic requirements) and setup succeed: before, setuptools-scm
        # was "unable to detect version" in the sandbox's copy without git metadata.
        h.prepare(tree)
        probe = h.run(PROBE, tree, timeout=120, idle_timeout=120)
        assert f"shapes 1.4.3.dev3+g{short}" in probe.output, probe.output
        # The generated file is in the worktree the step runs in, hidden from git.
        generated = tree / "src/shapes/_version.py"
        assert f"1.4.3.dev3+g{short}" in generated.read_text()
        before = tracked.snapshot(tree)
        outcomes = outcomes_by_id(h, tree, "python -m pytest -q tests", exit_code=1)
        assert outcomes == {
            "tests/test_rect.py::test_version_is_ci_s": "passed",
            "tests/test_rect.py::test_area": "failed",
        }
        assert tracked.touched(before, tree) == []
        assert worktree_diff(tree) == ""
        # A candidate: the fix, and (hostile) an edit of the generated file. The generated
        # copy is laid again before the run, and only the fix is the candidate's diff.
        (tree / "src/shapes/rect.py").write_text(
            "def area(width, height):\n    return width * height\n"
        )
        generated.write_text("version = 'forged'\n")
        after = outcomes_by_id(h, tree, "python -m pytest -q tests", exit_code=0)
        assert set(after.values()) == {"passed"}, after
        assert f"1.4.3.dev3+g{short}" in generated.read_text()
        diff = worktree_diff(tree)
        assert "rect.py" in diff
        assert "_version" not in diff, diff
        commit = workspace.commit(tree, "the fix")
        workspace.publish(commit, "patchheal/fix")
        published = git(repo, "ls-tree", "-r", "--name-only", "patchheal/fix")
        assert "src/shapes/rect.py" in published.splitlines()
        assert "_version" not in published, published
        assert "egg-info" not in published, published
        # A reset worktree (the next attempt) gets the file again before its run.
        workspace.reset(tree)
        assert not generated.exists()
        again = h.run(PROBE, tree, timeout=120, idle_timeout=120)
        assert again.exit_code == 0, again.output
        assert generated.is_file()
        containers.remove_image(h.client, h.run_image(tree))
    finally:
        h.close()
        workspace.destroy()
