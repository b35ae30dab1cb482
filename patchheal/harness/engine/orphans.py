"""Finding what patchheal left behind: containers, volumes, networks and temp images
whose owning process is gone, and job workspaces that no live run owns.

Everything patchheal creates in the engine carries `ownership.owner_labels`
(pid, the pid's start time, host), so an owner that was `kill -9`ed is told
apart from a live one even after its pid was reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchheal import proc
from patchheal.atomic import atomic_write
from patchheal.harness.engine import containers, dockerapi, hostdirs, leftovers, ownership

if TYPE_CHECKING:
    from docker import DockerClient

OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class Orphan:
    """One thing `gc` would remove, and why."""

    kind: str  # container, volume, network, image, workspace
    name: str
    reason: str
    handle: Any = None


def _why(labels: dict[str, str]) -> str:
    job = labels.get(ownership.LABEL_JOB, "?")
    return f"job {job}, owner pid {labels.get(ownership.LABEL_PID, '?')} is gone"


def engine_orphans(client: DockerClient, store: str | None = None) -> list[Orphan]:
    """Labelled containers, volumes and networks whose owner is gone; abandoned temp images.
    Objects labelled with a store other than `store` are that store's to remove."""
    flt = {"label": ownership.LABEL}
    found: list[Orphan] = []
    for container, why in leftovers.dead_containers(client, store):
        found.append(Orphan("container", str(getattr(container, "name", "?")), why, container))
    for network in dockerapi.call(client.networks.list, filters=flt):
        labels = network.attrs.get("Labels") or {}
        if leftovers.ours(labels, store) and not ownership.owner_alive(labels):
            found.append(Orphan("network", network.name, _why(labels), network))
    for volume in dockerapi.call(client.volumes.list, filters=flt):
        labels = volume.attrs.get("Labels") or {}
        if leftovers.ours(labels, store) and not ownership.owner_alive(labels):
            found.append(Orphan("volume", volume.name, _why(labels), volume))
    if not _any_build_running():
        for image in dockerapi.call(client.images.list, name=f"{ownership.REPOSITORY}-tmp/*"):
            for tag in (t for t in image.tags if t.startswith(f"{ownership.REPOSITORY}-tmp/")):
                found.append(Orphan("image", tag, "temporary tag of an interrupted build"))
    return found


def dependency_images(client: DockerClient) -> list[Orphan]:
    """Every cached dependency image not used by a container (caches, rebuilt on demand)."""
    from patchheal.harness.engine.ownership import DEPS_REPOSITORY

    # The image id as inspected: `c.image` would look the image up and fail on a removed one.
    # A container of ours whose owner died (a dead run's pin, imagepin.py) uses nothing: gc
    # removes it in the same pass.
    used = {
        c.attrs.get("Image")
        for c in dockerapi.list_containers(client)
        if not (ownership.LABEL in (c.labels or {}) and not ownership.owner_alive(c.labels))
    }
    return [
        Orphan("image", tag, "cached dependency image")
        for image in dockerapi.call(client.images.list, name=f"{DEPS_REPOSITORY}/*")
        if image.id not in used
        for tag in image.tags
        # The same image may carry other tags. A live run pins the image it steps in
        # (imagepin.py) and holds its tag (a file lock, seen by this cache directory).
        if tag.startswith(f"{DEPS_REPOSITORY}/") and not hostdirs.held(tag)
    ]


def _any_build_running() -> bool:
    """True when another process holds one of the build locks."""
    lock_dir = hostdirs.cache_dir() / "locks"
    return any(map(hostdirs.locked, lock_dir.glob("*.lock") if lock_dir.is_dir() else []))


def remove(client: DockerClient, orphan: Orphan) -> bool:
    """Remove one engine orphan; never raises (gc goes on with the rest). False for an image
    that a container began to use since it was listed, which stays."""
    from patchheal.harness.engine.containers import remove_network, remove_volume

    if orphan.kind == "container":
        containers.teardown(orphan.handle, grace=0)
    elif orphan.kind == "network":
        remove_network(orphan.handle)
    elif orphan.kind == "volume":
        remove_volume(client, orphan.name)
    elif orphan.kind == "image":
        return _remove_unused_image(client, orphan.name)
    return True


def _remove_unused_image(client: DockerClient, tag: str) -> bool:
    """Remove `tag` unless a container uses its image: not forced. A run pins the dependency
    image it steps in the moment it has it (imagepin.py); a pin made after gc listed the
    image as unused would not stop a forced removal, which untags the image under the live
    run (CI saw a compose run's results keeper find its image's tag gone)."""
    import docker.errors

    try:
        dockerapi.call(client.images.remove, tag, force=False)
    except docker.errors.ImageNotFound:
        return True
    except Exception:  # in use (a conflict), or the engine refused: it stays
        return False
    return True


# -- workspaces -----------------------------------------------------------------------


def write_owner(job_dir: Path) -> None:
    """Mark a workspace as owned by this process (temp file + rename)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    data = {
        ownership.LABEL_PID: str(pid),
        ownership.LABEL_START: str(proc.process_start(pid) or ""),
        ownership.LABEL_HOST: socket.gethostname(),
    }
    atomic_write(job_dir / OWNER_FILE, json.dumps(data))


def live_worktrees(client: DockerClient | None) -> set[str]:
    """Worktree paths that a container of a live owner has mounted."""
    if client is None:
        return set()
    flt = {"label": ownership.LABEL_WORKTREE}
    return {
        c.labels[ownership.LABEL_WORKTREE]
        for c in dockerapi.list_containers(client, filters=flt)
        if ownership.owner_alive(c.labels)
    }


def stale_workspaces(
    root: Path, *, db: str | None, mounted: set[str]
) -> Iterator[tuple[Path, str | None]]:
    """Each job workspace under `root` with the reason it is stale, or None if it is kept."""
    if not root.is_dir():
        return
    with _store(db) as store:
        for job_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            yield job_dir, _judge(job_dir, store, mounted)


def _judge(job_dir: Path, store: Any, mounted: set[str]) -> str | None:
    from patchheal.workspace.worktrees import TRASH_PREFIX, store_key, workspace_job

    if job_dir.name.startswith(TRASH_PREFIX):
        return "its run died while deleting it"
    if any(Path(m).is_relative_to(job_dir) for m in mounted):
        return None  # a live run's container works in it
    owner = job_dir / OWNER_FILE
    if owner.is_file():
        with contextlib.suppress(OSError, ValueError):
            labels = json.loads(owner.read_text(encoding="utf-8"))
            if ownership.owner_alive(labels):
                return None
            return f"its owner pid {labels.get(ownership.LABEL_PID)} is gone"
    job_id, key = workspace_job(job_dir.name)
    if store is None or (key and key != store_key(store.url)):
        return None  # another store's workspace: only that store can tell
    for lock in store.list_locks():
        if lock.job_id == job_id and store.lock_state(lock)[0] == "live":
            return None
    job = store.job(job_id)
    if job is not None and job.status == "running":
        return "its run died (job status 'running', no live lock)"
    return None  # finished and kept on purpose (--keep, takeover, worktree open)


@contextlib.contextmanager
def _store(db: str | None) -> Iterator[Any]:
    if db is None or ("://" not in db and not Path(db).is_file()):
        yield None
        return
    from patchheal.memory.store import AttemptStore

    store = AttemptStore(db)
    try:
        yield store
    finally:
        store.close()
