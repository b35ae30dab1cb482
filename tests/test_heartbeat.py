"""The lock heartbeat keeps a live run's lock from expiring during a long attempt."""

from __future__ import annotations

import time
from pathlib import Path

from patchheal.loop.heartbeat import LockHeartbeat
from patchheal.memory.store import AttemptStore


def test_lock_outlives_its_ttl_while_the_heartbeat_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "store.sqlite3")
    store = AttemptStore(db)
    try:
        store.acquire_lock("long-job", owner="test", ttl_seconds=0.6)
        with LockHeartbeat(db, "long-job", 0.6):
            time.sleep(1.5)  # well past the TTL: only the heartbeat keeps it alive
            [lock] = [lk for lk in store.list_locks() if lk.job_id == "long-job"]
            assert lock.expires_at > time.time()
        time.sleep(0.8)
        [lock] = [lk for lk in store.list_locks() if lk.job_id == "long-job"]
        assert lock.expires_at < time.time()  # stopped: it expires again
    finally:
        store.close()
