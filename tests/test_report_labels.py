"""Report labels that say something: no approach on a patch file, a reused fix's rationale,
and an apply failure's one-line why that does not stop at its heading (issue 27)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from patchheal.cli import cli
from patchheal.models import Outcome
from patchheal.report import load_report
from patchheal.report.filters import why
from tests.healjobs import FIX, TESTS, diff_for, make_calc_repo, state_args
from tests.test_report import attempt

APPLY_FAILED = (
    "the patch does not apply to /wt/verify by any method:\n"
    "  git-apply (exit 1):\n"
    "    error: patch failed: src/calc.py:2\n"
    "    error: src/calc.py: patch does not apply\n"
    "  git-apply-3way (exit 1):\n"
    "    error: repository lacks the necessary blob to perform 3-way merge.\n"
)


def test_why_of_a_reason_that_ends_in_a_heading_carries_its_first_error() -> None:
    """Invariant: the one-line why of an attempt is never a heading cut at its colon."""
    line = why(attempt(1, Outcome.APPLY_FAILED, reason=APPLY_FAILED))
    assert line.startswith("the patch does not apply to /wt/verify by any method: error:")
    assert "patch failed: src/calc.py:2" in line
    plain = why(attempt(2, Outcome.NO_EFFECT, reason="test_add still fails\nmore detail"))
    assert plain == "test_add still fails"


def _spec(path: Path, repo: Path, job_id: str, candidates: Path) -> Path:
    path.write_text(
        f'[job]\nid = "{job_id}"\nrepo = "{repo}"\nbase = "main"\nharness = "local"\n\n'
        f'[[steps]]\nname = "unit"\ncommand = "python3 -m pytest -q tests/test_calc.py"\n\n'
        f'[proposer]\nkind = "patchfiles"\ndir = "{candidates}"\n\n'
        "[budget]\nverify_runs = 1\nflaky_reruns = 0\n"
    )
    return path


def test_patch_files_have_no_approach_and_a_reused_fix_says_where_it_came_from(
    tmp_path: Path,
) -> None:
    """Invariant: a patch file (here a test-deleting one) is not labelled with an approach
    it never read; a fix reused from memory names the job and attempt it verified in."""
    repo = make_calc_repo(tmp_path)
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    gutted = TESTS.replace("assert add(2, 3) == 5", "pass")
    (candidates / "01-gut-the-test.patch").write_text(
        diff_for(repo, {"tests/test_calc.py": gutted})
    )
    (candidates / "02-fix.patch").write_text(diff_for(repo, {"calc.py": FIX}))
    runner = CliRunner()
    state = state_args(tmp_path)
    first = _spec(tmp_path / "a.toml", repo, "labels-a", candidates)
    assert runner.invoke(cli, ["heal", str(first), *state]).exit_code == 0
    report = load_report(tmp_path / "reports" / "labels-a" / "report.json")
    attempts = report.steps[0].attempts
    assert [a.outcome for a in attempts] == [Outcome.REJECTED_POLICY, Outcome.FIXED]
    assert [a.approach for a in attempts] == ["", ""]
    assert "Approach" not in (tmp_path / "reports" / "labels-a" / "report.html").read_text()

    second = _spec(tmp_path / "b.toml", repo, "labels-b", candidates)
    assert runner.invoke(cli, ["heal", str(second), *state]).exit_code == 0
    again = load_report(tmp_path / "reports" / "labels-b" / "report.json").steps[0].attempts
    # The refused patch is gated again (never silently dropped), then memory's fix is reused.
    assert [(a.label, a.outcome) for a in again[:1]] == [
        ("01-gut-the-test.patch", Outcome.REJECTED_POLICY)
    ]
    reused = next(a for a in again if a.proposer == "memory")
    assert reused.rationale.startswith(
        "reused: the fix that verified for this failure in job labels-a (attempt 2)"
    )
