"""A job's steps in order: reproduce, heal, checkpoint; hard resets and going back.

controller.py owns the job (lock, workspace, harness, report); this module walks
its steps from the first one to heal, healing each with step.py's StepHealer.
It also owns every rebuild of the verify worktree from the base ref and the
checkpoints (`--resume`, `--from-step`, a hard reset, `resume-from-step`),
and honors operator control between checkpoints of such a replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from patchheal.errors import PatchhealError
from patchheal.harness.base import Harness
from patchheal.loop.attempt import AttemptRunner, StepState
from patchheal.loop.cause import cause_sites
from patchheal.loop.checkpoints import (
    checkpoint_step,
    discard_checkpoints,
    load_checkpoints,
    replay,
)
from patchheal.loop.controls import ControlReader, Directive
from patchheal.loop.lease import ProposalLease
from patchheal.loop.reproduce import reproduce
from patchheal.loop.state import JobState
from patchheal.loop.step import JobBudget, StepHealer, StepResult, first_line
from patchheal.memory.store import AttemptStore
from patchheal.models import (
    PATCHABLE_CLASSES,
    Classification,
    Failure,
    JobStatus,
    StepEnd,
    StepStatus,
)
from patchheal.proposers.registry import create_proposer
from patchheal.report.model import CauseSite, StepReport
from patchheal.runs import RunPaths
from patchheal.scrub.scrubber import Scrubber
from patchheal.telemetry.events import EventLog
from patchheal.telemetry.metrics import Metrics
from patchheal.workspace.worktrees import JobWorkspace

# How a step's end maps onto the job's status.
_JOB_STATUS = {
    StepEnd.EXHAUSTED: JobStatus.NOT_FIXED,
    StepEnd.STUCK: JobStatus.NOT_FIXED,
    StepEnd.MANUAL_HANDOFF: JobStatus.MANUAL_HANDOFF,
    StepEnd.CANCELLED: JobStatus.CANCELLED,
    StepEnd.TAKEN_OVER: JobStatus.TAKEN_OVER,
}


class StepSequence:
    """Heals the job's steps from `first` on; `run()` returns the head when all are fixed."""

    def __init__(
        self,
        state: JobState,
        store: AttemptStore,
        events: EventLog,
        metrics: Metrics,
        workspace: JobWorkspace,
        harness: Harness,
        controls: ControlReader,
        *,
        paths: RunPaths,
        scrubber: Scrubber,
        say: Callable[[str], None],
        sleep: Callable[[float], None],
    ) -> None:
        self.state = state
        self.spec = state.spec
        self.paths = paths
        self.say = say
        self.store = store
        self.events = events
        self.workspace = workspace
        self.harness = harness
        self.controls = controls
        self.verify_tree = workspace.worktree("verify")
        self.start_commit = workspace.base_commit
        self.hard_resets: dict[int, int] = {}
        spec = self.spec
        self.runner = AttemptRunner(
            spec, workspace, self.verify_tree, harness, store, events, self.paths,
            scrubber, metrics, regression=state.regression,
        )  # fmt: skip
        self.chain = [
            (config, create_proposer(config, job=spec, sleep=sleep))
            for config in spec.proposer_chain
        ]
        self.budget = JobBudget(
            state.started,
            spec.budget.job_wall_seconds,
            spec.budget.max_proposer_calls,
            spec.budget.max_model_tokens,
        )
        self.numbers = self._attempt_numbers()
        self.lease = ProposalLease(
            store,
            events,
            job_id=state.job_id,
            owner=f"run {state.run_id}",
            ttl_seconds=spec.memory.lease_ttl_seconds,
            wait_seconds=spec.memory.lease_wait_seconds,
            say=say,
            sleep=sleep,
        )

    def run(self, first: int) -> str | None:
        """The commit with every step fixed, or None when the job stopped (see JobState.stop)."""
        self.start_commit = self._replay(before=first)
        index = first
        while index <= len(self.spec.steps):
            directive = self.controls.poll()
            if directive.action in ("cancel", "takeover"):
                self._stop_by(directive)
                return None
            if directive.action == "resume-from-step":
                index = self._go_back(
                    directive.arg, index, f"resume-from-step by {directive.issued_by}"
                )
                continue
            # retry-step / hard-reset-step: the step's healer applies them.
            self.controls.hold(directive)
            result = self._heal_step(index)
            if result is None:
                return None
            if result.status is StepEnd.FIXED:
                self.start_commit = self._checkpoint(index, result)
                index += 1
            elif result.status is StepEnd.HARD_RESET:
                self.events.emit(
                    "self_heal.escalated",
                    step_id=self.spec.steps[index - 1].name,
                    step_index=index,
                    data={"to": "hard_reset", "reason": result.reason},
                )
                self.say(f"step {index}: hard reset ({result.reason})")
                self._hard_reset(index)
            elif result.status is StepEnd.FROM_STEP:
                index = self._go_back(result.arg, index, result.reason)
            else:
                self._stop_step(index, result)
                return None
        return self.start_commit

    # -- one step ---------------------------------------------------------------

    def _heal_step(self, index: int) -> StepResult | None:
        """Reproduce step `index` and heal it; None when it is not patchable (stopped)."""
        step_spec = self.spec.steps[index - 1]
        self.events.emit("step.started", step_id=step_spec.name, step_index=index)
        self.say(f"step {index} ({step_spec.name}): reproducing `{step_spec.command}`")
        self.workspace.reset(self.verify_tree, to=self.start_commit)
        repro = reproduce(
            self.harness,
            step_spec,
            self.verify_tree,
            self.spec.budget,
            regression=self.state.regression,
        )
        self.runner.harness_prepared = True
        failure, classification = repro.failure, repro.classification
        prior = self.state.step_reports.get(index)
        report = StepReport(
            index=index,
            name=step_spec.name,
            command=step_spec.command,
            status=StepStatus.PENDING,
            failure=failure,
            classification=classification,
            ci_fingerprint=repro.ci_fingerprint,
            # A hard reset or a step healed again keeps the step's whole timeline.
            attempts=prior.attempts if prior is not None else (),
        )
        self.state.step_reports[index] = report
        if failure is not None:
            self._record_failure(index, failure, classification)
        if (
            repro.verdict.passed
            or failure is None
            or classification is None
            or classification.failure_class not in PATCHABLE_CLASSES
        ):
            self._not_patchable(index, classification)
            return None
        state = StepState(
            index,
            step_spec,
            self.start_commit,
            failure,
            repro.verdict,
            repro.regression_baseline,
            failure_class=classification.failure_class.value,
            traces=dict(repro.result.tests.traces) if repro.result.tests is not None else {},
        )
        return self._heal(state, report, classification)

    def _record_failure(
        self, index: int, failure: Failure, classification: Classification | None
    ) -> None:
        step_spec = self.spec.steps[index - 1]
        self.events.emit(
            "failure.recorded",
            step_id=step_spec.name,
            step_index=index,
            fingerprint=failure.fingerprint,
            failure_class=classification.failure_class.value if classification else None,
            data={
                "failure": failure.model_dump(mode="json"),
                "classification": classification.model_dump(mode="json")
                if classification
                else None,
            },
        )
        self.store.record_failure(
            failure, job_id=self.state.job_id, step_index=index, classification=classification
        )

    def _not_patchable(self, index: int, classification: Classification | None) -> None:
        why = (
            f"not patched: classified {classification.failure_class.value}"
            if classification
            else "the step passes on its starting point: nothing to heal"
        )
        self.state.step_reports[index] = self.state.step_reports[index].model_copy(
            update={"status": StepStatus.NOT_PATCHABLE, "stop_reason": why}
        )
        self._exhausted(index, JobStatus.NOT_PATCHABLE, why)
        self.state.stop(
            JobStatus.NOT_PATCHABLE,
            why,
            retryable=bool(classification and classification.retryable),
        )
        self.say(f"step {index}: {why}")

    def _heal(
        self, step: StepState, report: StepReport, classification: Classification
    ) -> StepResult:
        failure = step.failure
        fclass = classification.failure_class.value
        message = first_line(failure.message, 120)
        # A bare `MemoryError` has its type as its message: said once.
        said = " ".join(dict.fromkeys(p for p in (failure.error_type, message) if p))
        self.say(f"step {step.index}: fingerprint {failure.fingerprint} ({fclass}): {said}")
        self.events.emit(
            "self_heal.triggered",
            step_id=step.spec.name,
            step_index=step.index,
            fingerprint=failure.fingerprint,
            failure_class=fclass,
        )
        healer = StepHealer(
            self.runner,
            self.chain,
            classification,
            self.budget,
            self.controls,
            lambda: next(self.numbers),
            self.say,
            hard_resets_done=self.hard_resets.get(step.index, 0),
            lease=self.lease,
        )
        result = healer.heal(step)
        self.hard_resets[step.index] = healer.hard_resets_done
        self.state.step_reports[step.index] = report.model_copy(
            update={
                "attempts": report.attempts + tuple(result.attempts),
                "stop_reason": result.reason,
                "cause_sites": self._cause_sites(step, result),
            }
        )
        return result

    def _cause_sites(self, step: StepState, result: StepResult) -> tuple[CauseSite, ...]:
        if result.status is not StepEnd.FIXED or result.fix is None:
            return ()
        tests = step.failure.failing_tests
        try:
            return cause_sites(
                self.verify_tree, step.start_commit, result.fix.diff, step.traces, tests
            )
        except PatchhealError:
            return ()  # the worktree is not one git can be pointed at: the report goes without

    def _checkpoint(self, index: int, result: StepResult) -> str:
        assert result.fix is not None
        fix = result.fix
        classification = self.state.step_reports[index].classification
        commit = checkpoint_step(
            self.paths,
            self.events,
            self.workspace,
            self.verify_tree,
            start_commit=self.start_commit,
            step_id=self.spec.steps[index - 1].name,
            step_index=index,
            fix=fix,
            failure_class=classification.failure_class.value if classification else None,
        )
        self.state.step_reports[index] = self.state.step_reports[index].model_copy(
            update={
                "status": StepStatus.FIXED,
                "checkpoint_patch": str(self.paths.checkpoint_patch(index)),
            }
        )
        self.say(f"step {index}: fixed by {fix.label or fix.strategy}; checkpoint written")
        return commit

    def _stop_step(self, index: int, result: StepResult) -> None:
        step_spec = self.spec.steps[index - 1]
        report = self.state.step_reports[index]
        self._exhausted(index, _JOB_STATUS[result.status], result.reason)
        self.state.step_reports[index] = report.model_copy(update={"status": StepStatus.NOT_FIXED})
        self.state.stop(
            _JOB_STATUS[result.status],
            f"step {index} ({step_spec.name}): {result.reason}",
            retryable=result.retryable,
        )
        self.state.infra_unavailable = result.infra_unavailable

    def _exhausted(self, index: int, status: JobStatus, reason: str) -> None:
        """Every terminal stop of a step that is not a fix, deterministic ones included
        (not patchable, hand-off, cancel), is one `self_heal.exhausted` event and counter;
        `stop` tells them apart."""
        report = self.state.step_reports[index]
        fclass = report.classification.failure_class.value if report.classification else None
        self.events.emit(
            "self_heal.exhausted",
            step_id=self.spec.steps[index - 1].name,
            step_index=index,
            fingerprint=report.failure.fingerprint if report.failure else None,
            failure_class=fclass,
            data={"reason": reason, "stop": status.value},
        )
        tags = {"failure_class": fclass or "unclassified", "stop": status.value}
        self.runner.metrics.incr("self_heal.exhausted_total", tags=tags)

    def _stop_by(self, directive: Directive) -> None:
        cancel = directive.action == "cancel"
        self.state.stop(
            JobStatus.CANCELLED if cancel else JobStatus.TAKEN_OVER,
            f"{directive.action} by {directive.issued_by}",
            retryable=cancel,
        )

    # -- rebuilding the verify worktree from the base and the checkpoints --------

    def _replay(self, *, before: int) -> str:
        """Base + the checkpoints of steps before `before`; a cancel stops between two."""
        return replay(
            self.paths,
            self.workspace,
            self.verify_tree,
            load_checkpoints(self.paths, before_step=before),
            should_stop=self._between_checkpoints,
        )

    def _between_checkpoints(self) -> bool:
        directive = self.controls.poll()  # a pause blocks here, with nothing half-applied
        # Whatever it is, the step loop acts on it next; a stopped replay is never built on.
        self.controls.hold(directive)
        return directive.action in ("cancel", "takeover")

    def _hard_reset(self, step_index: int) -> None:
        """Recreate the worktrees from the base ref and replay the earlier steps' checkpoints."""
        for tree in self.workspace.list_worktrees():
            self.workspace.remove(tree)
        self.verify_tree = self.workspace.worktree("verify")
        self.runner.verify_tree = self.verify_tree
        self.runner.harness_prepared = False
        self.start_commit = self._replay(before=step_index)

    def _go_back(self, arg: int | None, index: int, reason: str) -> int:
        """Heal again from step `arg` (at most the current step): drop its checkpoints, rebuild."""
        target = max(1, min(arg or 1, index))
        self.events.emit("resume.from_step", step_index=target, data={"reason": reason})
        self.say(f"going back to step {target} ({reason})")
        discard_checkpoints(self.paths, from_step=target)
        self._hard_reset(target)
        return target

    def _attempt_numbers(self) -> Iterator[int]:
        """Attempt numbers go on from the highest ever used by this job, in the store or in
        the event log: a run killed mid-attempt left its number (and logs) behind."""
        used = [a.attempt_number for a in self.store.attempts(job_id=self.state.job_id)]
        if self.paths.events.exists():
            used += [
                e.attempt
                for e in EventLog.read(self.paths.events)
                if e.type == "step.attempt.started" and e.attempt is not None
            ]
        return iter(range(max(used, default=0) + 1, 1 << 30))


__all__ = ["StepSequence"]
