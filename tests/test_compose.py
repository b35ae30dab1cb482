"""The compose harness: services on a private network, the step beside them, all torn down."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, labelled, python_def, python_image, sandboxes

from patchheal.errors import SpecError
from patchheal.harness.compose import file as composefile
from patchheal.harness.compose.harness import ComposeHarness
from patchheal.harness.definitions import load_harness

__all__ = ["engine", "python_def", "python_image"]

COMPOSE = """\
services:
  web:
    x-patchheal-harness: python
    command: ["python3", "-m", "http.server", "8000", "--directory", "/srv"]
    working_dir: /srv
    tmpfs: ["/srv"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import socket as s; s.create_connection(('127.0.0.1', 8000))"]
      interval: 200ms
      retries: 50
  step:
    depends_on: [web]
    environment:
      WEB_URL: http://web:8000/
"""

STEP = (
    'python3 -c "import os, urllib.request; '
    "r = urllib.request.urlopen(os.environ['WEB_URL'], timeout=5); "
    "print('status', r.status)\""
)


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ph-cache"))


@pytest.mark.docker
def test_step_talks_to_a_service_and_both_are_torn_down(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text(COMPOSE)
    job_id = f"compose-{os.getpid()}"
    harness = ComposeHarness(load_harness("compose"), job_id=job_id)
    seen: list[dict[str, Any]] = []

    def inspect_while_running(_chunk: bytes) -> None:
        seen.extend(
            n.attrs for n in engine.networks.list(filters={"label": f"patchheal.job={job_id}"})
        )
        seen.append({"containers": sandboxes(engine, job_id)})

    try:
        harness.prepare(tree)
        result = harness.run(
            STEP, tree, timeout=120, idle_timeout=60, on_output=inspect_while_running
        )
    finally:
        harness.close()
    assert "status 200" in result.output, result.output
    assert result.harness == "docker:compose"
    # While the step ran: both services up, on one private network with no way out.
    networks = [n for n in seen if "Internal" in n]
    assert networks
    assert all(n["Internal"] for n in networks)
    # The web service, the results keeper and the step (results/volume.py).
    assert len(next(n for n in seen if "containers" in n)["containers"]) == 3
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}


TESTS = "def test_up():\n    assert True\n\n\ndef test_down():\n    assert 1 == 2\n"
# From a shell: the tripwire refuses a watched Python process's writes there.
FILL = 'head -c 83886080 /dev/zero > "$PATCHHEAL_RESULTS_DIR/big"; python3 -m pytest -q test_it.py'


@pytest.mark.docker
def test_a_compose_steps_results_live_in_a_capped_volume_read_back_by_id(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """Issue 25, item 4, for compose: the step's collectors report by id through a capped
    tmpfs volume that a keeper holds after the step's container is gone (never a host
    directory); a step that fills it past its cap is rejected with the cap as its reason;
    the volume and the keeper are torn down with the rest."""
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text(COMPOSE)
    (tree / "test_it.py").write_text(TESTS)
    job_id = f"compose-results-{os.getpid()}"
    harness = ComposeHarness(load_harness("compose"), job_id=job_id)
    try:
        harness.prepare(tree)
        plain = harness.run("python3 -m pytest -q test_it.py", tree, timeout=120, idle_timeout=60)
        full = harness.run(FILL, tree, timeout=120, idle_timeout=60)
    finally:
        harness.close()
    assert plain.exit_code == 1, plain.output
    assert plain.tests is not None, plain.output
    assert plain.tests.outcomes == {
        "test_it.py::test_up": "passed",
        "test_it.py::test_down": "failed",
    }
    assert not plain.tests.rejected, plain.tests.rejected
    assert "No space left on device" in full.output, full.output
    assert full.tests is not None, full.output
    rejected = " | ".join(full.tests.rejected)
    assert f"reached its cap of {64 << 20} bytes" in rejected, rejected
    assert not list(tmp_path.rglob("big"))
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}


@pytest.mark.docker
def test_a_service_that_exits_fails_clearly_and_cleans_up(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    from patchheal.errors import HarnessError

    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text(
        "services:\n  db:\n    x-patchheal-harness: python\n"
        "    command: sh -c 'echo db broke; sleep 1; exit 3'\n    volumes: [data:/data]\n"
        "    healthcheck: {test: 'test -f /data/ready', interval: 100ms}\n"
    )
    job_id = f"compose-bad-{os.getpid()}"
    harness = ComposeHarness(load_harness("compose"), job_id=job_id)
    try:
        with pytest.raises(HarnessError, match="db broke"):
            harness.run("true", tree, timeout=60, idle_timeout=60)
    finally:
        harness.close()
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}


@pytest.mark.docker
def test_a_service_that_never_gets_ready_times_out_and_cleans_up(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """Invariant: a service whose health check never reports stops the run after the
    definition's ready_timeout with a one-line reason (the wait loop is tenacity's), and
    nothing of the run is left."""
    from patchheal.errors import HarnessError

    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text(
        "services:\n  db:\n    x-patchheal-harness: python\n    command: sleep 60\n"
        "    healthcheck: {test: 'true', interval: 1h, start_period: 1h}\n"
    )
    defn = load_harness("compose")
    assert defn.compose is not None
    defn = defn.model_copy(update={"compose": defn.compose.model_copy(update={"ready_timeout": 1})})
    job_id = f"compose-slow-{os.getpid()}"
    harness = ComposeHarness(defn, job_id=job_id)
    try:
        with pytest.raises(HarnessError, match=r"service 'db' not ready after 1 s"):
            harness.run("true", tree, timeout=60, idle_timeout=60)
    finally:
        harness.close()
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}


def test_compose_subset_parses_order_and_durations(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(COMPOSE)
    services = composefile.load(path)
    assert list(services) == ["web", "step"]
    assert services["web"].healthcheck is not None
    assert services["web"].healthcheck["interval"] == 200_000_000
    assert services["step"].environment == {"WEB_URL": "http://web:8000/"}


def test_a_long_depends_on_chain_is_ordered_not_a_crash(tmp_path: Path) -> None:
    """Invariant: a compose file is untrusted input; a chain of 1200 services (deeper than
    Python's recursion limit; the recursive sort raised RecursionError) comes out in
    dependency order."""
    count = 1200
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n"
        + "".join(
            f"  s{i}:\n    image: x\n" + (f"    depends_on: [s{i + 1}]\n" if i < count - 1 else "")
            for i in range(count)
        )
    )
    order = list(composefile.load(path))
    assert order == [f"s{i}" for i in reversed(range(count))]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("services:\n  a:\n    build: .\n", "build is not supported"),
        ("services:\n  a:\n    volumes: ['./x:/y']\n", "only named volumes"),
        ("services:\n  a:\n    depends_on: [b]\n", "unknown service 'b'"),
        ("services:\n  a:\n    depends_on: [b]\n  b:\n    depends_on: [a]\n", "cycle: a → b → a"),
        ("services:\n  a:\n    privileged: true\n", "unsupported keys"),
        ("version: '3'\n", "no `services`"),
        ("services:\n  a:\n    healthcheck: {test: x, interval: soon}\n", "not a duration"),
    ],
)
def test_compose_subset_refuses_what_it_cannot_sandbox(
    tmp_path: Path, body: str, message: str
) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(body)
    with pytest.raises(SpecError, match=message):
        composefile.load(path)


@pytest.mark.docker
def test_a_compose_step_writing_past_worktree_size_is_stopped(
    engine: Any, python_image: str, tmp_path: Path
) -> None:
    """Issue 32 item 8, for compose: the step's worktree is watched as a session's is."""
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / "compose.yaml").write_text("services:\n  step:\n    environment:\n      X: '1'\n")
    job_id = f"compose-treesize-{os.getpid()}"
    harness = ComposeHarness(load_harness("compose"), job_id=job_id)
    box = harness.base.defn.sandbox.model_copy(update={"worktree_size": "20m"})
    harness.base.defn = harness.base.defn.model_copy(update={"sandbox": box})
    endless = "i=0; while true; do head -c 1048576 /dev/zero > big.$i; i=$((i+1)); sleep 0.1; done"
    try:
        harness.prepare(tree)
        stopped = harness.run(endless, tree, timeout=100, idle_timeout=100)
    finally:
        harness.close()
    assert stopped.timed_out is None, stopped.output
    assert stopped.exit_code is None
    assert stopped.stopped is not None
    assert "worktree_size = '20m'" in stopped.stopped
    assert stopped.duration_seconds < 60
    assert labelled(engine, job_id) == {"containers": [], "networks": [], "volumes": []}
