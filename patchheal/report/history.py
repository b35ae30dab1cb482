"""Report history: every run keeps its report, and an index lists them all.

    reports/index.html                       every job and run, newest first
    reports/<job-id>/<run-id>/report.{md,html,json}
    reports/<job-id>/latest                  the newest run's id (a one-line file)
    reports/<job-id>/report.{md,html,json}   a copy of the newest run's report

`latest` is a plain file, not a symlink: symlinks are lost or refused by
artifact uploaders, zip files, SMB shares and Windows checkouts, and a file
renamed into place is atomic everywhere. The copy at the job's top level
keeps `reports/<job-id>/report.md` (the path a pull-request body or a CI
step links to) pointing at the newest report, while older runs stay in
their own directories, so a cancelled run no longer erases a fixed one.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchheal.atomic import atomic_write
from patchheal.errors import BadInput
from patchheal.report.model import JobReport
from patchheal.report.render import Scrub, default_scrub, environment, render_reports

LATEST = "latest"
INDEX = "index.html"
REPORT_JSON = "report.json"
_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")


def new_run_id(started_at: float) -> str:
    """A run id that sorts by start time; the random tail tells apart runs of one second."""
    stamp = datetime.fromtimestamp(started_at, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def is_run_id(name: str) -> bool:
    return bool(_RUN_ID.match(name))


def run_dir(reports_dir: Path, job_id: str, run_id: str) -> Path:
    return reports_dir / job_id / run_id


def set_latest(reports_dir: Path, job_id: str, run_id: str) -> None:
    atomic_write(reports_dir / job_id / LATEST, run_id + "\n")


def latest_run(reports_dir: Path, job_id: str) -> str | None:
    """The newest run's id, or None for a job with no run history (an older layout)."""
    try:
        name = (reports_dir / job_id / LATEST).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return name if is_run_id(name) else None


@dataclass(frozen=True)
class RunEntry:
    """One row of the index: what a person scans for before opening a report."""

    job_id: str
    run_id: str
    status: str
    failure_class: str
    attempts: int
    started_at: float
    duration_seconds: float
    stop_reason: str
    latest: bool
    started: bool = True
    """Whether any step got as far as a reproduction (a set-up that failed first did not)."""

    def link(self) -> str:
        return f"{self.job_id}/{self.run_id}/report.html"

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "status": self.status,
            "class": self.failure_class,
            "attempts": self.attempts,
            "started_at": _iso(self.started_at),
            "duration_seconds": round(self.duration_seconds, 3),
            "stop_reason": self.stop_reason,
            "latest": self.latest,
            "started": self.started,
            "report": self.link(),
        }


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def _shown(timestamp: float) -> str:
    """A run's start as a person reads it in the index: to the second, in UTC."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _entry(path: Path, job_id: str, run_id: str, latest: str | None) -> RunEntry | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # a report being written or damaged: the index skips it, never fails
    if not isinstance(data, dict):
        return None
    classes = [
        str(step["classification"]["failure_class"])
        for step in data.get("steps") or []
        if isinstance(step, dict) and isinstance(step.get("classification"), dict)
    ]
    started = _seconds(data.get("started_at"))
    finished = _seconds(data.get("finished_at"))
    steps = [step for step in data.get("steps") or [] if isinstance(step, dict)]
    reached = any(
        step.get("failure") or step.get("attempts") or step.get("status") not in (None, "pending")
        for step in steps
    )
    return RunEntry(
        job_id=job_id,
        run_id=run_id,
        status=str(data.get("status", "unknown")),
        failure_class=classes[-1] if classes else "unclassified",
        attempts=int((data.get("totals") or {}).get("attempts", 0)),
        started_at=started,
        duration_seconds=max(finished - started, 0.0),
        stop_reason=str(data.get("stop_reason", "")),
        latest=run_id == latest,
        started=reached,
    )


def _seconds(value: object) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def list_runs(reports_dir: Path) -> list[RunEntry]:
    """Every kept run of every job, newest first."""
    if not reports_dir.is_dir():
        return []
    entries: list[RunEntry] = []
    for job_dir in sorted(p for p in reports_dir.iterdir() if p.is_dir()):
        latest = latest_run(reports_dir, job_dir.name)
        for run in sorted(job_dir.iterdir()):
            if run.is_dir() and is_run_id(run.name):
                entry = _entry(run / REPORT_JSON, job_dir.name, run.name, latest)
                if entry is not None:
                    entries.append(entry)
    return sorted(entries, key=lambda e: (e.started_at, e.run_id), reverse=True)


def write_index(reports_dir: Path, scrub: Scrub) -> Path:
    """reports/index.html, rendered from every kept run's report.json."""
    runs = list_runs(reports_dir)
    text = environment().get_template("index.html.j2").render(runs=runs, iso=_shown)
    path = reports_dir / INDEX
    try:
        atomic_write(path, scrub(text))
    except OSError as exc:
        raise BadInput(f"cannot write the report index {path}: {exc}") from None
    return path


def publish_reports(
    report: JobReport, reports_dir: Path, run_id: str, *, scrub: Scrub | None = None
) -> dict[str, Path]:
    """Write one run's report into its own directory, point `latest` at it, copy it to
    the job's top level and rewrite the index. Returns the run directory's paths."""
    scrub = scrub or default_scrub()
    paths = render_reports(report, run_dir(reports_dir, report.job_id, run_id), scrub=scrub)
    top = reports_dir / report.job_id
    for kind, path in paths.items():
        try:
            atomic_write(top / f"report.{kind}", path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise BadInput(f"cannot write the report {top / f'report.{kind}'}: {exc}") from None
    set_latest(reports_dir, report.job_id, run_id)
    write_index(reports_dir, scrub)
    return paths
