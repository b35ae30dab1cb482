"""What the loop knows about one job run, read and updated by its parts.

The controller owns one `JobState`; the step sequence records each step's
report in it and stops it; the summary turns it into the report. None of
them reaches into another's object, so each can be read (and tested) alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from patchheal.config import JobSpec
from patchheal.models import JobStatus
from patchheal.report.model import StepReport


@dataclass
class JobState:
    """One run of one job: how far it got, and why it stopped."""

    spec: JobSpec
    harness_reason: str = ""
    started: float = field(default_factory=time.time)
    step_reports: dict[int, StepReport] = field(default_factory=dict)
    status: JobStatus = JobStatus.NOT_FIXED
    stop_reason: str = ""
    retryable: bool = False
    branch: str | None = None
    final_diff: str = ""
    harness_name: str = "local"
    python: str | None = None
    """The Python the harness runs the steps on (None: one only, or the local harness)."""
    node: str | None = None
    regression: tuple[str, ...] = ()
    """The regression steps: the job's [regression] command, then its harness's own."""
    base_commit: str = ""
    pull_request: str | None = None
    interrupted: bool = False
    queue_attempt: int | None = None
    run_id: str = ""
    infra_unavailable: bool = False
    """It stopped because infrastructure could not be reached: exit 3, not 1."""

    @property
    def job_id(self) -> str:
        return self.spec.job.id

    def stop(self, status: JobStatus, reason: str, *, retryable: bool) -> None:
        """Record why the job stops (the report and the JSON summary say it)."""
        self.status, self.stop_reason, self.retryable = status, reason, retryable

    def steps(self) -> list[StepReport]:
        """The reports of the steps reached so far, in step order."""
        return [self.step_reports[index] for index in sorted(self.step_reports)]
