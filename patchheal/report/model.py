"""The report's model: the single input of every rendering (md, html, json).

The loop builds one `JobReport` when it stops, fixed or not; the renderer
never reaches back into the store or the workspace, so a report can be
re-rendered from its own `report.json` alone.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)

from patchheal.errors import BadInput, validation_problems
from patchheal.models import AttemptRecord, Classification, Failure, JobStatus, StepStatus

SCHEMA = "patchheal.report/1"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CauseSite(_Model):
    """A function the verified patch changes, and whether the failing test ran it."""

    file: str
    function: str = Field(description="its qualified name; empty for the module level")
    executed: bool | None = Field(
        None,
        description="the failing test executed it at reproduction (None: no trace recorded)",
    )


class StepReport(_Model):
    """One step of the job: its original failure, why it fails, and every attempt on it."""

    index: int = Field(description="1-based position of the step in the job")
    name: str
    command: str
    status: StepStatus
    failure: Failure | None = Field(description="the step's original failure, scrubbed")
    classification: Classification | None
    ci_fingerprint: str | None = Field(
        None, description="fingerprint from the job's CI log, when it differs (env_mismatch)"
    )
    attempts: tuple[AttemptRecord, ...] = Field((), description="the timeline, in order")
    checkpoint_patch: str | None = Field(
        None, description="path of steps/step-NNNN.patch when the step verified"
    )
    stop_reason: str = Field("", description="why the loop stopped on this step")
    cause_sites: tuple[CauseSite, ...] = Field(
        (),
        description="where the verified patch changed the code (only when the step is fixed)",
    )


class JobReport(_Model):
    """Everything the root-cause report says about one job run."""

    job_id: str
    run_id: str = Field("", description="this run's directory under reports/<job-id>/")
    repo: str
    base: str = Field(description="the base ref as the job spec names it")
    base_commit: str = Field(description="the commit the base ref resolved to")
    harness: str
    harness_reason: str = Field(description="why this harness was chosen")
    python: str | None = Field(
        None, description="the Python the steps ran on, when the harness offers several"
    )
    node: str | None = Field(
        None, description="the Node the steps ran on, when the harness offers several"
    )
    setup: tuple[str, ...] = Field(
        (), description="the job's setup commands, so a printed reproduction runs them too"
    )
    env: tuple[str, ...] = Field((), description="variables the job passes through, by name")
    regression: tuple[str, ...] = Field(
        (), description="the regression steps: the job's [regression] command, then the harness's"
    )
    status: JobStatus
    retryable: bool = Field(description="an outer scheduler may requeue it with backoff")
    stop_reason: str
    started_at: float = Field(description="Unix time the run started")
    finished_at: float = Field(description="Unix time the loop stopped")
    steps: tuple[StepReport, ...]
    branch: str | None = Field(
        None, description="local branch with the verified patch (only when fixed)"
    )
    pull_request: str | None = Field(
        None, description="what the pull-request command printed (only when asked for and fixed)"
    )
    final_diff: str = Field("", description="the verified patch of all steps")
    next_actions: tuple[str, ...] = Field((), description="the runbook, most useful first")
    totals: dict[str, int] = Field(
        default_factory=dict,
        description="attempts per outcome, proposer calls, model tokens",
    )
    patchheal_version: str
    queue_attempt: int | None = Field(
        None, description="the queue-level attempt, 1-based, when a `patchheal worker` ran it"
    )

    @field_validator("started_at", "finished_at", mode="before")
    @classmethod
    def _from_iso(cls, value: object) -> object:
        # report.json carries ISO 8601 times; older files carry Unix seconds. Both read.
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return value  # pydantic names the field and the bad value
        return value

    @field_serializer("started_at", "finished_at", when_used="json")
    def _to_iso(self, value: float) -> str:
        # Microseconds kept, so a report read back has the very same times.
        return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")

    @field_validator("totals")
    @classmethod
    def _sorted_totals(cls, value: dict[str, int]) -> dict[str, int]:
        # Key order is part of the output; sorting here keeps every rendering
        # identical for the same counts, whatever order the loop filled them in.
        return dict(sorted(value.items()))


def report_to_json(report: JobReport, first_screen: dict[str, Any] | None = None) -> str:
    """The report.json text: the schema tag, the first screen (what a person reads first,
    derived from the rest, see report/firstscreen.py) and the model's JSON dump, stable
    byte for byte."""
    data: dict[str, Any] = {"schema": SCHEMA}
    if first_screen is not None:
        data["first_screen"] = first_screen
    data.update(report.model_dump(mode="json"))
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def report_from_json(text: str, *, source: str = "report.json") -> JobReport:
    """Parse a report.json text back into a JobReport; bad input names the source and field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{source}: expected a JSON object, got {type(data).__name__}")
    schema = data.pop("schema", None)
    data.pop("first_screen", None)  # derived from the rest: rebuilt when rendered again
    if schema != SCHEMA:
        raise BadInput(f"{source}: schema is {schema!r}, expected {SCHEMA!r}")
    try:
        return JobReport.model_validate(data)
    except ValidationError as exc:
        first = validation_problems(exc, top="(root)")[0]
        raise BadInput(f"{source}: field {first} ({exc.error_count()} error(s))") from None


def load_report(path: Path) -> JobReport:
    """Read a written report.json (e.g. to re-render it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read report {path}: {exc}") from None
    return report_from_json(text, source=str(path))
