"""The controller of one job: intake, steps in order, resets, checkpoints, stop, report.

Healing one step's attempts is step.py; one attempt is attempt.py; this module
owns the job: the lock, the workspace, the harness, the step order, hard
resets and `--from-step` rebuilds, publishing the verified branch, the report.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchheal.attempt import AttemptRunner, StepState
from patchheal.checkpoints import discard_checkpoints, load_checkpoints, replay, write_checkpoint
from patchheal.config import JobSpec
from patchheal.controls import ControlReader
from patchheal.errors import EXIT_FIXED, EXIT_NOT_FIXED, Interrupted
from patchheal.events import EventLog
from patchheal.harness.base import Harness
from patchheal.memory.store import AttemptStore
from patchheal.metrics import Metrics
from patchheal.models import PATCHABLE_CLASSES
from patchheal.proposers.registry import create_proposer
from patchheal.report.model import JobReport, StepReport
from patchheal.reproduce import reproduce
from patchheal.runs import RunPaths
from patchheal.scrub import Scrubber
from patchheal.step import JobBudget, StepHealer, StepResult
from patchheal.summary import branch_name, build_report
from patchheal.workspace import JobWorkspace, worktree_diff

LOCK_TTL_SECONDS = 600.0

# How a step's end maps onto the job's status.
_JOB_STATUS = {
    "exhausted": "not_fixed",
    "stuck": "not_fixed",
    "manual_handoff": "manual_handoff",
    "cancelled": "cancelled",
    "taken_over": "taken_over",
}


@dataclass
class HealOptions:
    """Where state goes and how the run behaves; every path is passed in."""

    state_dir: Path = Path("var")
    db: str = "var/memory/attempts.sqlite3"
    reports_dir: Path = Path("reports")
    keep_worktrees: bool = False
    resume: bool = False
    from_step: int | None = None
    statsd_host: str | None = None
    statsd_port: int = 8125
    say: Callable[[str], None] = lambda _message: None
    sleep: Callable[[float], None] = time.sleep
    harness: Harness | None = None
    harness_reason: str = ""


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
        self.started = time.time()
        self.step_reports: dict[int, StepReport] = {}
        self.status = "not_fixed"
        self.stop_reason = ""
        self.retryable = False
        self.branch: str | None = None
        self.final_diff = ""
        self.harness_name = "local"
        self.harness_reason = options.harness_reason
        self.base_commit = ""
        self.keep = options.keep_worktrees
        self.interrupted = False

    def run(self) -> HealResult:
        from patchheal.report.render import render_reports

        store = AttemptStore(self.options.db)
        try:
            store.acquire_lock(
                self.job_id,
                owner=f"{socket.gethostname()}:{os.getpid()}",
                ttl_seconds=LOCK_TTL_SECONDS,
            )
            try:
                worktrees = self._run_locked(store)
            finally:
                store.release_lock(self.job_id)
            report = build_report(self, store)
            report_paths = render_reports(report, self.options.reports_dir / self.job_id)
        finally:
            store.close()
        if self.interrupted:
            raise Interrupted(
                f"job {self.job_id} interrupted; state saved, report at "
                f"{report_paths['md']}; continue with --resume"
            )
        exit_code = EXIT_FIXED if self.status == "fixed" else EXIT_NOT_FIXED
        return HealResult(report, report_paths, exit_code, worktrees)

    def _run_locked(self, store: AttemptStore) -> list[Path]:
        spec = self.spec
        events = EventLog(self.paths.events, job_id=self.job_id, scrubber=self.scrubber)
        metrics = Metrics(self.options.statsd_host, self.options.statsd_port)
        workspace = JobWorkspace(Path(spec.job.repo), spec.job.base, self.job_id)
        workspace.open()
        self.base_commit = workspace.base_commit
        harness = self.options.harness
        if harness is None:
            from patchheal.harness.registry import create

            harness, self.harness_reason = create(spec, Path(spec.job.repo))
        self.harness_name = harness.name
        self.say(f"harness: {harness.name} ({self.harness_reason})")
        events.emit(
            "job.started",
            data={
                "repo": spec.job.repo,
                "base": spec.job.base,
                "base_commit": self.base_commit,
                "spec_toml": self.spec_toml,
            },
        )
        store.ensure_job(
            self.job_id, repo=spec.job.repo, base=self.base_commit, spec_toml=self.spec_toml
        )
        store.set_job_status(self.job_id, "running")
        try:
            self._heal_steps(store, events, metrics, workspace, harness)
        except KeyboardInterrupt:
            self._stop(
                "cancelled", "interrupted (Ctrl-C or SIGTERM); resume with --resume", retryable=True
            )
            self.interrupted = True
        except Exception as exc:
            self._stop("error", f"{type(exc).__name__}: {exc}", retryable=False)
            raise
        finally:
            harness.close()
            metrics.close()
            events.emit("job.finished", data={"status": self.status, "reason": self.stop_reason})
            store.set_job_status(self.job_id, self.status, detail=self.stop_reason)
        trees = workspace.list_worktrees()
        if self.keep or self.status == "taken_over":
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
    ) -> None:
        spec = self.spec
        controls = ControlReader(
            store,
            events,
            self.job_id,
            sleep=self.options.sleep,
            heartbeat=lambda: store.refresh_lock(self.job_id, ttl_seconds=LOCK_TTL_SECONDS),
            on_message=self.say,
        )
        first = self._first_step(events)
        verify_tree = workspace.worktree("verify")
        start_commit = replay(
            self.paths,
            workspace,
            verify_tree,
            load_checkpoints(self.paths, before_step=first),
            should_stop=lambda: bool(store.pending_controls(self.job_id)),
        )
        runner = AttemptRunner(
            spec, workspace, verify_tree, harness, store, events, self.paths, self.scrubber, metrics
        )
        chain = [
            (config, create_proposer(config, job=spec, sleep=self.options.sleep))
            for config in spec.proposer_chain
        ]
        budget = JobBudget(
            self.started,
            spec.budget.job_wall_seconds,
            spec.budget.max_proposer_calls,
            spec.budget.max_model_tokens,
        )
        counter = iter(range(len(store.attempts(job_id=self.job_id)) + 1, 1 << 30))
        hard_resets: dict[int, int] = {}
        index = first
        while index <= len(spec.steps):
            step_spec = spec.steps[index - 1]
            directive = controls.poll()
            if directive.action in ("cancel", "takeover"):
                self._stop(
                    _JOB_STATUS["cancelled" if directive.action == "cancel" else "taken_over"],
                    f"{directive.action} by {directive.issued_by}",
                    retryable=directive.action == "cancel",
                )
                return
            events.emit("step.started", step_id=step_spec.name, step_index=index)
            self.say(f"step {index} ({step_spec.name}): reproducing `{step_spec.command}`")
            workspace.reset(verify_tree, to=start_commit)
            repro = reproduce(
                harness, step_spec, verify_tree, spec.budget, regression=spec.regression.command
            )
            runner.harness_prepared = True
            failure, classification = repro.failure, repro.classification
            report = StepReport(
                index=index,
                name=step_spec.name,
                command=step_spec.command,
                status="pending",
                failure=failure,
                classification=classification,
                ci_fingerprint=repro.ci_fingerprint,
                attempts=(),
            )
            if failure is not None:
                events.emit(
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
                store.record_failure(
                    failure, job_id=self.job_id, step_index=index, classification=classification
                )
            if (
                repro.verdict.passed
                or failure is None
                or classification is None
                or classification.failure_class not in PATCHABLE_CLASSES
            ):
                cls = classification.failure_class.value if classification else "none"
                why = (
                    f"not patched: classified {cls}"
                    if classification
                    else "the step passes on its starting point: nothing to heal"
                )
                self.step_reports[index] = report.model_copy(
                    update={"status": "not_patchable", "stop_reason": why}
                )
                self._stop(
                    "not_patchable",
                    why,
                    retryable=bool(classification and classification.retryable),
                )
                self.say(f"step {index}: {why}")
                return
            self.say(
                f"step {index}: fingerprint {failure.fingerprint} "
                f"({classification.failure_class.value}): {failure.error_type} "
                f"{failure.message[:120]}"
            )
            events.emit(
                "self_heal.triggered",
                step_id=step_spec.name,
                step_index=index,
                fingerprint=failure.fingerprint,
                failure_class=classification.failure_class.value,
            )
            state = StepState(
                index, step_spec, start_commit, failure, repro.verdict, repro.regression_baseline
            )
            healer = StepHealer(
                runner,
                chain,
                classification,
                budget,
                controls,
                lambda: next(counter),
                self.say,
                hard_resets_done=hard_resets.get(index, 0),
            )
            result = healer.heal(state)
            hard_resets[index] = healer.hard_resets_done
            self.step_reports[index] = report.model_copy(
                update={"attempts": tuple(result.attempts), "stop_reason": result.reason}
            )
            if result.status == "fixed":
                start_commit = self._checkpoint(
                    events, workspace, verify_tree, state, result, start_commit
                )
                index += 1
                continue
            if result.status == "hard_reset":
                events.emit(
                    "self_heal.escalated",
                    step_id=step_spec.name,
                    step_index=index,
                    data={"to": "hard_reset", "reason": result.reason},
                )
                self.say(f"step {index}: hard reset ({result.reason})")
                verify_tree, start_commit = self._hard_reset(workspace, index, store)
                runner.verify_tree = verify_tree
                runner.harness_prepared = False
                continue
            if result.status == "from_step":
                target = max(1, min(result.arg or 1, index))
                events.emit("resume.from_step", step_index=target, data={"reason": result.reason})
                discard_checkpoints(self.paths, from_step=target)
                verify_tree, start_commit = self._hard_reset(workspace, target, store)
                runner.verify_tree = verify_tree
                index = target
                continue
            if result.status in ("exhausted", "stuck"):
                events.emit(
                    "self_heal.exhausted",
                    step_id=step_spec.name,
                    step_index=index,
                    fingerprint=failure.fingerprint,
                    failure_class=classification.failure_class.value,
                    data={"reason": result.reason},
                )
            self.step_reports[index] = self.step_reports[index].model_copy(
                update={"status": "not_fixed"}
            )
            self._stop(
                _JOB_STATUS[result.status],
                f"step {index} ({step_spec.name}): {result.reason}",
                retryable=result.retryable,
            )
            return
        self._publish(workspace, verify_tree, start_commit)

    def _first_step(self, events: EventLog) -> int:
        options = self.options
        if options.from_step is not None:
            if not 1 <= options.from_step <= len(self.spec.steps):
                from patchheal.errors import BadInput

                raise BadInput(
                    f"--from-step {options.from_step}: the job has {len(self.spec.steps)} step(s)"
                )
            have = len(load_checkpoints(self.paths, before_step=options.from_step))
            if have < options.from_step - 1:
                from patchheal.errors import BadInput

                raise BadInput(
                    f"--from-step {options.from_step}: only {have} step checkpoint(s) "
                    f"exist under {self.paths.steps_dir}"
                )
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

    def _checkpoint(
        self,
        events: EventLog,
        workspace: JobWorkspace,
        tree: Path,
        state: StepState,
        result: StepResult,
        start_commit: str,
    ) -> str:
        assert result.fix is not None
        fix = result.fix
        workspace.reset(tree, to=start_commit)
        workspace.apply(tree, fix.diff)
        commit = workspace.commit(
            tree,
            f"patchheal: heal step {state.index} ({state.spec.name})\n\n"
            f"strategy: {fix.strategy}\nfingerprint: {fix.fingerprint}\n"
            f"{fix.rationale}".rstrip(),
        )
        events.emit(
            "step.checkpointed",
            step_id=state.spec.name,
            step_index=state.index,
            attempt=fix.attempt_number,
            diff_hash=fix.diff_hash,
            strategy=fix.strategy,
        )
        write_checkpoint(
            self.paths,
            step_id=state.spec.name,
            step_index=state.index,
            attempt=fix.attempt_number,
            attempt_id=None,
            diff=fix.diff,
            worktree=tree,
            commit=commit,
        )
        events.emit(
            "self_heal.recovered",
            step_id=state.spec.name,
            step_index=state.index,
            attempt=fix.attempt_number,
            fingerprint=fix.fingerprint,
            diff_hash=fix.diff_hash,
            strategy=fix.strategy,
        )
        self.step_reports[state.index] = self.step_reports[state.index].model_copy(
            update={
                "status": "fixed",
                "checkpoint_patch": str(self.paths.checkpoint_patch(state.index)),
            }
        )
        self.say(f"step {state.index}: fixed by {fix.label or fix.strategy}; checkpoint written")
        return commit

    def _hard_reset(
        self, workspace: JobWorkspace, step_index: int, store: AttemptStore
    ) -> tuple[Path, str]:
        """Recreate the worktree from the base ref and replay the earlier steps' checkpoints."""
        for tree in workspace.list_worktrees():
            workspace.remove(tree)
        tree = workspace.worktree("verify")
        commit = replay(
            self.paths,
            workspace,
            tree,
            load_checkpoints(self.paths, before_step=step_index),
            should_stop=lambda: bool(store.pending_controls(self.job_id)),
        )
        return tree, commit

    def _publish(self, workspace: JobWorkspace, tree: Path, head: str) -> None:
        branch = branch_name(self.job_id)
        workspace.publish(head, branch)
        self.branch = branch
        # The verify tree is at `head` now; its diff against the base is the whole fix.
        self.final_diff = worktree_diff(tree, base=workspace.base_commit)
        self._stop("fixed", f"every step verified; branch {branch}", retryable=False)

    def _stop(self, status: str, reason: str, *, retryable: bool) -> None:
        self.status, self.stop_reason, self.retryable = status, reason, retryable
