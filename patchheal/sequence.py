"""A job's steps in order: reproduce, heal, checkpoint; hard resets and going back.

loop.py owns the job (lock, workspace, harness, report); this module walks
its steps from the first one to heal, healing each with step.py's StepHealer.
It also owns every rebuild of the verify worktree from the base ref and the
checkpoints (`--resume`, `--from-step`, a hard reset, `resume-from-step`),
and honors operator control between checkpoints of such a replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from patchheal.attempt import AttemptRunner, StepState
from patchheal.checkpoints import checkpoint_step, discard_checkpoints, load_checkpoints, replay
from patchheal.controls import ControlReader, Directive
from patchheal.events import EventLog
from patchheal.harness.base import Harness
from patchheal.memory.store import AttemptStore
from patchheal.metrics import Metrics
from patchheal.models import PATCHABLE_CLASSES
from patchheal.proposers.registry import create_proposer
from patchheal.report.model import StepReport
from patchheal.reproduce import reproduce
from patchheal.step import JobBudget, StepHealer, StepResult, first_line
from patchheal.workspace import JobWorkspace

if TYPE_CHECKING:
    from patchheal.loop import HealLoop

# How a step's end maps onto the job's status.
_JOB_STATUS = {
    "exhausted": "not_fixed",
    "stuck": "not_fixed",
    "manual_handoff": "manual_handoff",
    "cancelled": "cancelled",
    "taken_over": "taken_over",
}


class StepSequence:
    """Heals the job's steps from `first` on; `run()` returns the head when all are fixed."""

    def __init__(
        self,
        loop: HealLoop,
        store: AttemptStore,
        events: EventLog,
        metrics: Metrics,
        workspace: JobWorkspace,
        harness: Harness,
        controls: ControlReader,
    ) -> None:
        self.loop = loop
        self.spec = loop.spec
        self.paths = loop.paths
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
            loop.scrubber, metrics,
        )  # fmt: skip
        self.chain = [
            (config, create_proposer(config, job=spec, sleep=loop.options.sleep))
            for config in spec.proposer_chain
        ]
        self.budget = JobBudget(
            loop.started,
            spec.budget.job_wall_seconds,
            spec.budget.max_proposer_calls,
            spec.budget.max_model_tokens,
        )
        self.numbers = self._attempt_numbers()

    def run(self, first: int) -> str | None:
        """The commit with every step fixed, or None when the loop stopped (see loop._stop)."""
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
            if result.status == "fixed":
                self.start_commit = self._checkpoint(index, result)
                index += 1
            elif result.status == "hard_reset":
                self.events.emit(
                    "self_heal.escalated",
                    step_id=self.spec.steps[index - 1].name,
                    step_index=index,
                    data={"to": "hard_reset", "reason": result.reason},
                )
                self.loop.say(f"step {index}: hard reset ({result.reason})")
                self._hard_reset(index)
            elif result.status == "from_step":
                index = self._go_back(result.arg, index, result.reason)
            else:
                self._stop_step(index, result)
                return None
        return self.start_commit

    # -- one step ---------------------------------------------------------------

    def _heal_step(self, index: int) -> StepResult | None:
        """Reproduce step `index` and heal it; None when it is not patchable (stopped)."""
        step_spec = self.spec.steps[index - 1]
        loop, events = self.loop, self.events
        events.emit("step.started", step_id=step_spec.name, step_index=index)
        loop.say(f"step {index} ({step_spec.name}): reproducing `{step_spec.command}`")
        self.workspace.reset(self.verify_tree, to=self.start_commit)
        repro = reproduce(
            self.harness,
            step_spec,
            self.verify_tree,
            self.spec.budget,
            regression=self.spec.regression.command,
        )
        self.runner.harness_prepared = True
        failure, classification = repro.failure, repro.classification
        prior = loop.step_reports.get(index)
        report = StepReport(
            index=index,
            name=step_spec.name,
            command=step_spec.command,
            status="pending",
            failure=failure,
            classification=classification,
            ci_fingerprint=repro.ci_fingerprint,
            # A hard reset or a step healed again keeps the step's whole timeline.
            attempts=prior.attempts if prior is not None else (),
        )
        loop.step_reports[index] = report
        fclass = classification.failure_class.value if classification else None
        if failure is not None:
            events.emit(
                "failure.recorded",
                step_id=step_spec.name,
                step_index=index,
                fingerprint=failure.fingerprint,
                failure_class=fclass,
                data={
                    "failure": failure.model_dump(mode="json"),
                    "classification": classification.model_dump(mode="json")
                    if classification
                    else None,
                },
            )
            self.store.record_failure(
                failure, job_id=loop.job_id, step_index=index, classification=classification
            )
        if (
            repro.verdict.passed
            or failure is None
            or classification is None
            or classification.failure_class not in PATCHABLE_CLASSES
        ):
            why = (
                f"not patched: classified {fclass}"
                if classification
                else "the step passes on its starting point: nothing to heal"
            )
            loop.step_reports[index] = report.model_copy(
                update={"status": "not_patchable", "stop_reason": why}
            )
            loop.stop(
                "not_patchable", why, retryable=bool(classification and classification.retryable)
            )
            loop.say(f"step {index}: {why}")
            return None
        loop.say(
            f"step {index}: fingerprint {failure.fingerprint} ({fclass}): "
            f"{failure.error_type} {first_line(failure.message, 120)}"
        )
        events.emit(
            "self_heal.triggered",
            step_id=step_spec.name,
            step_index=index,
            fingerprint=failure.fingerprint,
            failure_class=fclass,
        )
        state = StepState(
            index,
            step_spec,
            self.start_commit,
            failure,
            repro.verdict,
            repro.regression_baseline,
            failure_class=classification.failure_class.value,
        )
        healer = StepHealer(
            self.runner,
            self.chain,
            classification,
            self.budget,
            self.controls,
            lambda: next(self.numbers),
            loop.say,
            hard_resets_done=self.hard_resets.get(index, 0),
        )
        result = healer.heal(state)
        self.hard_resets[index] = healer.hard_resets_done
        loop.step_reports[index] = report.model_copy(
            update={
                "attempts": report.attempts + tuple(result.attempts),
                "stop_reason": result.reason,
            }
        )
        return result

    def _checkpoint(self, index: int, result: StepResult) -> str:
        assert result.fix is not None
        fix = result.fix
        classification = self.loop.step_reports[index].classification
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
        self.loop.step_reports[index] = self.loop.step_reports[index].model_copy(
            update={"status": "fixed", "checkpoint_patch": str(self.paths.checkpoint_patch(index))}
        )
        self.loop.say(f"step {index}: fixed by {fix.label or fix.strategy}; checkpoint written")
        return commit

    def _stop_step(self, index: int, result: StepResult) -> None:
        step_spec = self.spec.steps[index - 1]
        report = self.loop.step_reports[index]
        if result.status in ("exhausted", "stuck"):
            self.events.emit(
                "self_heal.exhausted",
                step_id=step_spec.name,
                step_index=index,
                fingerprint=report.failure.fingerprint if report.failure else None,
                failure_class=report.classification.failure_class.value
                if report.classification
                else None,
                data={"reason": result.reason},
            )
        self.loop.step_reports[index] = report.model_copy(update={"status": "not_fixed"})
        self.loop.stop(
            _JOB_STATUS[result.status],
            f"step {index} ({step_spec.name}): {result.reason}",
            retryable=result.retryable,
        )

    def _stop_by(self, directive: Directive) -> None:
        cancel = directive.action == "cancel"
        self.loop.stop(
            "cancelled" if cancel else "taken_over",
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
        self.loop.say(f"going back to step {target} ({reason})")
        discard_checkpoints(self.paths, from_step=target)
        self._hard_reset(target)
        return target

    def _attempt_numbers(self) -> Iterator[int]:
        """Attempt numbers go on from the highest ever used by this job, in the store or in
        the event log: a run killed mid-attempt left its number (and logs) behind."""
        used = [a.attempt_number for a in self.store.attempts(job_id=self.loop.job_id)]
        if self.paths.events.exists():
            used += [
                e.attempt
                for e in EventLog.read(self.paths.events)
                if e.type == "step.attempt.started" and e.attempt is not None
            ]
        return iter(range(max(used, default=0) + 1, 1 << 30))


__all__ = ["StepSequence"]
