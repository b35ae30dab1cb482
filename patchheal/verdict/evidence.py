"""Everything one verification produced, gathered by the loop and judged by `verdict/decide.py`.

The loop (loop/verification.py, loop/twins.py) runs the failing step, the
impossible twin and the regression steps and records here what each produced;
it decides nothing. `decide(evidence)` reads it. The evidence grows as the
runs happen (each `with_*` returns a new, frozen object), so that the loop can
ask after every run whether the verification is over: a failing first run ends
it without running the rest, as it always did. Data only; no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from patchheal.models import CommandResult, Failure, Verdict
from patchheal.verdict.ran import Required


@dataclass(frozen=True)
class RunEvidence:
    """One run of the failing step: what it captured and the tracked files it changed."""

    result: CommandResult | None
    touched: tuple[str, ...] = ()
    """Tracked files the run changed besides its declared results (issue 25)."""
    error: str = ""
    """The harness's error when the run could not be made (then `result` is None)."""


@dataclass(frozen=True)
class TwinEvidence:
    """The impossible twin: what it changed, what the collector was told, what its run gave."""

    place: str
    """'run 2 of 3': where it ran among the verification runs."""
    changed: tuple[str, ...] = ()
    """Each change, 'file:line what' (empty: no twin could be made, nothing ran)."""
    missing: tuple[tuple[str, str], ...] = ()
    """Protected tests no twin was made for, and why."""
    protected: tuple[str, ...] = ()
    """The protected test ids the twin changed: each must not pass."""
    kept: Mapping[str, tuple[str, int, str]] = field(default_factory=dict)
    """Test id -> the file and line of its assertion that ran as it is before it ran
    impossible, and who reports it passed ('pytest' or 'unittest', an evidence kind)."""
    result: CommandResult | None = None
    touched: tuple[str, ...] = ()
    error: str = ""
    """The harness's error when the twin run could not be made."""
    replaced: str = ""
    """Why a protected test file could not be read to make its twin (it became a link...)."""


@dataclass(frozen=True)
class RegressionEvidence:
    """One regression step's run and the baseline it is compared with."""

    command: str
    baseline: Verdict | None
    result: CommandResult | None
    touched: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class VerificationEvidence:
    """What one verification of a candidate produced so far, and what it was to produce."""

    command: str
    """The failing step's command."""
    tree: Path
    """The patched worktree (an environmental failure is told by the project's layout)."""
    baseline: Verdict
    """The failing step's verdict at reproduction."""
    failure: Failure
    changed: tuple[str, ...] = ()
    """The candidate's files."""
    verify_runs: int = 1
    step_timeout_seconds: float = 0.0
    idle_timeout_seconds: float = 0.0
    """The limits a timed-out run is told by."""
    twin_at: int | None = None
    """The run after which the twin runs (None: no twin for this verification)."""
    required: Mapping[str, Required] = field(default_factory=dict)
    """Protected test id -> what its passing run must show the monitor saw (verdict/ran.py)."""
    regression: tuple[str, ...] = ()
    """The regression steps' commands, in order."""
    runs: tuple[RunEvidence, ...] = ()
    twin: TwinEvidence | None = None
    regressions: tuple[RegressionEvidence, ...] = ()

    def with_run(
        self, result: CommandResult | None, touched: tuple[str, ...] = (), error: str = ""
    ) -> VerificationEvidence:
        """This evidence and one more run of the failing step."""
        run = RunEvidence(result=result, touched=touched, error=error)
        return dataclasses.replace(self, runs=(*self.runs, run))

    def with_plan(self, required: Mapping[str, Required]) -> VerificationEvidence:
        """The protected tests' plan as the first run completed it (a module that failed
        to collect stands for its tests that passed)."""
        return dataclasses.replace(self, required=dict(required))

    def with_twin(self, twin: TwinEvidence) -> VerificationEvidence:
        return dataclasses.replace(self, twin=twin)

    def with_regression(
        self,
        command: str,
        baseline: Verdict | None,
        result: CommandResult | None,
        touched: tuple[str, ...] = (),
        error: str = "",
    ) -> VerificationEvidence:
        step = RegressionEvidence(command, baseline, result, touched, error)
        return dataclasses.replace(self, regressions=(*self.regressions, step))

    @property
    def complete(self) -> bool:
        """Every run, the twin and every regression step were gathered."""
        return (
            len(self.runs) >= self.verify_runs
            and (self.twin_at is None or self.twin is not None)
            and len(self.regressions) >= len(self.regression)
        )
