"""The project's pins win: the job's venv never sees the image's packages (issue 32).

The python image carries Debian's pytest (7.2.1 on bookworm). When the venv saw
the system site-packages, pip took it as satisfying a project's `pytest`
requirement, so pallets/flask ran another pytest than its CI. Real engine,
real pip, real wheelhouse downloaded on the host.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, outcomes_by_id, python_def, python_image, python_project

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers
from tests.test_lockedpytest import UV_LOCK

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker

DEBIAN_PYTEST = "7.2.1"


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # One wheelhouse for the session, not one per test's fresh HOME.
    root = tmp_path_factory.getbasetemp() / "patchheal-cache"
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(root))


def _run(h: DockerHarness, tree: Path, command: str) -> Any:
    return h.run(command, tree, timeout=300, idle_timeout=300)


def test_the_pytest_the_project_pins_is_the_one_that_runs(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """Invariant: a project pinning pytest==8.0.2 runs pytest 8.0.2, bare or as a module,
    never the image's Debian pytest; and the collectors still load under it."""
    repo = python_project(make_repo, {"requirements-test.txt": "pytest==8.0.2\n"})
    said: list[str] = []
    setup = [f"pip install -r requirements-test.txt -e . && echo pins-{uuid.uuid4().hex}"]
    h = DockerHarness(python_def, job_id=f"pins-{os.getpid()}", setup=setup, say=said.append)
    try:
        h.prepare(repo)
        result = _run(h, repo, "command -v pytest; pytest --version; python -m pytest --version")
        assert result.exit_code == 0, result.output
        assert "/opt/patchheal/venv/bin/pytest\n" in result.output
        assert result.output.count("pytest 8.0.2") == 2, result.output
        assert DEBIAN_PYTEST not in result.output
        # Nothing of the image's Python packages is importable in the job's venv.
        shown = _run(h, repo, "python -c 'import sys; print(sys.path)'")
        assert "dist-packages" not in shown.output, shown.output
        assert not any("patchheal provided pytest" in s for s in said)
        outcomes = outcomes_by_id(h, repo, "python -m pytest -q", exit_code=0)
        assert outcomes == {"tests/test_tiny.py::test_double": "passed"}
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_a_project_without_a_pytest_requirement_still_runs_pytest(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """A job whose setup installs no pytest (here: none at all, as `patchheal demo`) gets
    the newest pytest for the image's Python, from the wheelhouse, in its venv; the setup
    log says patchheal provided it. The collectors load and see the test."""
    # A nonce in a dependency file: an earlier session's dependency image is not reused.
    pyproject = f'[project]\nname = "tiny"\nversion = "0.1"\n# {uuid.uuid4().hex}\n'
    repo = python_project(make_repo, {"pyproject.toml": pyproject})
    said: list[str] = []
    h = DockerHarness(python_def, job_id=f"nopins-{os.getpid()}", say=said.append)
    try:
        h.prepare(repo)
        provided = [s for s in said if "patchheal provided pytest" in s]
        assert provided, said
        result = _run(
            h, repo, "python -c 'import pytest; print(pytest.__file__)'; pytest --version"
        )
        assert result.exit_code == 0, result.output
        assert "/opt/patchheal/venv/lib/" in result.output
        version = result.output.split("pytest ")[-1].split()[0]
        assert version in provided[0]
        assert tuple(map(int, version.split(".")[:2])) >= (8, 0), result.output
        outcomes = outcomes_by_id(h, repo, "python -m pytest -q", exit_code=0)
        assert outcomes == {"tests/test_tiny.py::test_double": "passed"}
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_a_setup_without_pytest_gets_the_pytest_the_projects_uv_lock_pins(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """click's case: CI runs `uv run --group tests pytest`, the pytest of uv.lock (9.0.2);
    the newest pytest (9.2) stopped its tests at collection (a deprecation its
    `filterwarnings = error` turns into an error), so a correct fix was judged wrong.
    A job whose setup installs no pytest gets the one the lock pins for the image's
    Python (8.3.5 here, the 3.10+ entry), and the setup log says why that one."""
    repo = python_project(make_repo, {"uv.lock": UV_LOCK + f"# {uuid.uuid4().hex}\n"})
    said: list[str] = []
    h = DockerHarness(python_def, job_id=f"uvlock-{os.getpid()}", say=said.append)
    try:
        h.prepare(repo)
        provided = [s for s in said if "patchheal provided pytest" in s]
        assert provided == [
            "patchheal provided pytest 8.3.5 (the version uv.lock pins): "
            "the job's setup installs none"
        ], said
        result = _run(h, repo, "python -m pytest --version")
        assert result.exit_code == 0, result.output
        assert "pytest 8.3.5" in result.output, result.output
        outcomes = outcomes_by_id(h, repo, "python -m pytest -q", exit_code=0)
        assert outcomes == {"tests/test_tiny.py::test_double": "passed"}
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_a_setup_that_installs_a_dependency_group_runs_its_pins(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """tox-dev/filelock's CI: `pip install -e . --group test` (PEP 735, pip 25.1+). The
    host's `pip download` runs away from the tree, so the group is expanded there; the
    venv's pip (Debian's 23.0.1 cannot) is upgraded to one that knows `--group`."""
    pyproject = (
        f'[project]\nname = "tiny"\nversion = "0.1"\n# {uuid.uuid4().hex}\n'
        '[dependency-groups]\ntest = [{ include-group = "runner" }]\n'
        'runner = ["pytest==8.0.2"]\n'
    )
    repo = python_project(make_repo, {"pyproject.toml": pyproject})
    said: list[str] = []
    setup = ["pip install -e . --group test"]
    h = DockerHarness(python_def, job_id=f"groups-{os.getpid()}", setup=setup, say=said.append)
    try:
        h.prepare(repo)
        assert any("pip download on the host" in s and "pytest==8.0.2" in s for s in said), said
        assert not any("patchheal provided pytest" in s for s in said), said
        result = _run(h, repo, "python -m pytest --version")
        assert result.exit_code == 0, result.output
        assert "pytest 8.0.2" in result.output, result.output
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_an_unpinned_pytest_requirement_is_not_the_images(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """pallets/flask's case: `pytest` with no pin, which the image's Debian pytest 7.2.1
    used to satisfy ("Requirement already satisfied: pytest in /usr/lib/python3/
    dist-packages"); pip now resolves it as CI's setup-python would, to a newer one."""
    repo = python_project(make_repo, {"requirements-test.txt": "pytest>=7\n"})
    said: list[str] = []
    setup = [f"pip install -r requirements-test.txt && echo unpinned-{uuid.uuid4().hex}"]
    h = DockerHarness(python_def, job_id=f"unpinned-{os.getpid()}", setup=setup, say=said.append)
    try:
        h.prepare(repo)
        assert not any("dist-packages" in s for s in said), said
        result = _run(h, repo, "python -m pytest --version")
        assert result.exit_code == 0, result.output
        assert "pytest " in result.output
        assert f"pytest {DEBIAN_PYTEST}" not in result.output
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_with_no_index_the_wheelhouses_pytest_serves_and_none_is_an_error(
    python_image: str, engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An offline host: the provided pytest cannot be downloaded. One an earlier download
    left in the wheelhouse serves (as the image's own did before); with none, the setup
    fails with pip's reason, not later as a missing module in the step."""
    from patchheal.errors import DependencySetupError
    from patchheal.harness.setup import wheelhouse

    # A closed loopback port as the index: the host's pip fails at once, nothing leaves.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path / "cache"))
    said: list[str] = []
    with pytest.raises(DependencySetupError):
        wheelhouse.fill_pytest(engine, python_image, tmp_path, said.append)
    version = wheelhouse.container_python(engine, python_image).replace(".", "")
    house = tmp_path / "cache" / "wheelhouse" / f"cp{version}"
    (house / "pytest-8.0.2-py3-none-any.whl").write_bytes(b"left by an earlier download")
    assert wheelhouse.fill_pytest(engine, python_image, tmp_path, said.append) == house
    assert "the wheelhouse's newest pytest is used" in said[-1]
    # A pytest the project's lock pins: only that version serves, never another one.
    with pytest.raises(DependencySetupError):
        wheelhouse.fill_pytest(engine, python_image, tmp_path, said.append, "pytest==8.3.5")
    pinned = wheelhouse.fill_pytest(engine, python_image, tmp_path, said.append, "pytest==8.0.2")
    assert pinned == house
    assert "the wheelhouse's pytest 8.0.2 is used" in said[-1]
