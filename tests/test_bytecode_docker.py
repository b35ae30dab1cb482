"""A step reads bytecode compiled before any candidate, never the tree's (engine/bytecode.py).

Real engine, real setup: the python harness image carries its standard library's
bytecode under the prefix, setup adds the venv's, all of it root's and none of the
worktree's; a step reads it (pytest imports from it) and cannot add to it.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image, python_project

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import bytecode, containers

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "pcache"))


def _run(h: DockerHarness, tree: Path, command: str) -> Any:
    return h.run(command, tree, timeout=300, idle_timeout=300)


def test_the_step_reads_the_images_bytecode_and_cannot_write_any(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    pyproject = f'[project]\nname = "tiny"\nversion = "0.1"\n# {uuid.uuid4().hex}\n'
    repo = python_project(make_repo, {"pyproject.toml": pyproject})
    h = DockerHarness(python_def, job_id=f"bytecode-{os.getpid()}", setup=["pip install -e ."])
    prefix = bytecode.PREFIX
    try:
        h.prepare(repo)
        # pytest's own modules and the stdlib's are there; nothing of the worktree is.
        listing = _run(
            h,
            repo,
            f"find {prefix} -name '__init__.cpython-*.pyc' -path '*_pytest*' | head -1; "
            f"find {prefix} -name 'json' -path '*/usr/lib/python3*' | head -1; "
            f"find {prefix}/work 2>/dev/null | head -1; "
            f"find {prefix} ! -user 0 | head -1; echo end",
        )
        lines = listing.output.split("end")[0].split()
        assert len(lines) == 2, listing.output
        assert lines[0].startswith(prefix + "/opt/patchheal/venv/"), listing.output
        assert "/usr/lib/python3" in lines[1], listing.output
        # Python looks for a module's bytecode in the prefix, and finds it there.
        cached = "json.__spec__.cached"
        check = f"import json, os.path; print(os.path.isfile({cached}), {cached})"
        shown = _run(h, repo, f"python -c '{check}'")
        assert shown.output.strip().startswith(f"True {prefix}/usr/lib/python3"), shown.output
        # The step can neither add to the prefix nor write bytecode of the tree anywhere.
        probe = _run(
            h,
            repo,
            f"touch {prefix}/probe 2>&1 || echo refused; "
            "python -c 'import tiny'; "
            "find / \\( -path /proc -o -path /sys \\) -prune -o -name 'tiny.cpython-*' -print; "
            "ls __pycache__ 2>&1 | head -1",
        )
        assert "refused" in probe.output, probe.output
        assert "tiny.cpython" not in probe.output, probe.output
        assert "No such file" in probe.output, probe.output
        # And the tests still run, collectors and all.
        result = _run(h, repo, "python -m pytest -q")
        assert result.exit_code == 0, result.output
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()
