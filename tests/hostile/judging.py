"""Judging a candidate as the loop does: the real reproduction gate, then the real verification.

Each project × runner is built as a real git repository and reproduced once
through `patchheal.loop.reproduce.reproduce` (the failing step, its rerun,
fingerprint, classification); every candidate of it is then verified in a
fresh copy of that repository, reset to the base commit and patched, by
`patchheal.loop.verification.verify` (`verify_runs` runs, default 2) in the
given harness (local by default, with its results channel). The policy gate's
decision on the candidate's diff is recorded beside the outcome, for the
table only: the battery judges the verdict, which must hold by itself.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from random import Random

from patchheal.config import BudgetSpec, PolicySpec, StepSpec
from patchheal.gates.policy import check_candidate
from patchheal.harness.base import Harness
from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.reproduce import Reproduction, reproduce
from patchheal.loop.verification import verify
from patchheal.models import PATCHABLE_CLASSES, Outcome
from tests.hostile.cases import PY, PYTEST, Candidate, write_tree

STEP_TIMEOUT = 30.0
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin",
}


@dataclass(frozen=True)
class Judged:
    candidate: Candidate
    outcome: Outcome | None
    """None: the reproduction gate never let the project be patched."""
    reason: str
    gate: str | None
    """The policy gate's rule that would refuse the candidate (None: it passes the gate)."""
    seconds: float

    @property
    def fixed(self) -> bool:
        return self.outcome is Outcome.FIXED


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=_GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout


@dataclass(frozen=True)
class _Reproduced:
    repo: Path
    step: StepSpec
    gate: Reproduction


def budget() -> BudgetSpec:
    return BudgetSpec(step_timeout_seconds=STEP_TIMEOUT, idle_timeout_seconds=STEP_TIMEOUT)


def placing(at: int, verify_runs: int) -> Random:
    """A seeded generator whose first draw puts the twin after verification run `at`
    (TwinRun draws its place first); its later draws (what the twin changes) are the
    seed's."""
    return Random(next(s for s in range(1000) if Random(s).randint(1, verify_runs) == at))


def verify_candidate(
    harness: Harness,
    step: StepSpec,
    tree: Path,
    gate: Reproduction,
    candidate: Candidate,
    twin_after: int | None = None,
) -> tuple[Outcome, str]:
    """The one call of the real verification (its signature may grow: change it here only).
    `twin_after`: the run the twin follows (None: a random one, as the loop places it)."""
    runs = budget().verify_runs
    outcome, reason, _ = verify(
        harness,
        step,
        tree,
        budget(),
        baseline=gate.verdict,
        failure=gate.failure,  # type: ignore[arg-type]
        regression=(),
        regression_baseline=gate.regression_baseline,
        changed=tuple(candidate.edits),  # as loop/attempt.py passes the diff's files
        rng=None if twin_after is None else placing(twin_after, runs),
    )
    return outcome, reason


class Judge:
    """Reproduces each project × runner once, then judges candidates against it.

    `make_harness` builds the harness (local by default); `python`/`pytest` are the
    executables the step commands name (the harness's own in Docker). Thread-safe.
    """

    def __init__(
        self,
        root: Path,
        make_harness: Callable[[], Harness] = LocalHarness,
        *,
        python: str = PY,
        pytest: str = PYTEST,
    ) -> None:
        self.root = root
        self.harness = make_harness()
        self.python = python
        self.pytest = pytest
        self._reproduced: dict[tuple[str, str], _Reproduced | str] = {}
        self._lock = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._count = 0

    def _slot(self, prefix: str) -> Path:
        with self._lock:
            self._count += 1
            return self.root / f"{prefix}-{self._count}"

    def reproduced(self, candidate: Candidate) -> _Reproduced | str:
        """The project × runner reproduced (once), or why it cannot be patched."""
        key = (candidate.project.name, candidate.runner)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # one reproduction per key; other keys go on meanwhile
            if key not in self._reproduced:
                self._reproduced[key] = self._reproduce(candidate)
            return self._reproduced[key]

    def _reproduce(self, candidate: Candidate) -> _Reproduced | str:
        repo = self.root / f"base-{candidate.project.name}-{candidate.runner}"
        write_tree(repo, candidate.project.files)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "a failing project")
        command = candidate.command(python=self.python, pytest=self.pytest)
        step = StepSpec(name="unit", command=command)
        gate = reproduce(self.harness, step, repo, budget(), regression=())
        klass = gate.classification.failure_class if gate.classification else None
        if gate.verdict.passed or gate.failure is None or klass not in PATCHABLE_CLASSES:
            return f"never patched: the reproduction gate says {klass}"
        return _Reproduced(repo, step, gate)

    def evaluate(self, candidate: Candidate, twin_after: int | None = None) -> Judged:
        """Reproduce (cached), patch a fresh copy, verify: the outcome (the twin after run
        `twin_after`, or a random one)."""
        started = time.monotonic()
        base = self.reproduced(candidate)
        if isinstance(base, str):
            return Judged(candidate, None, base, None, time.monotonic() - started)
        tree = self._slot("verify")
        shutil.copytree(base.repo, tree, symlinks=True)
        # As between attempts: the verify worktree is pristine before the patch.
        git(tree, "reset", "-q", "--hard")
        git(tree, "clean", "-q", "-fdx")
        write_tree(tree, candidate.edits)
        gate = _policy(tree)
        outcome, reason = verify_candidate(
            self.harness, base.step, tree, base.gate, candidate, twin_after
        )
        shutil.rmtree(tree, ignore_errors=True)
        return Judged(candidate, outcome, reason, gate, time.monotonic() - started)

    def close(self) -> None:
        self.harness.close()


def _policy(tree: Path) -> str | None:
    """The rule of the default policy that refuses the patch in `tree`, or None."""
    git(tree, "add", "-A")
    diff = git(tree, "diff", "--cached", "HEAD")
    git(tree, "reset", "-q")

    def original(path: str) -> str | None:
        try:
            return git(tree, "show", f"HEAD:{path}")
        except subprocess.CalledProcessError:
            return None

    decision = check_candidate(diff, PolicySpec(), original=original)
    return None if decision.allowed else decision.rule
