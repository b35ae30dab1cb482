"""What patchheal owns in the engine: its labels, names and image repositories.

Everything patchheal creates carries `owner_labels` (pid, the pid's start time,
host, store), so `owner_alive` tells a `kill -9`ed owner from a live one.
"""

from __future__ import annotations

import os
import re
import socket

from patchheal import proc

LABEL = "patchheal"
LABEL_JOB = "patchheal.job"
LABEL_PURPOSE = "patchheal.purpose"
LABEL_PID = "patchheal.owner.pid"
LABEL_START = "patchheal.owner.start"
LABEL_HOST = "patchheal.owner.host"
LABEL_WORKTREE = "patchheal.worktree"
# The store (its key, workspace/worktrees.py `store_key`) of the run that made an object:
# `gc --db` and the end of a run remove only their own store's leftovers.
LABEL_STORE = "patchheal.store"
_store_key: list[str] = []


def set_store(key: str | None) -> None:
    """Label what this process creates from now on with store `key` (None: no label)."""
    _store_key[:] = [key] if key else []


_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


def owner_labels(job_id: str, purpose: str, *, worktree: str | None = None) -> dict[str, str]:
    pid = os.getpid()
    labels = {
        LABEL: "1",
        LABEL_JOB: job_id,
        LABEL_PURPOSE: purpose,
        LABEL_PID: str(pid),
        LABEL_START: str(proc.process_start(pid) or ""),
        LABEL_HOST: socket.gethostname(),
    }
    if worktree is not None:
        labels[LABEL_WORKTREE] = worktree
    if _store_key:
        labels[LABEL_STORE] = _store_key[0]
    return labels


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that created a labelled object still runs.

    Objects of another host are treated as alive: only that host can tell.
    """
    if labels.get(LABEL_HOST, socket.gethostname()) != socket.gethostname():
        return True
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    start = labels.get(LABEL_START, "")
    return proc.pid_alive(pid, int(start) if start.isdigit() else None)


def container_name(job_id: str, purpose: str) -> str:
    """Deterministic: the same job and purpose give the same name across runs."""
    return f"patchheal-{_UNSAFE.sub('-', job_id)}-{_UNSAFE.sub('-', purpose)}"[:120]


# The image repositories patchheal builds into: harness images, and dependency images.
REPOSITORY = "patchheal"
DEPS_REPOSITORY = "patchheal-deps"
