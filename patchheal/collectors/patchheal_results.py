"""Writes a collector's per-test results into the harness's results channel.

Shipped by patchheal and put on the step's PYTHONPATH by the harness; never
copied into the worktree. The directory is read from the environment when a
collector is imported; the signing token never reaches this module: the
tripwire (`patchheal_monitor`, armed first by sitecustomize) keeps it in its
audit hook's closure and signs a record when `write` raises the
`patchheal.sign` audit event, adding what it saw. Every record is signed with
HMAC-SHA256 so a file the step writes without the token is rejected.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

DIR_ENV = "PATCHHEAL_RESULTS_DIR"
TOKEN_ENV = "PATCHHEAL_RESULTS_TOKEN"

_DIR = os.environ.get(DIR_ENV, "")
SIGN_EVENT = "patchheal.sign"
ARMED_EVENT = "patchheal.armed"

# A step started with `python -S` has no sitecustomize: the first collector
# import arms the tripwire then (still before any conftest or test module).
try:
    import patchheal_monitor

    patchheal_monitor.install()
except Exception:
    pass

# Worst first: a test id reported twice (reruns, subtests, xdist) keeps the worst.
RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}


def worst(before: str | None, now: str) -> str:
    if before is None:
        return now
    return before if RANK.get(before, 0) <= RANK.get(now, 0) else now


def active() -> bool:
    """Whether records can be written: a results directory and an armed tripwire with a token."""
    armed: list[bool] = []
    if _DIR:
        sys.audit(ARMED_EVENT, armed)
    return bool(armed and armed[0])


def where(path: str, root: str) -> str:
    """A test's defining file, relative to the project root when inside it."""
    try:
        return os.path.relpath(path, root) if os.path.commonpath([path, root]) == root else path
    except ValueError:
        return path


def write(runner: str, body: dict[str, Any]) -> None:
    """Write one finished, signed record; never raises into the test run."""
    if not _DIR:
        return
    signed: list[tuple[str, str]] = []
    try:
        sys.audit(SIGN_EVENT, runner, body, signed)
    except PermissionError:
        return
    if not signed:
        return
    payload, mac = signed[0]
    record = json.dumps({"payload": payload, "mac": mac})
    name = f"{runner}-{os.getpid()}-{secrets.token_hex(4)}.json"
    try:
        target = Path(_DIR) / name
        partial = target.with_suffix(".part")
        partial.write_text(record, encoding="utf-8")
        partial.replace(target)
    except OSError:
        return
