"""`patchheal show A --diff-against B`, against a real SQLite store, through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from patchheal.memory.store import AttemptStore
from patchheal.models import Outcome
from tests.test_report import DIFF, attempt

OTHER = DIFF.replace("if xs else 0.0", "if len(xs) else float('nan')")


def _show(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", "show", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_show_diff_against_compares_outcomes_and_candidates(tmp_path: Path) -> None:
    db = str(tmp_path / "store.sqlite3")
    store = AttemptStore(db)
    try:
        store.ensure_job("ci-4821", repo="/r", base="main", spec_toml="")
        first = store.record_attempt(
            attempt(1, Outcome.NO_EFFECT, diff=OTHER, normalized_diff_hash="1" * 64)
        )
        second = store.record_attempt(
            attempt(2, Outcome.FIXED, reason="passed\nmore", normalized_diff_hash="2" * 64)
        )
        same = store.record_attempt(
            attempt(3, Outcome.REJECTED_REPEAT, normalized_diff_hash="2" * 64)
        )
    finally:
        store.close()

    done = _show(str(second), "--diff-against", str(first), "--db", db)
    assert done.returncode == 0, done.stderr
    assert f"attempt {second}: fixed: passed\n" in done.stdout
    assert f"attempt {first}: no_effect: reason for no_effect" in done.stdout
    assert f"--- attempt {first} candidate" in done.stdout
    assert "-+    return sum(xs) / len(xs) if len(xs) else float('nan')" in done.stdout
    assert "++    return sum(xs) / len(xs) if xs else 0.0" in done.stdout

    repeat = _show(str(same), "--diff-against", str(second), "--db", db)
    assert "the same patch (same normalized diff)" in repeat.stdout

    missing = _show(str(second), "--diff-against", "999", "--db", db)
    assert missing.returncode == 2


def test_attempts_table_never_cuts_a_job_id_or_strategy(tmp_path: Path) -> None:
    """Regression (issue 27): the table cut job ids at 20 characters, so two jobs of one
    pipeline (`nightly-integration-py311`, `nightly-integration-py312`) read the same."""
    db = str(tmp_path / "store.sqlite3")
    long_ids = ("nightly-integration-py311", "nightly-integration-py312")
    store = AttemptStore(db)
    try:
        for number, job_id in enumerate(long_ids, 1):
            store.ensure_job(job_id, repo="/r", base="main", spec_toml="")
            store.record_attempt(
                attempt(number, Outcome.NO_EFFECT, job_id=job_id, strategy="gather_more_context")
            )
    finally:
        store.close()
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "attempts", "--db", db],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(job_id in done.stdout for job_id in long_ids)
    assert "gather_more_context" in done.stdout
    # Still a table: the outcome column starts at one offset on every line.
    assert (
        len({line.index("outcome" if i == 0 else "no_effect") for i, line in enumerate(lines)}) == 1
    )
