"""Outcome tracking: what real CI said of a verified patch changes what memory does next.

Real heal runs (local harness, scripted proposer), a real SQLite store, the real
CLI in a subprocess, and a real pull-request command that prints a URL.
"""

from __future__ import annotations

import json
from pathlib import Path

from patchheal.memory.store import AttemptStore
from tests.healjobs import FIX, diff_for, heal_in_process, make_calc_repo, write_spec
from tests.healjobs import patchheal_cli as cli

# Another right fix, so the proposer has something memory did not already verify.
OTHER_FIX = FIX.replace("return a + b", "return b + a")
CI_LOG = """\
============================= test session starts ==============================
tests/test_calc.py F                                                     [100%]
___________________________________ test_mul ___________________________________
    def test_mul():
>       assert mul(2, 3) == 6
E       AssertionError: assert 5 == 6
tests/test_calc.py:9: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_mul - AssertionError: assert 5 == 6
"""


def _first_proposer(tmp_path: Path, job_id: str) -> list[str]:
    store = AttemptStore(str(tmp_path / "store.sqlite3"))
    try:
        return [a.proposer for a in store.attempts(job_id=job_id)]
    finally:
        store.close()


def _heal(tmp_path: Path, repo: Path, job_id: str) -> str:
    spec = write_spec(
        tmp_path / f"{job_id}.toml",
        repo,
        job_id=job_id,
        diffs=[diff_for(repo, {"calc.py": OTHER_FIX})],
    )
    return str(heal_in_process(tmp_path, spec).report.status)


def test_a_fix_that_failed_in_real_ci_is_not_reused_first(tmp_path: Path) -> None:
    """Invariant: after `patchheal outcome JOB --status fail`, the next job with the same
    fingerprint does not start with that fix; after `--status pass` it does."""
    repo = make_calc_repo(tmp_path)
    first = write_spec(
        tmp_path / "a.toml", repo, job_id="a", diffs=[diff_for(repo, {"calc.py": FIX})]
    )
    assert heal_in_process(tmp_path, first).report.status == "fixed"
    db = ["--db", str(tmp_path / "store.sqlite3")]

    passed = cli("outcome", "a", "--status", "pass", "--json", *db)
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["recorded"][0]["outcome"] == "fixed"
    assert _heal(tmp_path, repo, "b") == "fixed"
    assert _first_proposer(tmp_path, "b") == ["memory"]  # green in CI: reused first

    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    failed = cli("outcome", "a", "--status", "fail", "--log", str(log), "--json", *db)
    assert failed.returncode == 0, failed.stderr
    [row] = json.loads(failed.stdout)["recorded"]
    assert row["outcome"] == "regression"  # a new failure (test_mul), not the one fixed
    assert _heal(tmp_path, repo, "c") == "fixed"
    assert _first_proposer(tmp_path, "c") == ["scripted"]  # the proposer went first


def test_outcome_bad_input_is_exit_2(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "store.sqlite3")]
    unknown = cli("outcome", "nope", "--status", "pass", *db)
    assert unknown.returncode == 2
    assert "no verified patch" in unknown.stderr
    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    mixed = cli("outcome", "nope", "--status", "pass", "--log", str(log), *db)
    assert mixed.returncode == 2
    assert "--log goes with --status fail" in mixed.stderr
