"""An environment verdict must be the environment's, not the candidate's words (issue 25, L5).

`verdict/environment.py` reads a failing run's output for signs that the
environment failed (`command not found`, a test tool missing, exit 127), and
such a run judges no patch: `harness_error`, the claim released. But the
output is the candidate's to write: `print("sh: 1: curl: not found")` or
`sys.exit(127)` dresses the candidate's own failure as the environment's,
buys it a release of its claim and a place in a later run. So the verifier's
"not judged" is confirmed by a control run: the same command on the step's
start commit (the candidate's patch gone, the worktree reset), now. Only if
that run shows an environment failure too is the environment to blame;
otherwise the candidate's run is judged as its own failure. The control run
costs one run, and only when a verification run looked environmental.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from patchheal.config import BudgetSpec
from patchheal.errors import HarnessError
from patchheal.harness.base import Harness
from patchheal.models import Outcome
from patchheal.verdict.environment import environmental
from patchheal.workspace.worktrees import JobWorkspace

NOT_JUDGED = "not judged: the environment failed, not the patch"
_IN_REGRESSION = "in the regression steps"


def looks_environmental(outcome: Outcome, reason: str) -> bool:
    """Whether the verifier declined to judge because the run looked environmental."""
    return outcome is Outcome.HARNESS_ERROR and reason.startswith(NOT_JUDGED)


def confirm(
    harness: Harness,
    workspace: JobWorkspace,
    tree: Path,
    *,
    start_commit: str,
    commands: Sequence[str],
    regression: Sequence[str],
    budget: BudgetSpec,
    reason: str,
) -> tuple[Outcome, str]:
    """The outcome of a run the verifier found environmental: kept when the step's start
    commit fails the same way now (or the harness fails), else the candidate's own."""
    in_regression = reason.startswith(f"{NOT_JUDGED} {_IN_REGRESSION}")
    workspace.reset(tree, to=start_commit)  # the candidate's patch goes
    for command in regression if in_regression else commands:
        try:
            control = harness.run(
                command,
                tree,
                timeout=budget.step_timeout_seconds,
                idle_timeout=budget.idle_timeout_seconds,
            )
        except HarnessError as exc:  # the harness itself failing is the environment's doing
            return Outcome.HARNESS_ERROR, f"{reason} (the control run failed too: {exc})"
        if control.timed_out is None and environmental(control, tree):
            return Outcome.HARNESS_ERROR, f"{reason} (the step's start commit fails so too, now)"
    why = reason.removeprefix(NOT_JUDGED).lstrip(" :")
    if in_regression:
        why = why.removeprefix(_IN_REGRESSION).lstrip(" :")
    told = (
        f"the candidate's run looked like an environment failure ({why}), but the step's "
        "start commit, run now without the patch, does not fail so: the candidate's own failure"
    )
    return (Outcome.REGRESSION if in_regression else Outcome.NO_EFFECT), told
