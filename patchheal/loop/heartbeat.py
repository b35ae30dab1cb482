"""Keeps a job's lock alive while a long step, proposer or setup runs.

The loop refreshes its lock between attempts, but one attempt may outlast the
lock's time to live (a 15-minute step, then its regression steps, then an
agent). A daemon thread with its own store connection refreshes the lock
every third of its time to live until the run ends, so no other host can
take over a job that is alive.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from patchheal.memory.store import AttemptStore

log = logging.getLogger(__name__)


class LockHeartbeat:
    """`with LockHeartbeat(db, job_id, ttl): ...` refreshes the lock in the background."""

    def __init__(self, db: str, job_id: str, ttl_seconds: float) -> None:
        self.db = db
        self.job_id = job_id
        self.ttl = ttl_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lock-{job_id}", daemon=True)

    def _beat(self) -> None:
        store = AttemptStore(self.db)
        try:
            while not self._stop.wait(self.ttl / 3):
                try:
                    store.refresh_lock(self.job_id, ttl_seconds=self.ttl)
                except Exception as exc:  # a missed beat is retried; the run goes on
                    log.warning("could not refresh the lock of job %s: %s", self.job_id, exc)
        finally:
            store.close()

    def __enter__(self) -> LockHeartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
