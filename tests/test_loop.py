"""The controller end to end with the local harness, real git and a real SQLite file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchheal.config import load_spec
from patchheal.errors import NotAGitRepository
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.controller import HealLoop, HealOptions
from patchheal.memory.store import AttemptStore
from patchheal.models import Outcome
from tests.healjobs import BUGGY, FIX, HANG, WRONG, diff_for, git, make_calc_repo, write_spec


def heal(tmp_path: Path, spec_path: Path, **options: object):  # type: ignore[no-untyped-def]
    spec = load_spec(spec_path)
    opts = HealOptions(
        state_dir=tmp_path / "var",
        db=str(tmp_path / "store.sqlite3"),
        reports_dir=tmp_path / "reports",
        **options,
    )  # type: ignore[arg-type]
    return HealLoop(spec, spec_to_toml(spec), opts).run()


def outcomes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [a.outcome.value for s in result.report.steps for a in s.attempts]


def test_fix_is_verified_and_lands_on_a_local_branch_only(tmp_path: Path) -> None:
    """The user's branch, index and uncommitted work are untouched; the fix is on its own branch."""
    repo = make_calc_repo(tmp_path)
    wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
    (repo / "scratch.txt").write_text("uncommitted work\n")
    spec = write_spec(
        tmp_path / "job.toml", repo, diffs=[wrong, fix], regression=f"{sys.executable} -m pytest -q"
    )
    result = heal(tmp_path, spec)
    assert result.exit_code == 0
    assert outcomes(result) == ["no_effect", "fixed"]
    assert result.report.branch == "patchheal/local/calc"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "calc.py").read_text() == BUGGY
    assert (repo / "scratch.txt").read_text() == "uncommitted work\n"
    assert "return a + b" in git(repo, "show", "patchheal/local/calc:calc.py")
    assert set(result.report_paths) == {"md", "html", "json"}
    md = result.report_paths["md"].read_text()
    assert "no_effect" in md
    assert "**fixed**" in md


def test_regression_is_caught_by_the_regression_steps(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    breaks_mul = diff_for(repo, {"calc.py": FIX.replace("return a * b", "return a + b")})
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[breaks_mul],
        regression=f"{sys.executable} -m pytest -q",
        budget="max_attempts = 1",
    )
    result = heal(tmp_path, spec)
    assert outcomes(result) == ["regression"]
    assert result.exit_code == 1
    assert result.report.status == "not_fixed"
    assert result.report.retryable is True


def test_step_that_hangs_is_killed_by_the_idle_timeout(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": HANG})],
        budget="max_attempts = 1\nidle_timeout_seconds = 2\nstep_timeout_seconds = 30",
    )
    result = heal(tmp_path, spec)
    [attempt] = result.report.steps[0].attempts
    assert attempt.outcome is Outcome.TIMEOUT
    assert "idle timeout" in attempt.reason
    assert attempt.duration_seconds < 20


def test_same_patch_is_never_verified_twice_across_jobs(tmp_path: Path) -> None:
    """A patch that failed for a fingerprint is rejected without running in another job."""
    repo = make_calc_repo(tmp_path)
    wrong = diff_for(repo, {"calc.py": WRONG})
    first = heal(
        tmp_path,
        write_spec(
            tmp_path / "a.toml", repo, job_id="job-a", diffs=[wrong], budget="max_attempts = 1"
        ),
    )
    assert outcomes(first) == ["no_effect"]
    second = heal(
        tmp_path,
        write_spec(
            tmp_path / "b.toml", repo, job_id="job-b", diffs=[wrong], budget="max_attempts = 1"
        ),
    )
    assert outcomes(second) == ["rejected_repeat"]


def test_fix_verified_in_one_job_is_reused_first_in_another(tmp_path: Path) -> None:
    """Memory across jobs: job B is fixed by job A's verified patch without any proposer call."""
    repo = make_calc_repo(tmp_path)
    fix = diff_for(repo, {"calc.py": FIX})
    heal(tmp_path, write_spec(tmp_path / "a.toml", repo, job_id="job-a", diffs=[fix]))
    result = heal(tmp_path, write_spec(tmp_path / "b.toml", repo, job_id="job-b", diffs=[]))
    [attempt] = result.report.steps[0].attempts
    assert attempt.outcome is Outcome.FIXED
    assert attempt.proposer == "memory"
    assert result.exit_code == 0


def test_not_a_git_repository_is_bad_input(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    spec = write_spec(tmp_path / "job.toml", plain, diffs=[])
    with pytest.raises(NotAGitRepository):
        heal(tmp_path, spec)


def test_candidate_that_is_not_a_diff_is_apply_failed(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml", repo, diffs=["please just fix it"], budget="max_attempts = 1"
    )
    result = heal(tmp_path, spec)
    assert outcomes(result) == ["apply_failed"]


def test_step_that_passes_is_not_patched(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[],
        steps=[("mul", f"{sys.executable} -m pytest -q tests/test_calc.py::test_mul")],
    )
    result = heal(tmp_path, spec)
    assert result.report.status == "not_patchable"
    assert result.report.steps[0].classification is not None
    assert result.report.steps[0].classification.failure_class.value == "env_mismatch"
    assert outcomes(result) == []


def test_store_has_every_attempt_and_events_match(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})],
    )
    heal(tmp_path, spec)
    store = AttemptStore(str(tmp_path / "store.sqlite3"))
    try:
        rows = store.attempts(job_id="calc")
        assert [r.outcome.value for r in rows] == ["no_effect", "fixed"]
        assert store.integrity_check() == []
    finally:
        store.close()
    events = (tmp_path / "var" / "runs" / "calc" / "events.jsonl").read_text().splitlines()
    assert sum('"task.step.attempt.finished"' in line for line in events) == 2
