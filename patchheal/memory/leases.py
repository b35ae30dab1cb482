"""Proposal leases: one run at a time asks a proposer about a fingerprint.

Claims stop the same patch from being verified twice; they do nothing against
M jobs with one bug each asking their (paid) proposer at the same moment. A
lease on the fingerprint does: the first run takes it before its first
proposer call, the others wait for its verified fix (loop/lease.py).

A lease names its holder (job, pid, host, process start time) and lapses at
`expires_at`, which the holder's heartbeat keeps pushing forward. It is
lapsed, and anyone may take it over, once it expired, or at once when its
holder's pid is gone on this host (a SIGKILL needs no waiting for the
expiry). A lease held by the same job in another process is taken over at
once too: the job's lock says that run is gone. Every decision is made in one
write transaction (BEGIN IMMEDIATE on SQLite, the store's advisory lock on
PostgreSQL), so two runs never both get it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import delete
from sqlmodel import col

from patchheal.errors import BadInput
from patchheal.memory.db import StoreBase
from patchheal.memory.locks import this_host
from patchheal.memory.tables import LeaseRow
from patchheal.proc import pid_alive, process_start


@dataclass(frozen=True)
class LeaseGrant:
    """The answer to `take_lease`: granted or not, and who holds it now."""

    granted: bool
    holder: LeaseRow
    taken_over: str = ""
    """Why a lapsed lease of another run was taken over ('' when it was free or ours)."""


def describe_lease(lease: LeaseRow) -> str:
    return f"job {lease.job_id} ({lease.owner}, pid {lease.pid} on {lease.host})"


class LeaseMixin(StoreBase):
    """The proposal-lease half of the attempt store."""

    def lease_lapsed(self, lease: LeaseRow, *, now: float | None = None) -> str:
        """Why `lease` no longer binds anyone ('' while it is live)."""
        now = self._now() if now is None else now
        if lease.host == this_host() and not pid_alive(lease.pid, lease.pid_started):
            return f"its holder, pid {lease.pid}, is gone"
        if now >= lease.expires_at:
            return f"it expired {now - lease.expires_at:.0f} s ago with no heartbeat"
        return ""

    def take_lease(
        self, fingerprint: str, *, job_id: str, owner: str, ttl_seconds: float
    ) -> LeaseGrant:
        """Take (or renew) the proposal lease of `fingerprint` unless another live run holds it."""
        if not fingerprint:
            raise BadInput("a proposal lease needs a fingerprint")
        pid, host, now = os.getpid(), this_host(), self._now()
        with self._write() as session:
            held = session.get(LeaseRow, fingerprint)
            why = ""
            if held is not None and (held.pid, held.host) != (pid, host):
                why = self.lease_lapsed(held, now=now)
                if not why and held.job_id == job_id:
                    why = "the same job's earlier run is gone (this run holds the job's lock)"
                if not why:
                    return LeaseGrant(False, held)
                why = f"took over the lease of {describe_lease(held)}: {why}"
            if held is None or why:
                if held is not None:
                    session.delete(held)
                    session.flush()
                held = LeaseRow(
                    fingerprint=fingerprint,
                    job_id=job_id,
                    owner=owner,
                    pid=pid,
                    host=host,
                    pid_started=process_start(pid),
                    acquired_at=now,
                    expires_at=now + ttl_seconds,
                )
            else:  # ours already: renewed
                held.expires_at = now + ttl_seconds
            session.add(held)
            session.commit()
            return LeaseGrant(True, held, why)

    def renew_lease(self, fingerprint: str, *, ttl_seconds: float) -> bool:
        """Push this process's lease forward; False when it is no longer ours."""
        with self._write() as session:
            held = session.get(LeaseRow, fingerprint)
            if held is None or (held.pid, held.host) != (os.getpid(), this_host()):
                return False
            held.expires_at = self._now() + ttl_seconds
            session.add(held)
            session.commit()
            return True

    def release_lease(self, fingerprint: str) -> None:
        """Drop the lease if this process holds it; another run's lease is left alone."""
        with self._write() as session:
            session.execute(
                delete(LeaseRow).where(
                    col(LeaseRow.fingerprint) == fingerprint,
                    col(LeaseRow.pid) == os.getpid(),
                    col(LeaseRow.host) == this_host(),
                )
            )
            session.commit()

    def lease(self, fingerprint: str) -> LeaseRow | None:
        with self._read() as session:
            return session.get(LeaseRow, fingerprint)
