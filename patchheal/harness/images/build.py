"""Harness images: content-addressed, built offline when no registry answers, health-checked.

The tag is a hash of what builds the image (the [image] table and every file
beside harness.toml: `recipe.py`), so an edited recipe gives a new image and an
unchanged one is never rebuilt. The base image comes from, in order:

1. `ref` already in the engine, or pulled when its registry might be reachable
   (the registry host resolves or the engine has mirrors: fail fast, no waiting);
2. a root filesystem of Debian packages made with mmdebstrap (installed with
   apt-get when missing and we are root), or debootstrap, then imported;
3. a host-runtime image: an empty root with the host's /usr mounted read-only.

A Dockerfile beside harness.toml is then built on top (`ARG BASE_IMAGE`). Every
build runs the harness's check in a fresh container before it is tagged.
"""

from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.errors import ImageBuildError
from patchheal.harness.config import HarnessDef
from patchheal.harness.engine import containers, dockerapi, ownership
from patchheal.harness.engine.containers import remove_image
from patchheal.harness.engine.hostdirs import file_lock
from patchheal.harness.engine.ownership import REPOSITORY
from patchheal.harness.images import rootfs
from patchheal.harness.images.recipe import _base_harness, image_tag

if TYPE_CHECKING:
    from docker import DockerClient

Say = Callable[[str], None]

SOURCE_LABEL = "patchheal.source"
MOUNTS_LABEL = "patchheal.host_mounts"


def exists(client: DockerClient, ref: str) -> bool:
    import docker.errors

    try:
        dockerapi.call(client.images.get, ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def host_mounts(client: DockerClient, image: str) -> list[str]:
    """Host paths a host-runtime image needs mounted read-only; [] for ordinary images."""
    labels = dockerapi.call(client.images.get, image).labels or {}
    return [p for p in labels.get(MOUNTS_LABEL, "").split(",") if p]


def ensure_image(
    client: DockerClient,
    defn: HarnessDef,
    *,
    say: Say = lambda _msg: None,
    from_scratch: bool = False,
) -> str:
    """The harness image's tag, built (and health-checked) if missing.

    `from_scratch` ignores every cache, including a local copy of `ref`, and
    builds under a throwaway tag that the caller removes (`remove_image`).
    """
    final = image_tag(defn)
    if not from_scratch and exists(client, final):
        return final
    with file_lock(final.replace("/", "_").replace(":", "_")):
        if not from_scratch and exists(client, final):
            return final
        scratch = f"{REPOSITORY}-tmp/{defn.name}:{uuid.uuid4().hex[:12]}"
        base, source = _base_image(client, defn, scratch + "-base", say, from_scratch)
        built = base
        try:
            if defn.dockerfile_path is not None:
                built = _build_dockerfile(client, defn, base, scratch, say)
            health_check(client, defn, built, say)
            if from_scratch:
                if built == base:
                    dockerapi.call(client.images.get(base).tag, *scratch.split(":"))
                return scratch
            dockerapi.call(client.images.get(built).tag, *final.split(":"))
            say(f"image {final} ready (source: {source})")
            return final
        finally:
            # The scratch tag of a Dockerfile build goes too once `final` names the image
            # (untagging only); a from-scratch build's is the caller's to remove.
            for leftover in {base, built} - ({scratch} if from_scratch else set()):
                if leftover.startswith(f"{REPOSITORY}-tmp/"):
                    remove_image(client, leftover)


def health_check(client: DockerClient, defn: HarnessDef, image: str, say: Say) -> None:
    """Run the harness's check as the sandbox would; `ImageBuildError` if it fails."""
    mounts = ro_binds(host_mounts(client, image))
    with containers.created(
        client,
        name=f"patchheal-check-{uuid.uuid4().hex[:12]}",
        image=image,
        command=["/bin/sh", "-c", defn.image.check],
        labels=ownership.owner_labels("image-check", "check"),
        user="1000:1000",
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": "rw,exec,nosuid,size=64m,mode=1777"},
        mounts=mounts,
        environment={"HOME": "/tmp"},
    ) as container:
        done = containers.run_to_completion(container, timeout=120, idle_timeout=120)
    if done.exit_code != 0:
        raise ImageBuildError(
            f"image {image} failed its health check `{defn.image.check}` "
            f"(exit {done.exit_code}):\n{done.output[-2000:]}"
        )
    say(f"health check passed: {defn.image.check}")


def ro_binds(paths: list[str]) -> list[object]:
    from docker.types import Mount

    return [Mount(target=p, source=p, type="bind", read_only=True) for p in paths]


def _base_image(
    client: DockerClient, defn: HarnessDef, scratch: str, say: Say, from_scratch: bool
) -> tuple[str, str]:
    spec = defn.image
    if spec.harness:
        base = ensure_image(client, _base_harness(defn), say=say)
        return base, f"harness {spec.harness}"
    # A job's packages ([job] packages) are Debian's: such an image is built from them.
    ref = spec.ref if not spec.extra_packages else None
    if ref and not from_scratch and exists(client, ref):
        return ref, "local"
    if ref and not from_scratch and spec.pull != "never" and _pull(client, spec, say):
        return ref, "pull"
    if spec.pull == "always" and ref:
        raise ImageBuildError(f"cannot pull {ref} and [image] pull = 'always'")
    base_packages = spec.packages or _default_packages(defn)
    packages = (*base_packages, *(p for p in spec.extra_packages if p not in base_packages))
    with tempfile.TemporaryDirectory(prefix="patchheal-rootfs-") as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        source, mounts = rootfs.build(tarball, spec.suite, spec.mirror, packages, say)
        say(f"importing the {source} root filesystem as {scratch}")
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "WORKDIR /workspace",
            'CMD ["/bin/sh"]',
            f"LABEL {ownership.LABEL}=1 {SOURCE_LABEL}={source} {MOUNTS_LABEL}={','.join(mounts)}",
        ]
        repository, tag = scratch.split(":")
        try:
            dockerapi.call(
                client.api.import_image,
                src=str(tarball),
                repository=repository,
                tag=tag,
                changes=changes,
            )
        except Exception as exc:
            raise ImageBuildError(f"docker import of the root filesystem failed: {exc}") from None
    if not exists(client, scratch):
        raise ImageBuildError(f"docker import did not produce {scratch}")
    return scratch, source


def _default_packages(defn: HarnessDef) -> tuple[str, ...]:
    if defn.image.ref and "node" in defn.image.ref:
        return ("nodejs", "npm", "git", "ca-certificates")
    return ("python3", "python3-venv", "python3-pip", "git", "ca-certificates")


def registry_might_be_reachable(client: DockerClient, ref: str) -> bool:
    """Fail fast: the engine has mirrors, or the registry's host name resolves (2 s)."""
    with contextlib.suppress(Exception):
        if (dockerapi.call(client.info).get("RegistryConfig") or {}).get("Mirrors"):
            return True
    first = ref.split("/", 1)[0]
    host = first if "/" in ref and ("." in first or ":" in first or first == "localhost") else None
    host = (host or "registry-1.docker.io").split(":")[0]
    found: list[bool] = []

    def resolve() -> None:
        with contextlib.suppress(OSError):
            found.append(bool(socket.getaddrinfo(host, 443)))

    worker = threading.Thread(target=resolve, daemon=True)
    worker.start()
    worker.join(2.0)
    return bool(found and found[0])


def _pull(client: DockerClient, spec: object, say: Say) -> bool:
    import docker.errors

    ref = str(getattr(spec, "ref", ""))
    if getattr(spec, "pull", "auto") == "auto" and not registry_might_be_reachable(client, ref):
        say(f"no registry reachable for {ref}; building the image offline")
        return False
    say(f"pulling {ref}")
    repository, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
    try:
        dockerapi.call(client.images.pull, repository, tag=tag)
    except (docker.errors.APIError, docker.errors.DockerException) as exc:
        say(f"pull of {ref} failed ({str(exc)[:160]}); building the image offline")
        return False
    return True


def _build_dockerfile(client: DockerClient, defn: HarnessDef, base: str, tag: str, say: Say) -> str:
    import docker.errors

    assert defn.path is not None
    assert defn.image.dockerfile is not None
    say(f"building {defn.image.dockerfile} on {base}")
    try:
        dockerapi.call(
            client.images.build,
            path=str(defn.path),
            dockerfile=defn.image.dockerfile,
            tag=tag,
            buildargs={"BASE_IMAGE": base},
            network_mode="none" if defn.sandbox.setup_network == "none" else "bridge",
            pull=False,
            rm=True,
            forcerm=True,
            labels={ownership.LABEL: "1"},
        )
    except docker.errors.BuildError as exc:
        lines = [str(item.get("stream") or item.get("error") or "") for item in exc.build_log]
        raise ImageBuildError(
            f"building {defn.dockerfile_path} failed: {exc.msg}\n{''.join(lines)[-3000:]}"
        ) from None
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"building {defn.dockerfile_path} failed: {exc}") from None
    return tag


__all__ = [
    "ensure_image",
    "health_check",
    "host_mounts",
]
