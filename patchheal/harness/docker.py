"""The Docker harness: each run is an exec in a sandboxed container over the worktree.

`prepare` builds the harness image if it is missing (offline when no registry
answers) and the dependency image once per dependency fingerprint. `run`
execs the step in the worktree's sandbox session (`session.py`): one
container per worktree, started on the first run and kept while the image,
the sandbox settings and the worktree directory stay the same, scrubbed
before every run and swept after it (no process of the step's user left,
/tmp and /dev/shm empty: `sweep.py`), with the
worktree bind-mounted at the harness's workdir. The step's output is
streamed, a wall or idle timeout kills it from outside, and the container is
removed when the harness closes or its owner dies.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.harness import containers, deps, images, leftovers, sandbox
from patchheal.harness.base import OutputSink
from patchheal.harness.config import HarnessDef
from patchheal.harness.hostdirs import collectors_source
from patchheal.harness.images import Say
from patchheal.harness.results import ResultsChannel
from patchheal.harness.session import SandboxSession
from patchheal.harness.sources import CommittedSources
from patchheal.models import CommandResult

if TYPE_CHECKING:
    from docker import DockerClient

log = logging.getLogger(__name__)

# Where a step container sees patchheal's collectors (read-only) and its run's
# results directory (the only other writable host path besides the worktree).
COLLECTORS_MOUNT = "/opt/patchheal/collectors"
RESULTS_MOUNT = "/run/patchheal"


@dataclass
class _Box:
    """A worktree's sandbox session and the host directory its runs report results in."""

    session: SandboxSession
    results_root: Path

    def close(self) -> None:
        self.session.close()
        shutil.rmtree(self.results_root.parent, ignore_errors=True)


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
        self.regression = defn.regression
        self.job_id = job_id or f"adhoc-{os.getpid()}"
        self._setup = tuple(setup)
        self.passthrough = tuple(env_passthrough)
        self._client = client
        self._say: Say = say or (lambda msg: log.info("%s", msg))
        self._setup_timeout = setup_timeout
        self._image: str | None = None
        self._envs: dict[tuple[Path, str], str] = {}
        self._boxes: dict[Path, _Box] = {}
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
        trace: bool = False,
    ) -> CommandResult:
        worktree = worktree.resolve()
        box = self._box(worktree)
        channel = ResultsChannel(root=box.results_root, trace=trace)
        try:
            env = channel.environment(
                sandbox.environment(self.defn, self.passthrough),
                results_dir=f"{RESULTS_MOUNT}/results-{channel.nonce}",
                collectors=COLLECTORS_MOUNT,
            )
            done = box.session.run(
                command,
                environment=env,
                timeout=timeout,
                idle_timeout=idle_timeout,
                on_output=on_output,
            )
            tests = channel.collect(worktree, results)
        finally:
            channel.close()
        return done.result(command, harness=self.name, memory=self.defn.sandbox.memory, tests=tests)

    def purpose(self, worktree: Path) -> str:
        """The purpose label (and name part) of `worktree`'s sandbox container."""
        return f"run-{self.defn.name}-{hashlib.sha256(bytes(worktree)).hexdigest()[:8]}"

    def _box(self, worktree: Path) -> _Box:
        """The worktree's running sandbox, (re)started when what it was made for changed."""
        image = self.run_image(worktree)
        user = sandbox.resolve_user(self.defn, worktree)
        sandbox.make_writable(worktree, user)
        box = self._boxes.get(worktree)
        results_root = box.results_root if box is not None else _results_root()
        purpose = self.purpose(worktree)
        kwargs = sandbox.step_container_kwargs(
            self.defn,
            image=image,
            command="true",  # the session runs its keeper; steps are execs
            worktree=worktree,
            user=user,
            env=sandbox.environment(self.defn, self.passthrough),
            labels=containers.owner_labels(self.job_id, purpose, worktree=str(worktree)),
            host_mounts=images.host_mounts(self.client, image),
            extra_mounts=(
                (str(collectors_source()), COLLECTORS_MOUNT, True),
                (str(results_root), RESULTS_MOUNT, False),
            ),
        )
        if box is not None and box.session.fits(worktree, kwargs):
            return box
        if box is not None:
            box.session.close()
        session = SandboxSession(
            self.client,
            name=containers.container_name(self.job_id, purpose),
            worktree=worktree,
            user=user,
            workdir=self.defn.sandbox.workdir,
            create_kwargs=kwargs,
        )
        box = self._boxes[worktree] = _Box(session, results_root)
        session.open()
        return box

    def close(self) -> None:
        """Remove the sandbox containers, drop the engine connection and the exported
        dependency sources."""
        for box in self._boxes.values():
            box.close()
        self._boxes.clear()
        self._sources.close()
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:  # close must never raise
                log.warning("closing the Docker client failed: %s", exc)
            self._client = None


def _results_root() -> Path:
    """A host directory for a session's per-run results directories.

    Its parent is private to this user (0700); the root itself is read-only
    for the step's user, so a step can write only into its own run's
    `results-<nonce>` directory, which the results channel makes writable.
    """
    root = leftovers.make_temp_dir("patchheal-session-") / "results"
    root.mkdir(mode=0o755)
    return root
