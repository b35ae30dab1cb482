"""What the tripwire reported: its signed `monitor-*.log` lines and the `monitor` of each record.

The tripwire (collectors/patchheal_watch.py) writes one signed line to a
`monitor-<pid>-<nonce>.log` in the results directory the moment a project file
performs a watched operation, and puts every event it kept into each record it
signs. Both are read here: a log with one line that is not signed with the
run's token, not for this file, or out of order is untrusted as a whole (the
caller names it `rejected`, which no verdict passes).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping

from pydantic import ValidationError

from patchheal.models import MonitorEvent

LOG_PREFIX = "monitor-"
LOG_SUFFIX = ".log"
MAX_LOG_BYTES = 1 << 20
MAX_EVENTS = 400
# Runners whose record is signed from inside a test runner's call (Airflow's at exit).
_RUNNER_SIGNED = ("pytest", "unittest")


def is_monitor_log(name: str) -> bool:
    return name.startswith(LOG_PREFIX) and name.endswith(LOG_SUFFIX)


def read_log(name: str, data: bytes, token: str) -> list[MonitorEvent] | None:
    """The events of the monitor log `name` (its bytes as the results channel read them: a
    regular file, capped), or None when any line of it is not genuine."""
    if len(data) > MAX_LOG_BYTES:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    events: list[MonitorEvent] = []
    for seq, raw in enumerate(text.splitlines()):
        try:
            record = json.loads(raw)
            line, mac = record["line"], record["mac"]
            expected = hmac.new(token.encode(), line.encode(), hashlib.sha256).hexdigest()
            if not (isinstance(mac, str) and hmac.compare_digest(expected, mac)):
                return None
            body = json.loads(line)
            if body["file"] != name or body["seq"] != seq:
                return None  # a genuine line copied from another log, or lines removed
            events.append(MonitorEvent.model_validate(body["event"]))
        except (ValueError, KeyError, TypeError, ValidationError):
            return None
    return events


def from_record(
    runner: str, monitor: Iterable[object], signed_by: Mapping[str, object]
) -> list[MonitorEvent]:
    """A signed record's events, plus who signed it: a pytest or unittest record signed with
    no test runner above the collector, or with project files on the stack."""
    events = []
    for raw in monitor:
        try:
            events.append(MonitorEvent.model_validate(raw))
        except ValidationError:
            continue
    if runner in _RUNNER_SIGNED and signed_by.get("caller") == "none":
        events.append(
            MonitorEvent(
                op=f"{runner} record signed outside the test runner",
                kind="none",
                file="",
                detail=str(signed_by.get("caller")),
                target="results",
            )
        )
    project = signed_by.get("project")
    for path in project if isinstance(project, list) else []:
        events.append(
            MonitorEvent(op="results record signed from this file", kind="project", file=str(path))
        )
    return events


# Kept in place of what no longer fits: the run is not believed unless its baseline's
# events did not fit either (a flood of harmless events would hide the one that matters).
LOG_FULL = MonitorEvent(
    op="tripwire log full: later events were not kept", kind="none", file="", target="monitor"
)


def merge(into: list[MonitorEvent], found: Iterable[MonitorEvent]) -> None:
    """Add `found` to `into`, without duplicates, bounded: past the bound, LOG_FULL once."""
    for event in found:
        if event in into:
            continue
        if len(into) >= MAX_EVENTS:
            if LOG_FULL not in into:
                into.append(LOG_FULL)
            return
        into.append(event)
