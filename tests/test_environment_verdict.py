"""Memory is never poisoned by the environment (issue 16).

A candidate verified while the environment is broken (a tool missing, the
project not importable) was never judged: it must not be remembered as a
failed candidate for the fingerprint, or the correct fix is `rejected_repeat`
for good once the environment is fixed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchheal.memory.store import AttemptStore
from patchheal.models import CommandResult
from patchheal.verdict.environment import environmental
from tests.healjobs import FIX, make_calc_repo, state_args, toml_str, wait_for, write_spec


def ran(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> CommandResult:
    """A real command's result, as a harness would capture it."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return CommandResult(
        command=" ".join(argv), exit_code=done.returncode, output=done.stdout + done.stderr,
        duration_seconds=0.0,
    )  # fmt: skip


def test_environmental_failures_are_told_from_the_patchs(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    bare = {"PATH": "/usr/bin:/bin"}  # no venv: pytest is not there
    no_tool = ran(["sh", "-c", "pytest-that-is-not-installed -q"], repo, bare)
    assert environmental(no_tool, repo).startswith("exit code 127")
    # The project's own module is in the worktree but not on the path: outside `repo`.
    outside = ran([sys.executable, "-c", "import calc"], tmp_path)
    assert "project's own module 'calc'" in environmental(outside, repo)
    # A module the worktree does not have is the code's problem (a bad import) ...
    gone = ran([sys.executable, "-c", "import calc_impl"], repo)
    assert environmental(gone, repo) == ""
    # ... and so are a missing dependency and a plain test failure.
    dep = ran([sys.executable, "-c", "import surely_not_installed_dep"], repo)
    assert environmental(dep, repo) == ""
    failing = ran([sys.executable, "-m", "pytest", "-q", "tests/test_calc.py"], repo)
    assert failing.exit_code == 1
    assert environmental(failing, repo) == ""


# An agent that waits on a gate file, then writes the right fix; it logs each call.
AGENT = textwrap.dedent("""\
    import pathlib, sys, time
    log, gate, fix = map(pathlib.Path, sys.argv[1:4])
    call = len(log.read_text().splitlines()) + 1 if log.exists() else 1
    with log.open("a") as handle:
        handle.write(f"{call}\\n")
    deadline = time.time() + 120
    while not (gate / f"go-{call}").exists() and time.time() < deadline:
        time.sleep(0.02)
    pathlib.Path("calc.py").write_text(fix.read_text())
    print("STRATEGY: fix_logic")
""")


@pytest.mark.slow
def test_a_fix_verified_under_a_broken_environment_is_verified_again_once_it_is_fixed(
    tmp_path: Path,
) -> None:
    """README-style job (bare `pytest` from PATH). The tool vanishes between the
    reproduction and the verification; the candidate is not remembered as tried, and the
    next run, with the tool back, verifies the same candidate."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "pytest"
    tool.write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest "$@"\n')
    tool.chmod(0o755)
    repo = make_calc_repo(tmp_path)
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "fixed.py").write_text(FIX)
    gate, log = tmp_path / "gate", tmp_path / "calls.log"
    gate.mkdir()
    agent = f"{sys.executable} {tmp_path / 'agent.py'} {log} {gate} {tmp_path / 'fixed.py'}"
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        job_id="readme",
        steps=[("unit", "pytest -q tests/test_calc.py::test_add")],
        proposer=f"[proposer]\nkind = 'agent'\ncommand = {toml_str(agent)}",
        budget="max_attempts = 1",
    )
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin"}
    argv = [sys.executable, "-m", "patchheal", "heal", str(spec), *state_args(tmp_path)]

    def heal() -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    first = heal()
    wait_for(lambda: log.exists(), timeout=120, what="the agent's first call")
    tool.unlink()  # the environment breaks after the failure was reproduced
    (gate / "go-1").touch()
    _, err = first.communicate(timeout=180)
    assert first.returncode == 1, err
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        [broken] = store.attempts(job_id="readme")
        assert broken.outcome.value == "harness_error", broken.reason
        assert "not judged: the environment failed" in broken.reason
        assert not store.is_claimed(broken.fingerprint, broken.normalized_diff_hash)

    tool.write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest "$@"\n')  # fixed again
    tool.chmod(0o755)
    (gate / "go-2").touch()
    second = heal()
    _, err = second.communicate(timeout=180)
    assert second.returncode == 0, err
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        _, fixed = store.attempts(job_id="readme")
    assert (fixed.outcome.value, fixed.proposer) == ("fixed", "agent")
    assert fixed.fingerprint == broken.fingerprint  # the same failure, the same candidate
    assert fixed.normalized_diff_hash == broken.normalized_diff_hash
