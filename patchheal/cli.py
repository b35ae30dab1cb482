"""The command line. Subcommands load lazily so that `patchheal --help` stays fast.

Errors map to the exit codes of DESIGN.md: 0 fixed, 1 not fixed, 2 bad input,
3 harness or infrastructure unavailable, 130 interrupted. An unexpected error
writes a crash log and exits 1 with its path.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from patchheal.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_NOT_FIXED, PatchhealError

# name -> (module, attribute, one-line help). The help text lives here so
# that listing commands does not import them.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "heal": ("patchheal.commands.heal", "heal", "Heal one failing job (the batch command)."),
    "demo": ("patchheal.commands.demo", "demo", "Heal the bundled example project end to end."),
    "batch": ("patchheal.commands.batch", "batch", "Heal several job specs, one after another."),
    "fingerprint": (
        "patchheal.commands.fingerprint",
        "fingerprint",
        "Fingerprint and classify a failure log.",
    ),
    "similar": (
        "patchheal.commands.similar",
        "similar",
        "Fixes and failed approaches for failures like the one in a log.",
    ),
    "attempts": ("patchheal.commands.inspect", "attempts", "List recorded attempts."),
    "show": ("patchheal.commands.inspect", "show", "Show one attempt: candidate, outcome, log."),
    "worktree": ("patchheal.commands.worktree", "worktree", "List, open and remove worktrees."),
    "report": (
        "patchheal.commands.report",
        "report",
        "Render a job's report again, or list every kept run.",
    ),
    "outcome": (
        "patchheal.commands.outcome",
        "outcome",
        "Record what real CI said of a job's verified patch.",
    ),
    "control": (
        "patchheal.commands.control",
        "control",
        "Steer a running job from another terminal.",
    ),
    "locks": ("patchheal.commands.locks", "locks", "List and reclaim job locks."),
    "store": ("patchheal.commands.store", "store", "Check or rebuild the attempt store."),
    "harness": ("patchheal.commands.harness", "harness", "List, build, check and run harnesses."),
    "submit": (
        "patchheal.commands.submit",
        "submit",
        "Queue jobs for Celery workers (the celery extra).",
    ),
    "worker": (
        "patchheal.commands.worker",
        "worker",
        "Heal queued jobs: a Celery worker (the celery extra).",
    ),
    "gc": ("patchheal.commands.gc", "gc", "Remove orphaned containers, volumes and worktrees."),
}


def _set_verbosity(ctx: click.Context, quiet: bool, verbose: int) -> None:
    """Record -q/-v in the root context (read by `commands.options.verbosity`)."""
    root = ctx.find_root()
    if not isinstance(root.obj, dict):
        root.obj = {}
    if quiet:
        root.obj["verbosity"] = -1
    elif verbose:
        before = max(int(root.obj.get("verbosity", 0)), 0)
        root.obj["verbosity"] = before + verbose
        import logging

        logging.basicConfig(level=logging.DEBUG if before + verbose > 1 else logging.INFO)


def _quiet_flag(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        _set_verbosity(ctx, True, 0)


def _verbose_flag(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    if value:
        _set_verbosity(ctx, False, value)


def with_global_flags(command: click.Command) -> click.Command:
    """`command` (and a group's subcommands) also taking -q/-v, so the global flags work
    after the subcommand too. A command that passes unknown options through to a command
    of its own (`harness run ... pytest -v`) keeps them: there they belong to that command."""
    if getattr(command, "_patchheal_global_flags", False):
        return command
    command._patchheal_global_flags = True  # type: ignore[attr-defined]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            with_global_flags(sub)
    if command.context_settings.get("ignore_unknown_options"):
        return command
    command.params += [
        click.Option(
            ["-q", "--quiet"], is_flag=True, expose_value=False, hidden=True, callback=_quiet_flag
        ),
        click.Option(
            ["-v", "--verbose"], count=True, expose_value=False, hidden=True, callback=_verbose_flag
        ),
    ]
    return command


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when they run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attribute, _ = entry
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return with_global_flags(command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, _, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="patchheal")
@click.option(
    "-q", "--quiet", is_flag=True, help="only results and errors (anywhere on the command line)"
)
@click.option("-v", "--verbose", count=True, help="more detail, -vv: debug logging (anywhere)")
@click.pass_context
def cli(ctx: click.Context, quiet: bool, verbose: int) -> None:
    """Heal failing CI jobs in a closed loop: reproduce, propose, gate, verify, report.

    Exit codes: 0 fixed, 1 not fixed (report written), 2 bad input or usage,
    3 harness or infrastructure unavailable, 130 interrupted (resumable).
    Colour only on a terminal, never with NO_COLOR set.
    """
    ctx.obj = {"verbosity": 0}
    _set_verbosity(ctx, quiet, verbose)
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        ctx.color = False


def _crash_log(exc: BaseException, argv: list[str]) -> Path:
    from patchheal.scrub.active import scrub
    from patchheal.telemetry.crashlog import write_crash_log

    text = "".join(traceback.format_exception(exc))
    return write_crash_log(scrub(f"patchheal {' '.join(argv)}\n{text}"), argv)


def main(argv: list[str] | None = None) -> Any:
    try:
        return cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT if exc.exit_code == 2 else exc.exit_code)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except PatchhealError as exc:
        click.echo(f"patchheal: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted; state is saved, run again with --resume", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # the unexpected: keep a crash log, never a bare traceback
        path = _crash_log(exc, sys.argv[1:] if argv is None else argv)
        click.echo(f"patchheal: unexpected error: {exc!r}\ncrash log: {path}", err=True)
        sys.exit(EXIT_NOT_FIXED)


if __name__ == "__main__":
    main()
