"""Every stop reason the loop writes gets its own, correct headline in the report.

The reasons below are the loop's own texts (loop/step.py, loop/sequence.py,
loop/controller.py); a reason whose wording changes there must get a row here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.models import Outcome
from patchheal.report import render_html, render_markdown
from patchheal.report.filters import diff_only, why
from patchheal.report.wording import check_locally, headline, reproduce_in_harness, runbook
from tests.test_report import DIFF, attempt, failure, job, step

# (status, the loop's stop reason, a phrase only the right headline has, phrases it must not say)
STOPS = [
    ("fixed", "every step verified; branch patchheal/local/ci-4821", "patch verified", ()),
    (
        "not_fixed",
        "step 1 (unit): attempt budget spent (3 verified, 5 candidates)",
        "attempt budget ran out",
        ("no progress",),
    ),
    (
        "not_fixed",
        "step 1 (unit): no progress in 3 attempts in a row and 1 hard reset(s) done",
        "already tried (no progress)",
        ("budget",),
    ),
    (
        "manual_handoff",
        "step 1 (unit): every proposer has run out of candidates",
        "ran out of new candidates",
        ("budget is spent", "budget of"),
    ),
    (
        "manual_handoff",
        "step 1 (unit): job wall time of 60 s is spent",
        "wall-time budget is spent",
        ("token",),
    ),
    (
        "manual_handoff",
        "step 1 (unit): proposer budget of 5 calls is spent",
        "proposer calls is spent",
        ("token",),
    ),
    (
        "manual_handoff",
        "step 1 (unit): model token budget of 1500 is spent (1500 used)",
        "model-token budget is spent",
        ("wall",),
    ),
    (
        "manual_handoff",
        "step 1 (unit): proposer unavailable: 503 Service Unavailable",
        "could not be reached",
        ("budget",),
    ),
    (
        "manual_handoff",
        "step 1 (unit): proposer failed: bad reply",
        "a retry does not fix",
        ("budget",),
    ),
    (
        "not_patchable",
        "not patched: classified infra_issue",
        "not one a code patch can fix",
        ("budget",),
    ),
    (
        "not_patchable",
        "the step passes on its starting point: nothing to heal",
        "nothing to heal",
        ("not one a code patch",),
    ),
    (
        "cancelled",
        "interrupted (Ctrl-C or SIGTERM); resume with --resume",
        "interrupted (Ctrl-C or SIGTERM)",
        ("operator",),
    ),
    ("cancelled", "step 1 (unit): cancel by alice", "operator cancelled", ("SIGTERM",)),
    ("taken_over", "step 1 (unit): takeover by bob", "operator took over", ("cancelled",)),
    ("error", "RuntimeError: boom", "error that is not the step's own", ()),
]


@pytest.mark.parametrize(("status", "reason", "says", "never"), STOPS)
def test_every_stop_reason_has_its_own_headline(
    status: str, reason: str, says: str, never: tuple[str, ...]
) -> None:
    report = job(status=status, stop_reason=reason)
    sentence = headline(report)
    assert says in sentence
    for wrong in never:
        assert wrong not in sentence
    assert sentence in render_markdown(report)


def test_headlines_differ_for_every_stop_reason() -> None:
    sentences = [headline(job(status=s, stop_reason=r)) for s, r, _, _ in STOPS]
    assert len(set(sentences)) == len(sentences)


def test_requeue_and_class_never_contradict_each_other() -> None:
    """Invariant: the report does not say "retryable" about the class beside "no" for the
    job (the job's requeue flag and the class's patchability are different questions)."""
    md = render_markdown(job(status="not_fixed", retryable=False, branch=None))
    assert "retryable" not in md
    assert "| Requeue | no: a rerun of the same job would stop the same way |" in md
    assert "(a code patch may fix it)" in md


def test_a_fixed_job_is_not_told_a_rerun_would_stop_the_same_way() -> None:
    """Invariant: the Requeue wording fits the status (issue 34): a fixed job needs no
    requeue, and no sentence about a rerun stopping the same way."""
    for text in (render_markdown(job(retryable=False)), render_html(job(retryable=False))):
        assert "would stop the same way" not in text
        assert "no need: the job is fixed" in text


def test_fixed_report_prints_the_local_check_and_the_harness_reproduction() -> None:
    """Invariant: the printed commands carry the job's setup and variables (without them a
    reproduction fails another way), name the harness as `harness run` takes it, and check
    out into a private temp dir, never a fixed shared path, with a venv of its own, both
    removed by a trap on the subshell's exit (issue 34: the block changed from a bare
    worktree add that was never removed)."""
    report = job(harness="docker:python", setup=("pip install -e .[test]",), env=("DB_URL",))
    assert check_locally(report) == (
        "patchheal harness run python --repo /srv/repos/calc --ref patchheal/local/ci-4821 "
        "--setup 'pip install -e .[test]' --env DB_URL -- sh -c 'pytest -q tests/test_calc.py'",
        "(",
        "  set -e",
        "  tree=$(mktemp -d -t patchheal-check-XXXXXX)",
        "  venv=$(mktemp -d -t patchheal-venv-XXXXXX)",
        '  trap \'cd /; git -C /srv/repos/calc worktree remove --force "$tree" 2>/dev/null; '
        'rm -rf "$tree" "$venv"\' EXIT',
        '  git -C /srv/repos/calc worktree add --quiet --detach "$tree" patchheal/local/ci-4821',
        '  cd "$tree"',
        '  python3 -m venv --system-site-packages "$venv"',
        '  . "$venv/bin/activate"',
        "  pip install -e .[test]",
        "  pytest -q tests/test_calc.py",
        ")",
    )
    assert reproduce_in_harness(report) == (
        "patchheal harness run python --repo /srv/repos/calc "
        "--ref 0123456789abcdef0123456789abcdef01234567 --setup 'pip install -e .[test]' "
        "--env DB_URL -- sh -c 'pytest -q tests/test_calc.py'",
    )
    md = render_markdown(report)
    assert md.index("Check it (in the harness") < md.index("## Failure summary")
    assert "Where the fix is: branch `patchheal/local/ci-4821`" in md
    assert check_locally(job(status="not_fixed", branch=None)) == ()


def test_the_printed_commands_carry_the_jobs_python() -> None:
    """Issue 32: a printed check of a 3.13 job ran on the default 3.11, because `harness run`
    was never told the job's Python. Every printed `harness run` names it (and the Node)."""
    report = job(harness="docker:python", python="3.13")
    for command in (*check_locally(report)[:1], *reproduce_in_harness(report)):
        assert command.startswith("patchheal harness run python --repo "), command
        assert " --python 3.13 -- sh -c " in command, command
    node = job(harness="docker:node", node="20")
    assert " --node 20 -- sh -c " in reproduce_in_harness(node)[0]
    # One offered only (the local or a compose harness): no flag to carry.
    assert "--python" not in reproduce_in_harness(job(harness="docker:python"))[0]


def test_runbook_names_the_known_test_and_gives_no_heal_advice_after_a_fix() -> None:
    actions = ("Reproduce the failing test alone: `pytest -x TEST_ID`.",)
    not_fixed = job(status="not_fixed", branch=None, next_actions=actions)
    assert runbook(not_fixed) == (
        "Reproduce the failing test alone: `pytest -x tests/test_calc.py::test_mean_empty`.",
    )
    fixed = job(next_actions=("Continue: `patchheal heal JOB.toml --resume`.", "Review it."))
    assert runbook(fixed) == ("Review it.",)


def test_why_is_one_line_and_the_raw_errors_are_folded() -> None:
    dump = "\n".join(
        f"error: patch failed: src/calc.py:{n}\nerror: /tmp/wt/gone/src/calc.py: does not exist"
        for n in range(4)
    )
    record = attempt(1, Outcome.APPLY_FAILED, reason=dump)
    assert why(record) == "error: patch failed: src/calc.py:0"
    html = render_html(job(steps=(step(attempts=(record,)),)))
    assert "<summary>Raw errors</summary>" in html


def test_candidate_diffs_drop_the_patch_files_header() -> None:
    patch_file = "From: a proposer\nSubject: guard mean\n# a comment\n" + DIFF
    assert diff_only(patch_file) == DIFF
    md = render_markdown(job(steps=(step(attempts=(attempt(1, Outcome.FIXED, diff=patch_file),)),)))
    assert "Subject: guard mean" not in md


def test_the_cause_sites_read_as_evidence() -> None:
    """Issue 34: each changed function says whether the failing test ran it (traced), or
    that no trace exists; a file that is not Python is not called "module level"."""
    from patchheal.report.firstscreen import first_screen, one_line_error
    from patchheal.report.model import CauseSite

    sites = (
        CauseSite(file="src/calc.py", function="mean", executed=True),
        CauseSite(file="src/calc.py", function="Stats.median", executed=False),
        CauseSite(file="src/calc.py", function="", executed=None),
        CauseSite(file="web/app.js", function="", executed=None),
    )
    report = job(steps=(step(cause_sites=sites),))
    assert first_screen(report, ()).where == (
        "`mean` in `src/calc.py`: the failing test executed it at reproduction (traced)",
        "`Stats.median` in `src/calc.py`: the failing test did not execute it at reproduction "
        "(traced)",
        "`src/calc.py` (module level): no trace of the failing test was recorded at reproduction",
        "`web/app.js` (its functions are not mapped: only Python files are)",
    )
    assert one_line_error("AssertionError", "assert 0 == 10\n+  where 0 = f(10)") == (
        "AssertionError: assert 0 == 10 (where 0 = f(10))"
    )
    assert one_line_error("ValueError", "bad\nsecond line") == "ValueError: bad …"


METRIC_TESTS = """
import pytest

def metric(value):
    return f"{value:.0f} V"

@pytest.mark.parametrize("value, expected", [(999.9, "1.00 kV"), (999_999, "1.00 MV"),
                                             (0.5, "500 mV"), (7, "7 V")])
def test_metric(value, expected):
    assert metric(value) == expected
"""


def test_each_failing_test_shows_only_its_own_error(tmp_path: Path) -> None:
    """A user trial (humanize's metric fix): three parametrized failures were each shown
    with the fourth's message. The recorded message belongs to one test; only its row
    carries it, and that row comes first."""
    from patchheal.failure.analysis import analyze
    from patchheal.report.firstscreen import first_screen

    root = tmp_path
    (root / "test_metric.py").write_text(METRIC_TESTS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_metric.py"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    failure = analyze(run.stdout + run.stderr, repo_root=str(root))
    assert len(failure.failing_tests) == 3, failure.failing_tests
    failed = first_screen(job(steps=(step(failure=failure),)), ()).failed
    with_error = [f for f in failed if f.error]
    assert len(with_error) == 1, failed
    owner = with_error[0]
    assert failed[0] == owner
    # The message names the owner's own values, never another test's.
    value = owner.test.partition("[")[2].partition("-")[0]
    assert value, owner
    assert f"{float(value):.0f} V" in owner.error, owner
    assert {f.test for f in failed} == set(failure.failing_tests)
    md = render_markdown(job(steps=(step(failure=failure),)))
    assert md.count(owner.error) == 1


def test_an_error_whose_test_is_unknown_is_shown_once_for_the_step() -> None:
    """Hostile: a summary that names no failing test; the error is the step's, not any
    one test's, and is shown once."""
    from patchheal.report.firstscreen import first_screen

    two = failure().model_copy(
        update={"failing_tests": ("t.py::a", "t.py::b"), "summary": "no test id here"}
    )
    failed = first_screen(job(steps=(step(failure=two),)), ()).failed
    assert [f.test for f in failed] == ["t.py::a", "t.py::b", ""]
    assert [bool(f.error) for f in failed] == [False, False, True]
    assert failed[2].step == "unit, the error of one of them"


def test_an_attempt_refused_after_it_ran_is_not_called_not_run() -> None:
    """A user trial (pluggy): a `rejected_tripwire` attempt, which ran for 5.6 s, was
    described "refused by the policy gate; not run". Refused after the run: says it ran;
    refused before it (`rejected_policy`): still "not run"."""
    tripped = attempt(1, Outcome.REJECTED_TRIPWIRE, attempt_class="deterministic_policy")
    oracle = attempt(2, Outcome.REJECTED_ORACLE, attempt_class="deterministic_policy")
    policy = attempt(3, Outcome.REJECTED_POLICY, attempt_class="deterministic_policy")
    fixed = attempt(4, Outcome.FIXED, attempt_class="recovered")
    md = render_markdown(job(steps=(step(attempts=(tripped, oracle, policy, fixed)),)))
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if "| **" in line}
    assert "ran; refused by the tripwire" in rows["1"], rows
    assert "ran; refused by the impossible-twin oracle" in rows["2"], rows
    assert "not run" not in rows["1"] + rows["2"]
    assert "refused by the policy gate; not run" in rows["3"], rows
