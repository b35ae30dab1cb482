"""Typed models that cross module boundaries.

Everything a harness returns, a parser extracts, a proposer produces or the
store records is one of these, never a loose dict.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt


class Outcome(StrEnum):
    """Why an attempt ended, as recorded in the store and the report."""

    FIXED = "fixed"
    NO_EFFECT = "no_effect"
    REGRESSION = "regression"
    REJECTED_REPEAT = "rejected_repeat"
    REJECTED_POLICY = "rejected_policy"
    APPLY_FAILED = "apply_failed"
    TIMEOUT = "timeout"
    HARNESS_ERROR = "harness_error"
    # Ran and passed, but a line of defence beside the tests refused it (docs/verdict.md):
    # an impossible twin of a protected test passed too, or the step's tripwire saw the
    # candidate's code tamper with the run.
    REJECTED_ORACLE = "rejected_oracle"
    REJECTED_TRIPWIRE = "rejected_tripwire"


class FailureClass(StrEnum):
    """Why a step fails. Only `code_bug` (and `unknown`) is patched."""

    CODE_BUG = "code_bug"
    ENV_MISMATCH = "env_mismatch"
    DEPENDENCY_ISSUE = "dependency_issue"
    INFRA_ISSUE = "infra_issue"
    DATA_ISSUE = "data_issue"
    FLAKY = "flaky"
    UNKNOWN = "unknown"


PATCHABLE_CLASSES = frozenset({FailureClass.CODE_BUG, FailureClass.UNKNOWN})


class JobStatus(StrEnum):
    """Where a job stands: `running` in the store while a run holds it, then how it ended."""

    RUNNING = "running"
    FIXED = "fixed"
    NOT_FIXED = "not_fixed"
    NOT_PATCHABLE = "not_patchable"
    MANUAL_HANDOFF = "manual_handoff"
    CANCELLED = "cancelled"
    TAKEN_OVER = "taken_over"
    ERROR = "error"


class StepStatus(StrEnum):
    """Where one step of a job stands in the report."""

    PENDING = "pending"
    FIXED = "fixed"
    NOT_FIXED = "not_fixed"
    NOT_PATCHABLE = "not_patchable"
    SKIPPED = "skipped"


class StepEnd(StrEnum):
    """How healing one step ended, and so what the step sequence does next."""

    FIXED = "fixed"
    EXHAUSTED = "exhausted"
    STUCK = "stuck"
    MANUAL_HANDOFF = "manual_handoff"
    CANCELLED = "cancelled"
    TAKEN_OVER = "taken_over"
    HARD_RESET = "hard_reset"
    FROM_STEP = "from_step"


# Operator commands (`patchheal control JOB COMMAND [N]`), in the order help lists them.
CONTROL_COMMANDS = (
    "pause",
    "resume",
    "cancel",
    "takeover",
    "retry-step",
    "hard-reset-step",
    "resume-from-step",
)
CONTROL_COMMANDS_WITH_STEP = frozenset({"resume-from-step"})


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TracedCall(_Model):
    """A project function a failing test executed (collectors/patchheal_trace.py)."""

    file: str = Field(max_length=500, description="relative to the project root")
    name: str = Field(max_length=300, description="the function's qualified name")
    line: int = Field(ge=0, description="the function's first line")
    calls: int = Field(ge=0)
    order: int = Field(ge=0, description="0 for the first project function the test called")
    depth: int = Field(description="call depth below the test function (1 = called by it)")
    passed_by: int = Field(0, ge=0, description="passing tests of the same run that ran it")
    line_passed_by: int | None = Field(
        None,
        ge=0,
        description="passing tests that ran the least shared of the lines this test ran in it "
        "(None: lines were not traced)",
    )
    rare_lines: tuple[NonNegativeInt, ...] = Field(
        (), max_length=30, description="the lines of it run by only that many passing tests"
    )


class TracedFrame(_Model):
    """One frame of the traceback a failing test raised, innermost last."""

    file: str = Field(max_length=500, description="relative to the project root when inside it")
    line: int = Field(ge=0)
    name: str = Field(max_length=300)


class TestTrace(_Model):
    """What one failing test executed: step-controlled evidence, never used by a verdict."""

    __test__ = False  # keep pytest from collecting this class

    functions: tuple[TracedCall, ...] = Field((), max_length=400)
    frames: tuple[TracedFrame, ...] = Field((), max_length=60)
    passed_tests: int = Field(0, ge=0, description="tests of the same run that passed")


class MonitorEvent(_Model):
    """A sensitive operation the tripwire (collectors/patchheal_watch.py) saw a file perform."""

    op: str = Field(max_length=200, description="what was done, e.g. 'object graph walk'")
    kind: str = Field(max_length=20, description="project, test, other (unknown code) or none")
    file: str = Field(max_length=500, description="the performing file, relative to the root")
    line: int = Field(0, ge=0)
    detail: str = Field("", max_length=300, description="the operation's object, e.g. a file")
    target: str = Field("", max_length=40, description="a protected target: test file, proc, ...")


class TestResults(_Model):
    """Per-test outcomes from the harness's results channel, by test id.

    Written by collectors the harness ships (a pytest plugin, a unittest hook,
    node's JUnit reporter), never parsed from what the step printed.
    """

    __test__ = False  # keep pytest from collecting this class

    outcomes: dict[str, str] = Field(
        default_factory=dict, description="test id -> passed|failed|error|skipped|xfailed"
    )
    defined_in: dict[str, str] = Field(
        default_factory=dict, description="test id -> the file its test function's code is in"
    )
    runners: tuple[str, ...] = Field((), description="collectors that reported, e.g. 'pytest'")
    tampered: tuple[str, ...] = Field(
        (), description="runner internals a collector found replaced during the run"
    )
    rejected: tuple[str, ...] = Field(
        (), description="results files that were unfinished or not signed by a collector"
    )
    collector_errors: tuple[str, ...] = Field(
        (),
        description="collectors that failed internally and stopped observing: no trusted results",
    )
    monitor: tuple[MonitorEvent, ...] = Field(
        (), description="sensitive operations the tripwire saw project code perform"
    )
    unstable: tuple[str, ...] = Field(
        (),
        description="a regression baseline's ids that a second run of the base did not give "
        "again with the same outcome (a flaky test, an id made from the clock): compared by "
        "count, not by id",
    )
    asserted: dict[str, tuple[str, ...]] | None = Field(
        None,
        exclude=True,  # evidence for the verification that ran it, not kept with a verdict
        description="test id -> 'file:line' of each assertion the monitor saw pass from the "
        "test file's own frame; None when the monitor gave no such evidence",
    )
    evidence_kinds: tuple[str, ...] = Field(
        (),
        exclude=True,
        description="which assertions the monitor could see pass: 'pytest' (rewritten "
        "asserts), 'unittest' (TestCase assertion helpers)",
    )
    held: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        exclude=True,
        description="test id -> 'file:line' of each assertion of the impossible twin the "
        "monitor saw hold (collectors/patchheal_twin_kept.py)",
    )
    sources: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        exclude=True,
        description="test file -> sha256 of its bytes when compiled and when its assertions "
        "were seen",
    )
    traces: dict[str, TestTrace] = Field(
        default_factory=dict,
        exclude=True,  # evidence for localization: never persisted with a verdict
        description="failing test id -> the project functions it executed and its frames",
    )

    def with_outcome(self, *wanted: str) -> tuple[str, ...]:
        return tuple(sorted(t for t, o in self.outcomes.items() if o in wanted))

    @property
    def ran(self) -> int:
        """Tests that ran to a pass or a failure (not skipped)."""
        return len(self.with_outcome("passed", "failed", "error"))


class CommandResult(_Model):
    """What a harness captured from one command."""

    command: str
    exit_code: int | None = Field(description="None when the process was killed before exiting")
    output: str = Field(description="combined stdout+stderr, capped; not yet scrubbed")
    duration_seconds: float
    timed_out: Literal["wall", "idle"] | None = None
    truncated: bool = False
    oom_killed: bool = False
    stopped: str | None = Field(
        None,
        description="why a limit of the run stopped it (the worktree grew past "
        "[sandbox] worktree_size): not a verdict on the code; None otherwise",
    )
    harness: str = "local"
    tests: TestResults | None = Field(
        None,
        description="per-test outcomes the harness's collectors wrote to its results channel; "
        "None when no collector reported (not a test runner, or it never finished)",
    )

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and self.timed_out is None


class Frame(_Model):
    """One stack frame of a failure; `line` is shown but never hashed."""

    file: str
    function: str
    line: int | None = None
    in_project: bool = True


class Failure(_Model):
    """A step's failure: scrubbed, normalized, and reduced to a fingerprint."""

    fingerprint: str
    error_type: str = ""
    message: str = Field("", description="normalized message template")
    summary: str = Field("", description="normalized, scrubbed excerpt of the failure")
    frames: tuple[Frame, ...] = ()
    failing_tests: tuple[str, ...] = ()
    source: str = Field("generic", description="parser that produced it: pytest, traceback, ...")

    @property
    def project_frames(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if f.in_project)


class Classification(_Model):
    """Why the step fails, whether patching can help, and what to do next."""

    failure_class: FailureClass
    retryable: bool
    evidence: tuple[str, ...] = ()
    next_actions: tuple[str, ...] = ()
    pass_rate: float | None = Field(None, description="observed pass rate, for flaky steps")


class Candidate(_Model):
    """A proposed patch: a unified diff plus why and how it was made."""

    diff: str
    strategy: str = "unspecified"
    rationale: str = ""
    proposer: str = ""
    label: str = Field("", description="human name, e.g. the patch file name")
    tokens_used: int = 0
    approach: str = Field("", description="the approach the loop asked for (loop/approach.py)")
    memory_degraded: str = Field("", description="why the memory search was incomplete, if any")


class TestCounts(_Model):
    """Parsed test-runner results; None fields were not reported."""

    __test__ = False  # keep pytest from collecting this class

    passed: int | None = None
    failed: int | None = None
    errors: int | None = None
    skipped: int | None = None
    deselected: int | None = None
    xfailed: int | None = None
    collected: int | None = None


class Verdict(_Model):
    """A pure function's judgement of a step run; see verdict.py."""

    passed: bool
    reason: str
    counts: TestCounts = TestCounts()
    failing_tests: tuple[str, ...] = ()
    tests: TestResults | None = None
    """The structured per-test results the verdict was reached from, if any."""


class AttemptRecord(_Model):
    """One candidate taken through the gates and the harness."""

    job_id: str
    step_index: int
    attempt_number: int
    fingerprint: str
    outcome: Outcome
    reason: str = ""
    diff: str = ""
    diff_hash: str = ""
    normalized_diff_hash: str = ""
    touched_files: tuple[str, ...] = ()
    strategy: str = "unspecified"
    rationale: str = ""
    proposer: str = ""
    label: str = ""
    log_excerpt: str = ""
    started_at: float = 0.0
    duration_seconds: float = 0.0
    attempt_class: str = ""
    approach: str = Field("", description="the approach the loop asked for this attempt")
    memory_degraded: str = Field(
        "", description="why the similar-failure search was incomplete (degraded), if it was"
    )


class PriorAttempt(_Model):
    """An earlier attempt on the same fingerprint, told to the proposer so it is not repeated."""

    attempt_number: int
    strategy: str
    touched_files: tuple[str, ...] = ()
    diff_hash: str = ""
    outcome: Outcome
    reason: str = ""
    label: str = ""


class CodeExcerpt(_Model):
    """Code around an in-project frame (or another file worth showing)."""

    file: str
    start_line: int
    text: str


class Hint(_Model):
    """A fix that verified for the same or a similar fingerprint elsewhere."""

    fingerprint: str
    similarity: float
    strategy: str
    diff: str
    job_id: str = ""
    real_ci: str = Field(
        "", description="what real CI said of this fix when it was not fixed (`patchheal outcome`)"
    )
    outcome: Outcome = Outcome.FIXED
    reason: str = Field("", description="why it failed, for a failed approach")


class RetryContext(_Model):
    """The compact context a proposer is shown; evidence.py builds and renders it."""

    job_id: str
    objective: str = ""
    step_name: str
    command: str
    fingerprint: str
    failure_class: FailureClass = FailureClass.UNKNOWN
    error_type: str = ""
    failure_summary: str = ""
    failing_tests: tuple[str, ...] = ()
    excerpts: tuple[CodeExcerpt, ...] = ()
    breaking_diff: str = Field("", description="`last_green..HEAD`, bounded: the change that broke")
    history: str = Field("", description="recent commits touching the implicated files")
    file_map: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    prior_attempts: tuple[PriorAttempt, ...] = ()
    hints: tuple[Hint, ...] = ()
    failed_elsewhere: tuple[Hint, ...] = Field(
        (), description="approaches that failed for similar failures: do not repeat them"
    )
    memory_degraded: str = Field("", description="why the memory search is incomplete, if it is")
    escalation: Literal["first", "more_context", "different_approach", "widen"] = "first"
    approach: str = Field("", description="the approach asked for (loop/approach.py), if any")
    exhausted_buckets: tuple[str, ...] = Field(
        (), description="strategy+files buckets that failed twice: do not propose these again"
    )
