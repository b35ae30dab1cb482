"""Issue 17: a step container dies with its run, even when patchheal is SIGKILLed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.engine import ownership

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STEP_TIMEOUT = 5
GRACE = 15  # the container's own limit fires SELF_LIMIT_GRACE (10 s) after the timeout


def test_a_killed_runs_step_container_stops_within_its_timeout(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    job_id = f"orphan-{os.getpid()}"
    (tmp_path / "wt").mkdir()
    script = textwrap.dedent(f"""
        from pathlib import Path
        from patchheal.harness.definitions import load_harness
        from patchheal.harness.docker.harness import DockerHarness
        harness = DockerHarness(load_harness("python"), job_id={job_id!r})
        harness.run("sleep 600", Path({str(tmp_path / "wt")!r}),
                    timeout={STEP_TIMEOUT}, idle_timeout={STEP_TIMEOUT})
    """)
    run = subprocess.Popen([sys.executable, "-c", script])
    flt = {"label": f"{ownership.LABEL_JOB}={job_id}", "status": "running"}
    try:
        deadline = time.monotonic() + 600  # a first dependency setup
        # The step's sandbox, not the image pin that starts before it (imagepin.py).
        while not any(
            c.labels.get(ownership.LABEL_PURPOSE, "").startswith("run-")
            for c in engine.containers.list(filters=flt, ignore_removed=True)
        ):
            assert run.poll() is None, "the run ended before its step started"
            assert time.monotonic() < deadline, "the step never started"
            time.sleep(0.2)
        started = time.monotonic()
        # SIGKILL: no finally, no atexit, no host-side timeout: only the container can act.
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        while (
            engine.containers.list(filters=flt, ignore_removed=True)
            and time.monotonic() - started < 120
        ):
            time.sleep(0.5)
        stopped_after = time.monotonic() - started
        assert not engine.containers.list(filters=flt, ignore_removed=True)
        assert stopped_after <= STEP_TIMEOUT + GRACE, stopped_after
    finally:
        for container in engine.containers.list(
            all=True, filters={"label": f"{ownership.LABEL_JOB}={job_id}"}, ignore_removed=True
        ):
            with contextlib.suppress(docker.errors.APIError):  # gone meanwhile (gc, a race)
                container.remove(force=True)


def test_a_killed_runs_setup_container_goes_with_it(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """The setup container lives only while its run holds its stdin (not the 1800 s timeout)."""
    job_id = f"orphan-setup-{os.getpid()}"
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    script = textwrap.dedent(f"""
        from pathlib import Path
        from patchheal.harness.definitions import load_harness
        from patchheal.harness.docker.harness import DockerHarness
        harness = DockerHarness(load_harness("python"), job_id={job_id!r},
                                setup=["echo setting-up-{job_id}; sleep 600"])
        harness.prepare(Path({str(tree)!r}))
    """)
    run = subprocess.Popen([sys.executable, "-c", script])
    flt = {"label": f"{ownership.LABEL_JOB}={job_id}", "status": "running"}
    try:
        deadline = time.monotonic() + 300
        while not engine.containers.list(filters=flt, ignore_removed=True):
            assert run.poll() is None, "the run ended before its setup started"
            assert time.monotonic() < deadline, "the setup never started"
            time.sleep(0.2)
        time.sleep(2)  # inside the setup command by now
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        killed = time.monotonic()
        while (
            engine.containers.list(filters=flt, ignore_removed=True)
            and time.monotonic() - killed < 60
        ):
            time.sleep(0.5)
        assert not engine.containers.list(filters=flt, ignore_removed=True), (
            "the setup container outlived its run"
        )
        assert time.monotonic() - killed < 30
    finally:
        run.kill()
        for container in engine.containers.list(
            all=True, filters={"label": f"{ownership.LABEL_JOB}={job_id}"}, ignore_removed=True
        ):
            with contextlib.suppress(docker.errors.APIError):  # gone meanwhile (gc, a race)
                container.remove(force=True)
