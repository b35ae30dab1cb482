"""`patchheal similar LOGFILE`: what memory knows about failures like the one in a log.

The log is fingerprinted like `patchheal fingerprint` does, then the attempt
store is searched for similar failures of other fingerprints: the fixes that
verified and the approaches that failed. The search is bounded (`--limit`,
`--failed`, `--scan`, `--time-budget`); when it is cut short the answer says
`degraded` and why, and it is still printed (exit 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from patchheal.runs import DEFAULT_DB_SHOWN, default_db


@click.command()
@click.argument("logfile", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--db", default=default_db, show_default=DEFAULT_DB_SHOWN,
              help="attempt store: a SQLite path or any SQLAlchemy URL")  # fmt: skip
@click.option("--limit", type=click.IntRange(min=0), default=3, show_default=True,
              help="fixes of similar failures to show")  # fmt: skip
@click.option("--failed", type=click.IntRange(min=0), default=3, show_default=True,
              help="failed approaches of similar failures to show")  # fmt: skip
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.6, show_default=True,
              help="least similarity that counts")  # fmt: skip
@click.option("--scan", type=click.IntRange(min=1), default=500, show_default=True,
              help="recent fingerprints compared at most")  # fmt: skip
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=2.0,
              show_default=True, help="seconds the search may take")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
def similar(
    logfile: Path,
    db: str,
    limit: int,
    failed: int,
    threshold: float,
    scan: int,
    time_budget: float,
    as_json: bool,
) -> None:
    """Fixes and failed approaches for failures similar to the one in LOGFILE (`-`: stdin)."""
    from patchheal.failure.analysis import from_text, read_log
    from patchheal.memory.hints import SimilarLimits
    from patchheal.memory.store import AttemptStore

    excerpt = read_log(None if str(logfile) == "-" else logfile)
    failure = from_text(excerpt.text)
    limits = SimilarLimits(
        fixes=limit, failed=failed, threshold=threshold, scan=scan, time_budget_seconds=time_budget
    )
    store = AttemptStore(db, create=False)
    try:
        found = store.similar(failure, limits)
        same = store.same_failure(failure.fingerprint, limits)
    finally:
        store.close()
    if as_json:
        payload = {
            "fingerprint": failure.fingerprint,
            "degraded": found.degraded,
            "degradeReason": found.degrade_reason,
            "scanned": found.scanned,
            "fixes": [h.model_dump(mode="json") for h in found.fixes],
            "failed": [h.model_dump(mode="json") for h in found.failed],
            "same": {
                "fixes": [h.model_dump(mode="json") for h in same.fixes],
                "failed": [h.model_dump(mode="json") for h in same.failed],
            },
        }
        click.echo(json.dumps(payload, indent=2))
        return
    click.echo(f"fingerprint: {failure.fingerprint}")
    if same.fixes or same.failed:
        click.echo(
            f"same failure: {len(same.fixes)} verified fix(es), {len(same.failed)} failed "
            "attempt(s) in memory (`patchheal attempts --fingerprint "
            f"{failure.fingerprint}`)"
        )
    click.echo(f"compared:    {found.scanned} other fingerprints")
    if found.degraded:
        click.echo(f"degraded:    {found.degrade_reason}")
    for title, hints in (
        ("fixed", same.fixes + found.fixes),
        ("failed", same.failed + found.failed),
    ):
        for h in hints:
            why = f" — {h.reason.splitlines()[0][:120]}" if h.reason and title == "failed" else ""
            click.echo(
                f"{title:<7} {h.similarity:.2f}  {h.fingerprint[:16]}  {h.strategy}"
                f"  job {h.job_id or '-'}{why}"
            )
    if not (found.fixes or found.failed or same.fixes or same.failed):
        click.echo("no similar failure in memory")
