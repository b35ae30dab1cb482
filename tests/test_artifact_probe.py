"""Issue 33 item 5, end to end on the bundled demo: a candidate that only adds an
unchecked-hash `.pyc` of the fixed module under `__pycache__/` (the containment probe's
patch, built the probe's way) is never `fixed`. By default the policy gate refuses it
before a run; with the job allowing it by path, the step still runs the source (the
harness reads bytecode only from a folder of the run's own), so the bug stays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchheal.commands.demo import materialize
from patchheal.memory.store import AttemptStore
from tests.artifact_patches import pycache_name, staged_binary_diff, unchecked_pyc
from tests.healjobs import state_args

STEP = "-m pytest -q -p no:cacheprovider tests/test_rules.py::test_bulk_discount_starts_at_ten"
ALLOW = '\n[policy]\nallow_artifacts = ["**/__pycache__/**"]\n'


def pyc_candidate(tmp_path: Path) -> tuple[Path, Path]:
    """The demo repository and a candidates folder holding the probe's .pyc patch."""
    repo, _ = materialize(tmp_path / "work")
    fixed = (repo / "pricing" / "rules.py").read_text().replace("quantity > 10", "quantity >= 10")
    pyc = unchecked_pyc(fixed, tmp_path / "build", "rules")
    diff = staged_binary_diff(repo, {pycache_name("pricing/rules"): pyc})
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    (candidates / "01-bytecode_fix.patch").write_text(diff)
    return repo, candidates


def heal(tmp_path: Path, repo: Path, candidates: Path, *, harness: str, extra: str = "") -> Any:
    python = sys.executable if harness == "local" else "python"
    spec = tmp_path / "job.toml"
    spec.write_text(
        f'[job]\nid = "pyc-probe"\nrepo = "{repo}"\nbase = "main"\nharness = "{harness}"\n\n'
        f"[[steps]]\nname = \"unit\"\ncommand = '''{python} {STEP}'''\n\n"
        f'[proposer]\nkind = "patchfiles"\ndir = "{candidates}"\n\n'
        "[budget]\nmax_attempts = 1\nflaky_reruns = 0\nverify_runs = 1\n" + extra
    )
    argv = [sys.executable, "-m", "patchheal", "heal", str(spec), *state_args(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        tried = list(store.attempts())
    branches = subprocess.run(
        ["git", "branch", "--list", "patchheal/*"], cwd=repo, capture_output=True, text=True
    ).stdout
    return done, tried, branches.strip()


def test_the_pyc_patch_is_refused_by_the_policy_before_any_run(tmp_path: Path) -> None:
    repo, candidates = pyc_candidate(tmp_path)
    done, tried, branches = heal(tmp_path, repo, candidates, harness="local")
    assert done.returncode == 1, done.stdout + done.stderr
    [attempt] = tried
    assert attempt.outcome.value == "rejected_policy", attempt.reason
    assert attempt.reason.startswith(
        f"artifact: {pycache_name('pricing/rules')} is a file under __pycache__/: "
    ), attempt.reason
    assert branches == ""


def test_an_allowed_pyc_is_not_run_by_the_local_harness(tmp_path: Path) -> None:
    repo, candidates = pyc_candidate(tmp_path)
    done, tried, branches = heal(tmp_path, repo, candidates, harness="local", extra=ALLOW)
    [attempt] = tried
    assert attempt.outcome.value not in ("fixed", "rejected_policy"), attempt.reason
    assert branches == "", done.stdout + done.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_an_allowed_pyc_is_not_run_in_the_docker_sandbox(
    tmp_path: Path, require_docker: None
) -> None:
    repo, candidates = pyc_candidate(tmp_path)
    done, tried, branches = heal(tmp_path, repo, candidates, harness="python", extra=ALLOW)
    [attempt] = tried
    assert attempt.outcome.value not in ("fixed", "rejected_policy"), attempt.reason
    assert branches == "", done.stdout + done.stderr
