"""The retry context: built from a real git repo, scrubbed, escalated, rendered within budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.config import JobSpec
from patchheal.errors import BadInput
from patchheal.evidence.build import (
    build_context,
    escalation_for,
    exhausted_buckets,
    render_context,
)
from patchheal.evidence.tokens import count_tokens
from patchheal.models import (
    AttemptRecord,
    Classification,
    Failure,
    FailureClass,
    Frame,
    Hint,
    Outcome,
)

FP = "f" * 64
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
JOB_SECRET = "job-secret-value-7f3a91"

CALC = (
    "".join(f"# line {n}\n" for n in range(1, 30))
    + (
        "def mean(values):\n"  # line 30
        "    total = sum(values)\n"
        "    return total / len(values)\n"  # line 32
    )
    + "".join(f"# tail {n}\n" for n in range(1, 40))
)
TEST = "from src.calc import mean\n\n\ndef test_mean_empty():\n    assert mean([]) == 0.0\n"


def _job(repo: Path, **policy: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "job": {
                "id": "ci-1",
                "repo": str(repo),
                "objective": "unit tests",
                "env": ["JOB_TOKEN"],
            },
            "steps": [{"name": "unit", "command": "pytest -q tests/test_calc.py"}],
            "policy": policy,
        }
    )


def _failure(*frames: Frame, summary: str = "ZeroDivisionError: division by zero") -> Failure:
    return Failure(
        fingerprint=FP,
        error_type="ZeroDivisionError",
        message="division by zero",
        summary=summary,
        frames=frames,
        failing_tests=("tests/test_calc.py::test_mean_empty",),
        source="pytest",
    )


def _attempt(n: int, strategy: str, files: tuple[str, ...], fp: str = FP) -> AttemptRecord:
    return AttemptRecord(
        job_id="ci-1",
        step_index=1,
        attempt_number=n,
        fingerprint=fp,
        outcome=Outcome.NO_EFFECT,
        reason=f"still fails after attempt {n}",
        diff_hash=f"{n:02d}" * 32,
        touched_files=files,
        strategy=strategy,
    )


CODE_BUG = Classification(failure_class=FailureClass.CODE_BUG, retryable=True)


@pytest.fixture
def repo(make_repo: Callable[[dict[str, str]], Path]) -> Path:
    files = {"src/calc.py": CALC, "tests/test_calc.py": TEST, "README.md": "x\n"}
    files.update({f"pkg/mod{i:03d}.py": "" for i in range(200)})
    return make_repo(files)


def test_context_carries_code_around_frames_constraints_and_file_map(repo: Path) -> None:
    frame = Frame(file="src/calc.py", function="mean", line=32)
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(frame),
        classification=CODE_BUG,
        worktree=repo,
        prior=[],
        hints=[],
        code_budget_tokens=0,  # the frame windows alone, without localization
    )
    assert ctx.escalation == "first"
    assert ctx.command == "pytest -q tests/test_calc.py"
    assert ctx.objective == "unit tests"
    (excerpt,) = ctx.excerpts
    assert excerpt.file == "src/calc.py"
    assert excerpt.start_line == 26  # 6 lines either side at the first level
    assert "return total / len(values)" in excerpt.text
    assert "# tail 7" not in excerpt.text
    # The file map is capped and puts the failure's directories first.
    assert len(ctx.file_map) == 151
    assert "src/calc.py" in ctx.file_map
    assert ctx.file_map[-1] == "... and 53 more files"
    joined = "\n".join(ctx.constraints)
    assert ".github/**" in joined
    assert "at most 400 changed lines" in joined
    assert "Do not edit, delete, skip" in joined


def test_container_paths_map_to_repository_files(repo: Path) -> None:
    frame = Frame(file="/app/checkout/src/calc.py", function="mean", line=None)
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(frame),
        classification=CODE_BUG,
        worktree=repo,
        prior=[],
        hints=[],
        code_budget_tokens=0,  # the frame windows alone, without localization
    )
    assert [e.file for e in ctx.excerpts] == ["src/calc.py"]
    assert "def mean(values):" in ctx.excerpts[0].text  # no line: found by function name


def test_escalation_grows_the_evidence(repo: Path) -> None:
    frame = Frame(file="src/calc.py", function="mean", line=32)
    job = _job(repo)
    levels = []
    for n in range(4):
        prior = [_attempt(i + 1, f"s{i}", ("src/calc.py",)) for i in range(n)]
        ctx = build_context(
            job=job,
            step_index=1,
            failure=_failure(frame),
            classification=CODE_BUG,
            worktree=repo,
            prior=prior,
            hints=[],
            code_budget_tokens=0,
        )
        levels.append((ctx.escalation, sum(e.text.count("\n") + 1 for e in ctx.excerpts)))
    assert [lvl for lvl, _ in levels] == ["first", "more_context", "different_approach", "widen"]
    sizes = [size for _, size in levels]
    assert sizes[0] < sizes[1] <= sizes[2] < sizes[3]
    widened = build_context(
        job=job,
        step_index=1,
        failure=_failure(frame),
        classification=CODE_BUG,
        worktree=repo,
        prior=[],
        hints=[],
        code_budget_tokens=0,  # the frame windows alone, without localization
        widen=True,
    )
    assert widened.escalation == "widen"
    assert any(e.file == "tests/test_calc.py" for e in widened.excerpts)  # the failing test too


def test_prior_attempts_on_other_fingerprints_are_not_shown(repo: Path) -> None:
    prior = [_attempt(1, "add_guard", ("src/calc.py",)), _attempt(2, "x", ("a.py",), fp="0" * 64)]
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(),
        classification=CODE_BUG,
        worktree=repo,
        prior=prior,
        hints=[],
    )
    assert [p.attempt_number for p in ctx.prior_attempts] == [1]
    assert ctx.prior_attempts[0].diff_hash == "01" * 6
    assert ctx.escalation == "more_context"


def test_escalation_and_exhausted_buckets() -> None:
    same = ("src/calc.py",)
    assert escalation_for([]) == "first"
    assert escalation_for([_attempt(1, "a", same)] * 7) == "widen"
    fixed = _attempt(1, "a", same).model_copy(update={"outcome": Outcome.FIXED})
    assert escalation_for([fixed]) == "first"
    prior = [_attempt(1, "add_guard", same), _attempt(2, "fix_logic", same)]
    assert exhausted_buckets(prior) == ()
    prior.append(_attempt(3, "add_guard", same))
    prior.append(_attempt(4, "add_guard", ("src/calc.py", "src/other.py")))
    assert exhausted_buckets(prior) == ("add_guard: src/calc.py",)


def test_everything_in_the_context_is_scrubbed(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Invariant: no secret from the log, the code, the env or memory reaches a proposer."""
    monkeypatch.setenv("JOB_TOKEN", JOB_SECRET)
    (repo / "src/calc.py").write_text(CALC.replace("# line 31", f'# line 31 KEY = "{SECRET}"'))
    summary = f"E   requests failed with token {SECRET} and {JOB_SECRET}"
    prior = [
        _attempt(1, "add_guard", ("src/calc.py",)).model_copy(update={"reason": f"log: {SECRET}"})
    ]
    hint = Hint(
        fingerprint=FP, similarity=0.9, strategy="add_guard", diff=f"+token = '{JOB_SECRET}'\n"
    )
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(Frame(file="src/calc.py", function="mean", line=32), summary=summary),
        classification=CODE_BUG,
        worktree=repo,
        prior=prior,
        hints=[hint],
        breaking_diff=f"+API_KEY = '{SECRET}'\n",
    )
    dumped = ctx.model_dump_json()
    assert SECRET not in dumped
    assert JOB_SECRET not in dumped
    assert "[REDACTED]" in ctx.failure_summary
    text = render_context(ctx, max_tokens=10_000)
    assert SECRET not in text
    assert JOB_SECRET not in text


def test_bad_step_index_is_bad_input(repo: Path) -> None:
    """Step indices count from 1, as in events, checkpoints and attempt records."""
    with pytest.raises(BadInput, match=r"has no step 0 \(steps are 1-1\)"):
        build_context(
            job=_job(repo),
            step_index=0,
            failure=_failure(),
            classification=CODE_BUG,
            worktree=repo,
            prior=[],
            hints=[],
        )


def _full_context(repo: Path) -> tuple[str, object]:
    prior = [_attempt(1, "add_guard", ("src/calc.py",)), _attempt(2, "add_guard", ("src/calc.py",))]
    hints = [Hint(fingerprint=FP, similarity=0.8, strategy="fix_logic", diff="+x = 1\n" * 40)]
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(Frame(file="src/calc.py", function="mean", line=32)),
        classification=CODE_BUG,
        worktree=repo,
        prior=prior,
        hints=hints,
        breaking_diff="--- a/src/calc.py\n+++ b/src/calc.py\n" + "+y = 2\n" * 60,
    )
    return render_context(ctx, max_tokens=100_000), ctx


def test_render_shows_failure_avoid_list_and_every_section(repo: Path) -> None:
    text, _ = _full_context(repo)
    assert "ZeroDivisionError: division by zero" in text
    assert "tests/test_calc.py::test_mean_empty" in text
    assert "## Do not repeat" in text
    assert "| 1 | add_guard | src/calc.py |" in text
    assert "Exhausted (failed twice" in text
    assert "- add_guard: src/calc.py" in text
    for heading in (
        "## Code around",
        "## The change that broke",
        "## Fixes that verified",
        "## Repository files",
    ):
        assert heading in text
    assert "Trimmed" not in text


def test_render_drops_least_important_sections_first(repo: Path) -> None:
    full, ctx = _full_context(repo)
    budget = count_tokens(full) - 200  # just too small: only the file map has to shrink
    text = render_context(ctx, max_tokens=budget)  # type: ignore[arg-type]
    assert count_tokens(text) <= budget
    assert "Trimmed to fit the context budget: file map" in text
    assert "## Fixes that verified" in text
    assert "## Code around" in text

    essentials_only = render_context(ctx, max_tokens=450)  # type: ignore[arg-type]
    assert count_tokens(essentials_only) <= 450
    assert "## Repository files" not in essentials_only
    assert "## Fixes that verified" not in essentials_only
    assert "ZeroDivisionError: division by zero" in essentials_only
    assert "| 2 | add_guard | src/calc.py |" in essentials_only


def test_render_cuts_the_summary_only_as_a_last_resort(repo: Path) -> None:
    long = "\n".join(f"log line {i}" for i in range(2000)) + "\nZeroDivisionError: division by zero"
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(summary=long),
        classification=CODE_BUG,
        worktree=repo,
        prior=[_attempt(1, "add_guard", ("src/calc.py",))],
        hints=[],
    )
    text = render_context(ctx, max_tokens=700)
    assert count_tokens(text) <= 700
    assert "failure summary" in text  # said to be trimmed
    assert text.count("ZeroDivisionError: division by zero") == 1  # the tail is kept
    assert "| 1 | add_guard |" in text


def test_avoid_list_names_each_diff_once_and_stays_bounded(repo: Path) -> None:
    repeated = [
        _attempt(n, "add_guard", ("src/calc.py",)).model_copy(update={"diff_hash": "ab" * 32})
        for n in range(1, 6)
    ]
    many = [_attempt(n, f"s{n}", ("src/calc.py",)) for n in range(10, 40)]
    ctx = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(),
        classification=CODE_BUG,
        worktree=repo,
        prior=repeated + many,
        hints=[],
    )
    assert len(ctx.prior_attempts) == 15
    assert ctx.prior_attempts[-1].attempt_number == 39  # the most recent are kept
    small = build_context(
        job=_job(repo),
        step_index=1,
        failure=_failure(),
        classification=CODE_BUG,
        worktree=repo,
        prior=repeated,
        hints=[],
    )
    assert [p.attempt_number for p in small.prior_attempts] == [5]
    assert small.exhausted_buckets == ("add_guard: src/calc.py",)  # counted over all of them
