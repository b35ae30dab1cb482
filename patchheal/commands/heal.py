"""`patchheal heal`: the batch command a CI job calls once per failing job."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from patchheal.commands.options import StateArgs, parse_statsd, state_options, verbosity


def _budget_overrides(values: dict[str, Any]) -> dict[str, Any]:
    budget = {k: v for k, v in values.items() if v is not None}
    return {"budget": budget} if budget else {}


def run_heal(
    spec: Any,
    spec_toml: str,
    state: StateArgs,
    *,
    resume: bool = False,
    from_step: int | None = None,
    open_pr: bool = False,
    json_lines: bool = False,
) -> int:
    """Heal one validated spec and print where the results are. Returns the exit code."""
    from patchheal.commands.progress import Progress
    from patchheal.errors import EXIT_INTERRUPTED, Interrupted
    from patchheal.loop.controller import HealLoop, HealOptions
    from patchheal.loop.summary import json_summary
    from patchheal.runs import state_dir_for
    from patchheal.scrub.scrubber import Scrubber

    host, port = parse_statsd(state.statsd)
    # One document per heal; `batch --json` prints one per line (JSON lines).
    indent = None if json_lines else 2

    # stderr is a write path too: everything said goes through the job's scrubber.
    scrubber = Scrubber.from_env(spec.job.env)
    progress = Progress(spec.job.id, verbosity=verbosity(), scrub=scrubber.scrub)
    options = HealOptions(
        state_dir=state_dir_for(state.db, state.state_dir),
        db=state.db,
        reports_dir=Path(state.reports_dir),
        keep_worktrees=state.keep,
        resume=resume,
        from_step=from_step,
        statsd_host=host,
        statsd_port=port,
        statsd_prefix=state.statsd_prefix,
        say=progress.say,
        open_pr=open_pr,
    )
    _keep_state_out_of_status(spec, options)
    try:
        with progress:
            result = HealLoop(spec, spec_toml, options).run()
    except Interrupted as exc:
        # Said here: click turns any KeyboardInterrupt into a bare "Aborted".
        click.echo(scrubber.scrub(f"patchheal: {exc}"), err=True)
        partial = getattr(exc, "result", None)
        if state.as_json and partial is not None:
            summary = json_summary(partial.report, partial.report_paths)
            click.echo(json.dumps(summary, indent=indent))
        sys.exit(EXIT_INTERRUPTED)
    report = result.report
    if state.as_json:
        click.echo(json.dumps(json_summary(report, result.report_paths), indent=indent))
    else:
        # Coloured on a terminal only (click strips styles otherwise; NO_COLOR turns them off).
        colour = "green" if result.exit_code == 0 else "red"
        click.echo(
            f"job {report.job_id}: {click.style(str(report.status), fg=colour, bold=True)}"
            + (" (retryable)" if report.retryable else "")
            + (f" — {report.stop_reason}" if report.stop_reason else "")
        )
        if report.branch:
            click.echo(f"verified branch: {report.branch} in {report.repo}")
        for kind, path in result.report_paths.items():
            click.echo(f"report ({kind}): {path}")
        for tree in result.worktrees:
            click.echo(f"worktree kept: {tree}")
        _print_commands(report)
        _print_next_actions(report, verbosity())
    return result.exit_code


def _print_next_actions(report: Any, verbose: int) -> None:
    """What to do next, when the job is not fixed: the first action (`-v`: all of them)."""
    from patchheal.report import wording

    if report.status == "fixed":
        return
    actions = wording.runbook(report)
    if not actions:
        return
    if verbose < 1:
        click.echo(f"next: {actions[0]}" + (" (-v: all next actions)" if len(actions) > 1 else ""))
        return
    click.echo("next actions:")
    for number, action in enumerate(actions, 1):
        click.echo(f"  {number}. {action}")


def _print_commands(report: Any) -> None:
    """The report's commands, ready to paste: check a verified fix, else reproduce the failure."""
    from patchheal.report import wording

    fixed = wording.check_locally(report)
    title = "check it (in the harness, then on your machine):"
    commands = fixed or wording.reproduce_in_harness(report)
    if not fixed:
        title = "reproduce the failure in the harness:"
    if commands:
        click.echo(title)
        for command in commands:
            click.echo(f"  {command}")


def _keep_state_out_of_status(spec: Any, options: Any) -> None:
    """Healing from inside the job's repository: its store, runs and reports stay out of
    `git status` (`workspace/exclude.py`; docs/architecture.md, "Where state lives")."""
    from patchheal.runs import sqlite_file
    from patchheal.workspace.exclude import hide_from_status, state_paths

    repo = Path(spec.job.repo)
    if "://" in spec.job.repo or not repo.is_dir():
        return
    paths = state_paths(
        sqlite_file(options.db), options.state_dir, options.reports_dir, spec.job.id
    )
    try:
        hide_from_status(repo, paths)
    except OSError as error:  # a read-only or odd .git/info: cosmetic, so the heal goes on
        click.echo(
            f"warning: could not list patchheal's state in the repository's info/exclude "
            f"({error}); it will show as untracked in `git status`",
            err=True,
        )


def _workflow_overrides(
    overrides: dict[str, Any],
    workflow: str | None,
    workflow_job: str | None,
    workflow_step: str | None,
    matrix: tuple[str, ...],
    ci_log: str | None,
) -> dict[str, Any]:
    """The `[job]` workflow keys the --from-workflow flags set."""
    from patchheal.errors import BadInput

    given = {
        "workflow": workflow,
        "workflow_job": workflow_job,
        "workflow_step": workflow_step,
        "workflow_log": None if ci_log is None else str(Path(ci_log).resolve()),
    }
    job: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if matrix:
        pairs = [m.partition("=") for m in matrix]
        bad = [m for m, (k, sep, _) in zip(matrix, pairs, strict=True) if not sep or not k]
        if bad:
            raise BadInput(f"--matrix takes KEY=VALUE, got {bad[0]!r}")
        job["matrix"] = {k.strip(): v.strip() for k, _, v in pairs}
    if job and workflow is None:
        raise BadInput("--job, --workflow-step, --matrix and --ci-log need --from-workflow")
    if workflow is not None and workflow_job is None:
        raise BadInput("--from-workflow needs --job NAME (the workflow's job to heal)")
    if not job:
        return overrides
    return {**overrides, "job": {**overrides.get("job", {}), **job}}


def _say_workflow(spec: Any) -> None:
    """How the workflow became this spec: the healed step, what is not run and why."""
    from patchheal.harness.ci.workflow import derive_for_job

    derived = derive_for_job(spec.job.model_dump(mode="json"))
    click.echo(
        f"workflow {spec.job.workflow} job {spec.job.workflow_job!r}: healing step "
        f"{derived.step.index} {derived.step.name!r} in the {derived.harness} harness",
        err=True,
    )
    for note in derived.notes:
        click.echo(f"  {note}", err=True)


def _harness_regression_note(spec: Any) -> str:
    """TOML comment lines naming the regression steps the job's Docker harness adds to
    `[regression]` (its harness.toml `regression`), so `--print-spec` shows what runs."""
    from patchheal.errors import PatchhealError
    from patchheal.harness.registry import resolve

    try:
        defn, _ = resolve(spec, Path(spec.job.repo))
    except PatchhealError:  # `heal` itself says why the harness cannot be had
        return ""
    if defn is None:
        return ""
    own = 1 if spec.regression.command else 0
    added = spec.regression.steps(defn.regression)[own:]
    if not added:
        return ""
    lines = [
        f"# Regression steps the harness {defn.name!r} adds in Docker (its harness.toml "
        "`regression`; [regression] harness = false turns them off):",
        *(f"#   {command}" for command in added),
    ]
    return "\n" + "\n".join(lines) + "\n"


@click.command()
@click.argument("job_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--repo", help="repository (instead of a job file)")
@click.option("--base", default="HEAD", show_default=True, help="the ref that fails")
@click.option("--step", "steps", multiple=True, help="a step command (repeatable, healed in order)")
@click.option("--regression", help="a command that must not get worse")
@click.option("--proposer", help="patchfiles:DIR or agent:COMMAND")
@click.option("--harness", default=None, help="auto, local, or a harness name/path")
@click.option("--job-id", default=None, help="job id for a flag-defined job")
@click.option(
    "--open-pr",
    is_flag=True,
    help="once every step is verified, run the job's pr_command (never for an unverified patch)",
)
@click.option("--pr-command", default=None, help="overrides [job] pr_command")
@click.option(
    "--branch",
    default=None,
    help="the branch a verified patch is published to (overrides [job] branch; "
    "default patchheal/local/<job id>)",
)
@click.option(
    "--from-workflow",
    "workflow",
    default=None,
    help="derive the job from a CI workflow (e.g. .github/workflows/ci.yml, repo-relative)",
)
@click.option("--job", "workflow_job", default=None, help="the workflow's job (--from-workflow)")
@click.option("--workflow-step", default=None, help="the run: step to heal (name or number)")
@click.option(
    "--matrix", "matrix", multiple=True, help="KEY=VALUE: the workflow matrix entry (repeatable)"
)
@click.option(
    "--ci-log",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="the CI job's log: finds the failing workflow step; first evidence",
)
@click.option("--print-spec", is_flag=True, help="print the TOML spec and exit")
@click.option("--resume", is_flag=True, help="continue from the last checkpoint")
@click.option("--from-step", type=int, default=None, help="rebuild from checkpoints before step N")
@click.option("--max-attempts", type=int, default=None)
@click.option("--step-timeout", "step_timeout_seconds", type=float, default=None)
@click.option("--idle-timeout", "idle_timeout_seconds", type=float, default=None)
@click.option("--no-progress-limit", type=int, default=None)
@click.option("--max-hard-resets", type=int, default=None)
@click.option("--job-wall-seconds", type=float, default=None)
@click.option("--max-proposer-calls", type=int, default=None, help="proposer calls per job")
@click.option("--max-model-tokens", type=int, default=None, help="model tokens per job")
@state_options
def heal(
    job_file: Path | None,
    repo: str | None,
    base: str,
    steps: tuple[str, ...],
    regression: str | None,
    proposer: str | None,
    harness: str | None,
    job_id: str | None,
    open_pr: bool,
    pr_command: str | None,
    branch: str | None,
    workflow: str | None,
    workflow_job: str | None,
    workflow_step: str | None,
    matrix: tuple[str, ...],
    ci_log: str | None,
    print_spec: bool,
    resume: bool,
    from_step: int | None,
    state: StateArgs,
    **budget: Any,
) -> None:
    """Heal the failing job JOB_FILE (a TOML job spec), or one described by flags.

    Exit codes: 0 fixed, 1 not fixed (report written), 2 bad input,
    3 harness unavailable, 130 interrupted (resumable with --resume).
    """
    from patchheal.config import build_spec, load_spec
    from patchheal.errors import BadInput
    from patchheal.intake.toml import spec_from_flags, spec_to_toml

    overrides = _budget_overrides(budget)
    if harness is not None:
        overrides.setdefault("job", {})["harness"] = harness
    if pr_command is not None:
        overrides.setdefault("job", {})["pr_command"] = pr_command
    if branch is not None:
        overrides.setdefault("job", {})["branch"] = branch
    overrides = _workflow_overrides(
        overrides, workflow, workflow_job, workflow_step, matrix, ci_log
    )
    if workflow is not None and job_file is None:
        repo = repo or "."
    if job_file is not None:
        if repo or steps or proposer:
            raise BadInput("give either a job file or --repo/--step/--proposer, not both")
        spec = load_spec(job_file, overrides=overrides)
    else:
        if not repo or not (steps or workflow):
            raise BadInput("give a job file, --repo and at least one --step, or --from-workflow")
        default_name = f"{Path(repo).resolve().name}-{workflow_job or base}"
        name = job_id or default_name.replace("/", "-")
        raw = spec_from_flags(
            job_id=name,
            repo=repo,
            base=base,
            steps=list(steps),
            proposer=proposer,
            harness=harness or "auto",
            regression=regression,
        )
        spec = build_spec(raw, source="(command line)", base_dir=Path.cwd(), overrides=overrides)
    spec_toml = spec_to_toml(spec)
    if spec.job.workflow is not None:
        _say_workflow(spec)
    if print_spec:
        click.echo(spec_toml + _harness_regression_note(spec), nl=False)
        return
    sys.exit(
        run_heal(
            spec,
            spec_toml,
            state,
            resume=resume,
            from_step=from_step,
            open_pr=open_pr,
        )
    )
