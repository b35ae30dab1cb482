"""`patchheal submit`: put job specs on a Celery queue, and optionally follow them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from patchheal.celery.settings import DEFAULT_BROKER
from patchheal.commands.options import StateArgs, state_options


def _outcome(result: Any, timeout: float | None) -> tuple[int, dict[str, Any]]:
    """Wait for one job's task; a failed task (bad input) is exit 2."""
    from patchheal.errors import EXIT_BAD_INPUT, EXIT_INFRA

    try:
        summary = result.get(timeout=timeout, propagate=False)
    except Exception as exc:  # a timeout or a lost backend: the job's fate is unknown
        return EXIT_INFRA, {"task_id": result.id, "status": "unknown", "error": repr(exc)}
    if result.failed():
        return EXIT_BAD_INPUT, {"task_id": result.id, "status": "failed", "error": str(summary)}
    assert isinstance(summary, dict)
    return int(summary.get("exit_code", 1)), summary


@click.command()
@click.argument(
    "job_files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--broker",
    envvar="PATCHHEAL_BROKER",
    default=DEFAULT_BROKER,
    show_default=True,
    help="Celery broker URL (also the result backend)",
)
@click.option("--wait", is_flag=True, help="follow the jobs until they end; exit like `batch`")
@click.option("--timeout", type=float, default=None, help="seconds to wait per job (--wait)")
@state_options
def submit(
    job_files: tuple[Path, ...],
    broker: str,
    wait: bool,
    timeout: float | None,
    state: StateArgs,
) -> None:
    """Enqueue each JOB_FILE for `patchheal worker`s sharing the store given by --db.

    The state options name paths on the workers. Every spec is validated here
    first: one bad spec enqueues nothing (exit 2).
    """
    from patchheal.commands.queue_extra import load_celery_app
    from patchheal.config import load_spec
    from patchheal.intake.toml import spec_to_toml
    from patchheal.runs import state_dir_for

    app = load_celery_app(broker)
    specs = [(path, load_spec(path)) for path in job_files]
    state_dict = {
        "db": state.db,
        "reports_dir": str(Path(state.reports_dir).resolve()),
        "state_dir": str(state_dir_for(state.db, state.state_dir).resolve()),
        "keep": state.keep,
    }
    pending = []
    for path, spec in specs:
        result = app.send_task(
            "patchheal.heal_job",
            kwargs={
                "spec_toml": spec_to_toml(spec),
                "spec_dir": str(path.resolve().parent),
                "state": state_dict,
            },
        )
        click.echo(f"{spec.job.id}: queued as task {result.id}", err=True)
        pending.append((spec.job.id, result))
    if not wait:
        return
    codes = []
    for job_id, result in pending:
        code, summary = _outcome(result, timeout)
        codes.append(code)
        if state.as_json:
            click.echo(json.dumps(summary))  # one line per job, in submission order
        queue = summary.get("queue", {})
        click.echo(
            f"{job_id}: {summary.get('status')} (exit {code}"
            + (f", queue attempt {queue['attempt']}" if queue else "")
            + ")",
            err=True,
        )
    fixed = sum(1 for c in codes if c == 0)
    click.echo(f"submit: {fixed} fixed of {len(codes)} job(s)", err=True)
    sys.exit(max(codes, default=0))
