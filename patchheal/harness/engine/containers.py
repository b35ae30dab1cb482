"""Container lifecycle: engine connection, names and labels, run-and-wait, teardown.

Every container, volume and network patchheal creates carries the labels of
`owner_labels`, so `patchheal gc` can tell whose it is and whether that
process still lives (pid + start time + host, so a reused pid is not taken for
the owner). A container's life is a context manager whose teardown escalates
stop → kill → remove, logs each step and never raises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from patchheal import proc
from patchheal.errors import HarnessError, InfraUnavailable
from patchheal.models import CommandResult, TestResults
from patchheal.proc import DEFAULT_OUTPUT_CAP, _CappedBuffer
from patchheal.retry import retrying

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

log = logging.getLogger(__name__)

LABEL = "patchheal"
LABEL_JOB = "patchheal.job"
LABEL_PURPOSE = "patchheal.purpose"
LABEL_PID = "patchheal.owner.pid"
LABEL_START = "patchheal.owner.start"
LABEL_HOST = "patchheal.owner.host"
LABEL_WORKTREE = "patchheal.worktree"
# The store (its key, workspace/worktrees.py `store_key`) of the run that made an object:
# `gc --db` and the end of a run remove only their own store's leftovers.
LABEL_STORE = "patchheal.store"
_store_key: list[str] = []


def set_store(key: str | None) -> None:
    """Label what this process creates from now on with store `key` (None: no label)."""
    _store_key[:] = [key] if key else []


_T = TypeVar("_T")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


def engine(timeout: float = 120.0) -> DockerClient:
    """A client for the local engine; `InfraUnavailable` (exit 3) when it is not there."""
    import docker

    try:
        client = docker.from_env(timeout=int(timeout))
        call(client.ping)
    except Exception as exc:
        raise InfraUnavailable(
            "the Docker engine is not reachable "
            f"({type(exc).__name__}: {str(exc)[:200]}); start it, check DOCKER_HOST and the "
            "socket permissions, or run with harness = 'local'"
        ) from None
    return client


def docker_reachable() -> bool:
    """True when an engine answers a ping within a few seconds."""
    try:
        engine(timeout=5).close()
    except InfraUnavailable:
        return False
    return True


def is_transient(exc: BaseException) -> bool:
    """Engine faults worth one more try: connection resets, timeouts, 5xx other than 'not found'."""
    import docker.errors
    import requests.exceptions

    if isinstance(exc, docker.errors.NotFound | docker.errors.ImageNotFound):
        return False
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code or 0
        return status >= 500 and "No such" not in str(exc.explanation or "")
    return isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout)


def call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Call an engine API function, retrying transient faults (3 tries, 0.5 s base)."""
    for attempt in retrying(is_transient, attempts=3, base=0.5):
        with attempt:
            return fn(*args, **kwargs)
    raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover


def owner_labels(job_id: str, purpose: str, *, worktree: str | None = None) -> dict[str, str]:
    pid = os.getpid()
    labels = {
        LABEL: "1",
        LABEL_JOB: job_id,
        LABEL_PURPOSE: purpose,
        LABEL_PID: str(pid),
        LABEL_START: str(proc.process_start(pid) or ""),
        LABEL_HOST: socket.gethostname(),
    }
    if worktree is not None:
        labels[LABEL_WORKTREE] = worktree
    if _store_key:
        labels[LABEL_STORE] = _store_key[0]
    return labels


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that created a labelled object still runs.

    Objects of another host are treated as alive: only that host can tell.
    """
    if labels.get(LABEL_HOST, socket.gethostname()) != socket.gethostname():
        return True
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    start = labels.get(LABEL_START, "")
    return proc.pid_alive(pid, int(start) if start.isdigit() else None)


def container_name(job_id: str, purpose: str) -> str:
    """Deterministic: the same job and purpose give the same name across runs."""
    return f"patchheal-{_UNSAFE.sub('-', job_id)}-{_UNSAFE.sub('-', purpose)}"[:120]


def remove_stale(client: DockerClient, name: str) -> None:
    """Remove a leftover container of the same name (a crashed earlier run)."""
    import docker.errors

    try:
        stale = client.containers.get(name)
    except docker.errors.NotFound:
        return
    log.info("removing stale container %s", name)
    teardown(stale)


def teardown(container: Container, *, grace: int = 2) -> None:
    """stop → kill → remove; logs each failure, never raises."""
    import docker.errors

    name = getattr(container, "name", "?")
    for step, action in (
        ("stop", lambda: container.stop(timeout=grace)),
        ("kill", container.kill),
        ("remove", lambda: container.remove(force=True, v=True)),
    ):
        try:
            if step != "remove":
                container.reload()
                if container.status not in ("running", "restarting", "paused"):
                    continue
            action()
        except docker.errors.NotFound:
            return
        except Exception as exc:  # teardown must go on to the next step whatever failed
            log.warning("container %s: %s failed: %s", name, step, exc)
    with contextlib.suppress(Exception):
        container.reload()
        log.warning("container %s still exists after teardown", name)


@contextlib.contextmanager
def created(
    client: DockerClient, *, name: str, stdin_once: bool = False, **create_kwargs: Any
) -> Iterator[Container]:
    """A created (not started) container, torn down on every path out.

    With `stdin_once`, the container's stdin is open until the first client
    attached to it goes (see `hold_stdin`): a main process that reads its
    stdin ends with the process that holds it, however that process ends.
    """
    import docker.errors

    remove_stale(client, name)
    # detach=False with stdin_open is how the SDK sets StdinOnce (it has no keyword for it).
    tied = {"detach": False, "stdin_open": True} if stdin_once else {"detach": True}
    try:
        container = call(client.containers.create, name=name, **tied, **create_kwargs)
    except docker.errors.ImageNotFound as exc:
        raise HarnessError(f"image missing for container {name}: {exc}") from None
    except docker.errors.APIError as exc:
        raise HarnessError(f"cannot create container {name}: {exc.explanation or exc}") from None
    try:
        yield container
    finally:
        teardown(container)


def hold_stdin(container: Container) -> Any:
    """Attach to a created container's stdin and keep the connection: the caller holds it
    for as long as the container may live (its main process reads the stdin)."""
    return container.attach_socket(params={"stdin": 1, "stream": 1})


def release_stdin(connection: Any) -> None:
    """Close a `hold_stdin` connection: the engine closes the container's stdin."""
    raw = getattr(connection, "_sock", connection)  # the SDK's SocketIO wraps the socket
    with contextlib.suppress(Exception):
        raw.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        raw.close()


def start(container: Container) -> None:
    """Start a created container; an engine refusal is a `HarnessError`, not a traceback."""
    import docker.errors

    try:
        call(container.start)
    except docker.errors.APIError as exc:
        raise HarnessError(
            f"the engine cannot start container {container.name}: {exc.explanation or exc}"
        ) from None


@dataclass(frozen=True)
class Finished:
    """What `run_to_completion` saw."""

    exit_code: int | None
    output: str
    truncated: bool
    timed_out: str | None
    oom_killed: bool
    duration: float
    stopped: str | None = None
    """Why a limit of the run stopped it (the worktree's size: treesize.py), or None."""

    def result(
        self, command: str, *, harness: str, memory: str, tests: TestResults | None = None
    ) -> CommandResult:
        """The harness's `CommandResult` of this run (one place for every container harness)."""
        output = self.output
        if self.oom_killed:
            output += f"\n[patchheal: the step was OOM-killed at {memory}]\n"
        if self.stopped:
            output += f"\n[patchheal: the step was stopped: {self.stopped}]\n"
        return CommandResult(
            command=command,
            exit_code=None if self.stopped else self.exit_code,
            stopped=self.stopped,
            output=output,
            duration_seconds=self.duration,
            timed_out=self.timed_out,
            truncated=self.truncated,
            oom_killed=self.oom_killed,
            harness=harness,
            tests=tests,
        )


class OutputPump:
    """An engine output stream read by a thread into a queue, and the timed loop over it.

    One place for the wall and idle timeouts of every run, whether a started
    container's attach stream or an exec's.
    """

    def __init__(self, stream: Any, name: str, cap: int = DEFAULT_OUTPUT_CAP) -> None:
        self.buffer = _CappedBuffer(cap)
        self._chunks: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(
            target=self._read, args=(stream, name), name=f"out-{name}", daemon=True
        )
        self._reader.start()

    def _read(self, stream: Any, name: str) -> None:
        try:
            for chunk in stream:
                self._chunks.put(chunk)
        except Exception as exc:  # the engine closed the stream; the exit status tells the rest
            log.debug("output stream of %s ended: %s", name, exc)
        finally:
            self._chunks.put(None)

    def follow(
        self,
        started: float,
        *,
        timeout: float,
        idle_timeout: float,
        on_output: Callable[[bytes], None] | None,
        kill: Callable[[], None],
    ) -> str | None:
        """Collect output until the stream ends; on a timeout `kill` and say which one."""
        last_output = started
        while True:
            now = time.monotonic()
            timed_out = (
                "wall"
                if now - started >= timeout
                else "idle"
                if now - last_output >= idle_timeout
                else None
            )
            if timed_out:
                with contextlib.suppress(Exception):
                    kill()
                return timed_out
            wait = min(started + timeout, last_output + idle_timeout) - now
            try:
                chunk = self._chunks.get(timeout=max(0.01, min(wait, 1.0)))
            except queue.Empty:
                continue
            if chunk is None:
                return None
            last_output = time.monotonic()
            self.buffer.add(chunk)
            if on_output is not None:
                on_output(chunk)

    def finish(self) -> _CappedBuffer:
        """The output, with what arrived between a timeout and the kill."""
        self._reader.join(timeout=5)
        while True:
            try:
                chunk = self._chunks.get_nowait()
            except queue.Empty:
                return self.buffer
            if chunk:
                self.buffer.add(chunk)


def run_to_completion(
    container: Container,
    *,
    timeout: float,
    idle_timeout: float,
    on_output: Callable[[bytes], None] | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> Finished:
    """Start `container`, stream its output, kill it from outside on a wall or idle timeout."""
    # Attach before start so that not a byte of output is missed.
    stream = container.attach(stdout=True, stderr=True, stream=True, logs=True)
    pump = OutputPump(stream, container.name, output_cap)
    started = time.monotonic()
    start(container)
    timed_out = pump.follow(
        started,
        timeout=timeout,
        idle_timeout=idle_timeout,
        on_output=on_output,
        kill=container.kill,
    )
    status = call(container.wait, timeout=60)
    duration = time.monotonic() - started
    buffer = pump.finish()
    container.reload()
    oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
    return Finished(
        exit_code=None if timed_out else int(status.get("StatusCode", -1)),
        output=buffer.text(),
        truncated=buffer.dropped > 0,
        timed_out=timed_out,
        oom_killed=oom,
        duration=duration,
    )


def exec_checked(
    container: Container,
    command: list[str],
    *,
    user: str,
    environment: dict[str, str],
    workdir: str,
    what: str,
    on_output: Callable[[bytes], None] | None = None,
) -> str:
    """Run `command` in a running container; `HarnessError` with the output tail if it fails."""
    api = container.client.api
    exec_id = call(
        api.exec_create,
        container.id,
        command,
        user=user,
        environment=environment,
        workdir=workdir,
        stdout=True,
        stderr=True,
    )["Id"]
    buffer = _CappedBuffer(DEFAULT_OUTPUT_CAP)
    for chunk in api.exec_start(exec_id, stream=True):
        buffer.add(chunk)
        if on_output is not None:
            on_output(chunk)
    code = call(api.exec_inspect, exec_id).get("ExitCode")
    if code != 0:
        tail = "\n".join("    " + line for line in buffer.text().rstrip().splitlines()[-40:])
        raise HarnessError(f"{what} failed with exit code {code}: {' '.join(command)}\n{tail}")
    return buffer.text()
