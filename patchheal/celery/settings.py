"""The queue's retry policy: how often, how soon, and what counts as an attempt."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from patchheal.errors import EXIT_BAD_INPUT, EXIT_FIXED, EXIT_INFRA, EXIT_INTERRUPTED

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class QueueSettings:
    """Read by the worker from the app's config; submitters never need them."""

    max_queue_attempts: int = 3
    """Counted attempts of one job: the first run plus retries of retryable endings."""
    backoff_seconds: float = 30.0
    """The first retry's delay; each counted retry doubles it, up to `backoff_cap_seconds`."""
    backoff_cap_seconds: float = 900.0
    max_infra_requeues: int = 10
    """Requeues after exit 3 or 130 (not counted as attempts), so a broken fleet still ends."""

    def backoff(self, attempt: int) -> float:
        """Delay before counted attempt `attempt + 1` (deterministic: no jitter to test around)."""
        return float(min(self.backoff_cap_seconds, self.backoff_seconds * 2 ** (attempt - 1)))

    def infra_backoff(self, requeues: int) -> float:
        return float(min(self.backoff_cap_seconds, self.backoff_seconds * 2**requeues))

    def to_conf(self) -> dict[str, Any]:
        return {f"patchheal_{name}": value for name, value in self.__dict__.items()}

    @classmethod
    def from_conf(cls, conf: Any) -> QueueSettings:
        defaults = cls()
        return cls(
            **{
                name: type(default)(conf.get(f"patchheal_{name}", default))
                for name, default in defaults.__dict__.items()
            }
        )


def broker_from_env() -> str:
    return os.environ.get("PATCHHEAL_BROKER", DEFAULT_BROKER)


@dataclass(frozen=True)
class Decision:
    """What the task does with a heal's ending."""

    action: str  # "done", "retry" (counted), "requeue" (not counted), "fail"
    countdown: float = 0.0
    why: str = ""


def decide(
    exit_code: int,
    retryable: bool,
    *,
    queue_attempt: int,
    infra_requeues: int,
    settings: QueueSettings,
) -> Decision:
    """Map a heal's exit code (and its report's `retryable`) to the queue's next move."""
    if exit_code == EXIT_BAD_INPUT:
        return Decision("fail", why="bad input: retrying cannot help")
    if exit_code in (EXIT_INFRA, EXIT_INTERRUPTED):
        if infra_requeues >= settings.max_infra_requeues:
            return Decision("done", why=f"gave up after {infra_requeues} infrastructure requeues")
        why = "harness or infrastructure unavailable" if exit_code == EXIT_INFRA else "interrupted"
        return Decision("requeue", settings.infra_backoff(infra_requeues), f"{why}: requeued")
    if exit_code == EXIT_FIXED or not retryable:
        return Decision("done")
    if queue_attempt >= settings.max_queue_attempts:
        return Decision("done", why=f"retryable, but {queue_attempt} queue attempts are spent")
    return Decision(
        "retry", settings.backoff(queue_attempt), f"retryable ending: queue attempt {queue_attempt}"
    )
