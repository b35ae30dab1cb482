"""The Docker harness against the real engine: sandbox, timeouts, cleanup, results."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, labelled, python_def, python_image, python_project

from patchheal.harness.base import Harness
from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.harness.engine import containers, ownership

__all__ = ["engine", "python_def", "python_image"]

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def _shared_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # One wheelhouse for the session, not one per test's fresh HOME.
    root = tmp_path_factory.getbasetemp() / "patchheal-cache"
    monkeypatch.setenv("PATCHHEAL_CACHE_DIR", str(root))


@pytest.fixture
def harness(python_image: str, python_def: HarnessDef, request: Any) -> Any:
    job_id = f"t-{request.node.name[:40]}-{os.getpid()}"
    h = DockerHarness(python_def, job_id=job_id)
    yield h
    h.close()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    path.mkdir()
    (path / "hello.txt").write_text("hi\n")
    return path


def run(h: DockerHarness, tree: Path, command: str, **kw: Any) -> Any:
    kw.setdefault("timeout", 60)
    kw.setdefault("idle_timeout", 60)
    return h.run(command, tree, **kw)


def test_satisfies_the_protocol_and_reports_its_name(harness: DockerHarness) -> None:
    assert isinstance(harness, Harness)
    assert harness.name == "docker:python"


def test_exit_code_and_output_come_back(harness: DockerHarness, tree: Path) -> None:
    result = run(harness, tree, "cat hello.txt; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert "hi" in result.output
    assert "err" in result.output
    assert result.harness == "docker:python"
    assert result.timed_out is None
    assert not result.oom_killed


def test_no_network_but_loopback(harness: DockerHarness, tree: Path) -> None:
    """Invariant: a step cannot reach any network; shown by its interfaces, no traffic sent."""
    result = run(harness, tree, "ls /sys/class/net; tail -n +3 /proc/net/dev | cut -d: -f1")
    assert result.exit_code == 0
    names = set(result.output.split())
    assert names == {"lo"}


def test_writes_only_inside_the_worktree(harness: DockerHarness, tree: Path) -> None:
    """Invariant: the worktree mount is the only writable host path; the root is read-only."""
    script = (
        "echo made > /workspace/made.txt && echo ok-workspace; "
        "touch /etc/evil 2>/dev/null && echo wrote-etc; "
        "touch /usr/evil 2>/dev/null && echo wrote-usr; "
        "touch /evil 2>/dev/null && echo wrote-root; "
        "touch /tmp/scratch && echo ok-tmp"
    )
    result = run(harness, tree, script)
    assert "ok-workspace" in result.output
    assert "ok-tmp" in result.output
    assert "wrote-" not in result.output
    assert (tree / "made.txt").read_text() == "made\n"


def test_runs_as_non_root(harness: DockerHarness, tree: Path) -> None:
    result = run(harness, tree, "id -u; id -g; grep CapEff /proc/self/status")
    uid, gid, caps = result.output.split("\n")[:3]
    assert uid != "0"
    assert gid != "0"
    expected = str(tree.stat().st_uid) if tree.stat().st_uid != 0 else "1000"
    assert uid == expected
    assert caps.split()[-1] == "0000000000000000"


def test_deterministic_environment_and_no_inherited_secrets(
    python_image: str, python_def: HarnessDef, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PH_TEST_SECRET_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("PH_TEST_PASSED", "through")
    h = DockerHarness(python_def, job_id=f"env-{os.getpid()}", env_passthrough=["PH_TEST_PASSED"])
    try:
        result = run(h, tree, "env")
    finally:
        h.close()
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert env["TZ"] == "UTC"
    assert env["PYTHONHASHSEED"] == "0"
    assert env["LC_ALL"] == "C.UTF-8"
    assert env["PH_TEST_PASSED"] == "through"
    assert "s3cr3t-value" not in result.output


def test_idle_timeout_kills_the_step(harness: DockerHarness, tree: Path) -> None:
    started = time.monotonic()
    result = run(harness, tree, "echo start; sleep 3; touch late; sleep 60", idle_timeout=2)
    assert result.timed_out == "idle"
    assert result.exit_code is None
    assert "start" in result.output
    assert time.monotonic() - started < 15
    time.sleep(2)
    assert not (tree / "late").exists()  # killed, not left running in the sandbox


def test_wall_timeout_kills_a_chatty_step(harness: DockerHarness, tree: Path) -> None:
    started = time.monotonic()
    command = "while true; do echo tick >> ticks; echo tick; sleep 0.2; done"
    result = run(harness, tree, command, timeout=3, idle_timeout=60)
    assert result.timed_out == "wall"
    assert result.output.count("tick") >= 5
    assert time.monotonic() - started < 15
    count = len((tree / "ticks").read_text().splitlines())
    time.sleep(1)
    assert len((tree / "ticks").read_text().splitlines()) == count  # nothing ticks on


def test_oom_kill_is_reported(python_image: str, python_def: HarnessDef, tree: Path) -> None:
    """Without the per-process limit, the cgroup's OOM kill is what stops a runaway step.
    (192m, not less: the harness's venv, made on first use under the same limit, needs
    about 100m for ensurepip; at 64m this test failed whenever it ran first.)"""
    small = _sandboxed(python_def, memory="192m", process_memory="off")
    h = DockerHarness(small, job_id=f"oom-{os.getpid()}")
    try:
        result = run(h, tree, "python3 -c 'x = bytearray(600 * 1024 * 1024); print(len(x))'")
    finally:
        h.close()
    assert result.oom_killed
    assert result.exit_code == 137
    assert not result.passed


def _sandboxed(defn: HarnessDef, **sandbox: str) -> HarnessDef:
    return defn.model_copy(update={"sandbox": defn.sandbox.model_copy(update=sandbox)})


_RUNAWAY_TESTS = """\
import itertools


def take_all(iterable):
    return list(iterable)  # the bug: an infinite input is consumed without end


def test_infinite_input():
    assert take_all(itertools.count())[:3] == [0, 1, 2]


def test_finite_input():
    assert take_all(range(3)) == [0, 1, 2]
"""


def test_a_runaway_test_fails_in_its_process_and_is_a_code_bug(
    python_image: str, python_def: HarnessDef, tree: Path
) -> None:
    """A test that allocates without end raises MemoryError under its process's data limit
    (7/8 of the container's memory): the runner survives, names the test, runs the others,
    and the failure is the code's to patch, as in a plain venv on a CI runner."""
    from patchheal.failure.analysis import analyze
    from patchheal.failure.classify import classify
    from patchheal.harness.engine.sandbox import size_bytes

    (tree / "test_runaway.py").write_text(_RUNAWAY_TESTS)
    h = DockerHarness(_sandboxed(python_def, memory="256m"), job_id=f"runaway-{os.getpid()}")
    try:
        limit = run(
            h, tree, "python3 -c 'import resource; print(resource.getrlimit(resource.RLIMIT_DATA))'"
        )
        result = run(h, tree, "python3 -m pytest -q -p no:cacheprovider test_runaway.py")
    finally:
        h.close()
    share = size_bytes("256m") * 7 // 8
    assert f"({share}, -1)" in limit.output  # soft; the hard limit stays unlimited
    assert not result.oom_killed, result.output[-2000:]
    assert result.exit_code == 1, result.output[-2000:]
    assert "MemoryError" in result.output
    assert "1 failed, 1 passed" in result.output
    verdict = classify(analyze(result.output), result.output, exit_code=result.exit_code)
    assert verdict.failure_class.value == "code_bug", verdict
    assert any("test_infinite_input" in line for line in verdict.evidence)


def test_container_gone_after_success_failure_and_interrupt(
    harness: DockerHarness, tree: Path
) -> None:
    """Invariant: no container survives the harness, whatever path its runs left by."""
    run(harness, tree, "true")
    run(harness, tree, "exit 1")

    def interrupt(_chunk: bytes) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(harness, tree, "echo go; sleep 60", on_output=interrupt)
    harness.close()
    assert labelled(harness.client, harness.job_id)["containers"] == []


def test_a_stale_same_name_container_is_replaced(harness: DockerHarness, tree: Path) -> None:
    name = ownership.container_name(harness.job_id, harness.purpose(tree.resolve()))
    harness.client.containers.create(
        harness.image(), ["sleep", "60"], name=name, labels={ownership.LABEL: "1"}
    )
    result = run(harness, tree, "echo fresh")
    assert result.exit_code == 0
    assert "fresh" in result.output
    harness.close()
    assert labelled(harness.client, harness.job_id)["containers"] == []


def test_setup_runs_once_per_dependency_fingerprint(
    python_image: str, python_def: HarnessDef, make_repo: Any, tmp_path: Path
) -> None:
    """Invariant: dependencies install once per fingerprint, not per attempt."""
    repo = python_project(make_repo)
    said: list[str] = []
    # A nonce: an earlier session's dependency image must not satisfy this one.
    setup = [f"pip install -e . && echo installed-once {uuid.uuid4().hex}"]
    first = DockerHarness(python_def, job_id=f"deps-{os.getpid()}", setup=setup, say=said.append)
    first.prepare(repo)
    result = run(first, repo, "python -c 'import tiny; print(tiny.__file__)'; python -m pytest -q")
    first.close()
    assert "/workspace/tiny.py" in result.output
    assert "1 passed" in result.output
    assert any("installed-once" in s for s in said)
    said.clear()
    second = DockerHarness(python_def, job_id=f"deps2-{os.getpid()}", setup=setup, say=said.append)
    second.prepare(repo)
    assert second.run_image(repo) == first.run_image(repo)
    assert not any("installed-once" in s for s in said)
    containers.remove_image(second.client, second.run_image(repo))
    second.close()


def test_a_live_runs_dependency_image_is_spared_by_gc_and_rebuilt_when_removed(
    python_image: str, python_def: HarnessDef, make_repo: Any, tmp_path: Path
) -> None:
    """Invariant: `gc --images` never removes the dependency image a live run steps in, not
    even a gc of another user or `HOME` (which sees none of the run's file holds: CI saw
    the demo die when another test's gc pruned its image); `docker rmi` is refused;
    and one removed anyway (its pin killed first) is a cache miss built again, not a crash."""
    import sys

    import docker.errors

    from patchheal.harness.engine import imagepin, orphans

    repo = python_project(make_repo)
    said: list[str] = []
    setup = [f"pip install -e . && echo installed {uuid.uuid4().hex}"]
    job_id = f"held-{os.getpid()}"
    h = DockerHarness(python_def, job_id=job_id, setup=setup, say=said.append)
    try:
        image = h.run_image(repo)
        assert image.startswith(f"{ownership.DEPS_REPOSITORY}/")
        assert image not in {o.name for o in orphans.dependency_images(h.client)}
        elsewhere = {
            **os.environ, "HOME": str(tmp_path / "other"),
            "XDG_CACHE_HOME": str(tmp_path / "other-cache"),
        }  # fmt: skip
        gc = subprocess.run(
            [sys.executable, "-m", "patchheal", "gc", "--images", "--dry-run"],
            capture_output=True, text=True, env=elsewhere, timeout=120, check=True,
        )  # fmt: skip
        assert image not in gc.stdout, gc.stdout
        with pytest.raises(docker.errors.APIError, match="is using its referenced image"):
            h.client.images.remove(image)  # `docker rmi` without -f
        pin_filter = {"label": [f"{ownership.LABEL_JOB}={job_id}",
                                f"{ownership.LABEL_PURPOSE}={imagepin.PURPOSE}"]}  # fmt: skip
        pins = h.client.containers.list(filters=pin_filter)
        assert len(pins) == 1
        pins[0].remove(force=True)
        containers.remove_image(h.client, image)
        said.clear()
        result = run(h, repo, "python -m pytest -q")
        assert "1 passed" in result.output, result.output
        assert any("is gone: installing again" in s for s in said), said
        assert any("installed" in s for s in said)
    finally:
        client = h.client
        h.close()
    # Released with the run: its pin is gone and the image a cache again, gc's to prune.
    assert not client.containers.list(all=True, filters=pin_filter)
    assert image in {o.name for o in orphans.dependency_images(client)}
    containers.remove_image(client, image)


def test_git_works_inside_the_step_and_sees_only_the_base(
    harness: DockerHarness, make_repo: Any, tmp_path: Path
) -> None:
    """A step that calls git sees the job's private repository read-only: the base commit,
    and not the user's later commits."""
    from patchheal.workspace.worktrees import JobWorkspace

    repo = make_repo({"a.txt": "one\n"})
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "later"], cwd=repo, check=True)
    workspace = JobWorkspace(repo, "HEAD~1", "git-in-step", root=tmp_path / "wt-root")
    workspace.open()
    tree = workspace.worktree("verify")
    result = run(
        harness,
        tree,
        "git rev-parse HEAD && git log --all --oneline | wc -l && git status --short && echo ok",
    )
    assert result.exit_code == 0, result.output
    lines = result.output.split()
    assert lines[0] == workspace.base_commit
    assert lines[1] == "1"
    assert "ok" in lines
    write = run(harness, tree, "git commit -q --allow-empty -m x 2>&1; echo rc=$?")
    assert "rc=0" not in write.output


def test_a_bare_pytest_after_setup_is_the_job_environments(
    python_image: str, python_def: HarnessDef, make_repo: Any
) -> None:
    """Invariant: after `pip install -e .[test]`, a bare `pytest` in a step is the job's
    environment's: it imports what setup installed. The image's own pytest satisfies the
    `[test]` extra, so pip writes no script for it; a bare `pytest` used to be
    /usr/bin/pytest, whose interpreter cannot see the venv (ModuleNotFoundError for the
    project, classified as a code bug)."""
    repo = make_repo(
        {
            "pyproject.toml": '[project]\nname = "srcpkg"\nversion = "0.1"\n'
            '[project.optional-dependencies]\ntest = ["pytest"]\n'
            '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n',
            # A src layout: importable only when installed, never from the working directory.
            "src/srcpkg/__init__.py": "def triple(x):\n    return 3 * x\n",
            "tests/test_srcpkg.py": "from srcpkg import triple\n\n"
            "def test_triple():\n    assert triple(2) == 6\n",
        }
    )
    setup = [f"pip install -e .[test] && echo {uuid.uuid4().hex}"]
    h = DockerHarness(python_def, job_id=f"barepytest-{os.getpid()}", setup=setup)
    try:
        h.prepare(repo)
        result = run(h, repo, "command -v pytest; command -v py.test; pytest -q")
        assert result.exit_code == 0, result.output
        assert "/opt/patchheal/venv/bin/pytest\n" in result.output
        assert "/opt/patchheal/venv/bin/py.test\n" in result.output
        assert "1 passed" in result.output
        containers.remove_image(h.client, h.run_image(repo))
    finally:
        h.close()


def test_an_image_pin_the_engine_refuses_is_a_harness_error(python_image: str) -> None:
    """A pin the engine will not create (here: a bind mount it rejects) is a clear harness
    error naming the image, not a traceback; a missing image is no pin at all."""
    from patchheal.errors import HarnessError
    from patchheal.harness.engine import dockerapi, imagepin

    client = dockerapi.engine()
    with pytest.raises(HarnessError, match=f"cannot pin image {python_image}"):
        imagepin.pin(client, python_image, f"pin-refused-{os.getpid()}", ["not/absolute"])
    assert imagepin.pin(client, "patchheal-deps/none:missing", f"pin-none-{os.getpid()}") is None
    assert not labelled(client, f"pin-refused-{os.getpid()}")["containers"]


class _RemovedOnCreation:
    """The engine's client, except that each container it creates is removed at once, by
    the engine, before its creator can start it (as someone else's cleanup could)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.containers = self

    def create(self, *args: Any, **kwargs: Any) -> Any:
        container = self._client.containers.create(*args, **kwargs)
        container.remove(force=True)
        return container


def test_an_image_pin_removed_before_it_starts_is_no_pin(python_image: str) -> None:
    """A pin whose container is gone before it starts is no pin (the run makes sure of its
    image and pins again), not a failed run; nothing of it is left in the engine."""
    from patchheal.harness.engine import dockerapi, imagepin

    client = dockerapi.engine()
    job = f"pin-vanished-{os.getpid()}"
    vanishing: Any = _RemovedOnCreation(client)
    assert imagepin.pin(vanishing, python_image, job) is None
    assert not labelled(client, job)["containers"]
    pinned = imagepin.pin(client, python_image, job)
    assert pinned is not None
    imagepin.unpin(pinned)
    assert not labelled(client, job)["containers"]
