"""`verdict.decide` on hand-built evidence: every line of defence refuses when it must, in
the order docs/verdict.md gives, and a verification still being gathered is not decided.

No harness here: the evidence is what a run would have captured (real `CommandResult`s,
real `TestResults`); decide is pure, so each refusal is reached by one fact changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.failure.analysis import analyze
from patchheal.models import CommandResult, MonitorEvent, Outcome, TestResults
from patchheal.verdict.decide import (
    CONTINUE,
    REGRESSION_CHECKS,
    RUN_CHECKS,
    TWIN_CHECKS,
    decide,
)
from patchheal.verdict.evidence import TwinEvidence, VerificationEvidence
from patchheal.verdict.judge import judge
from patchheal.verdict.ran import Required

ADD = "tests/test_calc.py::test_add"
SUB = "tests/test_calc.py::test_sub"
BASE_OUTPUT = f"FAILED {ADD} - AssertionError\n1 failed, 1 passed in 0.1s\n"
REGRESSION = "pytest -q tests/test_other.py"
CHANGE = "tests/test_calc.py:5 `assert add(2, 3) == 5` now expects 12"


def _tests(outcomes: dict[str, str], **more: object) -> TestResults:
    return TestResults.model_validate({"outcomes": outcomes, "runners": ("pytest",), **more})


def _result(exit_code: int | None, output: str, **more: object) -> CommandResult:
    fields = {"command": "pytest", "exit_code": exit_code, "output": output}
    return CommandResult.model_validate({"duration_seconds": 0.1, **fields, **more})


BASE = _result(1, BASE_OUTPUT, tests=_tests({ADD: "failed", SUB: "passed"}))
PASSED = _result(0, "2 passed in 0.1s\n", tests=_tests({ADD: "passed", SUB: "passed"}))
FAILED = _result(1, BASE_OUTPUT, tests=_tests({ADD: "failed", SUB: "passed"}))
# An honest twin: the impossible assert fails.
TWIN_FAILED = _result(
    1,
    f"FAILED {ADD}\n1 failed, 1 passed in 0.1s\n",
    tests=_tests({ADD: "failed", SUB: "passed"}),
)
REG_PASSED = _result(0, "1 passed in 0.1s\n", tests=_tests({"tests/test_other.py::t": "passed"}))


def _twin(**more: object) -> TwinEvidence:
    fields: dict[str, object] = {
        "place": "run 2 of 3",
        "changed": (CHANGE,),
        "protected": (ADD,),
        "result": TWIN_FAILED,
    }
    return TwinEvidence(**{**fields, **more})  # type: ignore[arg-type]


def _start(tree: Path, **more: object) -> VerificationEvidence:
    """Two runs, the twin after the first, one regression step: nothing gathered yet."""
    baseline = judge(BASE)
    fields: dict[str, object] = {
        "command": "pytest",
        "tree": tree,
        "baseline": baseline,
        "failure": analyze(BASE_OUTPUT, command="pytest"),
        "changed": ("calc.py",),
        "verify_runs": 2,
        "step_timeout_seconds": 600.0,
        "idle_timeout_seconds": 120.0,
        "twin_at": 1,
        "regression": (REGRESSION,),
    }
    return VerificationEvidence(**{**fields, **more})  # type: ignore[arg-type]


def _all(
    tree: Path,
    *,
    first: CommandResult | None = PASSED,
    second: CommandResult = PASSED,
    twin: TwinEvidence | None = None,
    regression: CommandResult | None = REG_PASSED,
    **more: object,
) -> VerificationEvidence:
    """Complete evidence; each keyword replaces one piece of a verification that passed."""
    ev = _start(tree, **more)
    ev = ev.with_run(first, error="" if first is not None else "docker daemon went away")
    ev = ev.with_twin(twin or _twin()).with_run(second)
    error = "" if regression is not None else "docker daemon went away"
    return ev.with_regression(REGRESSION, judge(REG_PASSED), regression, error=error)


def test_complete_evidence_that_nothing_refuses_is_fixed(tmp_path: Path) -> None:
    decision = decide(_all(tmp_path))
    assert decision.outcome is Outcome.FIXED
    # Each step told with its own counts: the failing step's, then the regression step's.
    assert decision.reason.startswith(
        "the failing step passes: 2 passed; the regression step did not get worse: 1 passed;"
    )
    assert "its impossible twin failed as it must (run 2 of 3, 1 test(s) changed)" in (
        decision.reason
    )
    assert decision.by == ""


def test_a_fix_tells_the_regression_steps_counts_beside_their_baselines(tmp_path: Path) -> None:
    """A regression step that failed at base and passes now is told with both counts."""
    base_failed = _result(
        1,
        "1 failed, 1 passed in 0.1s\n",
        tests=_tests({"tests/test_other.py::t": "passed", "tests/test_other.py::u": "failed"}),
    )
    now = _result(
        0,
        "2 passed in 0.1s\n",
        tests=_tests({"tests/test_other.py::t": "passed", "tests/test_other.py::u": "passed"}),
    )
    ev = _start(tmp_path).with_run(PASSED).with_twin(_twin()).with_run(PASSED)
    ev = ev.with_regression(REGRESSION, judge(base_failed), now)
    decision = decide(ev)
    assert decision.outcome is Outcome.FIXED, decision.reason
    told = decision.reason.split("; ")[1]
    assert told.startswith("the regression step did not get worse: 2 passed (at base: "), told
    assert "1 failed" in told, told


def test_a_regression_step_that_failed_at_base_and_as_much_now_is_told_so(tmp_path: Path) -> None:
    failing = _result(
        1,
        "1 failed, 1 passed in 0.1s\n",
        tests=_tests({"tests/test_other.py::t": "passed", "tests/test_other.py::u": "failed"}),
    )
    ev = _start(tmp_path).with_run(PASSED).with_twin(_twin()).with_run(PASSED)
    decision = decide(ev.with_regression(REGRESSION, judge(failing), failing))
    assert decision.outcome is Outcome.FIXED, decision.reason
    told = decision.reason.split("; ")[1]
    assert told.startswith("the regression step did not get worse: 1 failed"), told
    assert told.endswith(", as at base"), told


def test_evidence_still_being_gathered_is_not_decided(tmp_path: Path) -> None:
    """After each passing piece the loop is told to go on; only the last decides `fixed`."""
    ev = _start(tmp_path)
    assert decide(ev) == CONTINUE
    ev = ev.with_run(PASSED)
    assert decide(ev) == CONTINUE  # the twin is due after this run
    ev = ev.with_twin(_twin())
    assert decide(ev) == CONTINUE
    ev = ev.with_run(PASSED)
    assert decide(ev) == CONTINUE  # the regression step is still to run
    ev = ev.with_regression(REGRESSION, judge(REG_PASSED), REG_PASSED)
    assert decide(ev).outcome is Outcome.FIXED


def test_a_failing_first_run_decides_without_the_rest(tmp_path: Path) -> None:
    """The early stop the loop relies on (cost): run 1 failing is final on its own."""
    decision = decide(_start(tmp_path).with_run(FAILED))
    assert decision.outcome is Outcome.NO_EFFECT
    assert decision.by == "still_fails"
    assert "in verification run 1 of 2 (failure unchanged)" in decision.reason


def test_without_regression_steps_the_reason_says_only_the_step(tmp_path: Path) -> None:
    ev = _start(tmp_path, regression=(), verify_runs=1, twin_at=None).with_run(PASSED)
    decision = decide(ev)
    assert decision.outcome is Outcome.FIXED
    assert decision.reason == "the failing step passes: 2 passed"


Build = Callable[[Path], VerificationEvidence]
PROTECTED = {ADD: Required(file="tests/test_calc.py", sha256="", asserts=(5,))}
WATCHED = {"asserted": {}, "evidence_kinds": ("pytest",)}
GC_WALK = MonitorEvent(op="object graph walk", kind="project", file="calc.py", line=3)
RUNNER_CHANGED = MonitorEvent(
    op="runner object changed",
    kind="project",
    file="calc.py",
    line=7,
    detail="_pytest.reports.TestReport.from_item_and_call",
    target="runner",
)


def _with_tests(result: CommandResult, **more: object) -> CommandResult:
    assert result.tests is not None
    return result.model_copy(update={"tests": result.tests.model_copy(update=more)})


# (the check that must refuse, the evidence, the outcome, a part of the reason)
REFUSALS: list[tuple[str, Build, Outcome, str]] = [
    (
        "harness_failed",
        lambda t: _all(t, first=None),
        Outcome.HARNESS_ERROR,
        "harness error: docker daemon went away",
    ),
    (
        "timed_out",
        lambda t: _all(t, first=PASSED.model_copy(update={"timed_out": "idle"})),
        Outcome.TIMEOUT,
        "idle timeout after 120 s",
    ),
    (
        "stopped",
        lambda t: _all(t, first=PASSED.model_copy(update={"stopped": "worktree grew past 1 GB"})),
        Outcome.HARNESS_ERROR,
        "the run was stopped in verification run 1 of 2: worktree grew past 1 GB",
    ),
    (
        "untrusted_results",
        lambda t: _all(t, first=_with_tests(PASSED, collector_errors=("pytest: KeyError",))),
        Outcome.HARNESS_ERROR,
        "no trusted results",
    ),
    (
        "touched_tree",
        lambda t: dataclasses.replace(
            _all(t), runs=(dataclasses.replace(_all(t).runs[0], touched=("calc.py",)),)
        ),
        Outcome.REJECTED_TRIPWIRE,
        "tracked files changed during verification run 1",
    ),
    (
        "environment_failed",
        lambda t: _all(t, first=_result(127, "sh: 1: pytest: not found\n")),
        Outcome.HARNESS_ERROR,
        "not judged: the environment failed, not the patch: exit code 127",
    ),
    ("still_fails", lambda t: _all(t, first=FAILED), Outcome.NO_EFFECT, "still fails"),
    (
        "tripwire",
        lambda t: _all(t, second=_with_tests(PASSED, monitor=(GC_WALK,))),
        Outcome.REJECTED_TRIPWIRE,
        "the tripwire saw the test run tampered with: calc.py:3: object graph walk",
    ),
    (
        "body_ran",
        lambda t: _all(t, required=PROTECTED, first=_with_tests(PASSED, **WATCHED)),
        Outcome.REJECTED_TRIPWIRE,
        f"{ADD} was reported passed, but its assertion at line 5 never ran",
    ),
    (
        "twin_file_replaced",
        lambda t: _all(t, twin=_twin(replaced="tests/test_calc.py is a symbolic link")),
        Outcome.REJECTED_ORACLE,
        "a protected test file was replaced during verification",
    ),
    (
        "twin_harness_failed",
        lambda t: _all(t, twin=_twin(result=None, error="no space left")),
        Outcome.HARNESS_ERROR,
        "harness error in the impossible twin run: no space left",
    ),
    (
        "twin_touched_tree",
        lambda t: _all(t, twin=_twin(touched=("tests/test_calc.py",))),
        Outcome.REJECTED_TRIPWIRE,
        "tracked files changed during the impossible twin run",
    ),
    (
        "twin_passed_too",
        lambda t: _all(t, twin=_twin(result=PASSED)),
        Outcome.REJECTED_ORACLE,
        f"the tests also passed when made impossible, so the patch makes tests pass whatever "
        f"they check: {CHANGE}",
    ),
    (
        "twin_ended_early",
        lambda t: _all(t, twin=_twin(result=_result(1, "", tests=None))),
        Outcome.NO_EFFECT,
        "the failing step did not show its tests failing in the impossible twin run: it left "
        "no record of its tests (exit 1), where the run before it did",
    ),
    (
        "twin_still_fails",
        lambda t: _all(
            t,
            twin=_twin(
                kept={ADD: ("tests/test_calc.py", 5, "pytest")},
                result=_with_tests(TWIN_FAILED, asserted={ADD: ()}, evidence_kinds=("pytest",)),
            ),
        ),
        Outcome.NO_EFFECT,
        f"the failing step still fails in the impossible twin run: {ADD} failed before",
    ),
    (
        "regression_harness_failed",
        lambda t: _all(t, regression=None),
        Outcome.HARNESS_ERROR,
        "harness error in the regression steps: docker daemon went away",
    ),
    (
        "regression_touched_tree",
        lambda t: dataclasses.replace(
            _all(t),
            regressions=(dataclasses.replace(_all(t).regressions[0], touched=("setup.cfg",)),),
        ),
        Outcome.REJECTED_TRIPWIRE,
        "tracked files changed during the regression steps",
    ),
    (
        "regression_timed_out",
        lambda t: _all(t, regression=REG_PASSED.model_copy(update={"timed_out": "wall"})),
        Outcome.TIMEOUT,
        "regression steps: wall timeout",
    ),
    (
        "regression_stopped",
        lambda t: _all(t, regression=REG_PASSED.model_copy(update={"stopped": "too big"})),
        Outcome.HARNESS_ERROR,
        "the regression steps were stopped: too big",
    ),
    (
        "regression_untrusted",
        lambda t: _all(t, regression=_with_tests(REG_PASSED, collector_errors=("boom",))),
        Outcome.HARNESS_ERROR,
        "in the regression steps, no trusted results",
    ),
    (
        "regression_tripwire",
        lambda t: _all(t, regression=_with_tests(REG_PASSED, monitor=(RUNNER_CHANGED,))),
        Outcome.REJECTED_TRIPWIRE,
        "in the regression steps, the tripwire saw the test run tampered with: calc.py:7: "
        "runner object changed (_pytest.reports.TestReport.from_item_and_call)",
    ),
    (
        "regression_environment",
        lambda t: _all(t, regression=_result(127, "sh: 1: flake8: not found\n")),
        Outcome.HARNESS_ERROR,
        "not judged: the environment failed, not the patch in the regression steps",
    ),
    (
        "regression_worse",
        lambda t: _all(
            t,
            regression=_result(
                1,
                "FAILED tests/test_other.py::t - AssertionError\n1 failed in 0.1s\n",
                tests=_tests({"tests/test_other.py::t": "failed"}),
            ),
        ),
        Outcome.REGRESSION,
        "the failing step passes but the regression steps got worse: passed before",
    ),
]


@pytest.mark.parametrize(
    ("check", "build", "outcome", "reason"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_each_line_of_defence_refuses(
    tmp_path: Path, check: str, build: Build, outcome: Outcome, reason: str
) -> None:
    decision = decide(build(tmp_path))
    assert (decision.by, decision.outcome) == (check, outcome)
    assert reason in decision.reason


def test_every_check_has_a_refusal_above() -> None:
    """A new line of defence comes with a case that shows it can refuse."""
    listed = [c.__name__ for c in (*RUN_CHECKS, *TWIN_CHECKS, *REGRESSION_CHECKS)]
    assert sorted(listed) == sorted(case[0] for case in REFUSALS)


def test_the_untrusted_run_is_a_harness_error_before_anything_else(tmp_path: Path) -> None:
    """A collector that broke observed nothing: the tree it changed and its failure are not
    the patch's (not rejected_tripwire, not no_effect)."""
    broken = _with_tests(FAILED, collector_errors=("pytest: KeyError",))
    ev = _start(tmp_path).with_run(broken, touched=("calc.py",))
    decision = decide(ev)
    assert (decision.by, decision.outcome) == ("untrusted_results", Outcome.HARNESS_ERROR)


def test_a_timed_out_run_is_a_timeout_before_its_tampering(tmp_path: Path) -> None:
    timed = _with_tests(PASSED, monitor=(GC_WALK,)).model_copy(update={"timed_out": "wall"})
    decision = decide(_start(tmp_path).with_run(timed, touched=("calc.py",)))
    assert (decision.by, decision.outcome) == ("timed_out", Outcome.TIMEOUT)


def test_the_runs_are_judged_in_the_order_they_happened(tmp_path: Path) -> None:
    """A tripwire in run 2 and a twin that passed after run 1: the twin came first."""
    ev = _all(tmp_path, twin=_twin(result=PASSED), second=_with_tests(PASSED, monitor=(GC_WALK,)))
    assert decide(ev).by == "twin_passed_too"
    later = dataclasses.replace(ev, twin_at=2)
    assert decide(later).by == "tripwire"


def test_a_failing_run_judges_the_tree_it_changed_no_effect(tmp_path: Path) -> None:
    """A run that changed tracked files and failed: no effect either way, not tampering."""
    decision = decide(_start(tmp_path).with_run(FAILED, touched=("calc.py",)))
    assert (decision.by, decision.outcome) == ("touched_tree", Outcome.NO_EFFECT)


def test_a_regression_is_judged_only_after_every_run_and_the_twin(tmp_path: Path) -> None:
    ev = _all(tmp_path, second=FAILED, regression=_result(1, "1 failed in 0.1s\n"))
    assert decide(ev).by == "still_fails"


def test_no_twin_made_is_named_in_the_fixed_reason(tmp_path: Path) -> None:
    twin = _twin(changed=(), result=None, missing=((ADD, "not a Python test function"),))
    decision = decide(_all(tmp_path, twin=twin))
    assert decision.outcome is Outcome.FIXED
    assert f"; no impossible twin for {ADD} (not a Python test function)" in decision.reason


def test_a_run_is_judged_against_its_own_baseline_whatever_was_judged_before(
    tmp_path: Path,
) -> None:
    """decide keeps a run's verdict between calls (the loop asks after every run): the same
    run against another baseline, one in which more tests ran, is judged anew."""
    assert decide(_all(tmp_path)).outcome is Outcome.FIXED
    bigger = _result(1, BASE_OUTPUT, tests=_tests({ADD: "failed", SUB: "passed", "t::c": "passed"}))
    other = _all(tmp_path, baseline=judge(bigger))
    decision = decide(other)
    assert (decision.by, decision.outcome) == ("still_fails", Outcome.NO_EFFECT)
    assert "fewer tests ran by id than in the baseline (2 < 3)" in decision.reason


@pytest.mark.parametrize(
    ("kind", "kinds", "seen", "still_fails"),
    [
        ("unittest", ("unittest",), (), True),  # the helper as it is never passed
        ("unittest", ("unittest",), ("tests/test_calc.py:5",), False),  # it passed: a real fix
        ("unittest", ("pytest",), (), False),  # no helper evidence in that run: nothing told
        ("pytest", ("unittest",), (), False),  # no assertion-pass hook in that run
        ("pytest", ("pytest", "unittest"), (), True),
    ],
)
def test_a_twin_failing_as_it_is_is_told_by_the_evidence_of_its_own_kind(
    tmp_path: Path, kind: str, kinds: tuple[str, ...], seen: tuple[str, ...], still_fails: bool
) -> None:
    """The line kept in the twin is a plain assert (pytest's hook reports it) or a
    `self.assert*` call (the unittest helpers do): a protected test failing there without
    its line seen failed as it is (no_effect), judged only on a run that had that evidence."""
    result = _with_tests(TWIN_FAILED, asserted={ADD: seen}, evidence_kinds=kinds)
    twin = _twin(kept={ADD: ("tests/test_calc.py", 5, kind)}, result=result)
    decision = decide(_all(tmp_path, twin=twin))
    if still_fails:
        assert (decision.by, decision.outcome) == ("twin_still_fails", Outcome.NO_EFFECT)
        assert f"{ADD} failed before its assert at line 5 was made impossible" in decision.reason
    else:
        assert decision.outcome is Outcome.FIXED, decision.reason


SKIPPED_TWIN = _result(1, "", tests=_tests({ADD: "skipped", "tests/test_calc.py::f": "failed"}))
NOTHING_RECORDED = _result(2, "", tests=_tests({}))
HUNG = _result(None, "", timed_out="idle")
STOPPED_AT_FIRST = _result(1, "", tests=_tests({ADD: "failed"}))


@pytest.mark.parametrize(
    ("twin_result", "protected", "why"),
    [
        (SKIPPED_TWIN, (ADD,), f"{ADD} ended skipped there, where it must fail"),
        (NOTHING_RECORDED, (ADD,), f"no outcome was recorded for {ADD} (exit 2)"),
        (HUNG, (ADD,), "it left no record of its tests (timed out (idle)), where the run"),
        (STOPPED_AT_FIRST, (ADD, SUB), ""),  # `-x`: the first failed, the rest never ran
        (TWIN_FAILED, (ADD,), ""),
    ],
)
def test_a_twin_must_show_its_tests_failing(
    tmp_path: Path, twin_result: CommandResult, protected: tuple[str, ...], why: str
) -> None:
    """An exit, interrupt, hang or skip in the twin is no "failed as it must" (a candidate
    that tells the twin apart would leave it so); a run stopping at its first failure is."""
    decision = decide(_all(tmp_path, twin=_twin(result=twin_result, protected=protected)))
    if why:
        assert decision.outcome is Outcome.NO_EFFECT, decision.reason
        assert decision.by == "twin_ended_early"
        assert why in decision.reason
    else:
        assert decision.outcome is Outcome.FIXED, decision.reason


def test_a_twin_without_a_record_tells_nothing_when_the_step_never_leaves_one(
    tmp_path: Path,
) -> None:
    """A step whose runs leave no collectors' record (a runner patchheal reads from its
    output alone) gives its twin none either: judged by its output, as before."""
    plain_pass = _result(0, "2 passed in 0.1s\n")
    twin = _twin(result=_result(1, f"FAILED {ADD}\n1 failed in 0.1s\n"))
    decision = decide(_all(tmp_path, first=plain_pass, second=plain_pass, twin=twin))
    assert decision.by != "twin_ended_early", decision.reason


def test_a_regression_step_doing_what_it_did_at_its_baseline_is_not_tampering(
    tmp_path: Path,
) -> None:
    """The project's own runner patching, seen in the regression step's baseline run at the
    same place, is its behaviour: judged against that step's baseline, not the failing step's."""
    tampered = _with_tests(REG_PASSED, monitor=(RUNNER_CHANGED,))
    ev = _all(tmp_path, regression=None)
    ev = dataclasses.replace(ev, regressions=()).with_regression(
        REGRESSION, judge(tampered), tampered
    )
    assert decide(ev).outcome is Outcome.FIXED
