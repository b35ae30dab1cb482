"""A step's writes into its worktree are bounded (`[sandbox] worktree_size`, issue 32 item 8).

The worktree is a host bind mount: what a step writes there lands on the
host's disk, outside the container's memory and tmpfs limits (one candidate's
test run wrote 3.0 GB). No mount option caps a bind mount, so a watcher thread
sums the tree's allocated bytes (`st_blocks`, each hard-linked inode once) with
`os.scandir` every couple of seconds while a run goes on, and past the limit
stops the run (kills every process of the step's user). The run's result then
carries the limit as its reason: not a verdict on the code.

Measured on this machine (2 cores, shared): a scan of 726 entries takes 8 ms, of
4,110 entries 78 ms, of 60,359 entries 1.7 s. The interval grows with the scan's own
duration (20 times it, at least 1.5 s), so watching never costs more than ~5 % of a
core; the price is a later stop (a larger overshoot) in a very large tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from patchheal.harness.tables import SandboxSpec

log = logging.getLogger(__name__)

INTERVAL = 1.5
# The watcher sleeps at least this many times its last scan's duration.
_DUTY = 20


def allocated_bytes(root: Path, stop_at: int | None = None) -> int:
    """Bytes the tree under `root` occupies on disk (symlinks not followed, each inode
    once); stops counting once past `stop_at`. Entries that vanish mid-scan are skipped."""
    total = 0
    seen: set[tuple[int, int]] = set()
    pending = [str(root)]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except OSError:  # removed, or replaced by a file, while the step runs
            continue
        with listing:
            for entry in listing:
                try:
                    info = entry.stat(follow_symlinks=False)
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                except OSError:
                    continue
                if info.st_nlink > 1:
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += info.st_blocks * 512
        if stop_at is not None and total > stop_at:
            break
    return total


def shown(size: int) -> str:
    """A byte count as people read it: '20 MiB', '4 GiB', '1.5 GiB'."""
    value, unit = float(size), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"


class TreeWatch:
    """Watches `root` while a run goes on; past `limit` bytes it calls `stop` once and
    keeps the reason (`reason`)."""

    def __init__(self, root: Path, limit: int, stop: Callable[[], None], setting: str) -> None:
        self.root = root
        self.limit = limit
        self.reason: str | None = None
        self._stop = stop
        self._setting = setting
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="treesize", daemon=True)

    def _watch(self) -> None:
        wait = 0.0
        while not self._done.wait(wait):
            started = time.monotonic()
            used = allocated_bytes(self.root, stop_at=self.limit)
            if used > self.limit:
                self.reason = (
                    f"the step's writes filled its worktree past its limit of "
                    f"{shown(self.limit)} ([sandbox] worktree_size = {self._setting!r}; "
                    f"more than {shown(used)} when it was stopped): a limit of the run, "
                    "not a verdict on the code"
                )
                log.warning("stopping the run: %s", self.reason)
                try:
                    self._stop()
                except Exception as exc:  # the run's own timeouts still end it
                    log.warning("stopping the run past its worktree size failed: %s", exc)
                return
            wait = max(INTERVAL, _DUTY * (time.monotonic() - started))

    @contextlib.contextmanager
    def running(self) -> Iterator[TreeWatch]:
        """Watch for the duration of the `with` block."""
        self._thread.start()
        try:
            yield self
        finally:
            self._done.set()
            self._thread.join(timeout=60)


def size_limit(box: SandboxSpec) -> int | None:
    """`worktree_size` in bytes, None when 'off'."""
    from patchheal.harness.engine.sandbox import size_bytes

    return None if box.worktree_size == "off" else size_bytes(box.worktree_size)


@contextlib.contextmanager
def watching(
    box: SandboxSpec, worktree: Path, stop: Callable[[], None]
) -> Iterator[TreeWatch | None]:
    """`worktree` watched against `box`'s `worktree_size` for the `with` block (None: off);
    `stop` ends the run past it."""
    limit = size_limit(box)
    if limit is None:
        yield None
        return
    with TreeWatch(worktree, limit, stop, box.worktree_size).running() as watch:
        yield watch
