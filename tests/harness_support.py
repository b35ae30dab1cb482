"""Helpers shared by the Docker harness tests (not a conftest: imported explicitly).

The python harness image is built once per session (and cached by the engine
across sessions, content-addressed), so the Docker tests share it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchheal.harness.config import HarnessDef
from patchheal.harness.definitions import load_harness
from patchheal.harness.engine import dockerapi, ownership
from patchheal.harness.images import build as images


@pytest.fixture(scope="session")
def engine(require_docker: None) -> Any:
    client = dockerapi.engine()
    yield client
    client.close()


@pytest.fixture(scope="session")
def python_def() -> HarnessDef:
    return load_harness("python")


@pytest.fixture(scope="session")
def python_image(engine: Any, python_def: HarnessDef) -> str:
    """The bundled python harness image, built offline if the engine lacks it."""
    return images.ensure_image(engine, python_def)


def labelled(engine: Any, job_id: str) -> dict[str, list[str]]:
    """Containers, networks and volumes of a job that still exist."""
    flt = {"label": f"{ownership.LABEL_JOB}={job_id}"}
    return {
        "containers": [c.name for c in dockerapi.list_containers(engine, filters=flt)],
        "networks": [n.name for n in engine.networks.list(filters=flt)],
        "volumes": [v.name for v in engine.volumes.list(filters=flt)],
    }


def sandboxes(engine: Any, job_id: str) -> list[str]:
    """The job's containers but the image pins (imagepin.py) of its dependency images."""
    from patchheal.harness.engine import imagepin

    return [c for c in labelled(engine, job_id)["containers"] if imagepin.PURPOSE not in c]


def python_project(make_repo: Any, extra: dict[str, str] | None = None) -> Path:
    """A tiny Python project with a pytest suite, as a real git repository."""
    files = {
        "pyproject.toml": '[project]\nname = "tiny"\nversion = "0.1"\n',
        "tiny.py": "def double(x):\n    return 2 * x\n",
        "tests/test_tiny.py": "from tiny import double\n\ndef test_double():\n"
        "    assert double(2) == 4\n",
    }
    return make_repo({**files, **(extra or {})})


def outcomes_by_id(harness: Any, tree: Path, command: str, *, exit_code: int) -> dict[str, str]:
    """Run a test command in `harness`; its exit code as given, and the collectors'
    outcomes by test id, with no error of their own."""
    result = harness.run(command, tree, timeout=120, idle_timeout=120)
    assert result.exit_code == exit_code, result.output
    assert result.tests is not None, result.output
    assert not result.tests.collector_errors, result.tests.collector_errors
    return dict(result.tests.outcomes)
