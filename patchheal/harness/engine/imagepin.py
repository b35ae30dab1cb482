"""A pin on an image that every user of the engine sees: a keeper container that lives
exactly as long as the process that pinned it.

A run steps in its dependency image for as long as it lives, but between two of
its containers no container uses the image. The file hold (`hostdirs.hold`) is
seen only by processes that share the run's cache directory; a `gc --images` by
another user, another `HOME` or another machine of the same engine sees none of
it and prunes the image under the run (CI saw the demo die this way). A pin is a
container of the image whose main process reads its stdin, which this process
holds (as a sandbox session's keeper, `session.py`): while it runs, `gc --images`
spares the image (it is in use) and the engine refuses `docker rmi` of it (`-f`
only untags it, which the run notices and answers by installing again); when this
process ends, however it ends, the keeper's stdin closes and the container removes
itself, and the image is a cache again.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from patchheal.errors import HarnessError
from patchheal.harness.engine import containers, dockerapi, ownership
from patchheal.harness.engine.session import KEEPER_COMMAND, KEEPER_USER

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

log = logging.getLogger(__name__)

PURPOSE = "image-pin"
_GONE_WITHIN = 10.0


@dataclass
class Pin:
    container: Container
    stdin: Any


def pin(
    client: DockerClient, image: str, job_id: str, host_mounts: list[str] | None = None
) -> Pin | None:
    """A pin on `image`, or None when the image is gone (the caller builds it again)."""
    import docker.errors
    from docker.types import Mount

    # Not the deterministic name of other containers: two harnesses of one job (or of one
    # process) may pin the same image, and `remove_stale` would take the other's pin.
    name = ownership.container_name(job_id, f"{PURPOSE}-{uuid.uuid4().hex[:12]}")
    try:
        container = dockerapi.call(
            client.containers.create,
            image,
            name=name,
            entrypoint=KEEPER_COMMAND,
            command=None,
            user=KEEPER_USER,
            # detach=False with stdin_open is how the SDK sets StdinOnce (session.py).
            detach=False,
            stdin_open=True,
            auto_remove=True,
            labels=ownership.owner_labels(job_id, PURPOSE),
            network_disabled=True,
            mem_limit="32m",
            pids_limit=4,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            mounts=[Mount(p, p, type="bind", read_only=True) for p in host_mounts or []],
        )
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:  # a clear harness error, as `containers.created`
        raise HarnessError(f"cannot pin image {image}: {exc.explanation or exc}") from None
    held = None
    try:
        held = containers.hold_stdin(container)
        dockerapi.call(container.start)
    except docker.errors.NotFound:
        # Removed between its creation and its start (seen once in CI, by whom was not
        # found): no pin yet, as when the image is gone, so the caller makes sure of the
        # image and pins again.
        log.warning("image pin %s vanished before it started", name)
        _abandon(container, held)
        return None
    except docker.errors.APIError as exc:
        _abandon(container, held)
        raise HarnessError(
            f"cannot start the pin of image {image}: {exc.explanation or exc}"
        ) from None
    except BaseException:
        _abandon(container, held)
        raise
    return Pin(container, held)


def _abandon(container: Container, held: Any) -> None:
    if held is not None:
        containers.release_stdin(held)
    containers.teardown(container, grace=0)


def unpin(pinned: Pin) -> None:
    """Remove the pin and let its stdin go, and return once it is gone; never raises (a
    close goes on with the rest). Its exit starts the engine's own removal (auto_remove),
    which a removal asked for meanwhile returns early from, as already in progress."""
    import docker.errors

    with contextlib.suppress(Exception):
        dockerapi.call(pinned.container.remove, force=True)
    containers.release_stdin(pinned.stdin)
    deadline = time.monotonic() + _GONE_WITHIN
    while time.monotonic() < deadline:
        try:
            pinned.container.reload()
        except docker.errors.NotFound:
            return
        except Exception:  # the engine gone: nothing more to wait for
            return
        time.sleep(0.1)
    log.warning("image pin %s still exists after its removal", pinned.container.name)
