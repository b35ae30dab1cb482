"""`patchheal attempts` and `patchheal show`: read the attempt store."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from patchheal.runs import DEFAULT_DB_SHOWN, default_db

if TYPE_CHECKING:
    from patchheal.memory.records import StoredAttempt

F = TypeVar("F", bound=Callable[..., Any])


def _db_option(func: F) -> F:
    return click.option(
        "--db",
        default=default_db,
        show_default=DEFAULT_DB_SHOWN,
        help="attempt store: a SQLite path or any SQLAlchemy URL",
    )(func)


@click.command()
@click.option("--job", "job_id", default=None, help="only this job")
@click.option("--fingerprint", default=None, help="only this failure fingerprint")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table")
@_db_option
def attempts(job_id: str | None, fingerprint: str | None, as_json: bool, db: str) -> None:
    """List recorded attempts, oldest first."""
    from patchheal.memory.store import AttemptStore

    store = AttemptStore(db, create=False)
    try:
        rows = store.attempts(job_id=job_id, fingerprint=fingerprint)
    finally:
        store.close()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row.model_dump(mode="json", exclude={"diff", "log_excerpt"})))
        return
    if not rows:
        click.echo("no attempts recorded")
        return
    # Columns as wide as their longest value: a job id or strategy is never cut.
    job = max(len("job"), *(len(r.job_id) for r in rows))
    strategy = max(len("strategy"), *(len(r.strategy) for r in rows))
    click.echo(
        f"{'id':>5}  {'job':<{job}} {'step':>4} {'#':>3}  {'outcome':<17} {'strategy':<{strategy}} "
        f"{'diff':<12} label"
    )
    for row in rows:
        click.echo(
            f"{row.id:>5}  {row.job_id:<{job}} {row.step_index:>4} "
            f"{row.attempt_number:>3}  {row.outcome.value:<17} {row.strategy:<{strategy}} "
            f"{row.diff_hash[:12]:<12} {row.label}"
        )


@click.command()
@click.argument("attempt_id", type=int)
@click.option("--diff/--no-diff", default=True, help="print the candidate diff")
@click.option("--log/--no-log", default=True, help="print the verification log excerpt")
@click.option(
    "--diff-against",
    "other_id",
    type=int,
    default=None,
    metavar="B",
    help="compare with attempt B: outcomes, then how the two candidates differ",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object (with B: the two and how)")
@_db_option
def show(
    attempt_id: int, diff: bool, log: bool, other_id: int | None, as_json: bool, db: str
) -> None:
    """Show one attempt: candidate, outcome, why, and its verification log."""
    from patchheal.memory.store import AttemptStore

    store = AttemptStore(db, create=False)
    try:
        row = store.attempt(attempt_id)
        other = store.attempt(other_id) if other_id is not None else None
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(_show_json(row, other, diff=diff, log=log), ensure_ascii=False))
        return
    if other is not None:
        _compare(row, other)
        return
    click.echo(
        f"attempt {row.id}: job {row.job_id}, step {row.step_index}, attempt {row.attempt_number}"
    )
    click.echo(f"outcome:     {row.outcome.value} ({row.attempt_class})")
    click.echo(f"why:         {row.reason}")
    click.echo(f"candidate:   {row.label} [{row.strategy}] from {row.proposer}")
    if row.rationale:
        click.echo(f"rationale:   {row.rationale}")
    click.echo(f"fingerprint: {row.fingerprint}")
    click.echo(f"diff hash:   {row.diff_hash} (normalized {row.normalized_diff_hash})")
    click.echo(f"files:       {', '.join(row.touched_files) or '-'}")
    click.echo(f"duration:    {row.duration_seconds:.2f} s")
    if diff and row.diff:
        click.echo("\n--- candidate ---\n" + row.diff.rstrip())
    if log and row.log_excerpt:
        click.echo("\n--- verification log (excerpt) ---\n" + row.log_excerpt.rstrip())


def _show_json(
    row: StoredAttempt, other: StoredAttempt | None, *, diff: bool, log: bool
) -> dict[str, Any]:
    """`show --json`: the attempt as stored (--no-diff/--no-log leave those out); with
    --diff-against, both attempts and whether they are the same patch and failure."""
    exclude = {name for name, keep in (("diff", diff), ("log_excerpt", log)) if not keep}
    one = row.model_dump(mode="json", exclude=exclude)
    if other is None:
        return one
    return {
        "attempts": [one, other.model_dump(mode="json", exclude=exclude)],
        "same_failure": row.fingerprint == other.fingerprint,
        "same_patch": bool(row.normalized_diff_hash)
        and row.normalized_diff_hash == other.normalized_diff_hash,
    }


def _compare(a: StoredAttempt, b: StoredAttempt) -> None:
    """`show A --diff-against B`: what changed between two candidates, and what it did."""
    import difflib

    for row in (a, b):
        first = row.reason.splitlines()[0] if row.reason.strip() else ""
        click.echo(f"attempt {row.id}: {row.outcome.value}: {first}")
    if a.fingerprint != b.fingerprint:
        click.echo("note: the two attempts are for different failures (fingerprints differ)")
    if a.normalized_diff_hash and a.normalized_diff_hash == b.normalized_diff_hash:
        click.echo("the two candidates are the same patch (same normalized diff)")
        return
    lines = difflib.unified_diff(
        b.diff.splitlines(),
        a.diff.splitlines(),
        fromfile=f"attempt {b.id} candidate",
        tofile=f"attempt {a.id} candidate",
        lineterm="",
    )
    click.echo("\n".join(lines))
