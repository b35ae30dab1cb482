"""The agent proposer running real scripts as the agent, in a real git worktree."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from patchheal.config import JobSpec, PolicySpec
from patchheal.errors import StepTimeout
from patchheal.evidence.build import build_context
from patchheal.gates.policy import check_candidate
from patchheal.models import Classification, Failure, FailureClass, Frame
from patchheal.proposers.agent import AgentProposer
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.config import AgentConfig
from patchheal.proposers.registry import create_proposer

AGENT_KEY = "sk-ant-api03-" + "Hx7Qm2Lr9Vt4Ws8Yz1Ab3Cd5Ef6Gh0Ij"
OTHER_SECRET = "other-secret-token-93b1c0"
CALC = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"

EDITING_AGENT = """\
import json, os, pathlib, sys
context = pathlib.Path(sys.argv[1])
out = pathlib.Path(sys.argv[2])
out.write_text(json.dumps({
    "argv_context": str(context),
    "context": context.read_text(),
    "cwd": os.getcwd(),
    "env": dict(os.environ),
}))
(out.parent / "written-outside.txt").write_text("not part of the diff")
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace(
    "    total = sum(values)", "    if not values:\\n        return 0.0\\n    total = sum(values)"))
pathlib.Path("notes.md").write_text("new file from the agent\\n")
print("STRATEGY: add_guard")
print("RATIONALE: empty input made mean() divide by zero")
print("key in use:", os.environ.get("AGENT_API_KEY"))
"""


@pytest.fixture
def repo(make_repo: Callable[[dict[str, str]], Path]) -> Path:
    return make_repo({"calc.py": CALC, "tests/test_calc.py": "def test_x():\n    assert True\n"})


@pytest.fixture
def job(repo: Path) -> JobSpec:
    return JobSpec.model_validate(
        {
            "job": {"id": "ci-agent", "repo": str(repo)},
            "steps": [{"name": "unit", "command": "pytest -q"}],
        }
    )


def _request(job: JobSpec, repo: Path) -> ProposalRequest:
    failure = Failure(
        fingerprint="b" * 64,
        error_type="ZeroDivisionError",
        summary="E   ZeroDivisionError: division by zero",
        frames=(Frame(file="calc.py", function="mean", line=3),),
        failing_tests=("tests/test_calc.py::test_x",),
    )
    context = build_context(
        job=job,
        step_index=1,
        failure=failure,
        classification=Classification(failure_class=FailureClass.CODE_BUG, retryable=True),
        worktree=repo,
        prior=[],
        hints=[],
    )
    return ProposalRequest(context=context, worktree=repo, attempt_number=3)


def _agent(job: JobSpec, command: str, **extra: object) -> AgentProposer:
    proposer = create_proposer(AgentConfig(command=command, **extra), job=job)
    assert isinstance(proposer, AgentProposer)
    return proposer


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "agents" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_agent_edits_become_the_candidate_diff(
    job: JobSpec, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_API_KEY", AGENT_KEY)
    monkeypatch.setenv("OTHER_SECRET_TOKEN", OTHER_SECRET)
    script = _script(tmp_path, "edit.py", EDITING_AGENT)
    seen = tmp_path / "agents" / "seen.json"
    agent = _agent(job, f"{sys.executable} {script} {{context}} {seen}", env=("AGENT_API_KEY",))
    candidate = agent.propose(_request(job, repo))

    assert "+    if not values:" in candidate.diff
    assert "notes.md" in candidate.diff  # new files count
    assert "written-outside" not in candidate.diff
    assert candidate.strategy == "add_guard"
    assert candidate.rationale.startswith("empty input made mean() divide by zero; agent exited 0")
    assert candidate.proposer == "agent"
    # The agent's output is kept, scrubbed: its own API key never reaches the record.
    assert "key in use: [REDACTED]" in agent.last_output
    assert AGENT_KEY not in candidate.rationale + agent.last_output

    observed = json.loads(seen.read_text())
    context_file = Path(observed["argv_context"])
    assert observed["env"]["PATCHHEAL_CONTEXT_FILE"] == str(context_file)
    assert not context_file.is_relative_to(repo)  # written outside the worktree
    assert not context_file.exists()  # and removed afterwards
    assert "ZeroDivisionError: division by zero" in observed["context"]
    assert Path(observed["cwd"]) == repo
    env = observed["env"]
    assert env["PATCHHEAL_WORKTREE"] == str(repo)
    assert env["PATCHHEAL_JOB_ID"] == "ci-agent"
    assert env["PATCHHEAL_ATTEMPT"] == "3"
    assert env["AGENT_API_KEY"] == AGENT_KEY  # passed through by name
    assert OTHER_SECRET not in json.dumps(env)  # nothing else secret
    assert "GIT_AUTHOR_EMAIL" not in env


def test_agent_that_commits_still_yields_its_diff(job: JobSpec, repo: Path) -> None:
    command = (
        "sed -i 's/return total/return 0.0 if not values else total/' calc.py && "
        "git -c user.name=a -c user.email=a@example.invalid commit -qam agent && echo done"
    )
    candidate = _agent(job, command).propose(_request(job, repo))
    assert "+    return 0.0 if not values else total / len(values)" in candidate.diff
    assert candidate.strategy == "agent"


def test_agent_that_changes_nothing_gives_an_empty_candidate(job: JobSpec, repo: Path) -> None:
    agent = _agent(job, "echo 'cannot help'; exit 3")
    candidate = agent.propose(_request(job, repo))
    assert candidate.diff == ""
    assert candidate.rationale == "agent exited 3, no change made | output tail: cannot help"
    assert agent.last_exit_code == 3


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status  # a zombie waiting for init is dead


def test_silent_agent_hits_the_idle_timeout_and_its_group_is_killed(
    job: JobSpec, repo: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    # A child in the background plus the shell itself, both silent forever.
    command = f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; wait"
    agent = _agent(job, command, idle_timeout_seconds=1.0, timeout_seconds=60.0)
    started = time.monotonic()
    with pytest.raises(StepTimeout, match=r"idle timeout: idle \(no output\) limit of 1 s"):
        agent.propose(_request(job, repo))
    assert time.monotonic() - started < 10
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 2
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in recorded) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in recorded)


def test_chatty_agent_hits_the_wall_timeout(job: JobSpec, repo: Path) -> None:
    command = "while true; do echo tick; sleep 0.1; done"
    agent = _agent(job, command, idle_timeout_seconds=30.0, timeout_seconds=1.0)
    with pytest.raises(StepTimeout, match=r"wall timeout: wall-clock limit of 1 s") as info:
        agent.propose(_request(job, repo))
    assert "job ci-agent attempt 3" in str(info.value)
    assert "tick" in str(info.value)  # the output tail says what it was doing


def test_the_plain_script_agent_of_the_docs_works(job: JobSpec, repo: Path, tmp_path: Path) -> None:
    """The example in docs/proposers.md, run as written against a real context."""
    docs = (Path(__file__).parents[1] / "docs" / "proposers.md").read_text()
    section = docs.split("### A plain script", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    script = _script(tmp_path, "guard_division.py", code)
    candidate = _agent(job, f"{sys.executable} {script} {{context}}").propose(_request(job, repo))
    assert "+    return (total / len(values) if values else 0.0)" in candidate.diff
    assert candidate.strategy == "add_guard"
    assert candidate.rationale.startswith("guard division by an empty length (attempt 3)")


def test_agent_edit_to_a_protected_path_is_refused_by_the_policy_gate(
    job: JobSpec, repo: Path
) -> None:
    """Invariant: what an agent writes to CI config or tests reaches the gate and is refused."""

    command = (
        "mkdir -p .github/workflows && printf 'on: push\\n' > .github/workflows/ci.yml && "
        "sed -i 's/assert True/pass/' tests/test_calc.py && echo edited"
    )
    candidate = _agent(job, command).propose(_request(job, repo))
    assert "+++ b/.github/workflows/ci.yml" in candidate.diff
    assert "tests/test_calc.py" in candidate.diff
    decision = check_candidate(candidate.diff, PolicySpec())
    assert not decision.allowed
    assert decision.rule == "protected_path"
    reasons = "\n".join(decision.reasons)
    assert ".github/workflows/ci.yml is a protected path" in reasons
    assert "tests/test_calc.py" in reasons  # the weakened assertion is refused too
