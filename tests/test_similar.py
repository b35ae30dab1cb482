"""Similar-failure memory: fixes and failed approaches, limits, time budget, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from patchheal.cli import cli
from patchheal.failure.analysis import analyze
from patchheal.memory.hints import SimilarLimits
from patchheal.memory.store import AttemptStore
from patchheal.models import AttemptRecord, Outcome


def _log(key: str, where: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "/app/{where}.py", line 7, in lookup\n'
        "    return USERS[name]\n"
        f"KeyError: '{key}'\n"
    )


def _attempt(fp: str, n: int, outcome: Outcome, strategy: str, diff: str) -> AttemptRecord:
    return AttemptRecord(
        job_id="job-a",
        step_index=1,
        attempt_number=n,
        fingerprint=fp,
        outcome=outcome,
        reason=f"{outcome.value} after {strategy}",
        diff=diff,
        diff_hash=f"{n:02d}" * 32,
        normalized_diff_hash=f"{n:02d}" * 32,
        touched_files=("users.py",),
        strategy=strategy,
    )


def _store(tmp_path: Path) -> tuple[str, str]:
    """A store where job-a's failure was first patched wrongly twice, then fixed."""
    db = str(tmp_path / "store.sqlite3")
    old = analyze(_log("alice", "users"))
    store = AttemptStore(db)
    store.ensure_job("job-a", repo="/r", base="main", spec_toml="")
    store.record_failure(old, job_id="job-a", step_index=1)
    store.record_attempt(
        _attempt(old.fingerprint, 1, Outcome.NO_EFFECT, "catch_keyerror", "-a\n+b\n")
    )
    store.record_attempt(
        _attempt(old.fingerprint, 2, Outcome.REGRESSION, "default_user", "-a\n+c\n")
    )
    store.record_attempt(_attempt(old.fingerprint, 3, Outcome.FIXED, "load_users", "-a\n+d\n"))
    store.close()
    return db, old.fingerprint


def test_similar_failures_show_fixes_and_failed_approaches(tmp_path: Path) -> None:
    db, old_fp = _store(tmp_path)
    new = analyze(_log("carol", "accounts"))
    assert new.fingerprint != old_fp
    store = AttemptStore(db)
    found = store.similar(new, SimilarLimits(threshold=0.3))
    assert [h.strategy for h in found.fixes] == ["load_users"]
    assert sorted(h.strategy for h in found.failed) == ["catch_keyerror", "default_user"]
    assert {h.outcome for h in found.failed} == {Outcome.NO_EFFECT, Outcome.REGRESSION}
    assert not found.degraded
    capped = store.similar(new, SimilarLimits(threshold=0.3, fixes=0, failed=1))
    assert (len(capped.fixes), len(capped.failed)) == (0, 1)
    assert store.similar(new, SimilarLimits(threshold=1.0)).fixes == []  # limits are honoured
    store.close()


def test_a_spent_time_budget_degrades_and_says_why(tmp_path: Path) -> None:
    db, _ = _store(tmp_path)
    store = AttemptStore(db)
    found = store.similar(
        analyze(_log("carol", "accounts")), SimilarLimits(time_budget_seconds=1e-9)
    )
    assert found.degraded
    assert "time budget" in found.degrade_reason
    store.close()


def test_similar_command_prints_json_with_the_degraded_flag(tmp_path: Path) -> None:
    db, _ = _store(tmp_path)
    log = tmp_path / "ci.log"
    log.write_text(_log("carol", "accounts"))
    runner = CliRunner()
    result = runner.invoke(cli, ["similar", str(log), "--db", db, "--threshold", "0.3", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["degraded"] is False
    assert payload["degradeReason"] == ""
    assert [h["strategy"] for h in payload["fixes"]] == ["load_users"]
    assert len(payload["failed"]) == 2
    text = runner.invoke(cli, ["similar", str(log), "--db", db, "--threshold", "0.3"])
    assert "fixed   " in text.output
    assert "failed  " in text.output
    assert "catch_keyerror" in text.output
    bad = subprocess.run(
        [sys.executable, "-m", "patchheal", "similar", str(tmp_path / "missing.log"), "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2, bad.stderr
    assert "cannot read the log" in bad.stderr


def test_the_context_shows_failed_approaches_and_the_degraded_flag(tmp_path: Path) -> None:
    from patchheal.config import JobSpec
    from patchheal.evidence.build import build_context, render_context
    from patchheal.models import Classification, FailureClass, Hint

    (tmp_path / "repo").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "repo", check=True)
    job = JobSpec.model_validate(
        {
            "job": {"id": "j", "repo": str(tmp_path / "repo")},
            "steps": [{"name": "s", "command": "x"}],
        }
    )
    failed = Hint(
        fingerprint="b" * 16,
        similarity=0.8,
        strategy="catch_keyerror",
        diff="-a\n+b\n",
        outcome=Outcome.NO_EFFECT,
        reason="still fails: KeyError",
    )
    ctx = build_context(
        job=job,
        step_index=1,
        failure=analyze(_log("carol", "accounts")),
        classification=Classification(failure_class=FailureClass.CODE_BUG, retryable=True),
        worktree=tmp_path / "repo",
        prior=[],
        hints=[],
        failed_elsewhere=[failed],
        memory_degraded="time budget of 2 s spent after 40 of 500 similar-failure candidates",
    )
    text = render_context(ctx, max_tokens=8000)
    assert "## Approaches that failed for similar failures" in text
    assert "`catch_keyerror`, similarity 0.80, no_effect: still fails: KeyError" in text
    assert "Memory search degraded: time budget of 2 s spent" in text
