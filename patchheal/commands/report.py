"""`patchheal report JOB_ID`: render a job's report again; `--list`: every kept run."""

from __future__ import annotations

import json
from pathlib import Path

import click

from patchheal.runs import DEFAULT_REPORTS_DIR


@click.command()
@click.argument("job_id", required=False)
@click.option(
    "--reports",
    "reports_dir",
    default=str(DEFAULT_REPORTS_DIR),
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
)
@click.option(
    "--print",
    "print_format",
    type=click.Choice(["md", "json"]),
    default=None,
    help="print the report in this format instead of only rewriting the files",
)
@click.option("--list", "list_runs", is_flag=True, help="list every kept run of every job")
@click.option("--json", "as_json", is_flag=True, help="with --list: JSON lines, one run per line")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="with --list: also the runs that never started (a set-up that failed before any step)",
)
def report(
    job_id: str | None,
    reports_dir: Path,
    print_format: str | None,
    list_runs: bool,
    as_json: bool,
    show_all: bool,
) -> None:
    """Re-render the newest report of JOB_ID (reports/JOB_ID/RUN/report.*, copied to
    reports/JOB_ID/report.*) from its JSON record, and the index; or list the runs."""
    from patchheal.errors import BadInput

    if list_runs:
        _list(reports_dir, job_id, as_json, show_all)
        return
    if job_id is None:
        raise BadInput("report: name a JOB_ID, or pass --list")
    if as_json:
        raise BadInput("report: --json goes with --list; use --print json for one report")
    _rerender(reports_dir, job_id, print_format)


def _list(reports_dir: Path, job_id: str | None, as_json: bool, show_all: bool) -> None:
    from patchheal.report.filters import duration
    from patchheal.report.history import list_runs

    runs = [r for r in list_runs(reports_dir) if job_id is None or r.job_id == job_id]
    hidden = 0 if show_all else sum(not r.started for r in runs)
    if hidden:
        runs = [r for r in runs if r.started]
        click.echo(f"{hidden} run(s) that never started are hidden; --all shows them", err=True)
    if as_json:
        for run in runs:  # JSON lines, as every listing prints them (README)
            click.echo(json.dumps(run.to_json(), ensure_ascii=False))
        return
    if not runs:
        click.echo(f"no reports under {reports_dir}")
        return
    for run in runs:
        row = run.to_json()
        mark = " (latest)" if run.latest else ""
        click.echo(
            f"{run.job_id}  {run.run_id}{mark}  {run.status}  {run.failure_class}  "
            f"{run.attempts} attempt(s)  {duration(run.duration_seconds)}  "
            f"{reports_dir / row['report']}"
        )


def _rerender(reports_dir: Path, job_id: str, print_format: str | None) -> None:
    from patchheal.errors import BadInput
    from patchheal.report import load_report
    from patchheal.report.history import latest_run, publish_reports, run_dir
    from patchheal.report.render import render_markdown, render_reports

    run_id = latest_run(reports_dir, job_id)
    folder = run_dir(reports_dir, job_id, run_id) if run_id else reports_dir / job_id
    source = folder / "report.json"
    if not source.is_file():
        raise BadInput(f"no report for job {job_id!r}: {source} does not exist")
    job_report = load_report(source)
    if run_id:
        paths = publish_reports(job_report, reports_dir, run_id)
    else:  # a report written before runs kept their own directories
        paths = render_reports(job_report, folder)
    if print_format == "md":
        click.echo(render_markdown(job_report))
    elif print_format == "json":
        click.echo(paths["json"].read_text(encoding="utf-8"))
    else:
        for kind, path in paths.items():
            click.echo(f"report ({kind}): {path}")
