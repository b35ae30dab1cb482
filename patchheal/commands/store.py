"""`patchheal store check|rebuild`: verify the attempt store, or rebuild it from event logs."""

from __future__ import annotations

from pathlib import Path

import click

from patchheal.runs import DEFAULT_DB_SHOWN, default_db

_DB_HELP = "attempt store: a SQLite path or any SQLAlchemy URL"


@click.group()
def store() -> None:
    """Check the attempt store, or rebuild it from the runs' event logs."""


@store.command()
@click.option("--db", default=default_db, show_default=DEFAULT_DB_SHOWN, help=_DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="one JSON object: store, ok, problems")
def check(db: str, as_json: bool) -> None:
    """Run the database's integrity checks and the store's own invariants."""
    import json

    from patchheal.errors import StoreIntegrityError
    from patchheal.memory.store import AttemptStore

    with AttemptStore(db, create=False) as attempts:
        problems = attempts.integrity_check()
        url = attempts.display_url
    if as_json:
        click.echo(json.dumps({"store": url, "ok": not problems, "problems": list(problems)}))
        if problems:  # the same exit code as without --json
            raise SystemExit(StoreIntegrityError.exit_code)
        return
    if problems:
        raise StoreIntegrityError(f"{len(problems)} problems in {url}:\n  " + "\n  ".join(problems))
    click.echo(f"ok: {url} is consistent")


@store.command()
@click.option("--apply", is_flag=True, help="replace the live store with the rebuilt one")
@click.option(
    "--runs",
    "runs_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder holding <job-id>/events.jsonl [default: the store's runs/]",
)
@click.option("--db", default=default_db, show_default=DEFAULT_DB_SHOWN, help=_DB_HELP)
def rebuild(apply: bool, runs_dir: Path | None, db: str) -> None:
    """Replay the event logs into a fresh store and show how it differs from the live one.

    A dry run unless --apply, which swaps the rebuilt store in atomically
    (SQLite only) and keeps the old file as a backup beside it.
    """
    from patchheal.memory.rebuild import rebuild as run_rebuild
    from patchheal.memory.store import resolve_db_url
    from patchheal.runs import state_dir_for

    runs_dir = runs_dir or state_dir_for(db) / "runs"
    report = run_rebuild(runs_dir, resolve_db_url(db), apply=apply)
    click.echo(report.render())
