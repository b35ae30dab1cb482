"""Healing one step: reuse, screening, proposals, budgets, stuck detection, resets."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchheal.errors import (
    ProposerError,
    StepTimeout,
    TokenBudgetReached,
    TransientProposerError,
)
from patchheal.evidence.build import build_context
from patchheal.evidence.history import breaking_change, recent_history
from patchheal.loop.approach import choose_approach, exhausted_bucket
from patchheal.loop.attempt import VERIFIED_OUTCOMES, AttemptRunner, StepState
from patchheal.loop.controls import ControlReader, Directive
from patchheal.loop.lease import ProposalLease
from patchheal.loop.recall import StepMemory
from patchheal.memory.hints import SimilarLimits
from patchheal.models import AttemptRecord, Candidate, Classification, Outcome, StepEnd
from patchheal.proposers.base import ProposalRequest, Proposer, StaticProposer
from patchheal.proposers.config import ProposerConfig
from patchheal.report.filters import cut_at_word

# Candidates that never reach the harness (rejected, not applicable) do not
# spend the attempt budget, but a proposer that only produces those is cut
# off after this many per allowed attempt.
CANDIDATES_PER_ATTEMPT = 4


def first_line(text: str, limit: int) -> str:
    """A progress line stays one line: the first line of `text`, at most `limit` characters,
    cut between words (a word cut in two reads as another word: `tests/test_r`)."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if len(first) > limit:
        return cut_at_word(first, limit)
    return first + (" …" if len(lines) > 1 else "")


@dataclass
class JobBudget:
    """Per-job counters shared by every step."""

    started: float
    wall_seconds: float | None
    max_calls: int | None
    max_tokens: int | None
    calls: int = 0
    tokens: int = 0

    def spent(self) -> str | None:
        if self.wall_seconds is not None and time.time() - self.started >= self.wall_seconds:
            return f"job wall time of {self.wall_seconds:g} s is spent"
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"proposer budget of {self.max_calls} calls is spent"
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"model token budget of {self.max_tokens} is spent ({self.tokens} used)"
        return None


@dataclass
class StepResult:
    """How healing a step ended."""

    status: StepEnd
    reason: str
    retryable: bool = False
    fix: AttemptRecord | None = None
    arg: int | None = None
    infra_unavailable: bool = False
    """The step stopped because infrastructure (the model endpoint) could not be reached."""
    attempts: list[AttemptRecord] = field(default_factory=list)


@dataclass
class _Tally:
    """A step's counters since its budget last started over (`retry-step` resets them)."""

    spent: int = 0
    """Candidates that reached the harness: what the attempt budget counts."""
    candidates: int = 0
    """Every candidate taken, rejected ones included."""
    no_progress: int = 0
    """Repeats in a row: a proposer going round in circles."""
    exhausted: set[int] = field(default_factory=set)
    """Positions in the proposer chain that have no candidates left."""
    pending: list[Candidate] = field(default_factory=list)
    """Candidates released by other runs' verdicts, to try before asking a proposer."""
    escalate: bool = False
    """A bucket was exhausted: the next proposal widens and tries an alternative."""


@dataclass
class StepHealer:
    """Runs the attempt loop of one step until it is fixed or must stop."""

    runner: AttemptRunner
    chain: list[tuple[ProposerConfig, Proposer]]
    classification: Classification
    budget: JobBudget
    controls: ControlReader
    next_number: Callable[[], int]
    say: Callable[[str], None]
    hard_resets_done: int = 0
    lease: ProposalLease | None = None
    """Turns on the fingerprint with other runs (None: this healer never waits for one)."""

    def heal(self, step: StepState) -> StepResult:
        try:
            return self._heal(step)
        finally:  # however the step ends (fixed, stopped, an exception): the lease goes back
            if self.lease is not None:
                self.lease.release()

    def _heal(self, step: StepState) -> StepResult:
        memory = StepMemory(
            self.runner.store, self._attempt_reuse, self.say, sleep=self.controls.sleep
        )
        memory.screen([proposer for _config, proposer in self.chain], step)
        tally = _Tally()
        while True:
            directive = self.controls.poll()
            if directive.action == "retry-step":
                self.say(f"retry-step by {directive.issued_by}: the step's budget starts over")
                tally = _Tally(pending=tally.pending)
                self.hard_resets_done = 0
            elif directive.action != "continue":
                return self._directive_result(directive, step)
            ended = self._budget_end(tally, step)
            if ended is None:
                reused = memory.reuse(step)
                if reused is not None:
                    return StepResult(
                        StepEnd.FIXED,
                        "a fix from memory verified",
                        fix=reused,
                        attempts=step.attempts,
                    )
                ended = self._next_attempt(tally, memory, step)
            if ended is not None:
                return ended

    def _budget_end(self, tally: _Tally, step: StepState) -> StepResult | None:
        """How the step ends when a budget is spent or it makes no progress; None to go on."""
        limits = self.runner.job.budget
        if (
            tally.spent >= limits.max_attempts
            or tally.candidates >= limits.max_attempts * CANDIDATES_PER_ATTEMPT
        ):
            return StepResult(
                StepEnd.EXHAUSTED,
                f"attempt budget spent ({tally.spent} verified, {tally.candidates} candidates)",
                retryable=True,
                attempts=step.attempts,
            )
        why = self.budget.spent()
        if why is not None:
            return StepResult(StepEnd.MANUAL_HANDOFF, why, attempts=step.attempts)
        if tally.no_progress < limits.no_progress_limit:
            return None
        self.runner.metrics.incr("step.no_progress_total", tags=self._tags())
        if self.hard_resets_done < limits.max_hard_resets:
            self.hard_resets_done += 1
            return StepResult(
                StepEnd.HARD_RESET,
                f"no progress in {tally.no_progress} attempts in a row",
                attempts=step.attempts,
            )
        return StepResult(
            StepEnd.STUCK,
            f"no progress in {tally.no_progress} attempts in a row and "
            f"{self.hard_resets_done} hard reset(s) done",
            retryable=True,
            attempts=step.attempts,
        )

    def _next_attempt(
        self, tally: _Tally, memory: StepMemory, step: StepState
    ) -> StepResult | None:
        """Get one candidate and take it through the attempt; a StepResult when the step ends."""
        picked = self._pick(
            len([a for a in step.attempts if a.outcome is not Outcome.FIXED]), tally.exhausted
        )
        if picked is None and not tally.pending and memory.in_flight:
            limit = self.runner.job.budget.step_timeout_seconds
            tally.pending = memory.wait_in_flight(step, limit)
            return None  # a fix judged meanwhile is reused at the top of the loop
        if picked is None and not tally.pending:
            return StepResult(
                StepEnd.MANUAL_HANDOFF,
                "every proposer has run out of candidates",
                attempts=step.attempts,
            )
        if tally.pending:
            return self._take(tally.pending.pop(0), tally, memory, step)
        assert picked is not None
        index, proposer = picked
        if not self._may_propose(memory, step):
            return None  # a fix another run verified meanwhile is reused at the top
        try:
            candidate = self._propose(proposer, step, escalate=tally.escalate)
        except StepTimeout as exc:
            self._record_proposer_timeout(step, proposer, str(exc))
            tally.spent += 1
            return None
        except TokenBudgetReached as exc:
            return StepResult(StepEnd.MANUAL_HANDOFF, str(exc), attempts=step.attempts)
        except TransientProposerError as exc:
            return StepResult(
                StepEnd.MANUAL_HANDOFF,
                f"proposer unavailable: {exc}",
                retryable=True,
                attempts=step.attempts,
                infra_unavailable=True,
            )
        except ProposerError as exc:
            return StepResult(
                StepEnd.MANUAL_HANDOFF, f"proposer failed: {exc}", attempts=step.attempts
            )
        if candidate is None:
            tally.exhausted.add(index)
            return None
        return self._take(candidate, tally, memory, step)

    def _may_propose(self, memory: StepMemory, step: StepState) -> bool:
        """Hold the fingerprint's proposal lease, or wait (bounded) for the run that does."""
        if self.lease is None:
            return True
        left = float("inf")
        if self.budget.wall_seconds is not None:
            left = self.budget.wall_seconds - (time.time() - self.budget.started)
        return self.lease.ready(
            step.failure.fingerprint,
            step_index=step.index,
            limit=left,
            fresh_fix=lambda: memory.fresh_fix(step),
            interrupted=self._interrupted,
        )

    def _interrupted(self) -> bool:
        """An operator command is waiting (it stays queued for the step loop to act on)."""
        directive = self.controls.poll()
        self.controls.hold(directive)
        return directive.action != "continue"

    def _take(
        self, candidate: Candidate, tally: _Tally, memory: StepMemory, step: StepState
    ) -> StepResult | None:
        tally.candidates += 1
        exhausted = exhausted_bucket(
            candidate,
            step.failure.fingerprint,
            self.runner.store.attempts(fingerprint=step.failure.fingerprint),
            self.runner.job.budget.bucket_limit,
        )
        if exhausted is not None:
            self._record_exhausted_bucket(candidate, step, exhausted)
            tally.escalate = True
            tally.no_progress += 1  # a proposer stuck in one bucket is going round in circles
            return None
        record = self._attempt(candidate, step)
        memory.note(record, candidate)
        if record.outcome in VERIFIED_OUTCOMES:
            tally.spent += 1
        if record.outcome is Outcome.FIXED:
            return StepResult(StepEnd.FIXED, record.reason, fix=record, attempts=step.attempts)
        if self._made_no_progress(record, step) and (
            record.normalized_diff_hash not in memory.in_flight  # waiting is not circling
        ):
            tally.no_progress += 1
        else:
            tally.no_progress = 0
        return None

    def _attempt(
        self, candidate: Candidate, step: StepState, *, reuse: bool = False
    ) -> AttemptRecord:
        record = self.runner.run(candidate, step, self.next_number(), reuse=reuse)
        step.attempts.append(record)
        self.say(
            f"attempt {record.attempt_number}: {record.label or record.strategy} "
            f"[{record.strategy}] -> {record.outcome.value}: {first_line(record.reason, 160)}"
        )
        if record.outcome is Outcome.FIXED:
            self.runner.metrics.incr("self_heal.recovered_total", tags=self._tags(record.strategy))
        return record

    def _attempt_reuse(self, candidate: Candidate, step: StepState, reuse: bool) -> AttemptRecord:
        return self._attempt(candidate, step, reuse=reuse)

    def _pick(self, failed: int, exhausted: set[int]) -> tuple[int, Proposer] | None:
        """The strongest proposer in the chain whose turn has come and that has candidates."""
        eligible = [
            (i, p)
            for i, (config, p) in enumerate(self.chain)
            if config.after_failures <= failed and i not in exhausted
        ]
        if not eligible:
            return None
        return eligible[-1]

    def _propose(
        self, proposer: Proposer, step: StepState, *, escalate: bool = False
    ) -> Candidate | None:
        runner = self.runner
        store = runner.store
        prior = store.attempts(fingerprint=step.failure.fingerprint)
        similar = store.similar(
            step.failure, self._memory_limits(), exclude_fingerprint=step.failure.fingerprint
        )
        if similar.degraded:  # advisory memory: the loop goes on with what was found
            self.say(f"memory search degraded: {similar.degrade_reason}")
        failed = [a for a in step.attempts if a.outcome is not Outcome.FIXED]
        approach = choose_approach(
            self.classification.failure_class, failed, bucket_exhausted=escalate
        )
        propose_tree = runner.workspace.worktree("propose", at=step.start_commit)
        user_repo, base = Path(runner.job.job.repo), runner.workspace.base_commit
        change = breaking_change(
            propose_tree, runner.job.job.last_green, user_repo=user_repo, base_commit=base
        )
        context = build_context(
            job=runner.job,
            step_index=step.index,
            failure=step.failure,
            classification=self.classification,
            worktree=propose_tree,
            prior=prior,
            hints=similar.fixes,
            failed_elsewhere=similar.failed,
            memory_degraded=similar.degrade_reason,
            breaking_diff=change.diff,
            history=recent_history(
                propose_tree,
                self._implicated(step, change.changed),
                user_repo=user_repo,
                base_commit=base,
            ),
            widen=len(failed) >= 3 or escalate,
            approach=approach,
            code_budget_tokens=self._context_tokens(),
            traces=step.traces,
        )
        self.budget.calls += 1
        allowance = (
            None if self.budget.max_tokens is None else self.budget.max_tokens - self.budget.tokens
        )
        candidate = proposer.propose(
            ProposalRequest(
                context=context,
                worktree=propose_tree,
                attempt_number=len(step.attempts) + 1,
                token_allowance=allowance,
            )
        )
        if candidate is None:
            return None
        self.budget.tokens += candidate.tokens_used
        return _stamped(candidate, proposer, approach, similar.degrade_reason)

    def _memory_limits(self) -> SimilarLimits:
        memory = self.runner.job.memory
        return SimilarLimits(
            fixes=memory.similar_fixes,
            failed=memory.similar_failed,
            threshold=memory.similar_threshold,
            scan=memory.similar_scan,
            time_budget_seconds=memory.similar_time_budget_seconds,
        )

    @staticmethod
    def _implicated(step: StepState, changed: dict[str, list[int]]) -> list[str]:
        """Files whose history is worth showing: the failing tests', the frames', the changed."""
        tests = [t.partition("::")[0] for t in step.failure.failing_tests]
        frames = [f.file for f in step.failure.project_frames if not f.file.startswith("/")]
        return list(dict.fromkeys([*frames, *tests, *changed]))[:20]

    def _context_tokens(self) -> int:
        """The largest context budget among the chain's proposers (8000 when none says)."""
        budgets = [getattr(config, "context_tokens", 0) for config, _ in self.chain]
        return max([b for b in budgets if isinstance(b, int) and b > 0] or [8000])

    def _record_exhausted_bucket(self, candidate: Candidate, step: StepState, why: str) -> None:
        record = self.runner.record_without_candidate(
            candidate, step, self.next_number(), Outcome.REJECTED_REPEAT, why
        )
        step.attempts.append(record)
        self.say(f"attempt {record.attempt_number}: {why}")

    def _record_proposer_timeout(
        self, step: StepState, proposer: Proposer, why: str
    ) -> AttemptRecord:
        candidate = Candidate(diff="", strategy="timeout", rationale=why, proposer=proposer.name)
        record = self.runner.record_without_candidate(
            candidate, step, self.next_number(), Outcome.TIMEOUT, f"proposer {why}"
        )
        step.attempts.append(record)
        self.say(f"attempt {record.attempt_number}: proposer timed out: {why}")
        return record

    @staticmethod
    def _made_no_progress(record: AttemptRecord, step: StepState) -> bool:
        """The same fingerprint with the same (normalized) diff again: a proposer going round
        in circles. A new patch with no effect is not stuck, it is a failed idea."""
        del step
        return record.outcome is Outcome.REJECTED_REPEAT

    def _directive_result(self, directive: Directive, step: StepState) -> StepResult:
        status = {
            "cancel": StepEnd.CANCELLED,
            "takeover": StepEnd.TAKEN_OVER,
            "hard-reset-step": StepEnd.HARD_RESET,
            "resume-from-step": StepEnd.FROM_STEP,
        }[directive.action]
        return StepResult(
            status,
            f"{directive.action} by {directive.issued_by}",
            retryable=directive.action == "cancel",
            arg=directive.arg,
            attempts=step.attempts,
        )

    def _tags(self, strategy: str = "") -> dict[str, str]:
        tags = {"failure_class": self.classification.failure_class.value}
        if strategy:
            tags["strategy"] = strategy
        return tags


def _stamped(candidate: Candidate, proposer: Proposer, approach: str, degraded: str) -> Candidate:
    """The candidate with the approach the loop asked for and the memory search's state.
    A fixed list of patches never reads the approach: recording one would label a patch
    file (even a test-deleting one) with advice it was never given."""
    asked = "" if isinstance(proposer, StaticProposer) else approach
    return candidate.model_copy(update={"approach": asked, "memory_degraded": degraded})
