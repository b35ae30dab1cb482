"""The store's consistency check: the back end's own checks plus the store's invariants.

A crash at any point must leave a store that passes this check (the crash
test of the controller kills a heal run at random points and runs it).
SQLite gets its PRAGMA checks; PostgreSQL enforces foreign keys itself, so
there the check looks for indexes left invalid (a failed concurrent build)
instead. On every back end the claims' UNIQUE constraint must exist: it is
what decides races between workers, and a store whose schema was made by
hand without it would let two of them verify the same patch.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

from patchheal.models import Outcome

_OUTCOMES = ", ".join(f"'{o.value}'" for o in Outcome)
_JUDGED = (
    "'fixed', 'no_effect', 'regression', 'apply_failed', 'rejected_oracle', 'rejected_tripwire'"
)

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


_CLAIM_KEY = {"fingerprint", "normalized_diff_hash"}
_PG_INVALID_INDEXES = (
    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready)"
)


def _claims_unique(conn: Connection, *, invalid: set[str]) -> list[str]:
    found = inspect(conn)
    keys: list[list[str | None]] = [
        list(c["column_names"]) for c in found.get_unique_constraints("claims")
    ]
    keys += [
        list(i["column_names"])
        for i in found.get_indexes("claims")
        if i["unique"] and i["name"] not in invalid  # an invalid index enforces nothing
    ]
    if any(len(k) == len(_CLAIM_KEY) and set(k) == _CLAIM_KEY for k in keys):
        return []
    return ["claims: no UNIQUE (fingerprint, normalized_diff_hash): a patch could be tried twice"]


def check(conn: Connection, *, sqlite: bool) -> list[str]:
    """Every problem found, [] when the store is consistent."""
    invalid: set[str] = set()
    if conn.dialect.name == "postgresql":
        invalid = {r[0] for r in conn.execute(text(_PG_INVALID_INDEXES))}
    problems = [f"postgresql: index {name} is invalid" for name in sorted(invalid)]
    problems += _claims_unique(conn, invalid=invalid)
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
