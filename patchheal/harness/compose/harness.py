"""The compose harness: a step that needs services, on the Docker SDK.

For each run, the services of the repository's compose file come up on a
private network of their own (`internal`: no route out), each reachable by its
service name; patchheal waits for them (healthy when they have a healthcheck,
running otherwise), runs the step in a fresh container of the base harness
(same image, dependencies and sandbox as that harness) on the same network,
then tears down every container, the network and the named volumes, on every
path out. Fresh services per run keep a verdict from depending on what an
earlier attempt left in a database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchheal.errors import HarnessError, ImageBuildError, SpecError
from patchheal.harness.base import OutputSink
from patchheal.harness.compose import file as composefile
from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import COLLECTORS_MOUNT, DockerHarness
from patchheal.harness.engine import containers, dockerapi, ownership, sandbox, treesize
from patchheal.harness.engine.containers import remove_network, remove_volume
from patchheal.harness.images import build as images
from patchheal.harness.images import services
from patchheal.harness.images.build import Say
from patchheal.harness.results import volume as resultsvolume
from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import collectors_source
from patchheal.models import CommandResult

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

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
        with self._network() as network, contextlib.ExitStack() as stack:
            for service in services.values():
                container = stack.enter_context(self._service(service, network))
                self._wait_ready(container, service, started)
            channel = ResultsChannel(trace=trace, on_host=False)
            stack.callback(channel.close)
            user = sandbox.resolve_user(self.base.defn, worktree)
            volume, keeper = stack.enter_context(self._results(image, user, channel.nonce))
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
            size = sandbox.size_bytes(self.base.defn.sandbox.results_size)
            tests = channel.collect(
                worktree,
                results,
                reader=lambda budget: resultsvolume.collect(keeper, channel.nonce, size, budget),
            )
            return done.model_copy(update={"tests": tests})

    @contextlib.contextmanager
    def _results(self, image: str, user: str, nonce: str) -> Iterator[tuple[str, Container]]:
        """The step's results directory: a named tmpfs volume capped as a session's
        (results/volume.py), never a host directory, and a keeper container that holds it
        mounted after the step's container is gone (a tmpfs volume is unmounted, its files
        lost, when its last container stops) and through which it is read."""
        from docker.types import Mount

        size = sandbox.size_bytes(self.base.defn.sandbox.results_size)
        name = ownership.container_name(self.job_id, f"{self.defn.name}-results")
        remove_volume(self.client, name)
        dockerapi.call(
            self.client.volumes.create,
            name=name,
            driver="local",
            driver_opts=resultsvolume.tmpfs_options(size),
            labels=ownership.owner_labels(self.job_id, "volume"),
        )
        try:
            with containers.created(
                self.client,
                name=ownership.container_name(self.job_id, f"{self.defn.name}-keeper"),
                image=image,
                entrypoint=["sleep", "infinity"],
                command=[],
                user=user,
                network_mode="none",
                mounts=[Mount(target=resultsvolume.ROOT, source=name, type="volume")],
                labels=ownership.owner_labels(self.job_id, "results-keeper"),
                mem_limit="64m",
                pids_limit=8,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=True,
            ) as keeper:
                containers.start(keeper)
                made = keeper.exec_run(["mkdir", "-m", "0700", resultsvolume.run_dir(nonce)])
                if made.exit_code != 0:
                    raise HarnessError(f"cannot make the results directory: {made.output!r}")
                yield name, keeper
        finally:
            remove_volume(self.client, name)

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
        kwargs.update(self._endpoint(network, self.spec.service))
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

    def _endpoint(self, network: str, alias: str) -> dict[str, Any]:
        config = self.client.api.create_endpoint_config(aliases=[alias])
        return {"network": network, "networking_config": {network: config}}

    @contextlib.contextmanager
    def _network(self) -> Iterator[str]:
        import docker.errors

        name = ownership.container_name(self.job_id, f"{self.defn.name}-net")
        for stale in self.client.networks.list(names=[name]):
            remove_network(stale)
        network = dockerapi.call(
            self.client.networks.create,
            name,
            driver="bridge",
            internal=True,  # services talk to each other, never to anything outside
            labels=ownership.owner_labels(self.job_id, "network"),
        )
        try:
            yield name
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                remove_network(network)

    @contextlib.contextmanager
    def _service(self, service: composefile.Service, network: str) -> Iterator[Container]:
        volumes = [self._volume(source) for source, _ in service.volumes]
        try:
            labels = ownership.owner_labels(self.job_id, f"service-{service.name}")
            kwargs: dict[str, Any] = {
                "image": self._service_image(service),
                "command": service.command,
                "entrypoint": service.entrypoint,
                "environment": service.environment,
                "labels": labels,
                "working_dir": service.working_dir,
                "user": service.user,
                "healthcheck": service.healthcheck,
                "tmpfs": dict.fromkeys(service.tmpfs, "rw"),
                "volumes": {
                    v: {"bind": t, "mode": "rw"}
                    for v, (_, t) in zip(volumes, service.volumes, strict=True)
                },
                "mem_limit": service.mem_limit or "1g",
                "pids_limit": 1024,
                "security_opt": ["no-new-privileges"],
                "init": True,
                **self._endpoint(network, service.name),
            }
            name = ownership.container_name(self.job_id, f"{self.defn.name}-{service.name}")
            with containers.created(
                self.client, name=name, **{k: v for k, v in kwargs.items() if v is not None}
            ) as container:
                containers.start(container)
                yield container
        finally:
            for volume in volumes:
                remove_volume(self.client, volume)

    def _volume(self, source: str) -> str:
        name = ownership.container_name(self.job_id, f"{self.defn.name}-vol-{source}")
        remove_volume(self.client, name)
        labels = ownership.owner_labels(self.job_id, "volume")
        dockerapi.call(self.client.volumes.create, name=name, labels=labels)
        return name

    def _wait_ready(self, container: Container, service: composefile.Service, t0: float) -> None:
        """Poll the service every 0.2 s until it is ready, until `ready_timeout` after `t0`.
        An exited or unhealthy service raises at once (tenacity retries only "not ready")."""
        from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

        timeout = self.spec.ready_timeout

        def not_ready(_state: object) -> bool:
            raise HarnessError(f"service {service.name!r} not ready after {timeout:.0f} s")

        poll = Retrying(
            retry=retry_if_result(lambda ready: not ready),
            stop=stop_after_delay(max(t0 + timeout - time.monotonic(), 0.0)),
            wait=wait_fixed(0.2),
            retry_error_callback=not_ready,
        )
        poll(_service_ready, container, service)

    def close(self) -> None:
        self.base.close()


def _service_ready(container: Container, service: composefile.Service) -> bool:
    """Whether a started service is ready for the step; raises when it never will be."""
    container.reload()
    state = container.attrs.get("State", {})
    health = (state.get("Health") or {}).get("Status")
    if state.get("Status") in ("exited", "dead"):
        logs = container.logs(tail=40).decode("utf-8", "replace")
        raise HarnessError(f"service {service.name!r} exited before the step:\n{logs}")
    if health == "unhealthy":
        checks = (state.get("Health") or {}).get("Log") or [{}]
        last = str(checks[-1].get("Output", "")).strip()[-500:]
        raise HarnessError(f"service {service.name!r} is unhealthy: {last}")
    return bool(state.get("Running") and (service.healthcheck is None or health == "healthy"))


def _compose_names() -> tuple[str, ...]:
    from patchheal.harness.compose.file import COMPOSE_FILES

    return COMPOSE_FILES
