"""The one door into the verdict: `decide(evidence)`, the outcome of a verification and why.

The loop gathers what a verification produced (`verdict/evidence.py`); this
reads it, in the order the runs happened, and asks each line of defence in
turn (docs/verdict.md follows this order):

* each run of the failing step, through `RUN_CHECKS`;
* after the run it followed, the impossible twin, through `TWIN_CHECKS`;
* each regression step against its baseline, through `REGRESSION_CHECKS`.

The first check that refuses ends the verification with its outcome and
reason. A check is a small pure function returning `(outcome, reason)` or
None; a new line of defence is one function and one entry in its list. On
evidence still being gathered that nothing refuses yet, `decide` answers
"continue" (`Decision.outcome` None), so the loop runs no more than it must: a
failing first run ends the verification. On complete evidence that nothing
refuses, the candidate is `fixed`. Pure, except that whether a failing run
failed because of its environment is told by the project's layout in the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from patchheal.failure.analysis import analyze
from patchheal.models import CommandResult, Outcome, Verdict
from patchheal.verdict.airflow import check_tasks
from patchheal.verdict.environment import environmental
from patchheal.verdict.evidence import RegressionEvidence, TwinEvidence, VerificationEvidence
from patchheal.verdict.judge import judge, worse
from patchheal.verdict.ran import unexecuted
from patchheal.verdict.regression import judge_regression, what_failed
from patchheal.verdict.tripwire import why_tainted
from patchheal.verdict.trust import untrusted
from patchheal.verdict.twin import ended_early, refusal, still_failing, twin_passed
from patchheal.workspace.tracked import tainted_reason

NOT_JUDGED = "not judged: the environment failed, not the patch"

Refusal = tuple[Outcome, str]
RunCheck = Callable[["Run", VerificationEvidence], Refusal | None]
TwinCheck = Callable[[TwinEvidence, VerificationEvidence], Refusal | None]
RegressionCheck = Callable[[RegressionEvidence, VerificationEvidence], Refusal | None]


@dataclass(frozen=True)
class Decision:
    """The outcome and its reason; `outcome` None: nothing refuses yet, gather more."""

    outcome: Outcome | None
    reason: str = ""
    by: str = ""
    """The line of defence (its check's name) that refused; "" for `fixed` and CONTINUE."""


CONTINUE = Decision(None)


@dataclass(frozen=True)
class Run:
    """One run of the failing step as its checks see it: its number, and its verdict."""

    number: int
    result: CommandResult | None
    touched: tuple[str, ...]
    error: str
    verdict: Verdict | None

    @property
    def judged(self) -> tuple[CommandResult, Verdict]:
        """The run's result and verdict (every check after the harness's has them)."""
        assert self.result is not None
        assert self.verdict is not None
        return self.result, self.verdict

    def which(self, ev: VerificationEvidence) -> str:
        return (
            f" in verification run {self.number} of {ev.verify_runs}" if ev.verify_runs > 1 else ""
        )


# The loop asks after every run, so each earlier run would be judged again and again (a
# run's output is up to megabytes; 10 runs, 66 judgements): a run's verdict is kept by the
# identity of the objects it was judged from, which are frozen. Bounded; cleared when full.
_JUDGED: dict[tuple[int, ...], tuple[tuple[object, ...], Verdict]] = {}
_JUDGED_MAX = 64


def _memo(of: tuple[object, ...], compute: Callable[[], Verdict]) -> Verdict:
    key = tuple(id(part) for part in of)
    kept = _JUDGED.get(key)
    if kept is not None and all(a is b for a, b in zip(kept[0], of, strict=True)):
        return kept[1]
    verdict = compute()
    if len(_JUDGED) >= _JUDGED_MAX:
        _JUDGED.clear()
    _JUDGED[key] = (of, verdict)  # the objects are held, so their ids stay theirs
    return verdict


def _judge_run(result: CommandResult, ev: VerificationEvidence) -> Verdict:
    verdict = judge(result, baseline=ev.baseline, expected_tests=ev.failure.failing_tests)
    if ev.failure.source == "airflow":  # `tasks test` exits 0 for a skipped task
        tasks = ev.failure.failing_tests
        verdict = check_tasks(verdict, result.output, tasks, result.tests)
    return verdict


def _run(number: int, ev: VerificationEvidence) -> Run:
    evidence = ev.runs[number - 1]
    result, verdict = evidence.result, None
    if result is not None:
        found = result
        verdict = _memo((result, ev.baseline, ev.failure), lambda: _judge_run(found, ev))
    return Run(number, result, evidence.touched, evidence.error, verdict)


# --- the failing step's runs, each in order -------------------------------------------------


def harness_failed(run: Run, ev: VerificationEvidence) -> Refusal | None:
    """The harness could not make the run: nothing was judged."""
    return (Outcome.HARNESS_ERROR, f"harness error: {run.error}") if run.result is None else None


def timed_out(run: Run, ev: VerificationEvidence) -> Refusal | None:
    result, _ = run.judged
    if result.timed_out is None:
        return None
    idle = result.timed_out == "idle"
    limit = ev.idle_timeout_seconds if idle else ev.step_timeout_seconds
    return Outcome.TIMEOUT, f"{result.timed_out} timeout after {limit:g} s"


def stopped(run: Run, ev: VerificationEvidence) -> Refusal | None:
    """A limit of the run (the worktree's size) stopped it: the patch was not judged."""
    result, _ = run.judged
    if not result.stopped:
        return None
    return Outcome.HARNESS_ERROR, f"the run was stopped{run.which(ev)}: {result.stopped}"


def untrusted_results(run: Run, ev: VerificationEvidence) -> Refusal | None:
    """The harness's collector broke, not the patch."""
    no_trust = untrusted(run.judged[0].tests)
    return (Outcome.HARNESS_ERROR, no_trust) if no_trust else None


def touched_tree(run: Run, ev: VerificationEvidence) -> Refusal | None:
    """The run changed tracked files: it judged another tree than the candidate's. Passing,
    it is the candidate's code tampering with the run; failing, no effect either way."""
    if not run.touched:
        return None
    outcome = Outcome.REJECTED_TRIPWIRE if run.judged[1].passed else Outcome.NO_EFFECT
    return outcome, tainted_reason(list(run.touched), f"verification run {run.number}")


def environment_failed(run: Run, ev: VerificationEvidence) -> Refusal | None:
    """A failing run that failed because of its environment judges no patch (its claim is
    released, never poisoned)."""
    result, verdict = run.judged
    unjudged = "" if verdict.passed else environmental(result, ev.tree)
    return (Outcome.HARNESS_ERROR, f"{NOT_JUDGED}: {unjudged}") if unjudged else None


def still_fails(run: Run, ev: VerificationEvidence) -> Refusal | None:
    result, verdict = run.judged
    if verdict.passed:
        return None
    after = analyze(result.output, repo_root=str(ev.tree), command=ev.command).fingerprint
    same = after == ev.failure.fingerprint
    change = "failure unchanged" if same else f"failure changed to {after}"
    return (
        Outcome.NO_EFFECT,
        f"the failing step still fails{run.which(ev)} ({change}): {verdict.reason}",
    )


def tripwire(run: Run, ev: VerificationEvidence) -> Refusal | None:
    tainted = why_tainted(run.judged[0].tests, ev.baseline.tests, ev.changed)
    return (Outcome.REJECTED_TRIPWIRE, tainted) if tainted else None


def body_ran(run: Run, ev: VerificationEvidence) -> Refusal | None:
    """The monitor saw each passing protected test's assertions pass from its own frame."""
    why = unexecuted(ev.required, run.judged[0].tests)
    return (Outcome.REJECTED_TRIPWIRE, why) if why else None


RUN_CHECKS: Sequence[RunCheck] = (
    harness_failed,
    timed_out,
    stopped,
    untrusted_results,
    touched_tree,
    environment_failed,
    still_fails,
    tripwire,
    body_ran,
)

# --- the impossible twin, after the run it followed -----------------------------------------


def twin_file_replaced(twin: TwinEvidence, ev: VerificationEvidence) -> Refusal | None:
    if not twin.replaced:
        return None
    why = f"a protected test file was replaced during verification: {twin.replaced}"
    return Outcome.REJECTED_ORACLE, why


def twin_harness_failed(twin: TwinEvidence, ev: VerificationEvidence) -> Refusal | None:
    if not twin.error:
        return None
    return Outcome.HARNESS_ERROR, f"harness error in the impossible twin run: {twin.error}"


def twin_touched_tree(twin: TwinEvidence, ev: VerificationEvidence) -> Refusal | None:
    """No file is changed for the twin: a tracked file that differs after it was changed by
    the step during the twin."""
    if not twin.touched:
        return None
    return Outcome.REJECTED_TRIPWIRE, tainted_reason(list(twin.touched), "the impossible twin run")


def twin_passed_too(twin: TwinEvidence, ev: VerificationEvidence) -> Refusal | None:
    """Tests passed that no honest code can pass: the patch makes tests pass whatever."""
    if twin.result is None:
        return None
    why = twin_passed(twin.result, twin.protected)
    if not why:
        return None
    return Outcome.REJECTED_ORACLE, refusal(twin.changed[0], why, "; ".join(twin.changed[:5]))


def twin_ended_early(twin: TwinEvidence, ev: VerificationEvidence) -> Refusal | None:
    """The twin must show its protected tests failing; a run that ends, hangs or skips
    before they fail shows nothing (a candidate that tells the twin apart would)."""
    if twin.result is None or not twin.changed:
        return None
    followed = ev.runs[ev.twin_at - 1].result if ev.twin_at and len(ev.runs) >= ev.twin_at else None
    had_record = followed is not None and followed.tests is not None
    early = ended_early(twin.result, twin.protected, had_record)
    if not early:
        return None
    why = f"the failing step did not show its tests failing in the impossible twin run: {early}"
    return Outcome.NO_EFFECT, why


def twin_still_fails(twin: TwinEvidence, ev: VerificationEvidence) -> Refusal | None:
    """The twin is also a run of the tests as they are: a candidate honest only in the twin,
    or a test failing every other run, fails here (verify_runs would miss it)."""
    if twin.result is None:
        return None
    failing = still_failing(twin.result.tests, twin.kept)
    if not failing:
        return None
    why = f"the failing step still fails in the impossible twin run: {failing}"
    return Outcome.NO_EFFECT, why


TWIN_CHECKS: Sequence[TwinCheck] = (
    twin_file_replaced,
    twin_harness_failed,
    twin_touched_tree,
    twin_passed_too,
    twin_ended_early,
    twin_still_fails,
)

# --- the regression steps, each in order, against its own baseline -------------------------


def regression_harness_failed(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    """As transient as in the failing step: never a job error."""
    if reg.result is not None:
        return None
    return Outcome.HARNESS_ERROR, f"harness error in the regression steps: {reg.error}"


def regression_touched_tree(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    """The tree that would be committed is not the one the candidate made."""
    if not reg.touched:
        return None
    return Outcome.REJECTED_TRIPWIRE, tainted_reason(list(reg.touched), "the regression steps")


def regression_timed_out(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    assert reg.result is not None
    if reg.result.timed_out is None:
        return None
    return Outcome.TIMEOUT, f"regression steps: {reg.result.timed_out} timeout"


def regression_stopped(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    assert reg.result is not None
    if not reg.result.stopped:
        return None
    return Outcome.HARNESS_ERROR, f"the regression steps were stopped: {reg.result.stopped}"


def regression_untrusted(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    assert reg.result is not None
    no_trust = untrusted(reg.result.tests)
    return (Outcome.HARNESS_ERROR, f"in the regression steps, {no_trust}") if no_trust else None


def regression_tripwire(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    """A regression step's test run is the candidate's to tamper with as much as the failing
    step's: a test it broke, recorded as passed through a runner object, is no regression by
    outcome. Judged as the failing step's runs are, against this step's own baseline (the
    project's behaviour there, same operation and place, does not taint)."""
    assert reg.result is not None
    before = reg.baseline.tests if reg.baseline is not None else ev.baseline.tests
    tainted = why_tainted(reg.result.tests, before, ev.changed)
    return (Outcome.REJECTED_TRIPWIRE, f"in the regression steps, {tainted}") if tainted else None


def _regression_verdict(reg: RegressionEvidence, ev: VerificationEvidence) -> Verdict:
    result = reg.result
    assert result is not None
    return _memo(
        (result, reg.baseline, ev.tree), lambda: judge_regression(result, ev.tree, reg.baseline)
    )


def _got_worse(reg: RegressionEvidence, ev: VerificationEvidence) -> tuple[bool, str]:
    verdict = _regression_verdict(reg, ev)
    if reg.baseline is not None:
        return worse(reg.baseline, verdict)
    return not verdict.passed, verdict.reason


def regression_environment(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    assert reg.result is not None
    if not _got_worse(reg, ev)[0]:
        return None
    unjudged = environmental(reg.result, ev.tree)
    if not unjudged:
        return None
    return Outcome.HARNESS_ERROR, f"{NOT_JUDGED} in the regression steps: {unjudged}"


def regression_worse(reg: RegressionEvidence, ev: VerificationEvidence) -> Refusal | None:
    assert reg.result is not None
    got_worse, why = _got_worse(reg, ev)
    if not got_worse:
        return None
    known = reg.baseline.failing_tests if reg.baseline is not None else ()
    why += what_failed(reg.result.output, reg.command, ev.tree, known)
    return (
        Outcome.REGRESSION,
        f"the failing step passes but the regression steps got worse: {why}",
    )


REGRESSION_CHECKS: Sequence[
    Callable[[RegressionEvidence, VerificationEvidence], Refusal | None]
] = (
    regression_harness_failed,
    regression_touched_tree,
    regression_timed_out,
    regression_stopped,
    regression_untrusted,
    regression_tripwire,
    regression_environment,
    regression_worse,
)


def decide(ev: VerificationEvidence) -> Decision:
    """The outcome of the verification `ev` gathered and why; CONTINUE when nothing refuses
    yet and evidence is still to come."""
    last: Run | None = None
    for number in range(1, len(ev.runs) + 1):
        last = _run(number, ev)
        for check in RUN_CHECKS:
            if refused := check(last, ev):
                return Decision(*refused, by=check.__name__)
        if ev.twin is not None and number == ev.twin_at:
            for twin_check in TWIN_CHECKS:
                if refused := twin_check(ev.twin, ev):
                    return Decision(*refused, by=twin_check.__name__)
    for reg in ev.regressions:
        for reg_check in REGRESSION_CHECKS:
            if refused := reg_check(reg, ev):
                return Decision(*refused, by=reg_check.__name__)
    if not ev.complete or last is None:
        return CONTINUE
    twin = _twin_note(ev.twin) if ev.twin is not None else ""
    passes = f"the failing step passes: {last.judged[1].reason}"
    if not ev.regression:
        return Decision(Outcome.FIXED, passes + twin)
    return Decision(Outcome.FIXED, f"{passes}; {_not_worse(ev)}{twin}")


def _not_worse(ev: VerificationEvidence) -> str:
    """'the regression steps did not get worse: 368 passed (at base: 366 passed, 2 failed)':
    each regression step's own counts, not the failing step's, with its baseline's when
    they differ."""
    told = []
    for reg in ev.regressions:
        now = _regression_verdict(reg, ev).reason
        base = reg.baseline.reason if reg.baseline is not None else ""
        if base and base != now:
            told.append(f"{now} (at base: {base})")
        elif reg.baseline is not None and base and not reg.baseline.passed:
            told.append(f"{now}, as at base")  # it failed at base too, no worse
        else:
            told.append(now)
    steps = "step" if len(told) == 1 else "steps"
    return f"the regression {steps} did not get worse: {' / '.join(told)}"


def _twin_note(twin: TwinEvidence) -> str:
    """What the twin found, told after a pass's reason."""
    if not twin.changed:
        return _no_twin(twin.missing)
    return (
        f"; its impossible twin failed as it must ({twin.place},"
        f" {len(twin.changed)} test(s) changed)"
        f"{_no_twin(twin.missing, ' and ')}\nimpossible twin changed: "
        + "; ".join(twin.changed[:5])
    )


def _no_twin(missing: Sequence[tuple[str, str]], joiner: str = "; ") -> str:
    if not missing:
        return ""
    shown = ", ".join(f"{test} ({why})" for test, why in missing[:3])
    more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
    return f"{joiner}no impossible twin for {shown}{more}"
