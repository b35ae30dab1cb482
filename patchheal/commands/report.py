"""`patchheal report JOB_ID`: render a job's report again from its report.json."""

from __future__ import annotations

from pathlib import Path

import click

from patchheal.runs import DEFAULT_REPORTS_DIR


@click.command()
@click.argument("job_id")
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
def report(job_id: str, reports_dir: Path, print_format: str | None) -> None:
    """Re-render reports/JOB_ID/report.{md,html,json} from its JSON record."""
    from patchheal.errors import BadInput
    from patchheal.report import load_report
    from patchheal.report.render import render_markdown, render_reports

    source = reports_dir / job_id / "report.json"
    if not source.is_file():
        raise BadInput(f"no report for job {job_id!r}: {source} does not exist")
    job_report = load_report(source)
    paths = render_reports(job_report, reports_dir / job_id)
    if print_format == "md":
        click.echo(render_markdown(job_report))
    elif print_format == "json":
        click.echo(paths["json"].read_text(encoding="utf-8"))
    else:
        for kind, path in paths.items():
            click.echo(f"report ({kind}): {path}")
