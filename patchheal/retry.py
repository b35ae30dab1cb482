"""The one retry factory, for transient infrastructure only.

A failed verification is a new recorded attempt, never a retry here. Callers
pass `sleep` in tests so that nothing waits for real.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base


class _ExponentialJitterOrRetryAfter(wait_base):
    """base × 2^(n-1), ±jitter; a `retry_after` attribute on the error wins."""

    def __init__(self, base: float, jitter: float, cap: float) -> None:
        self.base, self.jitter, self.cap = base, jitter, cap

    def __call__(self, retry_state: Any) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            return float(min(retry_after, self.cap))
        delay = self.base * 2 ** (retry_state.attempt_number - 1)
        delay *= 1 + random.uniform(-self.jitter, self.jitter)
        return float(min(delay, self.cap))


def retrying(
    is_transient: Callable[[BaseException], bool],
    *,
    attempts: int = 3,
    base: float = 0.5,
    jitter: float = 0.2,
    cap: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Retrying:
    """A tenacity `Retrying` that retries only errors `is_transient` accepts."""
    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(attempts),
        wait=_ExponentialJitterOrRetryAfter(base, jitter, cap),
        sleep=sleep,
        reraise=True,
    )
