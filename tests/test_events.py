"""The append-only event log: shape, scrubbing, durability and torn writes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from patchheal.errors import StoreIntegrityError
from patchheal.models import FailureClass
from patchheal.scrub.scrubber import Scrubber
from patchheal.telemetry.events import EVENT_TYPES, EventLog

GH_TOKEN = "ghp_" + "Zq8Xw2Lk5Mn7Pb3Vc9Rt1Ys4Ud6Fe0Ga2Hj"


def test_every_type_of_the_contract_is_known() -> None:
    assert {
        "job.started",
        "job.finished",
        "failure.recorded",
        "step.attempt.started",
        "step.attempt.finished",
        "step.attempt.failed",
        "self_heal.triggered",
        "self_heal.escalated",
        "self_heal.exhausted",
        "self_heal.recovered",
        "resume.from_step",
        "control.received",
        "control.applied",
        "lock.reclaimed",
    } <= EVENT_TYPES


def test_events_are_written_as_the_seed_names_them_and_old_logs_still_read(
    tmp_path: Path,
) -> None:
    """Invariant: the log carries `task.`-prefixed types; a log written before the prefix
    (short types) reads back to the same short types, so rebuild and recovery replay both."""
    path = tmp_path / "events.jsonl"
    with EventLog(path, job_id="job-1") as log:
        log.emit("self_heal.exhausted", step_index=1, data={"reason": "r"})
    line = json.loads(path.read_text())
    assert line["type"] == "task.self_heal.exhausted"
    old = dict(line, type="self_heal.exhausted", event_id="e" * 32)
    path.write_text(path.read_text() + json.dumps(old) + "\n")
    assert [e.type for e in EventLog.read(path)] == ["self_heal.exhausted"] * 2


def test_emit_splits_columns_from_data_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "job-1" / "events.jsonl"
    with EventLog(path, job_id="job-1") as log:
        first = log.emit("job.started", data={"repo": ".", "base": "main"}, spec_toml="x")
        second = log.emit(
            "step.attempt.finished",
            step_id="unit",
            step_index=0,
            attempt=2,
            failure_class=FailureClass.CODE_BUG,
            fingerprint="f" * 64,
            diff_hash="d" * 64,
            strategy="fix_logic",
            seconds=1.5,
            data={"record": {"outcome": "fixed", "files": ("a.py",)}},
        )
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["failure_class"] == "code_bug"
    assert first.data == {"repo": ".", "base": "main", "spec_toml": "x"}
    assert (second.step_index, second.attempt, second.strategy) == (0, 2, "fix_logic")
    assert second.data == {"record": {"outcome": "fixed", "files": ["a.py"]}, "seconds": 1.5}
    assert EventLog.read(path) == [first, second]
    assert first.event_id != second.event_id
    assert first.time <= second.time


def test_unknown_type_is_refused_and_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path, job_id="job-1")
    with pytest.raises(ValueError, match=r"unknown event type 'step\.exploded'"):
        log.emit("step.exploded")
    log.close()
    assert path.read_bytes() == b""


def test_every_string_is_scrubbed(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    job_secret = "s3cr3t-" + "value-of-the-job"
    with EventLog(path, job_id="job-1", scrubber=Scrubber([job_secret])) as log:
        event = log.emit(
            "control.received",
            strategy=f"use {GH_TOKEN}",
            data={"nested": [{"log": f"password={job_secret}"}], "token": GH_TOKEN},
            issued_by=f"bob with {job_secret}",
        )
    raw = path.read_text()
    assert GH_TOKEN not in raw
    assert job_secret not in raw
    assert "[REDACTED]" in (event.strategy or "")
    assert event.data["issued_by"] == "bob with [REDACTED]"


def test_a_torn_last_line_is_tolerated_then_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, job_id="job-1") as log:
        log.emit("job.started", data={"repo": ".", "base": "main"})
        log.emit("step.started", step_index=0)
    with path.open("ab") as handle:  # a crash in the middle of a write
        handle.write(b'{"event_id": "abc", "time": 12.5, "ty')
    assert [e.type for e in EventLog.read(path)] == ["job.started", "step.started"]
    with EventLog(path, job_id="job-1") as log:  # the resumed run
        log.emit("resume.from_step", step_index=0)
    assert [e.type for e in EventLog.read(path)] == [
        "job.started",
        "step.started",
        "resume.from_step",
    ]
    assert b'"ty{' not in path.read_bytes()


def test_a_complete_last_line_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, job_id="job-1") as log:
        log.emit("step.started", step_index=0)
        log.emit("step.started", step_index=1, data={"pad": "p" * 200_000})  # > one read chunk
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert [e.step_index for e in EventLog.read(path)] == [0, 1]
    with EventLog(path, job_id="job-1") as log:
        log.emit("step.started", step_index=2)
    assert [e.step_index for e in EventLog.read(path)] == [0, 1, 2]
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])  # now torn inside the 200 kB line
    with EventLog(path, job_id="job-1") as log:
        log.emit("step.started", step_index=3)
    assert [e.step_index for e in EventLog.read(path)] == [0, 3]


def test_corruption_before_the_last_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, job_id="job-1") as log:
        for index in range(3):
            log.emit("step.started", step_index=index)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = '{"event_id": "x"}\n'  # valid JSON, not an event
    path.write_text("".join([*lines, "garbage\n"]))
    with pytest.raises(StoreIntegrityError) as info:
        EventLog.read(path)
    message = str(info.value)
    assert f"{path}:2: not an event" in message
    assert f"{path}:4: not JSON" in message  # the last line, but complete: corrupt, not torn


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from patchheal.telemetry.events import EventLog
    log = EventLog(Path(sys.argv[1]), job_id="job-1")
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        log.emit("step.started", step_index=n, data={"pad": "x" * 20000})
    """
)


def test_killed_writers_never_leave_an_unreadable_log(tmp_path: Path) -> None:
    """Invariant: a SIGKILL at any point leaves a log that reads and appends cleanly."""
    path = tmp_path / "events.jsonl"
    for round_ in range(5):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(0.05 + 0.03 * round_)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        events = EventLog.read(path)
        assert events
        assert all(e.type == "step.started" for e in events)
    with EventLog(path, job_id="job-1") as log:
        log.emit("job.finished", data={"status": "cancelled"})
    assert EventLog.read(path)[-1].type == "job.finished"
