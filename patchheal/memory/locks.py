"""Job locks: one run per job at a time, stale locks reclaimed with an audit record.

A lock records its holder's pid, host and process start time. On the lock's
own host the holder's liveness is checked directly (pid present, not a
zombie, same start time, so a recycled pid does not count); a lock from
another host can only be judged by its expiry, so it is reclaimed only once
it has expired beyond the grace period. A live lock goes only with `force`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Literal

from sqlalchemy import delete, select
from sqlmodel import col

from patchheal.errors import LockHeld
from patchheal.memory.db import StoreBase
from patchheal.memory.tables import ClaimRow, LockAuditRow, LockRow
from patchheal.proc import pid_alive, process_start

LockState = Literal["live", "stale", "orphaned"]
OnReclaim = Callable[[LockRow, str], None]


def this_host() -> str:
    return socket.gethostname()


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def describe(lock: LockRow) -> str:
    return (
        f"{lock.owner} (pid {lock.pid} on {lock.host}), since {_when(lock.created_at)},"
        f" expires {_when(lock.expires_at)}"
    )


class LockMixin(StoreBase):
    """The lock half of the attempt store."""

    def lock_state(
        self, lock: LockRow, *, grace_seconds: float = 60, now: float | None = None
    ) -> tuple[LockState, str]:
        """Whether a lock's holder still runs, and the evidence for it."""
        now = self._now() if now is None else now
        overdue = now - lock.expires_at
        if lock.host == this_host():
            if pid_alive(lock.pid, lock.pid_started):
                return "live", f"pid {lock.pid} is running on this host"
            if overdue > grace_seconds:
                return "stale", f"expired {overdue:.0f} s ago and pid {lock.pid} is gone"
            # The holder provably died (a crash, a SIGKILL): waiting for the
            # expiry would only keep `--resume` from running.
            return "orphaned", f"pid {lock.pid} is gone (the lock had not expired yet)"
        if overdue > grace_seconds:
            return "stale", (
                f"expired {overdue:.0f} s ago, beyond the {grace_seconds:g} s grace period,"
                f" on host {lock.host}"
            )
        return "live", f"held on host {lock.host}, whose pids cannot be checked from here"

    def acquire_lock(
        self,
        job_id: str,
        *,
        owner: str,
        ttl_seconds: float = 600,
        grace_seconds: float = 60,
        on_reclaim: OnReclaim | None = None,
    ) -> LockRow:
        """Take the job's lock, reclaiming it from a holder that is gone.

        `on_reclaim(old_lock, reason)` runs before the reclaim commits, so the
        caller can log the event first. A run that died mid-verification left
        claims with no attempt; they are released here, since nobody else can
        be running this job now.
        """
        pid, host, now = os.getpid(), this_host(), self._now()
        with self._write() as session:
            held = session.get(LockRow, job_id)
            if held is not None and (held.pid, held.host) == (pid, host):
                held.expires_at = now + ttl_seconds
                session.add(held)
                session.commit()
                return held
            if held is not None:
                state, reason = self.lock_state(held, grace_seconds=grace_seconds, now=now)
                if state == "live":
                    raise LockHeld(
                        f"job {job_id} is locked by {describe(held)}: {reason}."
                        " If that run is gone, `patchheal locks --apply` reclaims the lock"
                        " (`--apply --force` for a live one)"
                    )
                if on_reclaim is not None:
                    on_reclaim(held, reason)
                session.add(_audit(held, "reclaimed", reason, by_owner=owner))
                session.delete(held)
                session.flush()
            lock = LockRow(
                job_id=job_id,
                owner=owner,
                pid=pid,
                host=host,
                pid_started=process_start(pid),
                created_at=now,
                expires_at=now + ttl_seconds,
            )
            session.add(lock)
            session.execute(
                delete(ClaimRow).where(
                    col(ClaimRow.job_id) == job_id,
                    col(ClaimRow.attempt_id).is_(None),
                )
            )
            session.commit()
            return lock

    def refresh_lock(self, job_id: str, *, ttl_seconds: float = 600) -> None:
        """Push the expiry forward; LockHeld if this process no longer holds the lock."""
        pid, host = os.getpid(), this_host()
        with self._write() as session:
            held = session.get(LockRow, job_id)
            if held is None or (held.pid, held.host) != (pid, host):
                now_held = f"it is now held by {describe(held)}" if held else "nobody holds it"
                raise LockHeld(f"this run lost the lock of job {job_id}: {now_held}")
            held.expires_at = self._now() + ttl_seconds
            session.add(held)
            session.commit()

    def release_lock(self, job_id: str) -> None:
        """Drop the lock if this process holds it; someone else's lock is left alone."""
        with self._write() as session:
            session.execute(
                delete(LockRow).where(
                    col(LockRow.job_id) == job_id,
                    col(LockRow.pid) == os.getpid(),
                    col(LockRow.host) == this_host(),
                )
            )
            session.commit()

    def list_locks(self) -> list[LockRow]:
        with self._read() as session:
            return list(session.execute(select(LockRow).order_by(col(LockRow.job_id))).scalars())

    def lock_audit(self, job_id: str | None = None) -> list[LockAuditRow]:
        query = select(LockAuditRow).order_by(col(LockAuditRow.id))
        if job_id is not None:
            query = query.where(col(LockAuditRow.job_id) == job_id)
        with self._read() as session:
            return list(session.execute(query).scalars())

    def reclaim_stale(
        self, *, apply: bool, force: bool = False, grace_seconds: float = 60
    ) -> list[tuple[LockRow, str]]:
        """Locks whose holder is gone (and live ones too with `force`), with the reason.

        A dry run unless `apply`; each lock is judged again inside the
        transaction that removes it, since its holder may have refreshed it.
        """
        chosen: list[tuple[LockRow, str]] = []
        for lock in self.list_locks():
            state, reason = self.lock_state(lock, grace_seconds=grace_seconds)
            if state == "live" and not force:
                continue
            if not apply:
                chosen.append((lock, _verdict(state, reason)))
                continue
            with self._write() as session:
                current = session.get(LockRow, lock.job_id)
                if current is None:
                    continue
                state, reason = self.lock_state(current, grace_seconds=grace_seconds)
                if state == "live" and not force:
                    continue
                action = "forced" if state == "live" else "reclaimed"
                session.add(_audit(current, action, _verdict(state, reason)))
                session.delete(current)
                session.commit()
                chosen.append((current, _verdict(state, reason)))
        return chosen


def _verdict(state: LockState, reason: str) -> str:
    return f"{state}: {reason}" + (" (forced)" if state == "live" else "")


def _audit(lock: LockRow, action: str, reason: str, *, by_owner: str = "") -> LockAuditRow:
    return LockAuditRow(
        job_id=lock.job_id,
        action=action,
        reason=reason,
        owner=lock.owner,
        pid=lock.pid,
        host=lock.host,
        created_at=lock.created_at,
        expires_at=lock.expires_at,
        by_owner=by_owner or f"uid {os.getuid()}",
        by_pid=os.getpid(),
        by_host=this_host(),
        at=time.time(),
    )
