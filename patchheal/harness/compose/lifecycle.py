"""The Docker resources of one compose run, brought up and torn down.

What `ComposeHarness.run` creates around a step and removes on every path out:
the run's private network (`internal`: no route out), each service's container
on it (reachable by its service name) with its named volumes, the wait until a
service is ready (healthy when it has a healthcheck, running otherwise; an
exited or unhealthy service raises at once), and the step's results directory:
a named tmpfs volume held by a keeper container. Every name is the job's
(`ownership.container_name`) and every resource carries the job's owner labels.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from patchheal.errors import HarnessError
from patchheal.harness.compose import file as composefile
from patchheal.harness.engine import containers, dockerapi, ownership
from patchheal.harness.engine.containers import remove_network, remove_volume
from patchheal.harness.results import volume as resultsvolume

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container


@contextlib.contextmanager
def results(
    client: DockerClient, job_id: str, harness: str, image: str, user: str, nonce: str, size: int
) -> Iterator[tuple[str, Container]]:
    """The step's results directory: a named tmpfs volume capped as a session's
    (results/volume.py), never a host directory, and a keeper container that holds it
    mounted after the step's container is gone (a tmpfs volume is unmounted, its files
    lost, when its last container stops) and through which it is read."""
    from docker.types import Mount

    name = ownership.container_name(job_id, f"{harness}-results")
    remove_volume(client, name)
    dockerapi.call(
        client.volumes.create,
        name=name,
        driver="local",
        driver_opts=resultsvolume.tmpfs_options(size),
        labels=ownership.owner_labels(job_id, "volume"),
    )
    try:
        with containers.created(
            client,
            name=ownership.container_name(job_id, f"{harness}-keeper"),
            image=image,
            entrypoint=["sleep", "infinity"],
            command=[],
            user=user,
            network_mode="none",
            mounts=[Mount(target=resultsvolume.ROOT, source=name, type="volume")],
            labels=ownership.owner_labels(job_id, "results-keeper"),
            mem_limit="64m",
            pids_limit=8,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            init=True,
        ) as keeper:
            containers.start(keeper)
            containers.exec_checked(
                keeper,
                ["mkdir", "-m", "0700", resultsvolume.run_dir(nonce)],
                user=user,
                environment={},
                workdir="/",
                what="making the results directory",
            )
            yield name, keeper
    finally:
        remove_volume(client, name)


def endpoint(client: DockerClient, network: str, alias: str) -> dict[str, Any]:
    config = client.api.create_endpoint_config(aliases=[alias])
    return {"network": network, "networking_config": {network: config}}


@contextlib.contextmanager
def network(client: DockerClient, job_id: str, harness: str) -> Iterator[str]:
    import docker.errors

    name = ownership.container_name(job_id, f"{harness}-net")
    for stale in client.networks.list(names=[name]):
        remove_network(stale)
    created = dockerapi.call(
        client.networks.create,
        name,
        driver="bridge",
        internal=True,  # services talk to each other, never to anything outside
        labels=ownership.owner_labels(job_id, "network"),
    )
    try:
        yield name
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            remove_network(created)


@contextlib.contextmanager
def service(
    client: DockerClient,
    job_id: str,
    harness: str,
    service: composefile.Service,
    network: str,
    image: Callable[[composefile.Service], str],
) -> Iterator[Container]:
    """`service` started on `network` from the image `image(service)` names, removed
    with its named volumes on the way out."""
    volumes = [volume(client, job_id, harness, source) for source, _ in service.volumes]
    try:
        labels = ownership.owner_labels(job_id, f"service-{service.name}")
        kwargs: dict[str, Any] = {
            "image": image(service),
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
            **endpoint(client, network, service.name),
        }
        name = ownership.container_name(job_id, f"{harness}-{service.name}")
        with containers.created(
            client, name=name, **{k: v for k, v in kwargs.items() if v is not None}
        ) as container:
            containers.start(container)
            yield container
    finally:
        for made in volumes:
            remove_volume(client, made)


def volume(client: DockerClient, job_id: str, harness: str, source: str) -> str:
    name = ownership.container_name(job_id, f"{harness}-vol-{source}")
    remove_volume(client, name)
    labels = ownership.owner_labels(job_id, "volume")
    dockerapi.call(client.volumes.create, name=name, labels=labels)
    return name


def wait_ready(
    container: Container, service: composefile.Service, t0: float, timeout: float
) -> None:
    """Poll the service every 0.2 s until it is ready, until `timeout` (the [compose]
    `ready_timeout`) after `t0`. An exited or unhealthy service raises at once
    (tenacity retries only "not ready")."""
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    def not_ready(_state: object) -> bool:
        raise HarnessError(f"service {service.name!r} not ready after {timeout:.0f} s")

    poll = Retrying(
        retry=retry_if_result(lambda ready: not ready),
        stop=stop_after_delay(max(t0 + timeout - time.monotonic(), 0.0)),
        wait=wait_fixed(0.2),
        retry_error_callback=not_ready,
    )
    poll(_service_ready, container, service)


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
