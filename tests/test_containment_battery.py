"""The containment battery (tests/containment_battery.py) in the real Docker harness:
every family × form of hostile step code, then a follower run; 0 host markers,
0 hangs, 0 internal errors (issue 25, "Done means").

The probes that need a whole heal (C1's host `pip download`, C2's false `fixed`,
H1's `.git` redirect, L5, s5/s7) are tested end to end in their own files
(test_host_escape_pipdl.py, test_containment_probes.py, test_environment_pose.py,
test_tripwire.py); their step-level forms (a detached process, files left in /tmp
and /dev/shm, a FIFO, a symlink, 3 GiB, deep JUnit in the results directory) are
families here.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.models import CommandResult
from tests.containment_battery import FAMILIES, FOLLOW, FORMS, Candidate, generate

__all__ = ["engine", "python_def", "python_image"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class _Server:
    """A TCP server on all host interfaces that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))  # the bridge gateway's address counts too
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.sock.close()


def _worktree_text(tree: Path) -> str:
    """What the run left in the worktree (the candidate's own sources aside)."""
    left = [p for p in tree.iterdir() if p.is_file() and p.suffix != ".py"]
    return "".join(p.read_text(errors="replace") for p in left)


def _judge(
    c: Candidate,
    run: CommandResult,
    follow: CommandResult,
    elapsed: float,
    tree: Path,
    host_dir: Path,
    secret: str,
    accepted: int,
) -> list[str]:
    """The host markers this candidate left (empty: contained)."""
    found = []
    if elapsed > 45 or run.timed_out:
        found.append(f"slow or hung ({elapsed:.0f} s)")
    names = sorted(p.name for p in host_dir.iterdir())
    if names != ["secret"]:
        found.append(f"host directory written: {names}")
    kept = [run.output, follow.output, repr(run.tests), repr(follow.tests), _worktree_text(tree)]
    if any(secret in text for text in kept):
        found.append("the host's secret reached the run's output, results or worktree")
    if accepted:
        found.append(f"{accepted} connection(s) to the host server")
    if any("BREACH:" in text for text in kept) or list(tree.glob("breach-*")):
        found.append("a forbidden action succeeded")
    found += [line for line in follow.output.splitlines() if line.startswith("FOLLOW")]
    late = list(tree.glob("late-*"))
    for path in late:
        path.unlink()
    if late:
        time.sleep(0.5)
        if list(tree.glob("late-*")):
            found.append("a process of the run still writes the worktree")
    return found


def test_every_hostile_candidate_is_contained(
    python_image: str,
    python_def: HarnessDef,
    tmp_path: Path,
    server: _Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = secrets.token_hex(16)
    monkeypatch.setenv("CB_SECRET", secret)
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "secret").write_text(secret)
    host_dir.chmod(0o755)
    candidates = generate(str(host_dir), server.port)
    assert len(candidates) == len(FAMILIES) * len(FORMS) >= 40
    capped = python_def.model_copy(
        update={"sandbox": python_def.sandbox.model_copy(update={"results_size": "16m"})}
    )
    harness = DockerHarness(capped, job_id=f"cb-{os.getpid()}")
    tree = tmp_path / "wt"
    tree.mkdir()
    markers: dict[str, list[str]] = {}
    try:
        for c in candidates:
            for stale in tree.iterdir():
                stale.unlink()
            (tree / "cand.py").write_text(c.source)
            (tree / "follow.py").write_text(FOLLOW)
            before = server.accepted
            started = time.monotonic()
            try:
                run = harness.run("python -I cand.py", tree, timeout=60, idle_timeout=60)
                elapsed = time.monotonic() - started
                follow = harness.run("python -I follow.py", tree, timeout=60, idle_timeout=60)
            except Exception as exc:  # an internal error is a finding, not a crash of the test
                markers[f"{c.family} / {c.form}"] = [f"internal error: {exc!r}"]
                continue
            accepted = server.accepted - before
            found = _judge(c, run, follow, elapsed, tree, host_dir, secret, accepted)
            if run.exit_code != 0 or "Traceback" in run.output:
                # A candidate that crashed tried nothing: a defect of the battery.
                found.append(f"did not run through (exit {run.exit_code}): {run.output[-300:]}")
            if found:
                markers[f"{c.family} / {c.form}"] = found
    finally:
        harness.close()
    assert markers == {}, "\n".join(f"{k}: {v}" for k, v in markers.items())


def test_the_battery_can_see_a_breach(
    python_image: str, python_def: HarnessDef, tmp_path: Path, server: _Server
) -> None:
    """The judge is not blind: the same markers, made by a run that is allowed to make
    them (the host secret planted in the worktree, a file left in /tmp by a follower
    that cannot be swept because it is the follower's own), are found."""
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "secret").write_text("s3cr3t-value")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "leak-x").write_text("s3cr3t-value")
    harness = DockerHarness(python_def, job_id=f"cb-judge-{os.getpid()}")
    try:
        run = harness.run("echo BREACH:demo", tree, timeout=60, idle_timeout=60)
        follow = harness.run(
            "touch /tmp/x; ls /tmp | sed 's/^/FOLLOW left /'", tree, timeout=60, idle_timeout=60
        )
    finally:
        harness.close()
    c = Candidate("x", "demo", "demo", "")
    found = _judge(c, run, follow, 1.0, tree, host_dir, "s3cr3t-value", 1)
    assert len(found) == 4, found
