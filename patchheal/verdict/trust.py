"""Whether a run's structured results can be trusted at all: a collector that failed inside
the step observed nothing reliable.

A collector's internal error (collectors/patchheal_guard.py) is the harness's
problem, not the project's and not the patch's: at reproduction it must not be
fingerprinted as the project's failure, and in verification it is neither
`no_effect` nor `fixed`. Pure functions; no I/O.
"""

from __future__ import annotations

from patchheal.models import TestResults


def untrusted(results: TestResults | None) -> str | None:
    """Why `results` cannot be judged (a collector failed internally), or None."""
    if results is None or not results.collector_errors:
        return None
    which = "; ".join(results.collector_errors[:3])
    return (
        f"no trusted results: the harness's test collector failed inside the step ({which}); "
        "a harness problem, not a verdict on the project or the patch"
    )
