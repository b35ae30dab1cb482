"""`patchheal control JOB COMMAND [N]`: steer a running job from another terminal."""

from __future__ import annotations

import click

from patchheal.models import CONTROL_COMMANDS
from patchheal.runs import DEFAULT_DB_SHOWN, default_db


@click.command()
@click.argument("job_id")
@click.argument(
    "command",
    type=click.Choice(CONTROL_COMMANDS),
)
@click.argument("step", type=int, required=False)
@click.option(
    "--db",
    default=default_db,
    show_default=DEFAULT_DB_SHOWN,
    help="the attempt store the job runs against",
)
@click.option(
    "--next-run",
    is_flag=True,
    help="the job has no live run: queue COMMAND for its next run (e.g. a pause before a --resume)",
)
def control(job_id: str, command: str, step: int | None, db: str, next_run: bool) -> None:
    """Queue COMMAND for JOB_ID; the loop applies it before its next attempt.

    resume-from-step takes the step number N. Every command is recorded with
    who issued it and when.
    """
    from patchheal.errors import BadInput
    from patchheal.loop.controls import issuer, validate
    from patchheal.memory.store import AttemptStore

    validate(command, step)
    store = AttemptStore(db, create=False)
    try:
        # A command queued for no live run would wait, then steer (or block)
        # the job's next run long after the operator meant it: refuse it now.
        lock = next((lk for lk in store.list_locks() if lk.job_id == job_id), None)
        state, evidence = store.lock_state(lock) if lock else ("gone", "no lock")
        if state != "live" and not next_run:
            raise BadInput(
                f"job {job_id!r} has no running heal in {db} ({evidence}); nothing queued "
                "(--next-run queues it for the job's next run)"
            )
        control_id = store.enqueue_control(job_id, command, arg=step, issued_by=issuer())
    finally:
        store.close()
    click.echo(
        f"queued {command}{'' if step is None else f' {step}'} for {job_id} (control {control_id})"
    )
