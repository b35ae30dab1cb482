"""`patchheal locks`: list job locks; reclaim those whose holder is gone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from patchheal.runs import DEFAULT_DB_SHOWN, default_db

if TYPE_CHECKING:
    from patchheal.memory.store import AttemptStore, LockRow


@click.command()
@click.option("--apply", is_flag=True, help="reclaim (not just list) the stale locks")
@click.option("--force", is_flag=True, help="include live locks: their runs lose the job")
@click.option(
    "--grace",
    "grace_seconds",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="seconds past its expiry before a lock from another host counts as stale",
)
@click.option(
    "--db",
    default=default_db,
    show_default=DEFAULT_DB_SHOWN,
    help="attempt store: a SQLite path or any SQLAlchemy URL",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per lock, per line")
def locks(apply: bool, force: bool, grace_seconds: float, db: str, as_json: bool) -> None:
    """List job locks and what a reclaim would do; a dry run unless --apply.

    A lock is stale when its holder is gone: on this host its pid no longer
    runs; from another host, it expired more than --grace seconds ago. A
    live lock is removed only with --apply --force. Every reclaim is audited.
    """
    from patchheal.memory.locks import describe
    from patchheal.memory.store import AttemptStore

    with AttemptStore(db, create=False) as store:
        held = store.list_locks()
        if as_json:
            _print_json(store, held, grace_seconds, apply=apply, force=force)
            return
        if not held:
            click.echo("no locks")
            return
        for lock in held:
            state, reason = store.lock_state(lock, grace_seconds=grace_seconds)
            click.echo(f"{lock.job_id}: {state}: {describe(lock)}; {reason}")
        chosen = store.reclaim_stale(apply=apply, force=force, grace_seconds=grace_seconds)
    verb = "reclaimed" if apply else "would reclaim"
    for lock, why in chosen:
        click.echo(f"{verb} {lock.job_id} ({why})")
    if not chosen:
        click.echo("nothing to reclaim" + ("" if force else " (live locks need --force)"))
    elif not apply:
        click.echo("dry run: add --apply to reclaim")


def _print_json(
    store: AttemptStore, held: list[LockRow], grace_seconds: float, *, apply: bool, force: bool
) -> None:
    """One line per lock: its holder, its state and what the reclaim did (or would do)."""
    import json

    states = {lock.job_id: store.lock_state(lock, grace_seconds=grace_seconds) for lock in held}
    reclaimed = store.reclaim_stale(apply=apply, force=force, grace_seconds=grace_seconds)
    chosen = {lock.job_id for lock, _why in reclaimed}
    verb = "reclaimed" if apply else "would reclaim"
    for lock in held:
        state, reason = states[lock.job_id]
        row = {
            "job_id": lock.job_id,
            "owner": lock.owner,
            "pid": lock.pid,
            "host": lock.host,
            "created_at": lock.created_at,
            "expires_at": lock.expires_at,
            "state": state,
            "evidence": reason,
            "reclaim": verb if lock.job_id in chosen else None,
        }
        click.echo(json.dumps(row))
