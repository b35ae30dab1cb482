"""The project's own build backend and tool pins, not the image's (issue 26, item 3).

Each case is a `src/` project whose job setup is `pip install -e .` through the backend
its pyproject.toml pins (setuptools with setup.py, setuptools-scm, hatchling, flit_core,
poetry-core, pdm-backend), with a pytest and a plugin of its own pinned, as a real CI's
setup installs them. In the offline harness: the backend's build requirements (and what
its editable hook asks for besides) come from the host's wheelhouse, the project
imports from the venv with the version its backend computed, the pinned pytest is the
one that runs, and the collectors inside it give outcomes by test id before and after
the fix, with no error of their own.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, outcomes_by_id, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers
from patchheal.workspace.worktrees import JobWorkspace

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

_PROJECT = '[project]\nname = "shapes"\nversion = "2.1.0"\ndescription = "x"\n'
_SCM_PROJECT = '[project]\nname = "shapes"\ndynamic = ["version"]\n'

# backend -> (pyproject.toml, further files, the version the backend gives, pins)
BACKENDS: dict[str, tuple[str, dict[str, str], str, str]] = {
    "setuptools (setup.py)": (
        "",
        {
            "setup.py": "from setuptools import find_packages, setup\n\n"
            "setup(name='shapes', version='2.1.0', package_dir={'': 'src'},\n"
            "      packages=find_packages('src'))\n"
        },
        "2.1.0",
        "'pytest==7.4.4' 'pytest-mock==3.12.0'",
    ),
    "setuptools-scm": (
        '[build-system]\nrequires = ["setuptools==69.5.1", "setuptools-scm==8.0.4"]\n'
        'build-backend = "setuptools.build_meta"\n\n' + _SCM_PROJECT + "\n[tool.setuptools_scm]\n",
        {},
        "0.1.dev",
        "'pytest==8.0.2' 'pytest-mock==3.12.0'",
    ),
    "hatchling": (
        '[build-system]\nrequires = ["hatchling==1.21.1"]\nbuild-backend = "hatchling.build"\n\n'
        + _PROJECT
        + '\n[tool.hatch.build.targets.wheel]\npackages = ["src/shapes"]\n',
        {},
        "2.1.0",
        "'pytest==7.2.2' 'pytest-mock==3.10.0'",
    ),
    "flit_core": (
        '[build-system]\nrequires = ["flit_core==3.9.0"]\nbuild-backend = "flit_core.buildapi"\n\n'
        + _PROJECT,
        {},
        "2.1.0",
        "'pytest==8.3.5' 'pytest-mock==3.14.0'",
    ),
    "poetry-core": (
        '[build-system]\nrequires = ["poetry-core==1.9.0"]\n'
        'build-backend = "poetry.core.masonry.api"\n\n'
        '[tool.poetry]\nname = "shapes"\nversion = "2.1.0"\ndescription = "x"\nauthors = []\n'
        'packages = [{ include = "shapes", from = "src" }]\n\n'
        '[tool.poetry.dependencies]\npython = "^3.8"\n',
        {},
        "2.1.0",
        "'pytest==7.4.4' 'pytest-mock==3.12.0'",
    ),
    "pdm-backend": (
        '[build-system]\nrequires = ["pdm-backend==2.1.8"]\nbuild-backend = "pdm.backend"\n\n'
        + _PROJECT,
        {},
        "2.1.0",
        "'pytest==8.1.1' 'pytest-mock==3.14.0'",
    ),
}

SOURCE = "def area(width, height):\n    return width + height\n"
FIXED = "def area(width, height):\n    return width * height\n"
TESTS = (
    "from shapes.rect import area\n\n\n"
    "def test_square():\n    assert area(2, 2) == 4\n\n\n"
    "def test_rectangle():\n    assert area(2, 3) == 6\n\n\n"
    "def test_uses_the_plugin(mocker):\n    assert mocker.Mock(return_value=1)() == 1\n"
)
# What the step prints besides the tests: the pytest that runs, the project's version.
PROBE = (
    "python -c 'import importlib.metadata as m, pytest, shapes; "
    'print("pytest", pytest.__version__, "shapes", m.version("shapes"))\''
)


def _project(backend: str) -> dict[str, str]:
    pyproject, extra, _, _ = BACKENDS[backend]
    files = {
        "src/shapes/__init__.py": "",
        "src/shapes/rect.py": SOURCE,
        "tests/test_rect.py": TESTS,
        **extra,
    }
    if pyproject:
        files["pyproject.toml"] = pyproject
    return files


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # One wheelhouse for the session, not one per test's fresh HOME.
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_projects_own_backend_and_pins_install_offline_and_report_by_id(
    backend: str, python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    _, _, version, pins = BACKENDS[backend]
    repo = make_repo(_project(backend))
    workspace = JobWorkspace(repo, "main", f"backend-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    workspace.open()
    tree = workspace.worktree("verify")
    # The job's setup as its CI has it: its pins, then the project through its backend.
    setup = [f"pip install {pins}", "pip install -e ."]
    h = DockerHarness(python_def, job_id=workspace.job_id, setup=setup)
    try:
        h.prepare(tree)
        probe = h.run(f"cd /tmp && {PROBE}", tree, timeout=120, idle_timeout=120)
        assert probe.exit_code == 0, probe.output
        pinned = pins.split("'")[1].split("==")[1]
        assert f"pytest {pinned} shapes {version}" in probe.output, probe.output
        before = outcomes_by_id(h, tree, "python -m pytest -q tests", exit_code=1)
        assert before == {
            "tests/test_rect.py::test_square": "passed",
            "tests/test_rect.py::test_rectangle": "failed",
            "tests/test_rect.py::test_uses_the_plugin": "passed",
        }
        # The fix, in the editable install's own source: the step sees it at once.
        (Path(tree) / "src/shapes/rect.py").write_text(FIXED)
        after = outcomes_by_id(h, tree, "python -m pytest -q tests", exit_code=0)
        assert set(after.values()) == {"passed"}, after
        containers.remove_image(h.client, h.run_image(tree))
    finally:
        h.close()
        workspace.destroy()
