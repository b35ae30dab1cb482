"""Writes a collector's per-test results into the harness's results channel.

Shipped by patchheal and put on the step's PYTHONPATH by the harness; never
copied into the worktree. The directory and the signing token are read from
the environment once, when a collector is imported (before the step's own
code runs), and every record is signed with HMAC-SHA256 so a file the step
writes into the directory without the token is rejected by the harness.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

DIR_ENV = "PATCHHEAL_RESULTS_DIR"
TOKEN_ENV = "PATCHHEAL_RESULTS_TOKEN"

_DIR = os.environ.get(DIR_ENV, "")
# Taken out of os.environ as soon as a collector loads (before the step's own
# code runs), so test or source code reading os.environ cannot sign a forged
# record; /proc/self/environ still shows it (see docs/verdict.md).
_TOKEN = os.environ.pop(TOKEN_ENV, "")

# Worst first: a test id reported twice (reruns, subtests, xdist) keeps the worst.
RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}


def worst(before: str | None, now: str) -> str:
    if before is None:
        return now
    return before if RANK.get(before, 0) <= RANK.get(now, 0) else now


def active() -> bool:
    return bool(_DIR and _TOKEN)


def sign(token: str, payload: str) -> str:
    return hmac.new(token.encode(), payload.encode(), hashlib.sha256).hexdigest()


def where(path: str, root: str) -> str:
    """A test's defining file, relative to the project root when inside it."""
    try:
        return os.path.relpath(path, root) if os.path.commonpath([path, root]) == root else path
    except ValueError:
        return path


def write(runner: str, body: dict[str, Any]) -> None:
    """Write one finished, signed record; never raises into the test run."""
    if not active():
        return
    payload = json.dumps({**body, "runner": runner, "finished": True}, sort_keys=True)
    record = json.dumps({"payload": payload, "mac": sign(_TOKEN, payload)})
    name = f"{runner}-{os.getpid()}-{secrets.token_hex(4)}.json"
    try:
        target = Path(_DIR) / name
        partial = target.with_suffix(".part")
        partial.write_text(record, encoding="utf-8")
        partial.replace(target)
    except OSError:
        return
