"""Where a run's files live: one directory per job, one per attempt, fixed names.

    <state>/runs/<job-id>/events.jsonl
    <state>/runs/<job-id>/attempts/0003/{patch.diff,output.txt,record.json}
    <state>/runs/<job-id>/steps/step-0001.{patch,json}

Every text written here goes through the scrubber first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from patchheal.atomic import atomic_write
from patchheal.scrub.scrubber import Scrubber

# Where state goes unless the command line says otherwise (DESIGN.md, "Where state lives").
DEFAULT_DB = Path("var/memory/attempts.sqlite3")
DEFAULT_STATE_DIR = Path("var")
DEFAULT_REPORTS_DIR = Path("reports")


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
