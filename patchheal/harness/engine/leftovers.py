"""What a killed run leaves on the host: temp dirs and Exited setup containers.

Measured (issue 25, item 7): after kills, `patchheal-session-*` and
`patchheal-sources-*` temp dirs were never cleaned, and setup containers stayed
Exited until the next run or `gc`. Now:

- each of patchheal's temp dirs is made by `make_temp_dir`, which writes an owner
  record (pid, its start time, host, store) inside it; `stale_temp_dirs` lists
  those whose owner is gone (the pid's start time tells a reused pid apart);
- `after_run` (the end of every run) removes such temp dirs and the containers
  of dead owners labelled with its own store; `gc --db` removes those and
  unlabelled ones (made by a command with no store, or before the label). An
  object labelled with another store's key is left to that store.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from patchheal.atomic import atomic_write
from patchheal.harness.engine import containers, dockerapi, ownership

if TYPE_CHECKING:
    from docker import DockerClient

log = logging.getLogger(__name__)

OWNER_FILE = "owner.json"
TEMP_PREFIXES = (
    "patchheal-session-",
    "patchheal-sources-",
    "patchheal-results-",
    "patchheal-context-",
    "patchheal-run-",  # the local harness's temporary folder of a run
)


def make_temp_dir(prefix: str) -> Path:
    """A private temp dir (mkdtemp, 0700) holding an owner record of this process."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atomic_write(path / OWNER_FILE, json.dumps(ownership.owner_labels("", "temp")))
    return path


def _owner(path: Path) -> dict[str, str] | None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((path / OWNER_FILE).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
    return None


def stale_temp_dirs(
    store: str | None, root: Path | None = None, *, strict: bool = False
) -> list[tuple[Path, str]]:
    """patchheal temp dirs under `root` (the temp dir) of this user whose owner is gone and
    that belong to `store` (or to no store, unless `strict`); dirs without an owner record
    are left alone."""
    root = Path(tempfile.gettempdir()) if root is None else root
    found: list[tuple[Path, str]] = []
    with contextlib.suppress(OSError), os.scandir(root) as listing:
        for entry in listing:
            if not entry.name.startswith(TEMP_PREFIXES):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            labels = _owner(Path(entry.path))
            if labels is None or not ours(labels, store, strict=strict):
                continue
            if ownership.owner_alive(labels):
                continue
            pid = labels.get(ownership.LABEL_PID, "?")
            found.append((Path(entry.path), f"its owner pid {pid} is gone"))
    return sorted(found)


def ours(labels: dict[str, str], store: str | None, *, strict: bool = False) -> bool:
    """Whether `store`'s cleanup may remove an object with these labels: one labelled with
    that store, or (unless `strict`) one labelled with none."""
    other = labels.get(ownership.LABEL_STORE)
    return other == store if strict or other is not None else True


def remove_temp_dir(path: Path) -> None:
    """`path` and everything in it, folders a step made unwritable included (never
    following a link out of it)."""
    shutil.rmtree(path, ignore_errors=True)
    if not path.exists():
        return
    for folder, dirs, _ in os.walk(path):
        for name in dirs:
            inner = Path(folder) / name
            if not inner.is_symlink():
                with contextlib.suppress(OSError):
                    inner.chmod(stat.S_IRWXU)
    with contextlib.suppress(OSError):
        path.chmod(stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


def dead_containers(
    client: DockerClient, store: str | None, *, strict: bool = False
) -> list[tuple[object, str]]:
    """Labelled containers of `store` (or of no store, unless `strict`) whose owner is gone."""
    found: list[tuple[object, str]] = []
    flt = {"label": ownership.LABEL}
    for container in dockerapi.list_containers(client, filters=flt):
        labels = container.labels or {}
        if ours(labels, store, strict=strict) and not ownership.owner_alive(labels):
            job = labels.get(ownership.LABEL_JOB, "?")
            pid = labels.get(ownership.LABEL_PID, "?")
            found.append((container, f"job {job}, owner pid {pid} is gone"))
    return found


def after_run(store: str | None, client: DockerClient | None) -> None:
    """The end of a run: remove dead owners' temp dirs and containers labelled with `store`
    (never unlabelled ones: those are `gc`'s, which a person runs); never raises."""
    try:
        for path, why in stale_temp_dirs(store, strict=True):
            log.info("removing %s (%s)", path, why)
            remove_temp_dir(path)
        if client is not None:
            for container, why in dead_containers(client, store, strict=True):
                log.info("removing container %s (%s)", getattr(container, "name", "?"), why)
                containers.teardown(container, grace=0)
    except Exception as exc:  # cleanup must never turn a finished run into a failure
        log.warning("cleaning up after the run failed: %s", exc)
