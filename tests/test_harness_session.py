"""The Docker harness's sandbox session: one container per worktree, every run as fresh.

Each test states the guarantee a fresh container per run gave and checks the
session keeps it, with the real engine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, labelled, python_def, python_image, sandboxes

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker


@pytest.fixture
def harness(python_image: str, python_def: HarnessDef, request: Any) -> Any:
    h = DockerHarness(python_def, job_id=f"s-{request.node.name[:40]}-{os.getpid()}")
    yield h
    h.close()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    path.mkdir()
    return path


def run(h: DockerHarness, tree: Path, command: str, **kw: Any) -> Any:
    kw.setdefault("timeout", 60)
    kw.setdefault("idle_timeout", 60)
    return h.run(command, tree, **kw)


def container_id(h: DockerHarness, tree: Path) -> str:
    return str(run(h, tree, "cat /etc/hostname").output.strip())


def test_runs_share_one_container_while_the_worktree_stays(
    harness: DockerHarness, tree: Path
) -> None:
    first = container_id(harness, tree)
    assert container_id(harness, tree) == first
    assert len(sandboxes(harness.client, harness.job_id)) == 1


def test_a_recreated_worktree_gets_a_new_container(harness: DockerHarness, tree: Path) -> None:
    """A hard reset re-creates the worktree: the old bind mount would show a deleted dir."""
    first = container_id(harness, tree)
    shutil.rmtree(tree)
    tree.mkdir()
    (tree / "new.txt").write_text("new\n")
    result = run(harness, tree, "cat new.txt; cat /etc/hostname")
    assert result.exit_code == 0
    assert "new" in result.output
    assert first not in result.output


def test_no_process_of_a_run_survives_into_the_next(harness: DockerHarness, tree: Path) -> None:
    started = run(harness, tree, "sleep 300 & echo $! > pid; echo started")
    assert started.exit_code == 0
    after = run(harness, tree, 'kill -0 "$(cat pid)" && echo ALIVE || echo gone')
    assert "gone" in after.output
    assert "ALIVE" not in after.output


def test_tmp_is_empty_at_the_start_of_every_run(harness: DockerHarness, tree: Path) -> None:
    run(harness, tree, "mkdir -p /tmp/cache && echo x > /tmp/cache/f && echo y > /tmp/.hidden")
    listing = run(harness, tree, "ls -A /tmp | wc -l")
    assert listing.output.strip() == "0"


def test_a_timed_out_run_is_killed_and_the_next_run_works(
    harness: DockerHarness, tree: Path
) -> None:
    slow = run(harness, tree, "echo start; sleep 60; touch late", timeout=2)
    assert slow.timed_out == "wall"
    assert slow.exit_code is None
    after = run(harness, tree, "sleep 1; ls late 2>/dev/null || echo no-late")
    assert "no-late" in after.output


def test_a_step_cannot_end_the_session(harness: DockerHarness, tree: Path) -> None:
    """kill -9 -1 as the step user reaches its own processes, not the keeper."""
    first = container_id(harness, tree)
    run(harness, tree, "kill -9 -1; true")
    assert container_id(harness, tree) == first


def test_each_run_reports_in_its_own_results_directory(harness: DockerHarness, tree: Path) -> None:
    dirs = [run(harness, tree, "echo $PATCHHEAL_RESULTS_DIR").output.strip() for _ in range(2)]
    assert dirs[0] != dirs[1]
    # The volume is a 1777 tmpfs, like /tmp, but only the run's own directory counts: a
    # file anywhere else rejects the run, and the next run starts from an empty volume.
    stray = run(harness, tree, "touch /run/patchheal/x && echo WROTE")
    assert "WROTE" in stray.output
    assert stray.tests is not None
    assert "x (outside the run's results directory)" in stray.tests.rejected
    listing = run(harness, tree, "ls -A /run/patchheal").output.split()
    assert len(listing) == 1, listing
    assert listing[0].startswith("results-"), listing


OWNER = """
import sys, time
from pathlib import Path
from patchheal.harness.definitions import load_harness
from patchheal.harness.docker.harness import DockerHarness
h = DockerHarness(load_harness("python"), job_id=sys.argv[2])
h.run("true", Path(sys.argv[1]), timeout=60, idle_timeout=60)
print("ready", flush=True)
time.sleep(600)
"""


def test_the_container_dies_with_its_owner(python_image: str, engine: Any, tree: Path) -> None:
    """A SIGKILLed patchheal leaves no sandbox running: the engine closes the keeper's stdin."""
    job = f"owner-{os.getpid()}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tree), job],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "ready"
        assert len(sandboxes(engine, job)) == 1
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        deadline = time.monotonic() + 30
        while labelled(engine, job)["containers"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert labelled(engine, job)["containers"] == []
    finally:
        owner.kill()
