"""The compose harness: a step that needs services, on the Docker SDK.

For each run, the services of the repository's compose file come up on a
private network of their own (`internal`: no route out), each reachable by its
service name; patchheal waits for them (healthy when they have a healthcheck,
running otherwise), runs the step in a fresh container of the base harness
(same image, dependencies and sandbox as that harness) on the same network,
then tears down every container, the network and the named volumes, on every
path out (those resources, created and removed: `lifecycle.py`). Fresh
services per run keep a verdict from depending on what an earlier attempt left
in a database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.errors import ImageBuildError, SpecError
from patchheal.harness.base import OutputSink
from patchheal.harness.compose import file as composefile
from patchheal.harness.compose import lifecycle
from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import COLLECTORS_MOUNT, DockerHarness
from patchheal.harness.engine import containers, ownership, sandbox, treesize
from patchheal.harness.images import build as images
from patchheal.harness.images import services
from patchheal.harness.images.build import Say
from patchheal.harness.results import volume as resultsvolume
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import collectors_source
from patchheal.models import CommandResult

if TYPE_CHECKING:
    from docker import DockerClient

log = logging.getLogger(__name__)


class ComposeHarness:
    """Runs each step beside the services of a compose file."""

    def __init__(
        self,
        defn: HarnessDef,
        *,
        job_id: str = "",
        setup: Sequence[str] = (),
        env_passthrough: Sequence[str] = (),
        say: Say | None = None,
        repo: Path | None = None,
        client: DockerClient | None = None,
    ) -> None:
        from patchheal.harness.definitions import load_harness

        assert defn.compose is not None, "a compose harness needs a [compose] table"
        self.defn = defn
        self.spec = defn.compose
        self.name = f"docker:{defn.name}"
        self.regression = defn.regression
        self._repo = repo
        self._say: Say = say or (lambda msg: log.info("%s", msg))
        self._said: set[str] = set()  # service images whose mapping was already announced
        self.base = DockerHarness(
            load_harness(self.spec.base, repo),
            job_id=job_id,
            setup=setup,
            env_passthrough=env_passthrough,
            client=client,
            say=self._say,
        )
        self.job_id = self.base.job_id

    @property
    def client(self) -> DockerClient:
        return self.base.client

    def compose_file(self, worktree: Path) -> Path:
        """The repository's compose file first, then the harness's own."""
        for folder in (worktree, self._repo):
            for name in (self.spec.file, *_compose_names()):
                if folder is not None and name and (folder / name).is_file():
                    return folder / name
        if self.spec.file and self.defn.path and (self.defn.path / self.spec.file).is_file():
            return self.defn.path / self.spec.file
        raise SpecError(
            f"harness {self.defn.name!r}: no compose file in {worktree} "
            f"({', '.join(_compose_names())}) nor beside its harness.toml"
        )

    def prepare(self, worktree: Path) -> None:
        self.base.prepare(worktree)
        for service in composefile.load(self.compose_file(worktree)).values():
            if service.name != self.spec.service:
                self._service_image(service)

    def _service_image(self, service: composefile.Service) -> str:
        if service.harness:
            from patchheal.harness.definitions import load_harness

            defn = load_harness(service.harness, self._repo)
            return images.ensure_image(self.client, defn, say=self._say)
        if service.image is None:
            return self.base.image()
        if images.exists(self.client, service.image):
            return service.image
        mapped = services.lookup(service.image, self.spec.images)
        if mapped is not None:
            from patchheal.harness.definitions import load_harness

            if service.image not in self._said:
                self._said.add(service.image)
                self._say(f"service {service.name!r}: {mapped.note}")
            return images.ensure_image(
                self.client, load_harness(mapped.harness, self._repo), say=self._say
            )
        raise ImageBuildError(
            f"service {service.name!r} needs image {service.image!r}, which is not in the "
            "engine, no registry is reachable and no offline recipe maps it "
            f"(known: {', '.join(sorted(services.mapping(self.spec.images)))}); "
            "`docker load` it, map it in [compose] images or $PATCHHEAL_SERVICE_IMAGES, "
            "or use `x-patchheal-harness: NAME` to run a patchheal harness image"
        )

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
        services = composefile.load(self.compose_file(worktree))
        step_service = services.pop(self.spec.service, None)
        image = self.base.run_image(worktree)
        started = time.monotonic()
        client, job, name = self.client, self.job_id, self.defn.name
        with lifecycle.network(client, job, name) as network, contextlib.ExitStack() as stack:
            for service in services.values():
                container = stack.enter_context(
                    lifecycle.service(client, job, name, service, network, self._service_image)
                )
                lifecycle.wait_ready(container, service, started, self.spec.ready_timeout)
            channel = ResultsChannel(trace=trace, on_host=False)
            stack.callback(channel.close)
            user = sandbox.resolve_user(self.base.defn, worktree)
            size = sandbox.size_bytes(self.base.defn.sandbox.results_size)
            volume, keeper = stack.enter_context(
                lifecycle.results(client, job, name, image, user, channel.nonce, size)
            )
            done = self._step(
                command,
                worktree,
                image,
                network,
                step_service,
                timeout,
                idle_timeout,
                on_output,
                (channel, volume),
            )
            tests = channel.collect(
                worktree,
                results,
                reader=lambda budget: resultsvolume.collect(keeper, channel.nonce, size, budget),
            )
            return done.model_copy(update={"tests": tests})

    def _step(
        self,
        command: str,
        worktree: Path,
        image: str,
        network: str,
        step_service: composefile.Service | None,
        timeout: float,
        idle_timeout: float,
        on_output: OutputSink | None,
        results: tuple[ResultsChannel, str],
    ) -> CommandResult:
        defn = self.base.defn
        channel, volume = results
        in_box = resultsvolume.run_dir(channel.nonce)
        user = sandbox.resolve_user(defn, worktree)
        sandbox.make_writable(worktree, user)
        extra = step_service.environment if step_service else {}
        kwargs = sandbox.step_container_kwargs(
            defn,
            image=image,
            command=command,
            worktree=worktree,
            user=user,
            env=channel.environment(
                sandbox.environment(defn, self.base.passthrough, extra),
                results_dir=in_box,
                collectors=COLLECTORS_MOUNT,
            ),
            labels=ownership.owner_labels(self.job_id, "step", worktree=str(worktree)),
            host_mounts=images.host_mounts(self.client, image),
            extra_mounts=((str(collectors_source()), COLLECTORS_MOUNT, True),),
            volumes=[resultsvolume.mount(0, source=volume)],
        )
        kwargs.pop("network_mode")
        kwargs.update(lifecycle.endpoint(self.client, network, self.spec.service))
        name = ownership.container_name(self.job_id, f"{self.defn.name}-{self.spec.service}")
        with (
            containers.created(self.client, name=name, **kwargs) as container,
            treesize.watching(defn.sandbox, worktree, container.kill) as watch,
        ):
            done = containers.run_to_completion(
                container, timeout=timeout, idle_timeout=idle_timeout, on_output=on_output
            )
        if watch is not None and watch.reason:
            done = dataclasses.replace(done, stopped=watch.reason)
        return done.result(command, harness=self.name, memory=defn.sandbox.memory)

    def close(self) -> None:
        self.base.close()


def _compose_names() -> tuple[str, ...]:
    from patchheal.harness.compose.file import COMPOSE_FILES

    return COMPOSE_FILES
