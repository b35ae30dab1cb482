"""`patchheal outcome JOB --status pass|fail [--log CI.log]`: what real CI said of a fix.

The verdict in the harness is patchheal's; this is the world's. `pass` records
`fixed`; `fail` fingerprints the CI log: the step's own failure again is
`no_effect`, any other failure is a `regression` (its fingerprint is kept).
Memory then stops offering a fix that failed in real CI first.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from patchheal.runs import DEFAULT_DB_SHOWN, default_db


@click.command()
@click.argument("job_id")
@click.option("--status", "ci_status", type=click.Choice(["pass", "fail"]), required=True)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the failing CI run's log, fingerprinted to tell no_effect from regression",
)
@click.option("--db", default=default_db, show_default=DEFAULT_DB_SHOWN, help="the attempt store")
@click.option("--json", "as_json", is_flag=True, help="print what was recorded as JSON")
def outcome(job_id: str, ci_status: str, log_path: Path | None, db: str, as_json: bool) -> None:
    """Record whether real CI went green with JOB_ID's verified patch."""
    from patchheal.errors import BadInput
    from patchheal.memory.store import AttemptStore

    if ci_status == "pass" and log_path is not None:
        raise BadInput("outcome: --log goes with --status fail (a green run has no failure)")
    new_fingerprint = ""
    if log_path is not None:
        from patchheal.failure.analysis import analyze_file

        new_fingerprint = analyze_file(log_path).fingerprint
    store = AttemptStore(db)
    try:
        patches = store.verified_patches(job_id)
        if not patches:
            raise BadInput(f"outcome: job {job_id!r} has no verified patch in {db}")
        recorded = []
        for patch in patches:
            verdict, detail = _verdict(ci_status, patch.fingerprint, new_fingerprint)
            store.record_outcome(
                job_id,
                patch,
                ci_status=ci_status,
                outcome=verdict,
                new_fingerprint=new_fingerprint,
                detail=detail,
            )
            recorded.append({"step": patch.step_index, "outcome": verdict, "detail": detail})
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"job_id": job_id, "ci": ci_status, "recorded": recorded}))
        return
    for row in recorded:
        click.echo(f"{job_id} step {row['step']}: {row['outcome']} ({row['detail']})")


def _verdict(ci_status: str, fixed_fingerprint: str, new_fingerprint: str) -> tuple[str, str]:
    if ci_status == "pass":
        return "fixed", "real CI passed"
    if not new_fingerprint:
        return "no_effect", "real CI failed; no log given, so the failure is taken as the same"
    if new_fingerprint == fixed_fingerprint:
        return "no_effect", "real CI failed with the failure the patch was meant to fix"
    return "regression", f"real CI failed with a new failure {new_fingerprint[:16]}"
