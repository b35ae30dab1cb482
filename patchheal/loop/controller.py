"""The controller of one job: intake, steps in order, resets, checkpoints, stop, report.

Walking the steps (checkpoints, hard resets, going back) is sequence.py;
healing one step's attempts is step.py; one attempt is attempt.py. This
module owns the job: the lock, the workspace, the harness, where the run
starts (`--resume`, `--from-step`), publishing the verified branch, the report.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from patchheal.config import JobSpec
from patchheal.errors import (
    EXIT_FIXED,
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_NOT_FIXED,
    BadInput,
    Interrupted,
)
from patchheal.harness.base import Harness
from patchheal.harness.engine import dockerapi, ownership
from patchheal.harness.engine.orphans import OWNER_FILE, write_owner
from patchheal.loop.checkpoints import discard_checkpoints, load_checkpoints
from patchheal.loop.controls import ControlReader
from patchheal.loop.heartbeat import LockHeartbeat
from patchheal.loop.recovery import recover
from patchheal.loop.sequence import StepSequence
from patchheal.loop.state import JobState
from patchheal.loop.summary import branch_name, build_report
from patchheal.memory.store import AttemptStore, LockRow
from patchheal.models import JobStatus
from patchheal.report.history import new_run_id, publish_reports
from patchheal.report.model import JobReport
from patchheal.runs import DEFAULT_REPORTS_DIR, RunPaths, default_db, default_state_dir
from patchheal.scrub.active import job_scrubber
from patchheal.scrub.scrubber import Scrubber
from patchheal.telemetry.events import EventLog
from patchheal.telemetry.metrics import DEFAULT_PREFIX, Metrics
from patchheal.workspace.worktrees import JobWorkspace, store_key, worktree_diff

LOCK_TTL_SECONDS = 600.0


@dataclass
class HealOptions:
    """Where state goes and how the run behaves; every path is passed in."""

    state_dir: Path = field(default_factory=default_state_dir)
    db: str = field(default_factory=default_db)
    reports_dir: Path = DEFAULT_REPORTS_DIR
    keep_worktrees: bool = False
    resume: bool = False
    from_step: int | None = None
    statsd_host: str | None = None
    statsd_port: int = 8125
    statsd_prefix: str = DEFAULT_PREFIX
    say: Callable[[str], None] = lambda _message: None
    sleep: Callable[[float], None] = time.sleep
    harness: Harness | None = None
    harness_reason: str = ""
    open_pr: bool = False
    """Run the job's pull-request command once every step is verified."""
    queue_attempt: int | None = None
    """The queue-level attempt when a `patchheal worker` runs the job (the report shows it)."""


@dataclass
class HealResult:
    report: JobReport
    report_paths: dict[str, Path]
    exit_code: int
    worktrees: list[Path] = field(default_factory=list)


class HealLoop:
    """Heals one job end to end. Use `run()`; it always writes a report."""

    def __init__(self, spec: JobSpec, spec_toml: str, options: HealOptions) -> None:
        self.spec = spec
        self.spec_toml = spec_toml
        self.options = options
        self.job_id = spec.job.id
        self.say = options.say
        self.scrubber = Scrubber.from_env(spec.job.env)
        self.paths = RunPaths(options.state_dir, self.job_id, self.scrubber)
        self.state = JobState(
            spec, harness_reason=options.harness_reason, queue_attempt=options.queue_attempt
        )
        self.state.run_id = new_run_id(self.state.started)
        self.keep = options.keep_worktrees
        self._reclaimed: list[tuple[LockRow, str]] = []

    def run(self) -> HealResult:
        with job_scrubber(self.scrubber):
            return self._run()

    def _run(self) -> HealResult:
        self._check_from_step()
        store = AttemptStore(self.options.db)
        failed: Exception | None = None
        try:
            store.acquire_lock(
                self.job_id,
                owner=f"{socket.gethostname()}:{os.getpid()}",
                ttl_seconds=LOCK_TTL_SECONDS,
                on_reclaim=lambda lock, reason: self._reclaimed.append((lock, reason)),
            )
            try:
                with (
                    _sigterm_interrupts(),
                    LockHeartbeat(self.options.db, self.job_id, LOCK_TTL_SECONDS),
                ):
                    worktrees = self._run_locked(store)
            except Exception as exc:  # reported below, then raised: the report is always written
                failed, worktrees = exc, []
            finally:
                store.release_lock(self.job_id)
            report = build_report(self.state)
            report_paths = publish_reports(
                report, self.options.reports_dir, self.state.run_id, scrub=self.scrubber.scrub
            )
            if self._wants_pull_request():
                self.state.pull_request = self._open_pull_request(report_paths["md"])
                _record_pull_request(store, self.job_id, self.state.pull_request)
                report = build_report(self.state)
                report_paths = publish_reports(
                    report, self.options.reports_dir, self.state.run_id, scrub=self.scrubber.scrub
                )
        finally:
            store.close()
        if failed is not None:
            raise failed
        if self.state.interrupted:
            interrupted = Interrupted(
                f"job {self.job_id} interrupted; state saved, report at "
                f"{report_paths['md']}; continue with --resume"
            )
            # The caller still owes a --json summary of what was done before the stop.
            interrupted.result = HealResult(report, report_paths, EXIT_INTERRUPTED, worktrees)
            raise interrupted
        exit_code = EXIT_FIXED if self.state.status is JobStatus.FIXED else EXIT_NOT_FIXED
        if self.state.infra_unavailable and exit_code == EXIT_NOT_FIXED:
            exit_code = EXIT_INFRA  # the report is written; the endpoint was not there
        return HealResult(report, report_paths, exit_code, worktrees)

    def _wants_pull_request(self) -> bool:
        state = self.state
        if not self.options.open_pr or state.status is not JobStatus.FIXED or state.branch is None:
            return False  # never for an unverified patch
        if not self.spec.job.pr_command:
            self.say("--open-pr: the job has no [job] pr_command; the branch stays local")
            return False
        return True

    def _open_pull_request(self, report: Path) -> str:
        from patchheal.loop.pullrequest import open_pull_request

        assert self.spec.job.pr_command is not None
        assert self.state.branch is not None
        result = open_pull_request(
            self.spec.job.pr_command,
            repo=Path(self.spec.job.repo),
            branch=self.state.branch,
            base=self.spec.job.base,
            job_id=self.job_id,
            report=report,
            scrubber=self.scrubber,
        )
        self.say(f"pull request: {result}")
        return result

    def _run_locked(self, store: AttemptStore) -> list[Path]:
        events = EventLog(self.paths.events, job_id=self.job_id, scrubber=self.scrubber)
        metrics = Metrics(
            self.options.statsd_host, self.options.statsd_port, prefix=self.options.statsd_prefix
        )
        # Keyed by store and job: a run of this job id against another store never shares it.
        workspace = JobWorkspace(
            Path(self.spec.job.repo), self.spec.job.base, self.job_id, store=store.url
        )
        harness: Harness | None = None
        started = False
        ownership.set_store(store_key(store.url))  # labels tell gc whose leftovers they are
        controls = ControlReader(
            store,
            events,
            self.job_id,
            sleep=self.options.sleep,
            heartbeat=lambda: store.refresh_lock(self.job_id, ttl_seconds=LOCK_TTL_SECONDS),
            on_message=self.say,
        )
        try:
            harness = self._open(workspace)
            self._start(store, events)
            started = True
            self._recover(store)
            self._heal_steps(store, events, metrics, workspace, harness, controls)
        except KeyboardInterrupt:
            self.state.stop(
                JobStatus.CANCELLED,
                "interrupted (Ctrl-C or SIGTERM); resume with --resume",
                retryable=True,
            )
            self.state.interrupted = True
        except Exception as exc:
            self.state.stop(JobStatus.ERROR, f"{type(exc).__name__}: {exc}", retryable=False)
            raise
        finally:
            if harness is not None:
                harness.close()
                _remove_leftovers(harness, store.url)
            metrics.close()
            if started:  # the job started: its end is recorded, whatever ended it
                self._record_end(store, events, controls)
            events.close()
            trees = self._leave(workspace)
        return trees

    def _open(self, workspace: JobWorkspace) -> Harness:
        """The job's private repository and worktree area, then its harness."""
        # gc tells a live run's workspace from a dead one's by this owner record. It is
        # written before open() creates anything (so a kill in between leaves no
        # ownerless workspace) and again after (open() rebuilds it for another base).
        write_owner(workspace.dir)
        workspace.open()
        write_owner(workspace.dir)
        self.state.base_commit = workspace.base_commit
        harness = self.options.harness
        if harness is None:
            from patchheal.harness.registry import create

            harness, self.state.harness_reason = create(
                self.spec, Path(self.spec.job.repo), say=self.say
            )
        self.state.harness_name = harness.name
        from patchheal.harness.registry import runtime_versions

        self.state.python, self.state.node = runtime_versions(harness)
        self.state.regression = self.spec.regression.steps(harness.regression)
        self.say(f"harness: {harness.name} ({self.state.harness_reason})")
        own = 1 if self.spec.regression.command else 0
        added = self.state.regression[own:]
        if added:
            self.say(f"regression steps the harness adds: {'; '.join(added)}")
        return harness

    def _start(self, store: AttemptStore, events: EventLog) -> None:
        """The job's start, in the event log and the store."""
        spec = self.spec
        events.emit(
            "job.started",
            data={
                "repo": spec.job.repo,
                "base": spec.job.base,
                "base_commit": self.state.base_commit,
                "spec_toml": self.spec_toml,
            },
        )
        for lock, reason in self._reclaimed:
            events.emit("lock.reclaimed", data={**_lock_data(lock), "reason": reason})
        store.ensure_job(
            self.job_id, repo=spec.job.repo, base=self.state.base_commit, spec_toml=self.spec_toml
        )
        store.set_job_status(self.job_id, JobStatus.RUNNING)

    def _recover(self, store: AttemptStore) -> None:
        attempts, failures = recover(self.paths.events, store, self.job_id)
        if attempts or failures:
            self.say(
                f"recovered {attempts} attempt(s) and {failures} failure(s) that a run which "
                "died had logged but not stored"
            )

    def _record_end(self, store: AttemptStore, events: EventLog, controls: ControlReader) -> None:
        state = self.state
        # A command this run never got to (e.g. a cancel queued during the attempt
        # that fixed the last step) must not stop the job's next run.
        controls.expire(f"the run ended first ({state.status})")
        events.emit("job.finished", data={"status": state.status, "reason": state.stop_reason})
        store.set_job_status(self.job_id, state.status, detail=state.stop_reason)

    def _leave(self, workspace: JobWorkspace) -> list[Path]:
        """The worktrees kept for a person, or none: everything else is removed."""
        trees = workspace.list_worktrees()
        workspace.close()  # its lookup processes end with the run, kept or not
        # Kept on request or for a person (takeover), and then no longer owned by a
        # process, so gc keeps it; otherwise nothing is left behind, even after an error.
        if self.keep or self.state.status is JobStatus.TAKEN_OVER:
            (workspace.dir / OWNER_FILE).unlink(missing_ok=True)
            return trees
        workspace.destroy()
        return []

    def _heal_steps(
        self,
        store: AttemptStore,
        events: EventLog,
        metrics: Metrics,
        workspace: JobWorkspace,
        harness: Harness,
        controls: ControlReader,
    ) -> None:
        first = self._first_step(events)
        sequence = StepSequence(
            self.state,
            store,
            events,
            metrics,
            workspace,
            harness,
            controls,
            paths=self.paths,
            scrubber=self.scrubber,
            say=self.say,
            sleep=self.options.sleep,
        )
        head = sequence.run(first)
        if head is not None:
            self._publish(workspace, sequence.verify_tree, head)

    def _check_from_step(self) -> None:
        """Bad --from-step is bad input: refused before anything is locked, logged or changed."""
        wanted = self.options.from_step
        if wanted is None:
            return
        if not 1 <= wanted <= len(self.spec.steps):
            raise BadInput(f"--from-step {wanted}: the job has {len(self.spec.steps)} step(s)")
        have = len(load_checkpoints(self.paths, before_step=wanted))
        if have < wanted - 1:
            raise BadInput(
                f"--from-step {wanted}: only {have} step checkpoint(s) exist under "
                f"{self.paths.steps_dir}; steps before {wanted} must be verified first"
            )

    def _first_step(self, events: EventLog) -> int:
        options = self.options
        if options.from_step is not None:
            discard_checkpoints(self.paths, from_step=options.from_step)
            events.emit(
                "resume.from_step", step_index=options.from_step, data={"how": "--from-step"}
            )
            return options.from_step
        if options.resume:
            done = len(load_checkpoints(self.paths))
            events.emit("resume.from_step", step_index=done + 1, data={"how": "--resume"})
            if done:
                self.say(f"resume: {done} step(s) already verified, continuing at step {done + 1}")
            return done + 1
        discard_checkpoints(self.paths, from_step=1)
        return 1

    def _publish(self, workspace: JobWorkspace, tree: Path, head: str) -> None:
        branch = self.spec.job.branch or branch_name(self.job_id)
        workspace.publish(head, branch)
        self.state.branch = branch
        # The verify tree is at `head` now; its diff against the base is the whole fix.
        workspace.reset(tree, to=head)
        self.state.final_diff = worktree_diff(tree, base=workspace.base_commit)
        self.state.stop(JobStatus.FIXED, f"every step verified; branch {branch}", retryable=False)


_URL = re.compile(r"https?://[^\s<>\"']+")


def _record_pull_request(store: AttemptStore, job_id: str, printed: str) -> None:
    """The URL the pull-request command printed, kept beside each verified patch so
    `patchheal outcome` can tie what real CI says to it."""
    found = _URL.search(printed)
    if found is None:
        return
    for patch in store.verified_patches(job_id):
        store.record_outcome(job_id, patch, ci_status="pending", pull_request=found.group(0))


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a CI job cancelled, a scheduler preempting) stops the run like Ctrl-C:
    state saved, report written, exit 130, resumable."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _lock_data(lock: LockRow) -> dict[str, object]:
    return {
        "owner": lock.owner,
        "pid": lock.pid,
        "host": lock.host,
        "created_at": lock.created_at,
        "expires_at": lock.expires_at,
    }


def _remove_leftovers(harness: Harness, store_url: str) -> None:
    """What killed runs of this store left: temp dirs, and containers when Docker was used."""
    from patchheal.harness.engine import leftovers

    client = None
    if harness.name.startswith(("docker", "compose")) and dockerapi.docker_reachable():
        client = dockerapi.engine()
    try:
        leftovers.after_run(store_key(store_url), client)
    finally:
        if client is not None:
            client.close()
