"""Issue 25, C2: a verification run that changes tracked files judged another tree.

Real processes in the local harness over a real git repository. A run during
which something rewrote a tracked file (a process an earlier candidate left,
the candidate's own code) is never `fixed`; what steps legitimately write
(caches, bytecode, untracked build outputs, the declared results) never counts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import Outcome
from patchheal.workspace import tracked

BUDGET = BudgetSpec(verify_runs=2, flaky_reruns=0, step_timeout_seconds=30)


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "src.py").write_text("VALUE = 1\n")
    (tree / "reports").mkdir()
    (tree / "reports" / "keep.txt").write_text("tracked, declared as the step's output\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
            cwd=tree, check=True,
        )  # fmt: skip
    return tree


def _verify(tmp_path: Path, during: str) -> tuple[Outcome, str]:
    """The step fails until `fixed` exists; on a pass it runs `during` first."""
    tree = _tree(tmp_path)
    command = f"if [ -e fixed ]; then {during}; exit 0; fi; echo 'ValueError: bad'; exit 1"
    step = StepSpec(name="unit", command=command)
    harness = LocalHarness()
    repro = reproduce(harness, step, tree, BUDGET, regression=())
    assert repro.failure is not None
    (tree / "fixed").write_text("")  # the candidate: an untracked marker ...
    (tree / "src.py").write_text("VALUE = 2\n")  # ... and a change to a tracked file
    outcome, reason, _ = verify(
        harness, step, tree, BUDGET, baseline=repro.verdict, failure=repro.failure,
        regression=(), regression_baseline={},
    )  # fmt: skip
    return outcome, reason


def test_a_tracked_file_rewritten_during_a_passing_run_is_refused(tmp_path: Path) -> None:
    """Invariant: a run that changed a tracked file (here the file the candidate changed
    too, rewritten again) is not `fixed`: `rejected_tripwire`, naming the file."""
    outcome, reason = _verify(tmp_path, "echo 'VALUE = 3' > src.py")
    assert outcome is Outcome.REJECTED_TRIPWIRE, reason
    assert "src.py" in reason


def test_a_tracked_file_the_candidate_left_alone_counts_too(tmp_path: Path) -> None:
    outcome, reason = _verify(tmp_path, "rm reports/keep.txt")
    assert outcome is Outcome.REJECTED_TRIPWIRE, reason
    assert "reports/keep.txt" in reason


def test_caches_and_untracked_outputs_do_not_taint(tmp_path: Path) -> None:
    """Legitimate writes: caches, bytecode, untracked build outputs; and touching a tracked
    file without changing it."""
    during = (
        "mkdir -p .pytest_cache __pycache__ build && echo x > .pytest_cache/v && "
        "echo y > __pycache__/src.cpython-311.pyc && echo z > build/out.txt && touch src.py"
    )
    outcome, reason = _verify(tmp_path, during)
    assert outcome is Outcome.FIXED, reason


def test_the_declared_results_do_not_taint(tmp_path: Path) -> None:
    """A tracked file matching the step's `results` glob is the step's to write."""
    tree = _tree(tmp_path)
    before = tracked.snapshot(tree)
    (tree / "reports" / "keep.txt").write_text("rewritten by the step\n")
    assert tracked.touched(before, tree, "reports/*.txt") == []
    assert tracked.touched(before, tree) == ["reports/keep.txt"]


def test_the_results_glob_excepts_exactly_what_the_results_reader_reads(tmp_path: Path) -> None:
    """pathlib's glob, as harness/results/untrusted.py walks it: `*` stays in one directory and
    `**/` also matches none (fnmatch on the whole path got both wrong)."""
    tree = _tree(tmp_path)
    (tree / "src.py").write_text("VALUE = 2\n")  # tracked, outside every glob below
    (tree / "reports" / "keep.txt").write_text("rewritten by the step\n")
    before = tracked.snapshot(tree)
    (tree / "src.py").write_text("VALUE = 3\n")
    (tree / "reports" / "keep.txt").write_text("rewritten again\n")
    assert tracked.touched(before, tree, "*.txt") == ["reports/keep.txt", "src.py"]
    assert tracked.touched(before, tree, "**/*.py") == ["reports/keep.txt"]
    assert tracked.touched(before, tree, "**/keep.txt") == ["src.py"]


def test_a_directory_that_is_no_git_worktree_is_not_checked(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a")
    before = tracked.snapshot(tmp_path)
    assert before is None
    assert tracked.touched(before, tmp_path) == []
