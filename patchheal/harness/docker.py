"""The Docker harness: each run is a fresh sandboxed container over the worktree.

`prepare` builds the harness image if it is missing (offline when no registry
answers) and the dependency image once per dependency fingerprint; `run`
starts a fresh container from it with the worktree bind-mounted at the
harness's workdir, streams its output, kills it from outside on a wall or idle
timeout, and removes it on every path out (success, failure, timeout, Ctrl-C).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.harness import containers, deps, images, sandbox
from patchheal.harness.base import OutputSink
from patchheal.harness.config import HarnessDef
from patchheal.harness.images import Say
from patchheal.harness.results import COLLECTORS, ResultsChannel
from patchheal.harness.sources import CommittedSources
from patchheal.models import CommandResult

if TYPE_CHECKING:
    from docker import DockerClient

log = logging.getLogger(__name__)

# Where a step container sees patchheal's collectors (read-only) and its run's
# results directory (the only other writable host path besides the worktree).
COLLECTORS_MOUNT = "/opt/patchheal/collectors"
RESULTS_MOUNT = "/run/patchheal"


class DockerHarness:
    """Runs step commands in containers of one harness definition."""

    def __init__(
        self,
        defn: HarnessDef,
        *,
        job_id: str = "",
        setup: Sequence[str] = (),
        env_passthrough: Sequence[str] = (),
        client: DockerClient | None = None,
        say: Say | None = None,
        setup_timeout: float = 1800.0,
        repo: Path | None = None,
    ) -> None:
        # `repo` is part of every harness's constructor (see harness/registry.py); one
        # container over the worktree reads nothing else of the job's repository.
        del repo
        self.defn = defn
        self.name = f"docker:{defn.name}"
        self.job_id = job_id or f"adhoc-{os.getpid()}"
        self._setup = tuple(setup)
        self.passthrough = tuple(env_passthrough)
        self._client = client
        self._say: Say = say or (lambda msg: log.info("%s", msg))
        self._setup_timeout = setup_timeout
        self._image: str | None = None
        self._envs: dict[tuple[Path, str], str] = {}
        self._sources = CommittedSources()

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            self._client = containers.engine()
        return self._client

    def image(self, *, from_scratch: bool = False) -> str:
        """The harness image, built (and health-checked) if missing."""
        if self._image is None or from_scratch:
            built = images.ensure_image(
                self.client, self.defn, say=self._say, from_scratch=from_scratch
            )
            if from_scratch:
                return built
            self._image = built
        return self._image

    def prepare(self, worktree: Path) -> None:
        self.run_image(worktree)

    def run_image(self, worktree: Path) -> str:
        worktree = worktree.resolve()
        user = sandbox.resolve_user(self.defn, worktree)
        # Dependencies come from the worktree's commit, never from a candidate's
        # uncommitted edits: a candidate's setup.py or build backend would run
        # as root in setup and its output (a .pth) would be cached in the image.
        source = self._sources.source(worktree)
        # Cheap to recompute (a few small files), and it notices a lockfile
        # that changed under the same worktree path.
        key = (worktree, deps.fingerprint(source, self.defn, self._setup, "", user))
        if key not in self._envs:
            self._envs[key] = deps.ensure_env(
                self.client,
                self.defn,
                self.image(),
                source,
                setup=self._setup,
                passthrough=self.passthrough,
                user=user,
                job_id=self.job_id,
                say=self._say,
                timeout=self._setup_timeout,
            )
        return self._envs[key]

    def run(
        self,
        command: str,
        worktree: Path,
        *,
        timeout: float,
        idle_timeout: float,
        on_output: OutputSink | None = None,
        results: str | None = None,
    ) -> CommandResult:
        worktree = worktree.resolve()
        image = self.run_image(worktree)
        user = sandbox.resolve_user(self.defn, worktree)
        sandbox.make_writable(worktree, user)
        purpose = f"run-{self.defn.name}"
        channel = ResultsChannel()
        try:
            in_box = f"{RESULTS_MOUNT}/results-{channel.nonce}"
            kwargs = sandbox.step_container_kwargs(
                self.defn,
                image=image,
                command=command,
                worktree=worktree,
                user=user,
                env=channel.environment(
                    sandbox.environment(self.defn, self.passthrough),
                    results_dir=in_box,
                    collectors=COLLECTORS_MOUNT,
                ),
                labels=containers.owner_labels(self.job_id, purpose, worktree=str(worktree)),
                host_mounts=images.host_mounts(self.client, image),
                extra_mounts=(
                    (str(COLLECTORS), COLLECTORS_MOUNT, True),
                    (str(channel.host_dir), in_box, False),
                ),
                wall_limit=timeout,
            )
            name = containers.container_name(self.job_id, purpose)
            with containers.created(self.client, name=name, **kwargs) as container:
                done = containers.run_to_completion(
                    container, timeout=timeout, idle_timeout=idle_timeout, on_output=on_output
                )
            tests = channel.collect(worktree, results)
        finally:
            channel.close()
        output = done.output
        if done.oom_killed:
            output += f"\n[patchheal: the container was OOM-killed at {self.defn.sandbox.memory}]\n"
        return CommandResult(
            command=command,
            exit_code=done.exit_code,
            output=output,
            duration_seconds=done.duration,
            timed_out=done.timed_out,
            truncated=done.truncated,
            oom_killed=done.oom_killed,
            harness=self.name,
            tests=tests,
        )

    def close(self) -> None:
        """Containers are removed after each run; this drops the engine connection
        and the exported dependency sources."""
        self._sources.close()
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:  # close must never raise
                log.warning("closing the Docker client failed: %s", exc)
            self._client = None
