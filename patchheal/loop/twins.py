"""The impossible twin run of a verification (docs/verdict.md, "Impossible twins").

After the failing step's verification runs all passed, one more run of the
same command in the same tree, with every protected test's file changed in
place (`oracle/mutate.py`: one top-level assertion of each made impossible, a
fresh test that must fail),
then put back byte for byte with its times before anything else runs. If
that twin passes (`verdict/twin.py`) the candidate makes tests pass whatever
they check: `rejected_oracle`, never `fixed`. A test no twin could be made
for (not a Python test function, its function not found) is named in the
reason and judged by the other lines alone.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import HarnessError
from patchheal.harness.base import Harness
from patchheal.loop.twinplan import Plan, expand, plan, protected_tests
from patchheal.models import CommandResult, Failure, Outcome, TestResults, Verdict
from patchheal.oracle.mutate import FileTwin, Mutation, twin_file
from patchheal.verdict.ran import unexecuted
from patchheal.verdict.twin import twin_passed
from patchheal.workspace import inplace, tracked

P = ParamSpec("P")


class TwinEnded(Exception):
    """The twin ended the verification: its outcome, why, and the log so far."""

    def __init__(self, outcome: Outcome, reason: str, log: str) -> None:
        super().__init__(reason)
        self.outcome, self.reason, self.log = outcome, reason, log


def ends_with_twin(
    verify: Callable[P, tuple[Outcome, str, str]],
) -> Callable[P, tuple[Outcome, str, str]]:
    """`verify`'s outcome, or the one its twin ended it with."""

    @functools.wraps(verify)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> tuple[Outcome, str, str]:
        try:
            return verify(*args, **kwargs)
        except TwinEnded as ended:
            return ended.outcome, ended.reason, ended.log

    return wrapper


@dataclass
class _Made:
    """The twins written for one run: each file as it was, and what was changed."""

    saved: list[inplace.Saved] = field(default_factory=list)
    twins: dict[str, FileTwin] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)

    @property
    def mutations(self) -> list[tuple[str, Mutation]]:
        return [(f, m) for f, twin in self.twins.items() for m in twin.mutations]


def refusal(first: str, why: str, changed: str) -> str:
    """The reason of a `rejected_oracle`: one sentence first (the report's "why" line),
    with the change that should have failed; what the twin run showed below it."""
    return (
        "the tests also passed when made impossible, so the patch makes tests pass whatever "
        f"they check: {first}\nimpossible twin: {why}; changed: {changed}"
    )


def _shown(file: str, mutation: Mutation) -> str:
    return f"{file}:{mutation.line} {mutation.what}"


class TwinRun:
    """One verification's impossible twin: where it goes, and running it when it is due."""

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
        # After the last passing run: between two runs, a twin made a test that fails every
        # other run (a counter in the tree) pass both real runs (tests/verdict_battery.py,
        # "flaky: no-op comment"). A candidate that counts runs (an untracked file in the
        # worktree) could tell the twin apart at any place, so a random one bought little.
        self.at = budget.verify_runs
        self.defined = dict(baseline.tests.defined_in) if baseline.tests else {}
        self.protected = protected_tests(baseline, failure)
        # Planned before the step first runs in this tree: a test file the step later turns
        # into a link (so that no twin could be written) refuses the candidate, it does not
        # make the test one without a twin.
        self.plan: Plan = plan(tree, expand(self.protected, None, self.rng), self.defined)
        self.note = ""

    def after(self, run: int, verdict: Verdict, log: str) -> Verdict:
        """Called after each passing run of the failing step; the verdict to keep (its
        reason tells what the twin found). Raises `TwinEnded` when the twin refuses."""
        if run == 1:
            self._collectors(verdict.tests)
        if why := unexecuted(self.plan.asserts, verdict.tests):
            raise TwinEnded(Outcome.REJECTED_TRIPWIRE, why, log)
        if run == self.at:
            self.note = self._twin(log)
        else:
            self._refresh()
        return verdict.model_copy(update={"reason": verdict.reason + self.note})

    def _collectors(self, first: TestResults | None) -> None:
        """A module or class that failed to collect stands for its tests that passed in
        the first run: they join the plan in its place."""
        expanded = expand(self.protected, first, self.rng)
        replaced = set(self.protected) - set(expanded)
        self.plan.missing = [m for m in self.plan.missing if m[0] not in replaced]
        more = plan(self.tree, [t for t in expanded if t not in self.protected], self.defined)
        for rel, targets in more.files.items():
            self.plan.files.setdefault(rel, []).extend(targets)
            self.plan.styles[rel] = more.styles[rel]
        self.plan.asserts.update(more.asserts)
        self.plan.missing += more.missing

    def _refresh(self) -> None:
        """Touch the protected files as a twin's restore does (their change time moves),
        so the run after a twin and the run after none see the same."""
        for rel in self.plan.files:
            try:
                inplace.refresh(self.tree, inplace.read(self.tree, rel))
            except OSError:
                continue  # the twin itself says what is wrong with the file

    def _twin(self, log: str) -> str:
        made = _Made(missing=list(self.plan.missing))
        before = tracked.snapshot(self.tree)
        try:
            self._write(made)
            if not made.mutations:
                return _no_twin(made.missing)
            result = self._run(made, log)
        finally:
            self._restore(made, log)
        # Watched like every verification run: the twin's own files are back byte for byte,
        # so any tracked file that differs now was changed by the step during the twin.
        if touched := tracked.touched(before, self.tree, self.step.results):
            raise TwinEnded(
                Outcome.REJECTED_TRIPWIRE,
                tracked.tainted_reason(touched, "the impossible twin run"),
                log + self._log(made, result.output),
            )
        skipped = {test for test, _ in made.missing}
        protected = [
            t.test_id
            for rel in made.twins
            for t in self.plan.files[rel]
            if t.test_id not in skipped
        ]
        fresh = [twin.fresh for twin in made.twins.values()]
        why = twin_passed(result, list(dict.fromkeys(protected)), fresh)
        changed = "; ".join(_shown(f, m) for f, m in made.mutations[:5])
        if why:
            first = _shown(*made.mutations[0])
            raise TwinEnded(
                Outcome.REJECTED_ORACLE,
                refusal(first, why, changed),
                log + self._log(made, result.output),
            )
        return (
            f"; its impossible twin failed as it must ({len(made.mutations)} test(s) changed)"
            f"{_no_twin(made.missing, ' and ')}\nimpossible twin changed: {changed}"
        )

    def _write(self, made: _Made) -> None:
        """Each planned file's twin in place (its times kept); raises `TwinEnded` when a
        file's path became a link or a non-file during an earlier run."""
        for rel, targets in self.plan.files.items():
            try:
                saved = inplace.read(self.tree, rel)
            except inplace.UnsafePath as exc:
                raise TwinEnded(
                    Outcome.REJECTED_ORACLE,
                    f"a protected test file was replaced during verification: {exc}",
                    "",
                ) from None
            text = saved.content.decode(errors="surrogateescape")
            twin = twin_file(text, targets, self.rng, style=self.plan.styles[rel])
            if isinstance(twin, str):
                made.missing += [(t.test_id, twin) for t in targets]
                continue
            made.missing += twin.missing
            if not twin.mutations:
                continue
            made.saved.append(saved)  # before the write: restored even if it fails halfway
            inplace.write(self.tree, saved, twin.source.encode(errors="surrogateescape"))
            made.twins[rel] = twin

    def _run(self, made: _Made, log: str) -> CommandResult:
        try:
            return self.harness.run(
                self.step.command,
                self.tree,
                timeout=self.budget.step_timeout_seconds,
                idle_timeout=self.budget.idle_timeout_seconds,
                results=self.step.results,
            )
        except HarnessError as exc:
            raise TwinEnded(
                Outcome.HARNESS_ERROR, f"harness error in the impossible twin run: {exc}", log
            ) from None

    def _restore(self, made: _Made, log: str) -> None:
        """Every changed file back, byte for byte, with its times; a path the twin run
        turned into a link or a directory cannot be: the candidate is refused."""
        broken = []
        for saved in made.saved:
            try:
                inplace.write(self.tree, saved, saved.content)
            except OSError as exc:
                broken.append(f"{saved.relative} ({exc})")
        if broken:
            raise TwinEnded(
                Outcome.REJECTED_ORACLE,
                "the impossible twin run replaced protected test files, which could not be "
                f"put back: {', '.join(broken)}",
                log,
            )

    def _log(self, made: _Made, output: str) -> str:
        changed = "\n".join(f"#   {_shown(f, m)}" for f, m in made.mutations)
        return f"$ {self.step.command}  (impossible twin)\n{changed}\n{output}"


def _no_twin(missing: Sequence[tuple[str, str]], joiner: str = "; ") -> str:
    if not missing:
        return ""
    shown = ", ".join(f"{test} ({why})" for test, why in missing[:3])
    more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
    return f"{joiner}no impossible twin for {shown}{more}"
