"""The worker's process pool: Celery's prefork pool, replacing a finished job's process promptly.

Every job runs in a fresh process (`worker_max_tasks_per_child=1`: nothing
leaks from one job into the next). Celery replaces an exited child when the
child's sentinel becomes readable, but that can fire before the exit is
reapable; the child is then found only by the pool's periodic maintenance,
which Celery runs every 5 s. Jobs waited 0 to 5 s for a process (measured:
benchmarks/README.md). This pool runs the same maintenance every
MAINTAIN_SECONDS: one non-blocking waitpid per child, cheap next to a job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery.concurrency.asynpool import AsynPool
from celery.concurrency.prefork import TaskPool as PreforkTaskPool

MAINTAIN_SECONDS = 0.2


class PromptAsynPool(AsynPool):  # type: ignore[misc]
    @property
    def timers(self) -> dict[Callable[[], Any], float]:
        return {self.maintain_pool: MAINTAIN_SECONDS}


class TaskPool(PreforkTaskPool):  # type: ignore[misc]
    """`--pool=patchheal.celery.pool:TaskPool`: prefork, with prompt process replacement."""

    Pool = PromptAsynPool
