"""Report history: every run keeps its report, `latest` names the newest, the index lists all.

Real files in tmp_path, the real renderer and scrubber, the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from patchheal.report.history import (
    latest_run,
    list_runs,
    new_run_id,
    publish_reports,
)
from tests.test_report import STARTED, infra_report, job


def patchheal(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_later_run_keeps_the_earlier_report(tmp_path: Path) -> None:
    """Invariant: a cancelled run never erases the fixed report of an earlier run."""
    reports = tmp_path / "reports"
    fixed_run = new_run_id(STARTED)
    publish_reports(job(run_id=fixed_run), reports, fixed_run)
    cancelled_run = new_run_id(STARTED + 600)
    cancelled = job(
        run_id=cancelled_run,
        status="cancelled",
        retryable=True,
        stop_reason="interrupted (Ctrl-C or SIGTERM); resume with --resume",
        started_at=STARTED + 600,
        finished_at=STARTED + 610,
        branch=None,
        final_diff="",
    )
    publish_reports(cancelled, reports, cancelled_run)

    kept = json.loads((reports / "ci-4821" / fixed_run / "report.json").read_text())
    assert kept["status"] == "fixed"
    assert latest_run(reports, "ci-4821") == cancelled_run
    top = json.loads((reports / "ci-4821" / "report.json").read_text())
    assert top["status"] == "cancelled"  # the job's top-level copy is the newest run
    runs = list_runs(reports)
    assert [(r.run_id, r.status, r.latest) for r in runs] == [
        (cancelled_run, "cancelled", True),
        (fixed_run, "fixed", False),
    ]
    index = (reports / "index.html").read_text()
    assert f'href="ci-4821/{fixed_run}/report.html"' in index
    assert f'href="ci-4821/{cancelled_run}/report.html"' in index


def test_run_ids_sort_by_time_and_differ_within_one_second() -> None:
    first, second = new_run_id(STARTED), new_run_id(STARTED)
    assert first != second
    assert first < new_run_id(STARTED + 1)
    assert first.startswith("20231114T221320Z-")


def test_report_list_prints_every_run_with_class_attempts_and_link(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run_a, run_b = new_run_id(STARTED), new_run_id(STARTED + 60)
    publish_reports(job(run_id=run_a), reports, run_a)
    infra = infra_report().model_copy(
        update={"job_id": "infra-1", "run_id": run_b, "started_at": STARTED + 60}
    )
    publish_reports(infra, reports, run_b)

    listed = patchheal("report", "--list", "--json", "--reports", str(reports), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    # JSON lines, as the README promises for every listing (issue 27: it was one array).
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["job_id"], r["status"], r["class"], r["attempts"]) for r in rows] == [
        ("infra-1", "not_patchable", "infra_issue", 0),
        ("ci-4821", "fixed", "code_bug", 0),
    ]
    assert rows[1]["started_at"] == "2023-11-14T22:13:20Z"
    assert rows[1]["report"] == f"ci-4821/{run_a}/report.html"

    text = patchheal("report", "--list", "--reports", str(reports), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "infra-1" in text.stdout
    assert "(latest)" in text.stdout

    rerendered = patchheal("report", "ci-4821", "--reports", str(reports), cwd=tmp_path)
    assert rerendered.returncode == 0, rerendered.stderr
    assert f"ci-4821/{run_a}/report.md" in rerendered.stdout

    bad = patchheal("report", "--reports", str(reports), cwd=tmp_path)
    assert bad.returncode == 2
    assert "--list" in bad.stderr


def test_report_json_times_are_iso_8601_and_old_unix_times_still_read(tmp_path: Path) -> None:
    from patchheal.report import render_json, report_from_json

    data = json.loads(render_json(job()))
    assert data["started_at"] == "2023-11-14T22:13:20Z"
    assert data["finished_at"] == "2023-11-14T22:15:25Z"
    assert report_from_json(json.dumps(data)).started_at == STARTED
    data["started_at"] = STARTED  # a report.json written before ISO times
    assert report_from_json(json.dumps(data)).started_at == STARTED


def test_report_list_hides_runs_that_never_started_unless_asked(tmp_path: Path) -> None:
    """Invariant (issue 34): a run whose set-up failed before any step reproduced leaves an
    `error` report that `report --list` hides (saying how many), and `--all` shows."""
    from tests.test_report import step

    reports = tmp_path / "reports"
    run_a, run_b = new_run_id(STARTED), new_run_id(STARTED + 60)
    publish_reports(job(run_id=run_a), reports, run_a)
    never = job(
        job_id="setup-broke",
        run_id=run_b,
        status="error",
        stop_reason="setup failed: pip install -e . exited 1",
        started_at=STARTED + 60,
        branch=None,
        final_diff="",
        steps=(step(status="pending", failure=None, classification=None, attempts=()),),
    )
    publish_reports(never, reports, run_b)
    assert [r.started for r in list_runs(reports)] == [False, True]

    shown = patchheal("report", "--list", "--json", "--reports", str(reports), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(line)["job_id"] for line in shown.stdout.splitlines()] == ["ci-4821"]
    assert "1 run(s) that never started are hidden; --all shows them" in shown.stderr
    every = patchheal("report", "--list", "--all", "--reports", str(reports), cwd=tmp_path)
    assert every.returncode == 0, every.stderr
    assert "setup-broke" in every.stdout
    assert "ci-4821" in every.stdout
