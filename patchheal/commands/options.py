"""Options shared by commands that heal (heal, demo, batch)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from patchheal.runs import DEFAULT_DB_SHOWN, DEFAULT_REPORTS_DIR, default_db

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class StateArgs:
    """Where a heal keeps its state, and how it reports: the shared options."""

    db: str
    reports_dir: str
    state_dir: str | None
    as_json: bool
    keep: bool
    statsd: str | None
    statsd_prefix: str = "task"


def state_options(func: F) -> F:
    """--db, --reports, --state-dir, --json, --keep, --statsd[-prefix], passed as `state`."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        db: str,
        reports_dir: str,
        state_dir: str | None,
        as_json: bool,
        keep: bool,
        statsd: str | None,
        statsd_prefix: str,
        **kwargs: Any,
    ) -> Any:
        state = StateArgs(db, reports_dir, state_dir, as_json, keep, statsd, statsd_prefix)
        return func(*args, state=state, **kwargs)

    decorated: Any = wrapper
    for option in reversed(
        [
            click.option(
                "--db",
                default=default_db,
                show_default=DEFAULT_DB_SHOWN,
                help="attempt store: a SQLite path or any SQLAlchemy URL",
            ),
            click.option(
                "--reports",
                "reports_dir",
                default=str(DEFAULT_REPORTS_DIR),
                show_default=True,
                type=click.Path(file_okay=False),
                help="where reports/<job-id>/ go",
            ),
            click.option(
                "--state-dir",
                default=None,
                type=click.Path(file_okay=False),
                help="where runs/<job-id>/ go [default: beside the store: the patchheal home "
                "for the default store, NAME-state/ for a store NAME.sqlite3, $PATCHHEAL_HOME "
                "for a server]",
            ),
            click.option("--json", "as_json", is_flag=True, help="print a JSON summary on stdout"),
            click.option("--keep", is_flag=True, help="keep the run's worktrees for inspection"),
            click.option(
                "--statsd", default=None, metavar="HOST:PORT", help="send StatsD metrics there"
            ),
            click.option(
                "--statsd-prefix",
                default="task",
                show_default=True,
                help="prefix of every metric name (the seed spec's names start with task.)",
            ),
        ]
    ):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def verbosity() -> int:
    """-1 with `patchheal -q`, 0 by default, 1+ with `-v`/`-vv` (the root group's options)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return int(obj.get("verbosity", 0)) if isinstance(obj, dict) else 0


def parse_statsd(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 8125
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint="--statsd")
    return host, int(port)
