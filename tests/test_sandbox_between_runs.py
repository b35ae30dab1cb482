"""Issue 25 (C2, M4, H1): what a sandbox run leaves behind reaches neither the next run nor
the host.

Real engine, the python harness's image, one session per worktree as the
Docker harness keeps it. Each test names the guarantee it protects.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers, ownership, sandbox, sweep
from patchheal.workspace.worktrees import JobWorkspace

__all__ = ["engine", "python_def", "python_image"]

# A process that escapes the step's process group and session (double fork + setsid),
# then keeps appending to `late` in the worktree.
DETACHED = """python3 -c '
import os, time
if os.fork():
    os.wait(); raise SystemExit(0)
os.setsid()
if os.fork():
    os._exit(0)
nul = os.open("/dev/null", os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(nul, fd)
while True:
    open("late", "a").write("x")
    time.sleep(0.02)
'; echo started"""


@pytest.fixture
def harness(python_image: str, python_def: HarnessDef, request: Any) -> Any:
    h = DockerHarness(python_def, job_id=f"between-{request.node.name[:30]}-{os.getpid()}")
    yield h
    h.close()


def run(h: DockerHarness, tree: Path, command: str) -> Any:
    return h.run(command, tree, timeout=60, idle_timeout=60)


@pytest.mark.docker
def test_a_detached_process_dies_with_its_run(harness: DockerHarness, tmp_path: Path) -> None:
    """Invariant: no process of a run outlives it; the host may reset the worktree and
    apply the next candidate at once (C2: a leftover rewrote the next candidate's source)."""
    tree = tmp_path / "wt"
    tree.mkdir()
    assert "started" in run(harness, tree, DETACHED).output
    written = (tree / "late").stat().st_size if (tree / "late").exists() else 0
    time.sleep(1.0)  # the host's reset and the next candidate's apply happen here
    after = (tree / "late").stat().st_size if (tree / "late").exists() else 0
    assert after == written, "a process of the run went on writing after the run ended"


@pytest.mark.docker
def test_dev_shm_and_unwritable_directories_in_tmp_do_not_reach_the_next_run(
    harness: DockerHarness, tmp_path: Path
) -> None:
    """Invariant: every run starts with /tmp (the HOME) and /dev/shm empty, whatever modes
    the previous run left on what it made there (M4)."""
    tree = tmp_path / "wt"
    tree.mkdir()
    left = run(
        harness, tree,
        "echo a > /dev/shm/left; mkdir -p /tmp/ro/deep && echo b > /tmp/ro/deep/f && "
        "chmod 0555 /tmp/ro/deep /tmp/ro; mkdir /tmp/locked && echo c > /tmp/locked/f && "
        "chmod 0 /tmp/locked; echo d > /tmp/.profile-of-a",
    )  # fmt: skip
    assert left.exit_code == 0, left.output
    seen = run(harness, tree, "ls -A /tmp /dev/shm")
    assert seen.exit_code == 0, seen.output
    assert seen.output.split() == ["/dev/shm:", "/tmp:"], seen.output


@pytest.mark.docker
def test_a_process_that_outlives_the_sweep_fails_the_run(engine: Any, python_image: str) -> None:
    """Invariant: the sweep checks, not hopes: a process of the step's user it cannot kill
    (here PID 1 runs as that user, which kill(-1) spares) makes it fail, so the run is a
    harness error rather than a verdict."""
    with containers.created(
        engine,
        name=f"patchheal-sweeptest-{os.getpid()}",
        image=python_image,
        command=["sleep", "60"],
        user="1000:1000",
        labels=ownership.owner_labels("sweeptest", "sweeptest"),
        network_mode="none",
    ) as container:
        containers.start(container)
        with pytest.raises(containers.HarnessError, match=f"exit code {sweep.SURVIVED}"):
            containers.exec_checked(
                container, sweep.SWEEP_COMMAND, user="1000:1000", environment={},
                workdir="/", what="the sweep",
            )  # fmt: skip


def _job_worktree(make_repo: Any, tmp_path: Path) -> tuple[JobWorkspace, Path]:
    repo = make_repo({"app.py": "VALUE = 1\n"})
    workspace = JobWorkspace(repo, "HEAD", "between-git", root=tmp_path / "wt-root")
    workspace.open()
    return workspace, workspace.worktree("verify")


def test_git_mounts_come_from_the_records_not_the_worktree(
    make_repo: Any, python_def: HarnessDef, tmp_path: Path
) -> None:
    """Invariant: what a step container mounts for git is derived from the private
    repository's records; a `.git` file naming any host directory changes nothing (H1)."""
    workspace, tree = _job_worktree(make_repo, tmp_path)
    secret = tmp_path / "private-home" / ".ssh"
    secret.mkdir(parents=True)
    (tree / ".git").unlink()
    (tree / ".git").write_text(f"gitdir: {secret}\n")  # what the step wrote
    kwargs = sandbox.step_container_kwargs(
        python_def, image="img", command="true", worktree=tree, user="1000:1000",
        env={}, labels={},
    )  # fmt: skip
    sources = [m["Source"] for m in kwargs["mounts"]]
    assert not any(s.startswith(str(secret.parent)) for s in sources), sources
    assert str(workspace.private.resolve()) in sources
    gitfile = next(m["Source"] for m in kwargs["mounts"] if m["Target"].endswith("/.git"))
    assert secret.name not in Path(gitfile).read_text()
    assert (tree / ".git").read_text().strip().endswith("/worktrees/verify")  # put back


@pytest.mark.docker
def test_a_rewritten_git_file_never_mounts_a_host_directory(
    harness: DockerHarness, make_repo: Any, tmp_path: Path
) -> None:
    """Invariant (H1, end to end): the step rewrites `.git` after a reset; later runs see
    neither the directory it names nor lose the repository (git still works inside)."""
    workspace, tree = _job_worktree(make_repo, tmp_path)
    secret = tmp_path / "private-home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_rsa").write_text("PRIVATE-KEY-BYTES\n")
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    first = run(harness, tree, "git rev-parse HEAD")
    assert first.output.strip() == head, first.output
    workspace.reset(tree)  # between attempts
    # Verification run 1 of a candidate; run 2 follows with no reset in between.
    run(harness, tree, f"rm -f .git; printf 'gitdir: {secret}\\n' > .git; true")
    later = run(harness, tree, f"cat {secret}/id_rsa; git rev-parse HEAD")
    assert "PRIVATE-KEY-BYTES" not in later.output, later.output
    assert head in later.output, later.output
