"""Buckets that act and the approach per attempt, end to end with the local harness."""

from __future__ import annotations

from pathlib import Path

from patchheal.config import load_spec
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.approach import choose_approach
from patchheal.loop.controller import HealLoop, HealOptions
from patchheal.models import AttemptRecord, FailureClass, Outcome
from tests.healjobs import BUGGY, FIX, diff_for, make_calc_repo, write_spec


def _heal(tmp_path: Path, spec_path: Path):  # type: ignore[no-untyped-def]
    spec = load_spec(spec_path)
    opts = HealOptions(
        state_dir=tmp_path / "var",
        db=str(tmp_path / "store.sqlite3"),
        reports_dir=tmp_path / "reports",
    )
    return HealLoop(spec, spec_to_toml(spec), opts).run()


def test_an_exhausted_bucket_is_not_verified_and_the_approach_escalates(tmp_path: Path) -> None:
    """Two failed patches of one bucket (strategy `scripted`, file calc.py, one fingerprint):
    the third is refused unverified; a candidate of another bucket is still verified and fixes."""
    repo = make_calc_repo(tmp_path)
    wrongs = [
        diff_for(repo, {"calc.py": BUGGY.replace("return a - b", body)})
        for body in ("return b - a", "return a * b", "return a + b + 1")
    ]
    fix_elsewhere = diff_for(repo, {"calc.py": FIX, "NOTES.md": "add() adds.\n"})
    spec = write_spec(
        tmp_path / "job.toml", repo, diffs=[*wrongs, fix_elsewhere], budget="max_attempts = 4"
    )
    result = _heal(tmp_path, spec)
    attempts = [a for s in result.report.steps for a in s.attempts]
    assert [a.outcome for a in attempts] == [
        Outcome.NO_EFFECT,
        Outcome.NO_EFFECT,
        Outcome.REJECTED_REPEAT,
        Outcome.FIXED,
    ]
    assert result.exit_code == 0
    assert attempts[2].reason.startswith("exhausted bucket: scripted: calc.py failed 2 time(s)")
    assert [a.approach for a in attempts] == [
        "simplify_approach",
        "gather_more_context",
        "try_alternative",
        "try_alternative",
    ]
    assert "exhausted bucket" in result.report_paths["md"].read_text()


def test_bucket_limit_is_configurable(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    wrongs = [
        diff_for(repo, {"calc.py": BUGGY.replace("return a - b", body)})
        for body in ("return b - a", "return a * b", "return a + b + 1")
    ]
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[*wrongs, diff_for(repo, {"calc.py": FIX})],
        budget="max_attempts = 4\nbucket_limit = 3",
    )
    result = _heal(tmp_path, spec)
    outcomes = [a.outcome for s in result.report.steps for a in s.attempts]
    assert outcomes == [Outcome.NO_EFFECT] * 3 + [Outcome.REJECTED_REPEAT]


def _failed(*outcomes: Outcome) -> list[AttemptRecord]:
    return [
        AttemptRecord(job_id="j", step_index=1, attempt_number=i + 1, fingerprint="f", outcome=o)
        for i, o in enumerate(outcomes)
    ]


def test_the_approach_follows_the_failure_class_and_how_attempts_ended() -> None:
    code, unknown = FailureClass.CODE_BUG, FailureClass.UNKNOWN
    assert choose_approach(code, [], bucket_exhausted=False) == "simplify_approach"
    assert choose_approach(unknown, [], bucket_exhausted=False) == "gather_more_context"
    regression = _failed(Outcome.REGRESSION)
    assert choose_approach(code, regression, bucket_exhausted=False) == "break_into_smaller_steps"
    refused = _failed(Outcome.NO_EFFECT, Outcome.APPLY_FAILED)
    assert choose_approach(code, refused, bucket_exhausted=False) == "simplify_approach"
    assert choose_approach(code, _failed(Outcome.NO_EFFECT), bucket_exhausted=False) == (
        "gather_more_context"
    )
    twice = _failed(Outcome.NO_EFFECT, Outcome.NO_EFFECT)
    assert choose_approach(code, twice, bucket_exhausted=False) == "try_alternative"
    assert choose_approach(code, [], bucket_exhausted=True) == "try_alternative"
