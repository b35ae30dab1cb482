"""The impossible twin run of a verification (docs/verdict.md, "Impossible twins").

After a passing verification run chosen at random, one more run of the same
command in the same tree, in which every protected test module is compiled,
in the step's memory, from its twin (`oracle/mutate.py`: one top-level
assertion of each made impossible): the changes
travel in a blob every run gets alike (`harness/results/twinchannel.py`) to the
collector that applies them at import (`collectors/patchheal_twin.py`). No
file changes on disk. This gathers what the twin was told and what its run
gave (`verdict/evidence.py`'s `TwinEvidence`) and decides nothing:
`verdict/decide.py` refuses a candidate whose twin passed (`rejected_oracle`,
never `fixed`). A test no twin could be made for (not a Python test function,
its function not found) is named in the reason and judged by the other lines
alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import HarnessError
from patchheal.harness.base import Harness
from patchheal.harness.results import twinchannel
from patchheal.loop.twinplan import Plan, expand, plan, protected_tests
from patchheal.models import CommandResult, Failure, TestResults, Verdict
from patchheal.oracle.mutate import FileTwin, Mutation, twin_file
from patchheal.verdict.evidence import TwinEvidence
from patchheal.workspace import inplace, tracked


@dataclass
class _Made:
    """The twins planned for one run: what was changed, and what the collector is told."""

    twins: dict[str, FileTwin] = field(default_factory=dict)
    files: list[dict[str, object]] = field(default_factory=list)
    kept: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    """Test id -> the file and line of its assertion that runs as it was after it runs made
    impossible, and who reports it passed ('pytest', 'unittest')."""
    missing: list[tuple[str, str]] = field(default_factory=list)

    @property
    def mutations(self) -> list[tuple[str, Mutation]]:
        return [(f, m) for f, twin in self.twins.items() for m in twin.mutations]


def _shown(file: str, mutation: Mutation) -> str:
    return f"{file}:{mutation.line} {mutation.what}"


class TwinRun:
    """One verification's impossible twin: where it goes, and running it when it is due."""

    twins = True
    """False: no twin (benchmarks/bench_verdict.py measures a verification without)."""

    def __init__(
        self,
        harness: Harness,
        step: StepSpec,
        tree: Path,
        budget: BudgetSpec,
        *,
        baseline: Verdict,
        failure: Failure,
        rng: random.Random | None = None,
    ) -> None:
        self.harness, self.step, self.tree, self.budget = harness, step, tree, budget
        self.baseline, self.failure = baseline, failure
        self.rng = rng or random.SystemRandom()  # not seedable from inside the step
        # After a passing run chosen at random (not the first place: the first run tells which
        # tests stand for a module that failed to collect), so that a candidate counting
        # runs guesses it right once in `verify_runs`; the number of runs is always one more.
        self.at: int | None = self.rng.randint(1, budget.verify_runs) if self.twins else None
        self.defined = dict(baseline.tests.defined_in) if baseline.tests else {}
        self.protected = protected_tests(baseline, failure)
        # Planned before the step first runs in this tree: a test file the step later turns
        # into a link (so that its twin could not be read) refuses the candidate, it does not
        # make the test one without a twin.
        self.plan: Plan = plan(
            tree, expand(self.protected, None, self.rng), self.defined, failure.frames
        )

    def learn(self, first: TestResults | None) -> None:
        """After the first run: a module or class that failed to collect stands for its
        tests that passed in it; they join the plan in its place."""
        expanded = expand(self.protected, first, self.rng)
        replaced = set(self.protected) - set(expanded)
        self.plan.missing = [m for m in self.plan.missing if m[0] not in replaced]
        added = [t for t in expanded if t not in self.protected]
        more = plan(self.tree, added, self.defined, self.failure.frames)
        for rel, targets in more.files.items():
            self.plan.files.setdefault(rel, []).extend(targets)
        self.plan.asserts.update(more.asserts)
        self.plan.missing += more.missing

    def wanted(self) -> list[str]:
        """The test files whose passing assertions the verdict needs seen in each run of the
        failing step: each protected pytest test's file, as its id starts, and each file
        the plan changes (where a test's function is defined)."""
        files = [t.partition("::")[0] for t in self.protected if "::" in t or t.endswith(".py")]
        return list(dict.fromkeys([*files, *self.plan.files]))

    def due(self, run: int) -> bool:
        """Whether the twin runs after verification run `run`."""
        return run == self.at

    def run(self) -> tuple[TwinEvidence, str]:
        """The twin: what it changed and was told, what its run gave, and its log ("" when
        it did not run)."""
        assert self.at is not None
        place = f"run {self.at + 1} of {self.budget.verify_runs + 1}"
        made = _Made(missing=list(self.plan.missing))
        before = tracked.snapshot(self.tree)
        try:
            self._make(made)
        except inplace.UnsafePath as exc:  # a test file became a link during an earlier run
            return TwinEvidence(place=place, replaced=str(exc)), ""
        told_so = TwinEvidence(
            place=place,
            changed=tuple(_shown(f, m) for f, m in made.mutations),
            missing=tuple(made.missing),
        )
        if not made.mutations:
            return told_so, ""
        with twinchannel.carrying(self._payload(made)):
            try:
                result = self._run()
            except HarnessError as exc:
                return dataclasses.replace(told_so, error=str(exc)), ""
        skipped = {test for test, _ in made.missing}
        protected = [
            t.test_id
            for rel in made.twins
            for t in self.plan.files[rel]
            if t.test_id not in skipped
        ]
        found = dataclasses.replace(
            told_so,
            protected=tuple(dict.fromkeys(protected)),
            kept=dict(made.kept),
            result=result,
            # Watched like every verification run: no file is changed for the twin, so any
            # tracked file that differs now was changed by the step during the twin.
            touched=tuple(tracked.touched(before, self.tree, self.step.results)),
        )
        return found, self._log(made, result.output)

    def _make(self, made: _Made) -> None:
        """Each planned file's twin, from the file as it is now; raises `inplace.UnsafePath`
        when a file's path became a link or a non-file during an earlier run."""
        for rel, targets in self.plan.files.items():
            saved = inplace.read(self.tree, rel)
            text = saved.content.decode(errors="surrogateescape")
            twin = twin_file(text, targets, self.rng)
            if isinstance(twin, str):
                made.missing += [(t.test_id, twin) for t in targets]
                continue
            made.missing += twin.missing
            if not twin.mutations:
                continue
            # Each changed assertion runs as made impossible, then as it is (what they share
            # evaluated once): a plain assert, or a TestCase helper's call. Whatever a
            # candidate does in the twin, it passes the one or fails the other.
            kept = {
                m.test_id: (rel, m.line, m.as_is)
                for m in twin.mutations
                if m.line in _reported(self.plan, m.test_id, m.as_is)
            }
            lines = sorted({line for _, line, _ in kept.values()})
            planned = told(rel, saved.content, twin, lines)
            try:
                twinchannel.payload([*made.files, planned])
            except twinchannel.TooLarge as exc:
                made.missing += [
                    (m.test_id, f"its twin does not fit: {exc}") for m in twin.mutations
                ]
                continue
            made.files.append(planned)
            made.twins[rel] = twin
            made.kept.update(kept)

    def _payload(self, made: _Made) -> bytes:
        return twinchannel.payload(made.files)

    def _run(self) -> CommandResult:
        return self.harness.run(
            self.step.command,
            self.tree,
            timeout=self.budget.step_timeout_seconds,
            idle_timeout=self.budget.idle_timeout_seconds,
            results=self.step.results,
        )

    def _log(self, made: _Made, output: str) -> str:
        changed = "\n".join(f"#   {_shown(f, m)}" for f, m in made.mutations)
        return f"$ {self.step.command}  (impossible twin)\n{changed}\n{output}"


def _reported(plan: Plan, test: str, as_is: str) -> tuple[int, ...]:
    """The lines of `test` whose passing the monitor sees through `as_is` (verdict/ran.py):
    its plain asserts through pytest's hook, its `self.assert*` calls through unittest's."""
    need = plan.asserts.get(test)
    if need is None:
        return ()
    return {"pytest": need.asserts, "unittest": need.calls}.get(as_is, ())


def told(rel: str, content: bytes, twin: FileTwin, keep: Sequence[int] = ()) -> dict[str, object]:
    """What the step's collector is told of one file's twin (collectors/patchheal_twin.py):
    the file as planned (path in the tree, hash), the changes, the twin's hash."""
    return {
        "rel": rel,
        "keep": list(keep),
        "sha256": hashlib.sha256(content).hexdigest(),
        "edits": [[e.line, e.col, e.end_line, e.end_col, e.text] for e in twin.edits],
        "twin_sha256": hashlib.sha256(twin.source.encode(errors="surrogateescape")).hexdigest(),
    }
