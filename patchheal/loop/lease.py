"""Taking turns on a fingerprint: a step asks its proposer only while it holds the lease.

Runs that share a store and meet the same failure (M jobs with one bug, on
several workers) would each ask their proposer before any of them had a
verified fix to reuse. Before its first proposer call for a fingerprint, a
step takes the proposal lease of that fingerprint (memory/leases.py) and
keeps it, renewed by a heartbeat thread, until the step ends, however it ends.

A step that finds the lease held by another live run waits for it, bounded by
`[memory] lease_wait_seconds` (and the job's wall time), saying so every
PROGRESS_SECONDS. The wait ends when:

* that run recorded a verified fix for the fingerprint: the step reuses it
  (`StepMemory.reuse`) and asks nobody;
* the lease came free (the holder's step ended unfixed, or it lapsed: the
  holder died or stopped beating): the step takes it and proposes;
* an operator command arrived (cancel, takeover, …): the step acts on it;
* the bound is reached: the step proposes without the lease (and does not
  wait again for this fingerprint), so a stuck holder never stalls a job.

A waiting step holds no lease, so waits never form a cycle; a lone job takes
a free lease in one write transaction and never waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from patchheal.loop.heartbeat import LeaseHeartbeat
from patchheal.memory.leases import LeaseGrant, describe_lease
from patchheal.memory.store import AttemptStore
from patchheal.telemetry.events import EventLog

LEASE_POLL_SECONDS = 0.5
PROGRESS_SECONDS = 10.0


@dataclass
class ProposalLease:
    """The proposal leases of one run: at most one held at a time (its current step's)."""

    store: AttemptStore
    events: EventLog
    job_id: str
    owner: str
    ttl_seconds: float
    wait_seconds: float
    say: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    held: str | None = None
    waited_out: set[str] = field(default_factory=set)
    """Fingerprints whose wait hit its bound: this run proposes for them without waiting."""
    _beat: LeaseHeartbeat | None = None

    def ready(
        self,
        fingerprint: str,
        *,
        step_index: int,
        limit: float,
        fresh_fix: Callable[[], bool],
        interrupted: Callable[[], bool],
    ) -> bool:
        """True: ask the proposer now. False: look again first (a fix to reuse, a command)."""
        if self.held == fingerprint or fingerprint in self.waited_out:
            return True
        self.release()  # a lease of an earlier fingerprint is not kept across steps
        grant = self._take(fingerprint, step_index)
        if grant.granted:
            # The last holder may have verified a fix and let go between this run's look at
            # memory and its take (seen on two Celery workers): look once more, else two
            # runs ask a proposer for the same fingerprint.
            return not fresh_fix()
        bound = max(0.0, min(self.wait_seconds, limit))
        return self._wait(fingerprint, step_index, grant, bound, fresh_fix, interrupted)

    def release(self) -> None:
        """Give the held lease back (every end of a step comes here)."""
        if self.held is None:
            return
        fingerprint, self.held = self.held, None
        if self._beat is not None:
            self._beat.stop()
            self._beat = None
        self.store.release_lease(fingerprint)

    def _take(self, fingerprint: str, step_index: int) -> LeaseGrant:
        grant = self.store.take_lease(
            fingerprint, job_id=self.job_id, owner=self.owner, ttl_seconds=self.ttl_seconds
        )
        if not grant.granted:
            return grant
        self.held = fingerprint
        self._beat = LeaseHeartbeat(self.store.url, fingerprint, self.ttl_seconds)
        self._beat.start()
        self.events.emit(
            "lease.acquired",
            step_index=step_index,
            fingerprint=fingerprint,
            data={"taken_over": grant.taken_over, "ttl_seconds": self.ttl_seconds},
        )
        if grant.taken_over:
            self.say(f"step {step_index}: {grant.taken_over}")
        return grant

    def _wait(
        self,
        fingerprint: str,
        step_index: int,
        grant: LeaseGrant,
        bound: float,
        fresh_fix: Callable[[], bool],
        interrupted: Callable[[], bool],
    ) -> bool:
        holder = describe_lease(grant.holder)
        self.say(
            f"step {step_index}: {holder} is asking its proposer about fingerprint "
            f"{fingerprint}; waiting up to {bound:g} s for its fix"
        )
        self.events.emit(
            "lease.waiting",
            step_index=step_index,
            fingerprint=fingerprint,
            data={"holder": holder, "wait_seconds": bound},
        )
        started = self.clock()
        noted = started
        while True:
            ended, go_on = self._wait_ended(fingerprint, step_index, fresh_fix, interrupted)
            waited = self.clock() - started
            if not ended and waited >= bound:
                self.waited_out.add(fingerprint)
                self.say(
                    f"step {step_index}: waited {waited:.0f} s for {holder}; "
                    "asking this job's proposer without the lease"
                )
                ended, go_on = "bound reached", True
            if ended:
                self.events.emit(
                    "lease.waited",
                    step_index=step_index,
                    fingerprint=fingerprint,
                    data={"holder": holder, "seconds": round(waited, 3), "ended": ended},
                )
                return go_on
            if self.clock() - noted >= PROGRESS_SECONDS:
                noted = self.clock()
                self.say(f"step {step_index}: still waiting for {holder} ({waited:.0f} s)")
            self.sleep(min(LEASE_POLL_SECONDS, max(bound - waited, 0.01)))

    def _wait_ended(
        self,
        fingerprint: str,
        step_index: int,
        fresh_fix: Callable[[], bool],
        interrupted: Callable[[], bool],
    ) -> tuple[str, bool]:
        """Why the wait is over and whether to propose now; ('', False) while it goes on."""
        if fresh_fix():
            self.say(f"step {step_index}: a fix verified for this fingerprint meanwhile")
            return "fix verified", False
        if interrupted():
            return "operator command", False
        if self._take(fingerprint, step_index).granted:
            # The holder may have recorded its verified fix and let go between the look
            # above and this take (a loaded machine widens that window): look once more,
            # else this run asks its proposer for a fingerprint that is already fixed.
            if fresh_fix():
                self.say(f"step {step_index}: a fix verified for this fingerprint meanwhile")
                return "fix verified", False
            return "lease acquired", True
        return "", False
