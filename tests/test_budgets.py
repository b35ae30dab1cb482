"""Budgets and stuck signals of the loop, each driven to its stop on a real job."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

from chat_server import ChatServer, Reply

from patchheal.models import Outcome
from tests.healjobs import (
    FIX,
    WRONG,
    diff_for,
    events_of,
    fixer_calls,
    fixer_proposer,
    heal_in_process,
    make_calc_repo,
    make_multi_repo,
    multi_steps,
    patchheal_cli,
    state_args,
    step_module,
    toml_str,
    write_fixer,
    write_spec,
)

# Wrong fixes that differ from WRONG and from each other after normalization.
WRONG_2 = WRONG.replace("return b - a", "return a * b")
WRONG_3 = WRONG.replace("return b - a", "return a - b - 1")
# The same wrong fix as WRONG, spelled with other whitespace.
WRONG_WS = (
    WRONG.replace("return b - a", "return b - a   "),
    WRONG.replace("return b - a", "return  b  -  a"),
    WRONG.replace("return b - a", "return\tb - a"),
    WRONG.replace("return b - a", "return b -  a "),
)


def outcomes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [a.outcome.value for s in result.report.steps for a in s.attempts]


def test_max_attempts_spent_is_not_fixed_and_retryable_in_json_and_report(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": text}) for text in (WRONG, WRONG_2, FIX)],
        budget="max_attempts = 2",
    )
    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), "--json")
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "not_fixed"
    assert summary["retryable"] is True
    assert "attempt budget spent (2 verified" in summary["stop_reason"]
    assert [a["outcome"] for a in summary["attempts"]] == ["no_effect", "no_effect"]
    report = json.loads((tmp_path / "reports" / "calc" / "report.json").read_text())
    assert report["status"] == "not_fixed"
    assert report["retryable"] is True
    assert any("--resume" in action for action in report["next_actions"])
    [exhausted] = [e for e in events_of(tmp_path, "calc") if e["type"] == "self_heal.exhausted"]
    assert exhausted["failure_class"] == "code_bug"


def _one_step_job(tmp_path: Path, body: str, budget: str) -> Path:
    """A step script whose patched function runs `body` (to hang, to chatter)."""
    repo = make_multi_repo(tmp_path, 1)
    patched = step_module(1).replace("    return a - b  # bug\n", body)
    return write_spec(
        tmp_path / "job.toml",
        repo,
        job_id="one",
        steps=multi_steps(1),
        diffs=[diff_for(repo, {"bugs/b1.py": patched})],
        budget=budget,
    )


def test_step_over_its_wall_clock_is_a_counted_timeout(tmp_path: Path) -> None:
    """Output keeps coming, so only the wall-clock limit can stop it."""
    spec = _one_step_job(
        tmp_path,
        "    import time\n    while True:\n        print('working', flush=True)\n"
        "        time.sleep(0.05)\n",
        "max_attempts = 1\nstep_timeout_seconds = 1.5\nidle_timeout_seconds = 30",
    )
    result = heal_in_process(tmp_path, spec)
    [attempt] = result.report.steps[0].attempts
    assert attempt.outcome is Outcome.TIMEOUT
    assert attempt.reason == "wall timeout after 1.5 s"
    assert attempt.attempt_class == "transient_runtime"
    assert attempt.duration_seconds < 15
    # It spent the step's only attempt.
    assert result.report.status == "not_fixed"
    assert result.report.retryable is True
    assert "attempt budget spent (1 verified" in result.report.stop_reason


def test_step_with_no_output_is_a_counted_idle_timeout(tmp_path: Path) -> None:
    spec = _one_step_job(
        tmp_path,
        "    import time\n    time.sleep(60)\n",
        "max_attempts = 1\nstep_timeout_seconds = 30\nidle_timeout_seconds = 1",
    )
    result = heal_in_process(tmp_path, spec)
    [attempt] = result.report.steps[0].attempts
    assert attempt.outcome is Outcome.TIMEOUT
    assert attempt.reason == "idle timeout after 1 s"
    assert attempt.duration_seconds < 15
    assert "attempt budget spent (1 verified" in result.report.stop_reason
    assert result.report.retryable is True


def test_proposer_with_no_output_is_a_counted_idle_timeout(tmp_path: Path) -> None:
    """The agent waits on a gate that never opens, silently: its process group is killed."""
    repo = make_multi_repo(tmp_path, 1)
    gate = tmp_path / "gate"
    gate.mkdir()
    proposer = fixer_proposer(
        write_fixer(tmp_path), tmp_path / "calls.log", gate=gate, extra="idle_timeout_seconds = 1"
    )
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        job_id="one",
        steps=multi_steps(1),
        proposer=proposer,
        budget="max_attempts = 1",
    )
    started = time.monotonic()
    result = heal_in_process(tmp_path, spec)
    [attempt] = result.report.steps[0].attempts
    assert attempt.outcome is Outcome.TIMEOUT
    assert "idle timeout" in attempt.reason
    assert attempt.proposer == "agent"
    assert "attempt budget spent (1 verified" in result.report.stop_reason
    assert result.report.retryable is True
    assert time.monotonic() - started < 30
    assert len(fixer_calls(tmp_path / "calls.log")) == 1


def test_no_progress_hard_resets_then_stops_stuck(tmp_path: Path) -> None:
    """The proposer repeats one patch: after `no_progress_limit` repeats the worktree is
    recreated from the base and step 1's checkpoint replayed; more repeats end stuck."""
    repo = make_multi_repo(tmp_path, 2)
    fixer = write_fixer(tmp_path)
    log = tmp_path / "calls.log"
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        job_id="multi",
        steps=multi_steps(2),
        # Call 1 fixes step 1; every later call proposes the same wrong fix for step 2.
        proposer=fixer_proposer(fixer, log, default="same", fix_calls=(1,)),
        budget="no_progress_limit = 2\nmax_hard_resets = 1\nmax_attempts = 5",
    )
    result = heal_in_process(tmp_path, spec)
    assert result.report.status == "not_fixed"
    assert result.report.retryable is True
    assert "no progress in 2 attempts in a row and 1 hard reset(s) done" in (
        result.report.stop_reason
    )
    assert outcomes(result) == [
        "fixed",  # step 1
        "no_effect",
        "rejected_repeat",
        "rejected_repeat",  # -> hard reset
        "rejected_repeat",
        "rejected_repeat",  # -> stuck
    ]
    calls = fixer_calls(log)
    assert [c["target"] for c in calls] == ["b1.py"] + ["b2.py"] * 5
    # The proposer's worktree was recreated by the hard reset (and only then), and it
    # starts from step 1's replayed checkpoint (its target is still b2.py, b1 is fixed).
    assert [c["fresh_worktree"] for c in calls] == [True, False, False, False, True, False]
    events = events_of(tmp_path, "multi")
    [escalated] = [e for e in events if e["type"] == "self_heal.escalated"]
    assert escalated["step_index"] == 2
    assert escalated["data"]["to"] == "hard_reset"
    assert [e["step_index"] for e in events if e["type"] == "step.started"] == [1, 2, 2]


def test_no_progress_with_no_hard_reset_allowed_is_stuck_at_once(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": text}) for text in (WRONG, *WRONG_WS)],
        budget="no_progress_limit = 2\nmax_hard_resets = 0",
    )
    result = heal_in_process(tmp_path, spec)
    assert outcomes(result) == ["no_effect", "rejected_repeat", "rejected_repeat"]
    assert result.report.status == "not_fixed"
    assert result.report.retryable is True
    assert "no progress in 2 attempts in a row and 0 hard reset(s) done" in (
        result.report.stop_reason
    )
    assert not [e for e in events_of(tmp_path, "calc") if e["type"] == "self_heal.escalated"]


def test_job_wall_time_spent_hands_off(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": FIX})],
        budget="job_wall_seconds = 0.001",
    )
    result = heal_in_process(tmp_path, spec)
    assert result.report.status == "manual_handoff"
    assert "job wall time of 0.001 s is spent" in result.report.stop_reason
    assert outcomes(result) == []
    assert result.exit_code == 1


def test_proposer_call_budget_spent_hands_off(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": text}) for text in (WRONG, FIX)],
        budget="max_proposer_calls = 1",
    )
    result = heal_in_process(tmp_path, spec)
    assert outcomes(result) == ["no_effect"]
    assert result.report.status == "manual_handoff"
    assert "proposer budget of 1 calls is spent" in result.report.stop_reason
    md = result.report_paths["md"].read_text()
    assert "manual_handoff" in md


SWAP_REPLY = """STRATEGY: swap_operands
RATIONALE: the operands look reversed

calc.py
<<<<<<< SEARCH
    return a - b
=======
    return b - a
>>>>>>> REPLACE
"""


def _swap_reply(expression: str) -> str:
    return f"""STRATEGY: fix_logic
RATIONALE: try another expression
calc.py
<<<<<<< SEARCH
    return a - b
=======
    return {expression}
>>>>>>> REPLACE
"""


def _llm_spec(tmp_path: Path, repo: Path, url: str, budget: str) -> Path:
    return write_spec(
        tmp_path / "job.toml",
        repo,
        proposer="\n".join(
            [
                "[proposer]",
                'kind = "llm"',
                f'base_url = "{url}"',
                'model = "test-model"',
                "retry_attempts = 1",
                "max_tokens = 400",
            ]
        ),
        budget=budget,
    )


def test_model_token_budget_too_small_for_one_call_makes_no_call(tmp_path: Path) -> None:
    """A budget smaller than one prompt is spent before any call: nothing is sent."""
    repo = make_calc_repo(tmp_path)
    usage = {"prompt_tokens": 450, "completion_tokens": 50, "total_tokens": 500}
    with ChatServer([Reply(content=SWAP_REPLY, usage=usage)] * 3) as server:
        spec = _llm_spec(tmp_path, repo, server.url, "max_model_tokens = 100")
        result = heal_in_process(tmp_path, spec)
    assert server.requests == []
    assert result.report.status == "manual_handoff"
    assert "model token budget: 100 token(s) left" in result.report.stop_reason


def test_model_token_budget_is_reserved_before_each_call_and_never_overshot(
    tmp_path: Path,
) -> None:
    """Invariant: prompt + the reply's cap is reserved before a call, so the tokens a job
    spends never pass its budget (a budget checked only before a call ended 1,500 at 2,000)."""
    from patchheal.evidence.tokens import count_tokens
    from patchheal.proposers.llm import SYSTEM_PROMPT

    repo = make_calc_repo(tmp_path)
    replies = [
        Reply(content=_swap_reply(e))
        for e in ("b - a", "a - b - 0", "-(b - a) * 0", "a - b + 0", "(a - b) * 1")
    ]
    with ChatServer(replies) as server:
        budget = "max_model_tokens = 1500\nmax_attempts = 10"
        result = heal_in_process(tmp_path, _llm_spec(tmp_path, repo, server.url, budget))
    # With no usage in the replies, the proposer counts prompt + reply itself.
    spent = [
        count_tokens(SYSTEM_PROMPT + r.user_message) + count_tokens(reply.content)
        for r, reply in zip(server.requests, replies, strict=False)
    ]
    assert len(spent) >= 1
    assert sum(spent) <= 1500, spent
    caps = [r.body["max_tokens"] for r in server.requests]
    assert all(cap <= 400 for cap in caps)
    assert result.report.status == "manual_handoff"
    assert "model token budget" in result.report.stop_reason


def test_proposer_chain_switches_after_failures(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    cheap = [diff_for(repo, {"calc.py": text}) for text in (WRONG, WRONG_2, WRONG_3)]
    strong = [diff_for(repo, {"calc.py": FIX})]
    chain = "\n".join(
        [
            "[[proposers]]",
            'kind = "scripted"',
            'strategy = "cheap"',
            "diffs = [" + ", ".join(toml_str(d) for d in cheap) + "]",
            "",
            "[[proposers]]",
            'kind = "scripted"',
            'strategy = "strong"',
            "after_failures = 2",
            "diffs = [" + ", ".join(toml_str(d) for d in strong) + "]",
        ]
    )
    spec = write_spec(tmp_path / "job.toml", repo, proposer=chain, budget="max_attempts = 3")
    result = heal_in_process(tmp_path, spec)
    attempts = result.report.steps[0].attempts
    assert [(a.strategy, a.outcome.value) for a in attempts] == [
        ("cheap", "no_effect"),
        ("cheap", "no_effect"),
        ("strong", "fixed"),
    ]
    assert result.exit_code == 0


def test_budget_precedence_defaults_pyproject_spec_flags(tmp_path: Path) -> None:
    """defaults < [tool.patchheal] in the job repo < the job spec < command-line flags."""
    pyproject = "\n".join(
        [
            "[tool.pytest.ini_options]",
            'pythonpath = ["."]',
            "",
            "[tool.patchheal.budget]",
            "max_attempts = 5",
            "no_progress_limit = 4",
            "max_hard_resets = 3",
            "idle_timeout_seconds = 77",
            "",
        ]
    )
    repo = make_calc_repo(tmp_path, files={"pyproject.toml": pyproject})
    spec = write_spec(
        tmp_path / "job.toml",
        repo,
        diffs=[diff_for(repo, {"calc.py": text}) for text in (WRONG, WRONG_2, FIX)],
        budget="max_attempts = 2\nmax_hard_resets = 2\nidle_timeout_seconds = 66",
    )
    printed = patchheal_cli("heal", str(spec), "--max-attempts", "1", "--idle-timeout", "55",
                            "--print-spec")  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    budget = tomllib.loads(printed.stdout)["budget"]
    assert budget["max_attempts"] == 1  # flag over spec over pyproject
    assert budget["idle_timeout_seconds"] == 55  # flag
    assert budget["max_hard_resets"] == 2  # spec over pyproject
    assert budget["no_progress_limit"] == 4  # pyproject over the default
    assert "step_timeout_seconds" not in budget  # the default (900)

    done = patchheal_cli("heal", str(spec), *state_args(tmp_path), "--json", "--max-attempts", "1")
    summary = json.loads(done.stdout)
    assert [a["outcome"] for a in summary["attempts"]] == ["no_effect"]
    assert "attempt budget spent (1 verified" in summary["stop_reason"]


def test_budget_flag_that_is_out_of_range_is_bad_input(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[])
    done = patchheal_cli("heal", str(spec), "--max-attempts", "0", "--print-spec")
    assert done.returncode == 2
    assert "budget.max_attempts" in done.stderr
    assert "Traceback" not in done.stderr
