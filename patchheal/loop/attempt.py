"""One candidate taken through the gates and the harness, with its outcome.

Order matters and is cheapest-first: policy and secrets (no I/O), the repeat
check (one indexed lookup), then a pristine worktree, the patch, and the
harness. Only a candidate that passed every gate costs a harness run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchheal import proc
from patchheal.config import JobSpec, StepSpec
from patchheal.errors import HarnessError, NotADiff, PatchApplyError
from patchheal.gates.policy import check_candidate
from patchheal.gates.secrets import credentials_in
from patchheal.harness.base import Harness
from patchheal.loop import envcontrol
from patchheal.loop.verification import verify
from patchheal.memory.store import AttemptStore
from patchheal.models import AttemptRecord, Candidate, Failure, Outcome, TestTrace, Verdict
from patchheal.runs import RunPaths
from patchheal.scrub.scrubber import Scrubber
from patchheal.telemetry.events import EventLog
from patchheal.telemetry.metrics import Metrics
from patchheal.workspace import diffs
from patchheal.workspace.worktrees import JobWorkspace

LOG_EXCERPT_CHARS = 4000

# Why an attempt ended, on the axis kept apart from the failure's class.
ATTEMPT_CLASS: dict[Outcome, str] = {
    Outcome.FIXED: "recovered",
    Outcome.NO_EFFECT: "code_bug",
    Outcome.REGRESSION: "code_bug",
    Outcome.TIMEOUT: "transient_runtime",
    Outcome.HARNESS_ERROR: "transient_runtime",
    Outcome.REJECTED_REPEAT: "stuck_no_progress",
    Outcome.REJECTED_POLICY: "deterministic_policy",
    Outcome.APPLY_FAILED: "deterministic_contract",
    Outcome.REJECTED_ORACLE: "deterministic_policy",
    Outcome.REJECTED_TRIPWIRE: "deterministic_policy",
}

# Outcomes that ran in the harness and so spend the step's attempt budget.
VERIFIED_OUTCOMES = frozenset(
    {
        Outcome.FIXED,
        Outcome.NO_EFFECT,
        Outcome.REGRESSION,
        Outcome.TIMEOUT,
        Outcome.HARNESS_ERROR,
        Outcome.REJECTED_ORACLE,
        Outcome.REJECTED_TRIPWIRE,
    }
)


@dataclass
class StepState:
    """What the loop knows about the step being healed."""

    index: int
    spec: StepSpec
    start_commit: str
    failure: Failure
    baseline: Verdict
    regression_baseline: dict[str, Verdict]
    """Each regression step's verdict at reproduction, by command."""
    attempts: list[AttemptRecord] = field(default_factory=list)
    failure_class: str = "unknown"
    """The step's failure classification: a tag on every attempt's metrics."""
    traces: dict[str, TestTrace] = field(default_factory=dict)
    """What the failing tests executed in the reproduction run (evidence for localization)."""


@dataclass
class AttemptRunner:
    """Runs candidates for one job; shares its worktree, harness and store."""

    job: JobSpec
    workspace: JobWorkspace
    verify_tree: Path
    harness: Harness
    store: AttemptStore
    events: EventLog
    paths: RunPaths
    scrubber: Scrubber
    metrics: Metrics
    regression: tuple[str, ...] = ()
    """The job's regression steps (JobState.regression)."""
    harness_prepared: bool = False

    def run(
        self, candidate: Candidate, step: StepState, number: int, *, reuse: bool = False
    ) -> AttemptRecord:
        started = self._started(candidate, step, number, reuse=reuse)
        outcome, reason, log, hashes = self._gate_and_verify(candidate, step, reuse=reuse)
        return self._finish(candidate, step, number, started, outcome, reason, log, hashes)

    def record_without_candidate(
        self, candidate: Candidate, step: StepState, number: int, outcome: Outcome, reason: str
    ) -> AttemptRecord:
        """Record an attempt that produced no candidate (e.g. the proposer timed out)."""
        started = self._started(candidate, step, number, reuse=False)
        return self._finish(candidate, step, number, started, outcome, reason, "", ("", "", ()))

    def _started(self, candidate: Candidate, step: StepState, number: int, *, reuse: bool) -> float:
        """Emit `step.attempt.started` (before anything of the attempt happens); its time."""
        self.events.emit(
            "step.attempt.started",
            step_id=step.spec.name,
            step_index=step.index,
            attempt=number,
            fingerprint=step.failure.fingerprint,
            strategy=candidate.strategy,
            data={"proposer": candidate.proposer, "label": candidate.label, "reuse": reuse},
        )
        return time.time()

    def _finish(
        self,
        candidate: Candidate,
        step: StepState,
        number: int,
        started: float,
        outcome: Outcome,
        reason: str,
        log: str,
        hashes: tuple[str, str, tuple[str, ...]],
    ) -> AttemptRecord:
        record = AttemptRecord(
            job_id=self.job.job.id,
            step_index=step.index,
            attempt_number=number,
            fingerprint=step.failure.fingerprint,
            outcome=outcome,
            reason=reason,
            diff=candidate.diff,
            diff_hash=hashes[0],
            normalized_diff_hash=hashes[1],
            touched_files=hashes[2],
            strategy=candidate.strategy,
            rationale=candidate.rationale,
            proposer=candidate.proposer,
            label=candidate.label,
            log_excerpt=log[-LOG_EXCERPT_CHARS:],
            started_at=started,
            duration_seconds=time.time() - started,
            attempt_class=ATTEMPT_CLASS[outcome],
            approach=candidate.approach,
            memory_degraded=candidate.memory_degraded,
        )
        record = AttemptRecord.model_validate(self.scrubber.scrub_obj(record.model_dump()))
        self._write_attempt_dir(record, log)
        # The event goes first: a crash between the two never hides the attempt.
        kind = "step.attempt.finished" if outcome in VERIFIED_OUTCOMES else "step.attempt.failed"
        self.events.emit(
            kind,
            step_id=step.spec.name,
            step_index=step.index,
            attempt=number,
            fingerprint=record.fingerprint,
            diff_hash=record.diff_hash,
            strategy=record.strategy,
            data={"record": record.model_dump(mode="json")},
        )
        self.store.record_attempt(record)
        tags = {
            "failure_class": step.failure_class,
            "strategy": record.strategy,
            "outcome": outcome.value,
        }
        self.metrics.incr("self_heal.attempts_total", tags=tags)
        self.metrics.duration("step.duration_seconds", record.duration_seconds, tags=tags)
        if outcome is Outcome.TIMEOUT:
            kind_of_timeout = "idle" if "idle" in reason else "wall"
            self.metrics.incr(f"step.{kind_of_timeout}_timeout_total", tags=tags)
        return record

    def _gate_and_verify(
        self, candidate: Candidate, step: StepState, *, reuse: bool
    ) -> tuple[Outcome, str, str, tuple[str, str, tuple[str, ...]]]:
        diff = candidate.diff
        empty: tuple[str, str, tuple[str, ...]] = ("", "", ())
        if not diff.strip():
            why = candidate.rationale or "the proposer produced no change"
            return Outcome.APPLY_FAILED, f"empty candidate: {why}", "", empty
        try:
            hashes = (
                diffs.exact_hash(diff),
                diffs.normalized_hash(diff),
                diffs.touched_files(diff),
            )
        except NotADiff as exc:
            return Outcome.APPLY_FAILED, f"not a unified diff: {exc}", "", empty
        decision = check_candidate(diff, self.job.policy, original=self._reader(step.start_commit))
        if not decision.allowed:
            return (
                Outcome.REJECTED_POLICY,
                f"{decision.rule}: {'; '.join(decision.reasons)}",
                "",
                hashes,
            )
        credentials = credentials_in(diff, self.scrubber)
        if credentials:
            return Outcome.REJECTED_POLICY, f"secret: {'; '.join(credentials)}", "", hashes
        fingerprint = step.failure.fingerprint
        if not reuse and not self.store.claim(fingerprint, hashes[1], job_id=self.job.job.id):
            prior = self.store.prior_claim(fingerprint, hashes[1])
            seen = (
                f"attempt {prior.attempt_number} of job {prior.job_id} ({prior.outcome.value})"
                if prior is not None
                else "an attempt another run is still verifying"
            )
            return (
                Outcome.REJECTED_REPEAT,
                f"an equivalent patch was already tried for this fingerprint: {seen}",
                "",
                hashes,
            )
        outcome, reason, log = self._verify(diff, step, hashes[2])
        if outcome in (Outcome.TIMEOUT, Outcome.HARNESS_ERROR) and not reuse:
            # Transient: the patch itself was not judged, so it may be tried again.
            self.store.release(fingerprint, hashes[1])
        return outcome, reason, log, hashes

    def _reader(self, commit: str) -> Callable[[str], str | None]:
        """Reads a file as the step's start commit has it, for the policy's syntax checks."""

        def read(path: str) -> str | None:
            shown = proc.git("show", f"{commit}:{path}", cwd=self.verify_tree, check=False)
            return shown.output if shown.exit_code == 0 else None

        return read

    def _verify(
        self, diff: str, step: StepState, changed: tuple[str, ...] = ()
    ) -> tuple[Outcome, str, str]:
        self.workspace.reset(self.verify_tree, to=step.start_commit)
        try:
            method = self.workspace.apply(self.verify_tree, diff)
        except (PatchApplyError, NotADiff) as exc:
            return Outcome.APPLY_FAILED, f"does not apply: {exc}", ""
        try:
            if not self.harness_prepared:
                self.harness.prepare(self.verify_tree)
                self.harness_prepared = True
        except HarnessError as exc:
            return Outcome.HARNESS_ERROR, f"harness error: {exc}", ""
        outcome, reason, log = verify(
            self.harness,
            step.spec,
            self.verify_tree,
            self.job.budget,
            baseline=step.baseline,
            failure=step.failure,
            regression=self.regression,
            regression_baseline=step.regression_baseline,
            changed=changed,
        )
        outcome, reason = self._unless_posed(outcome, reason, step)
        return outcome, reason, f"(patch applied with {method})\n{log}"

    def _unless_posed(self, outcome: Outcome, reason: str, step: StepState) -> tuple[Outcome, str]:
        """An environment verdict only if the environment fails without the patch too: a
        candidate can print `command not found` as well (`envcontrol.py`)."""
        if not envcontrol.looks_environmental(outcome, reason):
            return outcome, reason
        return envcontrol.confirm(
            self.harness, self.workspace, self.verify_tree, start_commit=step.start_commit,
            commands=[step.spec.command], regression=self.regression,
            budget=self.job.budget, reason=reason,
        )  # fmt: skip

    def _write_attempt_dir(self, record: AttemptRecord, log: str) -> None:
        directory = self.paths.attempt_dir(record.attempt_number)
        self.paths.write_text(directory / "patch.diff", record.diff)
        self.paths.write_text(directory / "output.txt", log)
        self.paths.write_json(directory / "record.json", record.model_dump(mode="json"))
