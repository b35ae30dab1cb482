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
import socket
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from patchheal.errors import HarnessError
from patchheal.harness.engine import containers, dockerapi
from patchheal.harness.engine.dockerapi import call
from patchheal.harness.engine.outputpump import Finished, OutputPump
from patchheal.proc import DEFAULT_OUTPUT_CAP, _CappedBuffer

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

log = logging.getLogger(__name__)


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
    for _ in range(dockerapi.EXEC_TRIES):
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
        if not dockerapi.exec_not_started(code, buffer.text()):
            break
        log.warning("%s: runc did not start the exec; again: %s", what, buffer.text()[:200])
    if code != 0:
        tail = "\n".join("    " + line for line in buffer.text().rstrip().splitlines()[-40:])
        raise HarnessError(f"{what} failed with exit code {code}: {' '.join(command)}\n{tail}")
    return buffer.text()


def remove_image(client: DockerClient, ref: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.ImageNotFound):
        dockerapi.call(client.images.remove, ref, force=True)


def remove_network(network: Any) -> None:
    """Disconnect whatever is attached, then remove; logs, never raises."""
    try:
        network.reload()
        for attached in network.containers:
            containers.teardown(attached)
        network.remove()
    except Exception as exc:  # teardown must not raise
        log.warning("removing network %s failed: %s", getattr(network, "name", "?"), exc)


def remove_volume(client: DockerClient, name: str) -> None:
    import docker.errors

    try:
        client.volumes.get(name).remove(force=True)
    except docker.errors.NotFound:
        return
    except Exception as exc:  # teardown must not raise
        log.warning("removing volume %s failed: %s", name, exc)
