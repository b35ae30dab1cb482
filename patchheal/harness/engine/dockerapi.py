"""The Docker engine's API: one connection, and calls that retry its transient faults."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from patchheal.errors import InfraUnavailable
from patchheal.retry import retrying

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container


_T = TypeVar("_T")


# runc can fail to start an exec'd process ("OCI runtime exec failed: exec failed: unable
# to start container process: read init-p: connection reset by peer", seen once in a
# full test run on a loaded 2-core machine). The engine then reports exit code 126 with
# that line as the output, and none of the command ran: starting it again is safe.
EXEC_TRIES = 3
_NOT_STARTED = "OCI runtime exec failed"
_RUNC_FAULTS = ("connection reset by peer", "broken pipe", "init-p")


def exec_not_started(exit_code: object, output: str) -> bool:
    """Whether an exec failed in runc before its command started (worth starting again)."""
    head = output.lstrip()[:800]
    return (
        exit_code in (126, 127)
        and head.startswith(_NOT_STARTED)
        and any(fault in head for fault in _RUNC_FAULTS)
    )


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


def list_containers(client: DockerClient, **filters: Any) -> list[Container]:
    """Every container (running or not) matching `filters`. The SDK lists ids, then inspects
    each: a container that goes away between the two (an auto-removed sandbox ending, another
    process's cleanup) is left out instead of failing the whole listing with NotFound."""
    return call(client.containers.list, all=True, ignore_removed=True, **filters)
