"""The scrubber of the job this process runs, for write paths that have no job at hand.

The failures table, the failure analysis, the reports and stderr are reached
from deep inside the loop, far from the job's `Scrubber` (built from the job's
`env = [...]`). While a job runs, `job_scrubber` makes its scrubber the one
`scrub` uses; outside a job, `scrub` is the process-wide default. One job runs
per process at a time (batch runs them one after another), so a module-level
value is enough; threads of the job (heartbeat, output pumps) see it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from patchheal.scrub.scrubber import Scrubber, default_scrubber

_active: Scrubber | None = None


def current() -> Scrubber:
    """The running job's scrubber, else the process-wide default."""
    return _active if _active is not None else default_scrubber()


def scrub(text: str) -> str:
    """Mask secrets in `text` with the running job's scrubber (default outside a job)."""
    return current().scrub(text)


@contextmanager
def job_scrubber(scrubber: Scrubber) -> Iterator[Scrubber]:
    """Make `scrubber` the active one for the duration of the block."""
    global _active
    previous, _active = _active, scrubber
    try:
        yield scrubber
    finally:
        _active = previous
