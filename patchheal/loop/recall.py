"""Memory at work inside one step: screen, reuse first, and wait for patches in flight.

* A proposer with a fixed list (`StaticProposer`) is screened before anything
  runs: candidates already tried for this fingerprint are recorded as
  `rejected_repeat` and never proposed; ones the policy refused before are
  gated (and recorded) again, so a second run shows they were offered again.
* Fixes that verified for this fingerprint (in any job, any run, any worker)
  are tried before a proposer is asked, and again before every later
  proposal, so a fix another worker verifies meanwhile is picked up.
* A candidate rejected because another run holds its claim and is still
  verifying it is kept: before the step gives up, it waits (bounded) for that
  verification; a fix is then reused, and a released claim is tried again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from patchheal.errors import NotADiff
from patchheal.loop.attempt import StepState
from patchheal.memory.store import AttemptStore
from patchheal.models import AttemptRecord, Candidate, Outcome
from patchheal.proposers.base import Proposer, StaticProposer
from patchheal.workspace import diffs

Attempt = Callable[[Candidate, StepState, bool], AttemptRecord]
IN_FLIGHT_POLL_SECONDS = 1.0


@dataclass
class StepMemory:
    """What memory does for one step; `attempt` runs a candidate through the gates."""

    store: AttemptStore
    attempt: Attempt
    say: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep
    reused: set[str] = field(default_factory=set)
    in_flight: dict[str, Candidate] = field(default_factory=dict)

    def screen(self, proposers: Sequence[Proposer], step: StepState) -> None:
        fp = step.failure.fingerprint
        known = {a.normalized_diff_hash for a in self.store.verified_fixes(fp, limit=50)}
        # Refused by policy before: never claimed, so not a repeat, yet offered again. It
        # goes through the gates again now (recorded, never run), or reuse-first would
        # fix the step and the refusal would vanish from the log and the report.
        refused = {
            a.normalized_diff_hash
            for a in self.store.attempts(fingerprint=fp)
            if a.outcome is Outcome.REJECTED_POLICY
        }
        for proposer in proposers:
            if not isinstance(proposer, StaticProposer):
                continue
            dropped: set[str] = set()
            for candidate in proposer.peek_all():
                try:
                    normalized = diffs.normalized_hash(candidate.diff)
                except NotADiff:
                    continue
                if normalized in known:
                    continue
                if normalized not in refused and self.store.prior_claim(fp, normalized) is None:
                    continue
                self.attempt(candidate, step, False)  # the claim check rejects it, unrun
                dropped.add(candidate.label)
            proposer.drop(dropped)

    def reuse(self, step: StepState) -> AttemptRecord | None:
        """Try each verified fix for this fingerprint not tried in this step yet."""
        fp = step.failure.fingerprint
        # A fix that real CI rejected (`patchheal outcome`) is not reused first: the
        # proposers go ahead, and its hint tells them it failed.
        failed_in_ci = self.store.failed_in_ci(fp)
        for known in self.store.verified_fixes(fp, limit=3):
            if known.normalized_diff_hash in self.reused:
                continue
            self.reused.add(known.normalized_diff_hash)
            ci = failed_in_ci.get(known.normalized_diff_hash)
            if ci:
                self.say(
                    f"memory: not reusing the fix of job {known.job_id} (attempt "
                    f"{known.attempt_number}): real CI judged it {ci}"
                )
                continue
            self.say(
                f"memory: trying the fix that verified for this fingerprint before "
                f"(job {known.job_id}, attempt {known.attempt_number}) first"
            )
            candidate = Candidate(
                diff=known.diff,
                strategy=known.strategy,
                rationale=(
                    f"reused: the fix that verified for this failure in job {known.job_id} "
                    f"(attempt {known.attempt_number})"
                    + (f": {known.rationale}" if known.rationale.strip() else "")
                ),
                proposer="memory",
                label=known.label or "known fix",
            )
            record = self.attempt(candidate, step, True)
            if record.outcome is Outcome.FIXED:
                return record
        return None

    def fresh_fix(self, step: StepState) -> bool:
        """Whether a fix verified for this fingerprint that this step has not tried yet."""
        fp = step.failure.fingerprint
        failed_in_ci = self.store.failed_in_ci(fp)
        return any(
            known.normalized_diff_hash not in self.reused
            and known.normalized_diff_hash not in failed_in_ci
            for known in self.store.verified_fixes(fp, limit=3)
        )

    def note(self, record: AttemptRecord, candidate: Candidate) -> None:
        """Remember a candidate whose claim another run holds and has not judged yet."""
        if record.outcome is not Outcome.REJECTED_REPEAT or not record.normalized_diff_hash:
            return
        if self.store.prior_claim(record.fingerprint, record.normalized_diff_hash) is None:
            self.in_flight[record.normalized_diff_hash] = candidate

    def wait_in_flight(self, step: StepState, timeout: float) -> list[Candidate]:
        """Wait until other runs judge the claims we were refused; return those released."""
        if not self.in_flight:
            return []
        self.say(
            f"waiting up to {timeout:g} s for {len(self.in_flight)} patch(es) another "
            "run is verifying for this fingerprint"
        )
        fp = step.failure.fingerprint
        deadline = time.monotonic() + timeout
        released: list[Candidate] = []
        while self.in_flight and time.monotonic() < deadline:
            for normalized, candidate in list(self.in_flight.items()):
                if self.store.prior_claim(fp, normalized) is not None:
                    del self.in_flight[normalized]  # judged: a fix is reused next
                elif not self.store.is_claimed(fp, normalized):
                    # Released after a transient outcome: we may try it ourselves.
                    del self.in_flight[normalized]
                    released.append(candidate)
            if self.in_flight:
                self.sleep(IN_FLIGHT_POLL_SECONDS)
        return released
