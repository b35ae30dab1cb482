"""Issue 25, L5: a candidate cannot pose as the environment.

A verification run whose output reads like a broken environment (`sh: 1: curl:
not found`, exit 127) is not judged (`harness_error`, claim released) only when
the step's start commit, run again without the patch, fails so too. A candidate
that prints those words, or exits 127, over its own failure is judged: its
failure is its own (`no_effect`), its claim kept. (The legitimate counterpart,
an environment that really broke after the reproduction, is
`test_environment_verdict.py`'s test of a tool that vanishes: still not judged.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.memory.store import AttemptStore
from tests.healjobs import BUGGY, diff_for, make_calc_repo, state_args, write_spec

# The candidate's add() says the environment failed, and still subtracts.
POSES = {
    "prints a missing tool": BUGGY.replace(
        "    return a - b", "    print('sh: 1: curl: not found')\n    return a - b"
    ),
    "prints that pytest is missing": BUGGY.replace(
        "    return a - b", "    print(\"No module named 'pytest'\")\n    return a - b"
    ),
}


@pytest.mark.parametrize("pose", sorted(POSES))
def test_a_candidate_that_prints_an_environment_failure_is_judged(
    tmp_path: Path, pose: str
) -> None:
    """Invariant: an environment verdict needs the environment to fail without the patch."""
    repo = make_calc_repo(tmp_path)
    diff = diff_for(repo, {"calc.py": POSES[pose]})
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[diff], budget="max_attempts = 1")
    argv = [sys.executable, "-m", "patchheal", "heal", str(spec), *state_args(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        [attempt] = store.attempts(job_id="calc")
        assert attempt.outcome.value == "no_effect", attempt.reason
        assert "the candidate's own failure" in attempt.reason
        assert store.is_claimed(attempt.fingerprint, attempt.normalized_diff_hash)
