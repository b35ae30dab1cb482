"""The store's consistency check: SQLite's own checks plus the store's invariants.

A crash at any point must leave a store that passes this check (the crash
test of the controller kills a heal run at random points and runs it).
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from patchheal.models import Outcome

_OUTCOMES = ", ".join(f"'{o.value}'" for o in Outcome)
_JUDGED = "'fixed', 'no_effect', 'regression', 'apply_failed'"

# (query, message template): each row the query returns is one problem.
_INVARIANTS: tuple[tuple[str, str], ...] = (
    (
        f"SELECT id, outcome FROM attempts WHERE outcome NOT IN ({_OUTCOMES})",
        "attempt {0}: unknown outcome {1!r}",
    ),
    (
        "SELECT c.id, a.id, a.outcome FROM claims c JOIN attempts a ON a.id = c.attempt_id"
        " WHERE a.fingerprint != c.fingerprint"
        " OR a.normalized_diff_hash != c.normalized_diff_hash"
        " OR a.outcome IN ('rejected_repeat', 'rejected_policy')",
        "claim {0} is held by attempt {1} ({2}), which is not that patch's verification",
    ),
    # Never the same patch twice: a judged patch keeps its claim for good.
    (
        "SELECT a.id, a.outcome FROM attempts a"
        f" WHERE a.outcome IN ({_JUDGED}) AND a.normalized_diff_hash != ''"
        " AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.fingerprint = a.fingerprint"
        " AND c.normalized_diff_hash = a.normalized_diff_hash)",
        "attempt {0} ({1}) judged a patch that no claim protects from being tried again",
    ),
    (
        "SELECT id, status FROM controls WHERE status NOT IN ('pending', 'done')",
        "control command {0}: unknown status {1!r}",
    ),
    (
        "SELECT job_id FROM locks WHERE expires_at < created_at",
        "lock of job {0} expires before it was created",
    ),
)


def check(conn: Connection, *, sqlite: bool) -> list[str]:
    """Every problem found, [] when the store is consistent."""
    problems: list[str] = []
    if sqlite:
        rows = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check")]
        problems += [f"sqlite integrity_check: {r}" for r in rows if r != "ok"]
        problems += [
            f"foreign key: {table} row {rowid} refers to a missing row of {parent}"
            for table, rowid, parent, _ in conn.exec_driver_sql("PRAGMA foreign_key_check")
        ]
    for query, message in _INVARIANTS:
        problems += [message.format(*row) for row in conn.execute(text(query))]
    return problems
