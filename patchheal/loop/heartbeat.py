"""Keeps a job's lock (and a step's proposal lease) alive while a long step, proposer or
setup runs.

The loop refreshes its lock between attempts, but one attempt may outlast the
lock's time to live (a 15-minute step, then its regression steps, then an
agent). A daemon thread with its own store connection refreshes the lock
every third of its time to live until the run ends, so no other host can
take over a job that is alive. A proposal lease (memory/leases.py) is kept
the same way while its step is healed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

from patchheal.memory.store import AttemptStore

log = logging.getLogger(__name__)


class Heartbeat:
    """`with Heartbeat(db, name, ttl, beat): ...` runs `beat(store)` every ttl/3 meanwhile."""

    def __init__(
        self, db: str, name: str, ttl_seconds: float, beat: Callable[[AttemptStore], None]
    ) -> None:
        self.db = db
        self.name = name
        self.ttl = ttl_seconds
        self.beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        store = AttemptStore(self.db)
        try:
            while not self._stop.wait(self.ttl / 3):
                try:
                    self.beat(store)
                except Exception as exc:  # a missed beat is retried; the run goes on
                    log.warning("heartbeat %s missed a beat: %s", self.name, exc)
        finally:
            store.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LockHeartbeat(Heartbeat):
    """`with LockHeartbeat(db, job_id, ttl): ...` refreshes the job's lock in the background."""

    def __init__(self, db: str, job_id: str, ttl_seconds: float) -> None:
        self.job_id = job_id
        super().__init__(db, f"lock-{job_id}", ttl_seconds, self._refresh)

    def _refresh(self, store: AttemptStore) -> None:
        store.refresh_lock(self.job_id, ttl_seconds=self.ttl)


class LeaseHeartbeat(Heartbeat):
    """Renews this process's proposal lease of `fingerprint` until stopped."""

    def __init__(self, db: str, fingerprint: str, ttl_seconds: float) -> None:
        self.fingerprint = fingerprint
        super().__init__(db, f"lease-{fingerprint}", ttl_seconds, self._renew)

    def _renew(self, store: AttemptStore) -> None:
        if not store.renew_lease(self.fingerprint, ttl_seconds=self.ttl):
            # Another run took it over (we missed beats past the expiry): our claims
            # still keep it from verifying what we verify, so the step goes on.
            log.warning("the proposal lease of %s is no longer ours", self.fingerprint)
            self._stop.set()
