"""One sandbox container kept for a worktree: each step run is an exec in it.

Starting a container costs about 0.3 s on this engine (namespaces, mounts,
attach, start); an exec in a running one about 0.05 s. A session keeps the
guarantees of a fresh container for every run:

- before each run every process of the step's user is killed and /tmp is
  emptied, as that user, so nothing of the previous run is left (the
  container's own main process runs as another user, out of its reach); and
  after each run, in an exec of its own, the same and more (`sweep.py`): no
  process of the run may survive it (else the run is a harness error), /tmp,
  /dev/shm and /dev/mqueue are emptied whatever modes were left on them;
- the worktree is the same bind mount, reset by the host between attempts;
  a worktree that was re-created (a hard reset) gets a new container;
- limits, network, capabilities and user are the container's, the same for
  every run; an OOM kill is read from the container's cgroup counters;
- the container dies with the process that owns it: its main process reads
  its stdin, which the engine closes when the owner's attach connection goes
  (`stdin_once`), however the owner ends (SIGKILL included), and it is
  created with auto-remove.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchheal.errors import HarnessError
from patchheal.harness.engine import containers, dockerapi, outputpump, sweep
from patchheal.harness.engine.outputpump import Finished

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

    from patchheal.proc import _CappedBuffer

log = logging.getLogger(__name__)

# The container's main process: it waits for its stdin to close. It runs as a
# user the steps are not, so a step's `kill -9 -1` cannot end the session.
KEEPER_USER = "65534:65534"
KEEPER_COMMAND = ["/bin/sh", "-c", "cat >/dev/null"]
# Run as the step's user before every run and after a timeout: no process of
# that user survives (kill(-1) spares the caller and PID 1), /tmp is empty.
_SCRUB = "kill -9 -1 2>/dev/null; find /tmp -mindepth 1 -delete 2>/dev/null"
SCRUB_COMMAND = ["/bin/sh", "-c", f"{_SCRUB}; exit 0"]
# A run scrubs first in the same exec (one engine round trip, not two), then
# becomes the step: the step's command travels as $0, never spliced into the script.
RUN_PREFIX = f'{_SCRUB}; exec "$@"'


def run_argv(command: str, entrypoint: list[str], prelude: str = "") -> list[str]:
    """The exec of one run: scrub, the session's `prelude` (shell, e.g. a fresh results
    directory), then the image's entrypoint (as a fresh container's start would run it,
    e.g. one that writes a profile into /tmp), then the step.
    The step's command travels as an argument, never spliced into the script."""
    script = f'{_SCRUB}; {prelude}; exec "$@"' if prelude else RUN_PREFIX
    return ["/bin/sh", "-c", script, "patchheal-run", *entrypoint, "/bin/sh", "-c", command]


# Where the container's cgroup counts OOM kills: cgroup v2, then v1 (`oom_kill N` in both).
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


class SandboxSession:
    """A running sandbox container over one worktree; `run` execs a command in it."""

    def __init__(
        self,
        client: DockerClient,
        *,
        name: str,
        worktree: Path,
        user: str,
        workdir: str,
        create_kwargs: Mapping[str, Any],
        prelude: str = "",
    ) -> None:
        self.name = name
        self.prelude = prelude
        self.worktree = worktree
        self.user = user
        self.workdir = workdir
        self._client = client
        self._kwargs = dict(create_kwargs)
        self._identity = _identity(worktree)
        self._container: Container | None = None
        self._socket: Any = None
        self._oom_kills = 0
        self._entrypoint: list[str] = []

    def fits(self, worktree: Path, create_kwargs: Mapping[str, Any]) -> bool:
        """Whether this session can run for `worktree` with these container settings."""
        return (
            self._container is not None
            and worktree == self.worktree
            and _identity(worktree) == self._identity
            and dict(create_kwargs) == self._kwargs
            and self._alive()
        )

    def open(self) -> None:
        """Create and start the container, attached to its stdin."""
        import docker.errors

        containers.remove_stale(self._client, self.name)
        kwargs = {
            **self._kwargs,
            # The keeper bypasses the image's entrypoint (which may write into /tmp as the
            # keeper's user); every run goes through it instead (`run_argv`).
            "entrypoint": KEEPER_COMMAND,
            "command": None,
            "user": KEEPER_USER,
            "stdin_open": True,
            "auto_remove": True,
        }
        try:
            # detach=False with stdin_open is how the SDK sets StdinOnce: the engine
            # closes the keeper's stdin when the (only) attached client goes.
            container = dockerapi.call(
                self._client.containers.create, name=self.name, detach=False, **kwargs
            )
        except docker.errors.APIError as exc:
            raise HarnessError(
                f"cannot create container {self.name}: {exc.explanation or exc}"
            ) from None
        self._container = container
        try:
            try:
                image = dockerapi.call(self._client.images.get, str(self._kwargs["image"]))
            except docker.errors.ImageNotFound:
                raise HarnessError(
                    f"image {self._kwargs['image']} was removed while {self.name} started"
                ) from None
            self._entrypoint = list(image.attrs.get("Config", {}).get("Entrypoint") or [])
            # Attached before start, held open for the session's life: when this
            # process ends, the engine closes the keeper's stdin and the container stops.
            self._socket = containers.hold_stdin(container)
            containers.start(container)
            self._oom_kills = self._read_oom_kills()
        except BaseException:
            self.close()
            raise

    def _exec(
        self,
        command: str,
        environment: Mapping[str, str],
        timeout: float,
        idle_timeout: float,
        on_output: Callable[[bytes], None] | None,
    ) -> tuple[int | None, _CappedBuffer, str | None, float]:
        """One exec of `command`: its exit code, output, which timeout stopped it, its seconds."""
        assert self._container is not None
        api = self._container.client.api
        exec_id = dockerapi.call(
            api.exec_create,
            self._container.id,
            run_argv(command, self._entrypoint, self.prelude),
            user=self.user,
            environment=dict(environment),
            workdir=self.workdir,
            stdout=True,
            stderr=True,
        )["Id"]
        started = time.monotonic()
        pump = outputpump.OutputPump(
            dockerapi.call(api.exec_start, exec_id, stream=True), self.name
        )
        try:
            timed_out = pump.follow(
                started,
                timeout=timeout,
                idle_timeout=idle_timeout,
                on_output=on_output,
                kill=self._scrub,
            )
            output = pump.finish()
        except BaseException:
            # Interrupted (Ctrl-C, an output callback that raised): the step must not go
            # on running in the container behind the caller's back.
            with contextlib.suppress(Exception):
                self._scrub()
            raise
        duration = time.monotonic() - started
        code = dockerapi.call(api.exec_inspect, exec_id).get("ExitCode")
        return None if code is None else int(code), output, timed_out, duration

    def run(
        self,
        command: str,
        *,
        environment: Mapping[str, str],
        timeout: float,
        idle_timeout: float,
        on_output: Callable[[bytes], None] | None = None,
    ) -> Finished:
        """Run `command` as the step user after a scrub; kill it from outside on a timeout."""
        for _ in range(dockerapi.EXEC_TRIES):
            code, output, timed_out, duration = self._exec(
                command, environment, timeout, idle_timeout, on_output
            )
            if timed_out or not dockerapi.exec_not_started(code, output.text()):
                break
            log.warning("runc did not start the step's exec; again: %s", output.text()[:200])
        self._sweep()  # nothing of this run outlives it (sweep.py)
        oom = False
        if code == 137 and not timed_out:  # SIGKILL: the OOM killer's, or the step's own?
            kills = self._read_oom_kills()
            oom, self._oom_kills = kills > self._oom_kills, kills
        return Finished(
            exit_code=None if timed_out or code is None else int(code),
            output=output.text(),
            truncated=output.dropped > 0,
            timed_out=timed_out,
            oom_killed=oom,
            duration=duration,
        )

    @property
    def container(self) -> Container:
        """The running container (an open session's)."""
        assert self._container is not None, "the session is not open"
        return self._container

    def close(self) -> None:
        """Stop and remove the container; never raises."""
        if self._socket is not None:
            # The keeper's stdin closes: it exits, and auto-remove takes the container.
            containers.release_stdin(self._socket)
            self._socket = None
        container, self._container = self._container, None
        if container is None:
            return
        with contextlib.suppress(Exception):
            container.wait(timeout=5, condition="removed")
            return
        containers.teardown(container, grace=0)  # the keeper did not go: make it

    def stop(self) -> None:
        """Kill every process of the step's user now (a limit of the run was reached)."""
        self._scrub()

    def _scrub(self) -> None:
        assert self._container is not None
        containers.exec_checked(
            self._container,
            SCRUB_COMMAND,
            user=self.user,
            environment={},
            workdir="/",
            what="cleaning the sandbox between runs",
        )

    def _sweep(self) -> None:
        assert self._container is not None
        containers.exec_checked(
            self._container,
            sweep.SWEEP_COMMAND,
            user=self.user,
            environment={},
            workdir="/",
            what="ending the run (no process of it may survive, /tmp and /dev/shm emptied)",
        )

    def _read_oom_kills(self) -> int:
        assert self._container is not None
        text = containers.exec_checked(
            self._container,
            ["/bin/sh", "-c", f"cat {' '.join(OOM_COUNTERS)} 2>/dev/null; exit 0"],
            user=KEEPER_USER,
            environment={},
            workdir="/",
            what="reading the OOM counter",
        )
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0  # no counter: an OOM kill shows as a bare SIGKILL

    def _alive(self) -> bool:
        assert self._container is not None
        try:
            self._container.reload()
        except Exception:
            return False
        return bool(self._container.status == "running")


def _identity(worktree: Path) -> tuple[int, int]:
    """A re-created directory at the same path is another bind-mount source."""
    info = worktree.stat()
    return info.st_dev, info.st_ino
