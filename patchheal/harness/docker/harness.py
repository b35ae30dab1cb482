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

import dataclasses
import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from patchheal.errors import HarnessError
from patchheal.harness.base import OutputSink
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import dockerapi, hostdirs, imagepin, ownership, sandbox, treesize
from patchheal.harness.engine.session import SandboxSession
from patchheal.harness.images import build as images
from patchheal.harness.images.build import Say
from patchheal.harness.results import volume as resultsvolume
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import collectors_source
from patchheal.harness.setup import deps, generated, scmversion
from patchheal.harness.setup.sources import CommittedSources
from patchheal.models import CommandResult

if TYPE_CHECKING:
    from docker import DockerClient

log = logging.getLogger(__name__)

# Where a step container sees patchheal's collectors (read-only); its run's results
# directory is a capped tmpfs volume at resultsvolume.ROOT (a session's, a compose step's).
COLLECTORS_MOUNT = "/opt/patchheal/collectors"


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
        # The job's repository: only its tags are read, for the version a CI checkout
        # gives git-versioned builds (scmversion.py).
        self._repo = repo
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
        self._versions: dict[str, dict[str, str]] = {}
        self._generated: dict[str, list[generated.Generated]] = {}
        self._boxes: dict[Path, SandboxSession] = {}
        self._sources = CommittedSources()
        # The dependency images this run steps in: `gc --images` spares them, by the file
        # hold (this cache directory's processes) and by the pin (every user of the engine).
        self._holds: dict[str, IO[str]] = {}
        self._pins: dict[str, imagepin.Pin] = {}

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            self._client = dockerapi.engine()
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
        build_env = self._build_env(worktree, source)
        # Cheap to recompute (a few small files), and it notices a lockfile
        # that changed under the same worktree path.
        key = (worktree, deps.fingerprint(source, self.defn, self._setup, "", user, build_env))
        known = self._envs.get(key)
        if known is not None and known != self.image() and not images.exists(self.client, known):
            # Removed under a live run (`docker rmi`; gc spares what a run holds): a cache
            # miss, built again, not a failed step.
            self._say(f"the dependency image {known} is gone: installing again")
            del self._envs[key]
            if (stale := self._pins.pop(known, None)) is not None:
                imagepin.unpin(stale)
        for _ in range(2):
            if key in self._envs:
                break
            image = deps.ensure_env(
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
                build_env=build_env,
                hold=self._hold,
            )
            if self._pin(image):
                self._envs[key] = image
                break
            # Removed between its lookup and the pin: once more.
            self._say(f"the dependency image {image} is gone: installing again")
        else:
            raise HarnessError(f"the dependency image for {worktree} vanished twice after setup")
        self._lay_generated(worktree, self._envs[key])
        return self._envs[key]

    def _hold(self, tag: str) -> None:
        if tag not in self._holds:
            self._holds[tag] = hostdirs.hold(tag)

    def _pin(self, image: str) -> bool:
        """Pin `image` for the run's life (imagepin.py); False when it is gone. The harness
        image itself (no dependencies to install) is not a cache and needs no pin."""
        if image == self.image() or image in self._pins:
            return True
        import docker.errors

        try:
            mounts = images.host_mounts(self.client, image)
        except docker.errors.ImageNotFound:
            return False
        pinned = imagepin.pin(self.client, image, self.job_id, mounts)
        if pinned is not None:
            self._pins[image] = pinned
        return pinned is not None

    def _build_env(self, worktree: Path, source: Path) -> dict[str, str]:
        """The version overrides a CI checkout's tags give `worktree`'s build (scmversion.py);
        none without the job's repository or for a commit it does not have."""
        if self._repo is None or source == worktree:
            return {}
        if str(source) not in self._versions:
            base = scmversion.base_commit(self._repo, worktree)
            version = scmversion.ci_version(self._repo, base) if base else None
            env = scmversion.override_env(version, source) if version else {}
            if version:
                self._say(f"version from the repository's tags, as CI's checkout: {version}")
            self._versions[str(source)] = env
        return self._versions[str(source)]

    def _lay_generated(self, worktree: Path, image: str) -> None:
        """Lay what setup generated in the tree over `worktree` (generated.py)."""
        if image.startswith(f"{ownership.DEPS_REPOSITORY}/"):
            if image not in self._generated:
                labels = ownership.owner_labels(self.job_id, "generated-files")
                self._generated[image] = generated.load(self.client, image, labels)
            generated.lay_over(worktree, self._generated[image])

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
        session = self._box(worktree)
        channel = ResultsChannel(trace=trace, on_host=False)
        env = channel.environment(
            sandbox.environment(self.defn, self.passthrough),
            results_dir=resultsvolume.run_dir(channel.nonce),
            collectors=COLLECTORS_MOUNT,
        )
        # The worktree is a host bind mount: its size is watched (`[sandbox] worktree_size`).
        with treesize.watching(self.defn.sandbox, worktree, session.stop) as watch:
            done = session.run(
                command,
                environment=env,
                timeout=timeout,
                idle_timeout=idle_timeout,
                on_output=on_output,
            )
        if watch is not None and watch.reason:
            done = dataclasses.replace(done, stopped=watch.reason)
        # After the run's sweep: no process of it is left to write into the volume.
        size = sandbox.size_bytes(self.defn.sandbox.results_size)
        tests = channel.collect(
            worktree,
            results,
            reader=lambda budget: resultsvolume.collect(
                session.container, channel.nonce, size, budget
            ),
        )
        return done.result(command, harness=self.name, memory=self.defn.sandbox.memory, tests=tests)

    def purpose(self, worktree: Path) -> str:
        """The purpose label (and name part) of `worktree`'s sandbox container."""
        return f"run-{self.defn.name}-{hashlib.sha256(bytes(worktree)).hexdigest()[:8]}"

    def _box(self, worktree: Path) -> SandboxSession:
        """The worktree's running sandbox, (re)started when what it was made for changed."""
        image = self.run_image(worktree)
        user = sandbox.resolve_user(self.defn, worktree)
        sandbox.make_writable(worktree, user)
        box = self._boxes.get(worktree)
        purpose = self.purpose(worktree)
        kwargs = sandbox.step_container_kwargs(
            self.defn,
            image=image,
            command="true",  # the session runs its keeper; steps are execs
            worktree=worktree,
            user=user,
            env=sandbox.environment(self.defn, self.passthrough),
            labels=ownership.owner_labels(self.job_id, purpose, worktree=str(worktree)),
            host_mounts=images.host_mounts(self.client, image),
            extra_mounts=((str(collectors_source()), COLLECTORS_MOUNT, True),),
            volumes=[resultsvolume.mount(sandbox.size_bytes(self.defn.sandbox.results_size))],
        )
        if box is not None and box.fits(worktree, kwargs):
            return box
        if box is not None:
            box.close()
        session = SandboxSession(
            self.client,
            name=ownership.container_name(self.job_id, purpose),
            worktree=worktree,
            user=user,
            workdir=self.defn.sandbox.workdir,
            create_kwargs=kwargs,
            prelude=resultsvolume.PRELUDE,
        )
        self._boxes[worktree] = session
        session.open()
        return session

    def close(self) -> None:
        """Remove the sandbox containers, drop the engine connection and the exported
        dependency sources."""
        for box in self._boxes.values():
            box.close()
        self._boxes.clear()
        self._sources.close()
        for pinned in self._pins.values():
            imagepin.unpin(pinned)
        self._pins.clear()
        for handle in self._holds.values():
            handle.close()
        self._holds.clear()
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:  # close must never raise
                log.warning("closing the Docker client failed: %s", exc)
            self._client = None
