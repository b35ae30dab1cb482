"""Where a run's files live: one directory per job, one per attempt, fixed names.

    <state>/runs/<job-id>/events.jsonl
    <state>/runs/<job-id>/attempts/0003/{patch.diff,output.txt,record.json}
    <state>/runs/<job-id>/steps/step-0001.{patch,json}

Every text written here goes through the scrubber first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from patchheal.atomic import atomic_write
from patchheal.errors import BadInput
from patchheal.scrub.scrubber import Scrubber

# The default store's place inside the user's patchheal home (see `user_home`).
DEFAULT_DB = Path("memory/attempts.sqlite3")
DEFAULT_REPORTS_DIR = Path("reports")
# The user's patchheal home: the default store and its runs; also names the state
# directory of a store that is not a file (PostgreSQL).
HOME_ENV = "PATCHHEAL_HOME"
DEFAULT_DB_SHOWN = f"${HOME_ENV}/{DEFAULT_DB}, else the user state dir's patchheal/{DEFAULT_DB}"


def user_home() -> Path:
    """Where the user's memory lives unless `--db` says otherwise: $PATCHHEAL_HOME, else
    the platform's per-user state directory (~/.local/state/patchheal on Linux, following
    $XDG_STATE_HOME). One place whatever the working directory, so `demo` and a user's own
    heals share one memory."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser()
    from platformdirs import user_state_dir

    return Path(user_state_dir("patchheal", appauthor=False))


def default_db() -> str:
    """The default store: `memory/attempts.sqlite3` under `user_home()`."""
    return str(user_home() / DEFAULT_DB)


def default_state_dir() -> Path:
    """The default store's state directory (its runs/): `user_home()`."""
    return user_home()


def sqlite_file(db: str) -> Path | None:
    """The database file a `--db` value names, or None for a server URL or in-memory SQLite."""
    if "://" not in db:
        return Path(db).expanduser()
    scheme, _, rest = db.partition("://")
    if scheme.split("+")[0] != "sqlite" or rest in ("", "/", "/:memory:"):
        return None
    return Path(rest[1:].split("?")[0])


def state_dir_for(db: str, explicit: str | Path | None = None) -> Path:
    """Where a store's runs (events, attempt logs, checkpoints) live: beside the store.

    The default store `<home>/memory/attempts.sqlite3` (any `memory/attempts.sqlite3`)
    keeps them in `<home>/runs/`; any other SQLite file `DIR/NAME.sqlite3` in
    `DIR/NAME-state/runs/`, so a fresh `--db` never sees (and never recovers attempts
    from) another store's runs. A server store has no folder of its own: `--state-dir` or
    $PATCHHEAL_HOME names it.
    """
    if explicit is not None:
        return Path(explicit)
    path = sqlite_file(db)
    if path is None:
        home = os.environ.get(HOME_ENV)
        if not home:
            raise BadInput(
                "a store that is not a file keeps its runs in a folder you name: "
                f"give --state-dir or set {HOME_ENV}"
            )
        return Path(home)
    if path.name == DEFAULT_DB.name and path.parent.name == DEFAULT_DB.parent.name:
        return path.parent.parent
    return path.parent / f"{path.stem}-state"


class RunPaths:
    """The fixed layout of one job's run directory."""

    def __init__(self, state_dir: Path, job_id: str, scrubber: Scrubber) -> None:
        self.root = state_dir / "runs" / job_id
        self.scrubber = scrubber

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def steps_dir(self) -> Path:
        return self.root / "steps"

    def attempt_dir(self, attempt_id: int) -> Path:
        return self.root / "attempts" / f"{attempt_id:04d}"

    def checkpoint_patch(self, step_index: int) -> Path:
        return self.steps_dir / f"step-{step_index:04d}.patch"

    def checkpoint_meta(self, step_index: int) -> Path:
        return self.steps_dir / f"step-{step_index:04d}.json"

    def write_text(self, path: Path, text: str) -> Path:
        atomic_write(path, self.scrubber.scrub(text))
        return path

    def write_json(self, path: Path, data: Any) -> Path:
        cleaned = self.scrubber.scrub_obj(data)
        atomic_write(path, json.dumps(cleaned, indent=2, sort_keys=True) + "\n")
        return path
