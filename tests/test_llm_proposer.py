"""The llm proposer against a real chat-completions server on loopback, on a real git repo."""

from __future__ import annotations

import email.utils
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from chat_server import ChatServer, Reply

from patchheal.config import JobSpec
from patchheal.errors import BadInput, ProposerError, TransientProposerError
from patchheal.evidence.build import build_context
from patchheal.evidence.tokens import count_tokens
from patchheal.models import (
    AttemptRecord,
    Classification,
    Failure,
    FailureClass,
    Frame,
    Outcome,
)
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.config import LLMConfig
from patchheal.proposers.llm import SYSTEM_PROMPT, LLMProposer
from patchheal.proposers.registry import create_proposer

API_KEY = "sk-proj-" + "Zq81xVb02LmNcT55RwYu3KpE9fH7jD4s"
LOG_SECRET = "ghp_" + "Q9w8E7r6T5y4U3i2O1p0A9s8D7f6G5h4J3k2"
JOB_SECRET = "job-db-password-5c1e9a"

CALC = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"
TEST = (
    "from calc import mean\n\n\ndef test_mean_empty():\n    assert mean([]) == 0.0\n\n\n"
    "def test_mean():\n    assert mean([1, 3]) == 2.0\n"
)
SEARCH_REPLACE = """STRATEGY: add_guard
RATIONALE: mean() divides by zero on an empty list; return 0.0 for it

calc.py
<<<<<<< SEARCH
    total = sum(values)
=======
    if not values:
        return 0.0
    total = sum(values)
>>>>>>> REPLACE
"""
UNIFIED = """Strategy: fix_logic
Rationale: guard the division

```diff
--- a/calc.py
+++ b/calc.py
@@ -1,3 +1,3 @@
 def mean(values):
     total = sum(values)
-    return total / len(values)
+    return total / len(values) if values else 0.0
```
"""


@pytest.fixture
def repo(make_repo: Callable[[dict[str, str]], Path]) -> Path:
    return make_repo({"calc.py": CALC, "tests/test_calc.py": TEST})


@pytest.fixture
def job(repo: Path, monkeypatch: pytest.MonkeyPatch) -> JobSpec:
    monkeypatch.setenv("LLM_KEY", API_KEY)
    monkeypatch.setenv("DB_PASSWORD", JOB_SECRET)
    return JobSpec.model_validate(
        {
            "job": {"id": "ci-7", "repo": str(repo), "env": ["DB_PASSWORD"]},
            "steps": [{"name": "unit", "command": "python -m pytest -q tests/test_calc.py"}],
        }
    )


def _request(job: JobSpec, repo: Path) -> ProposalRequest:
    failure = Failure(
        fingerprint="a" * 64,
        error_type="ZeroDivisionError",
        message="division by zero",
        summary=(
            "tests/test_calc.py::test_mean_empty FAILED\n"
            f"E   ZeroDivisionError: division by zero (GITHUB_TOKEN={LOG_SECRET}, "
            f"db password {JOB_SECRET})"
        ),
        frames=(Frame(file="calc.py", function="mean", line=3),),
        failing_tests=("tests/test_calc.py::test_mean_empty",),
    )
    prior = [
        AttemptRecord(
            job_id="ci-7",
            step_index=1,
            attempt_number=1,
            fingerprint=failure.fingerprint,
            outcome=Outcome.NO_EFFECT,
            reason="test_mean_empty still raises ZeroDivisionError",
            diff_hash="d" * 64,
            touched_files=("calc.py",),
            strategy="fix_type",
        )
    ]
    context = build_context(
        job=job,
        step_index=1,
        failure=failure,
        classification=Classification(failure_class=FailureClass.CODE_BUG, retryable=True),
        worktree=repo,
        prior=prior,
        hints=[],
    )
    return ProposalRequest(context=context, worktree=repo, attempt_number=2)


def _proposer(job: JobSpec, url: str, waits: list[float], **extra: object) -> LLMProposer:
    config = LLMConfig(base_url=url, model="test-model", api_key_env="LLM_KEY", **extra)
    proposer = create_proposer(config, job=job, sleep=waits.append)
    assert isinstance(proposer, LLMProposer)
    return proposer


def test_search_replace_patch_fixes_the_failing_test(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    usage = {"prompt_tokens": 300, "completion_tokens": 21, "total_tokens": 321}
    with ChatServer([Reply(content=SEARCH_REPLACE, usage=usage)]) as server:
        candidate = _proposer(job, server.url, waits).propose(_request(job, repo))
    assert candidate.proposer == "llm:test-model"
    assert candidate.strategy == "add_guard"
    assert candidate.rationale.startswith("mean() divides by zero")
    assert candidate.tokens_used == 321
    assert "+    if not values:" in candidate.diff
    assert candidate.diff.startswith("diff --git a/calc.py b/calc.py")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_calc.py"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout
    assert waits == []


def test_request_carries_failure_and_avoid_list_and_no_secret(job: JobSpec, repo: Path) -> None:
    """Invariant: the model sees the failure and what not to repeat, never a secret."""
    with ChatServer([Reply(content=SEARCH_REPLACE)]) as server:
        _proposer(job, server.url, [], temperature=0.0, max_tokens=512).propose(_request(job, repo))
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["Authorization"] == f"Bearer {API_KEY}"
    assert sent.body["model"] == "test-model"
    assert sent.body["temperature"] == 0.0
    assert sent.body["max_tokens"] == 512
    assert sent.body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    user = sent.user_message
    assert "ZeroDivisionError: division by zero" in user
    assert "tests/test_calc.py::test_mean_empty" in user
    assert "| 1 | fix_type | calc.py |" in user  # the avoid-list
    assert "return total / len(values)" in user  # code around the frame
    for secret in (API_KEY, LOG_SECRET, JOB_SECRET):
        assert secret not in sent.text


def test_unified_diff_reply_is_applied_and_rediffed(job: JobSpec, repo: Path) -> None:
    with ChatServer([Reply(content=UNIFIED, usage={"total_tokens": 99})]) as server:
        candidate = _proposer(job, server.url, []).propose(_request(job, repo))
    assert candidate.strategy == "fix_logic"
    assert candidate.rationale == "guard the division"
    assert "+    return total / len(values) if values else 0.0" in candidate.diff
    assert "index " in candidate.diff  # git's own diff, not the model's text
    assert candidate.tokens_used == 99


def test_reply_without_edits_is_an_empty_candidate_with_estimated_tokens(
    job: JobSpec, repo: Path
) -> None:
    content = "STRATEGY: add_guard\nI would add a guard to mean()."
    with ChatServer([Reply(content=content)]) as server:  # no usage reported
        proposer = _proposer(job, server.url, [])
        candidate = proposer.propose(_request(job, repo))
    assert candidate.diff == ""
    assert candidate.rationale.startswith("no usable edit: no SEARCH/REPLACE block")
    expected = count_tokens(SYSTEM_PROMPT + proposer.last_prompt) + count_tokens(content)
    assert candidate.tokens_used == expected > 100
    assert proposer.tokens_used == expected


def test_patch_that_does_not_apply_leaves_the_worktree_clean(job: JobSpec, repo: Path) -> None:
    bad = (
        "STRATEGY: add_guard\ncalc.py\n"
        "<<<<<<< SEARCH\nnothing like this\n=======\nx\n>>>>>>> REPLACE\n"
    )
    with ChatServer([Reply(content=bad)]) as server:
        candidate = _proposer(job, server.url, []).propose(_request(job, repo))
    assert candidate.diff == ""
    assert "SEARCH text not found in calc.py" in candidate.rationale
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    assert status.stdout == b""


def test_malformed_envelope_stops_without_retry(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    malformed = pytest.raises(ProposerError, match="malformed chat-completions reply")
    with ChatServer([Reply(body=b"<html>gateway says hi</html>")]) as server, malformed as info:
        _proposer(job, server.url, waits).propose(_request(job, repo))
    assert not isinstance(info.value, TransientProposerError)
    assert len(server.requests) == 1
    assert waits == []


def test_429_then_success_backs_off_with_jitter(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    with ChatServer([Reply(status=429), Reply(content=SEARCH_REPLACE)]) as server:
        candidate = _proposer(job, server.url, waits).propose(_request(job, repo))
    assert len(server.requests) == 2
    assert len(waits) == 1
    assert 0.4 <= waits[0] <= 0.6  # 0.5 s base ±20 %
    assert candidate.diff


def test_429_retry_after_header_is_honoured(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    script = [Reply(status=429, headers={"Retry-After": "7"}), Reply(content=SEARCH_REPLACE)]
    with ChatServer(script) as server:
        _proposer(job, server.url, waits).propose(_request(job, repo))
    assert waits == [7.0]


def test_429_retry_after_as_an_http_date_is_honoured(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    when = email.utils.formatdate(time.time() + 20, usegmt=True)  # whole seconds
    script = [Reply(status=429, headers={"Retry-After": when}), Reply(content=SEARCH_REPLACE)]
    with ChatServer(script) as server:
        _proposer(job, server.url, waits).propose(_request(job, repo))
    assert len(waits) == 1
    assert 17.0 <= waits[0] <= 20.0  # not the 0.5 s back-off


def test_500_three_times_gives_up_after_three_tries(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    gives_up = pytest.raises(TransientProposerError, match="answered HTTP 500")
    with ChatServer([Reply(status=500)] * 3 + [Reply(content=SEARCH_REPLACE)]) as server, gives_up:
        _proposer(job, server.url, waits).propose(_request(job, repo))
    assert len(server.requests) == 3
    assert len(waits) == 2
    assert 0.4 <= waits[0] <= 0.6
    assert 0.8 <= waits[1] <= 1.2  # ×2


def test_401_is_not_retried_and_names_provider_model_and_status(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    with (
        ChatServer(
            [Reply(status=401, body=f'{{"error": "bad key {API_KEY}"}}'.encode())]
        ) as server,
        pytest.raises(ProposerError) as info,
    ):
        _proposer(job, server.url, waits).propose(_request(job, repo))
    message = str(info.value)
    assert not isinstance(info.value, TransientProposerError)
    assert server.url in message
    assert "model test-model" in message
    assert "HTTP 401" in message
    assert API_KEY not in message  # even when the provider echoes it
    assert len(server.requests) == 1
    assert waits == []


def test_connection_refused_is_transient(job: JobSpec, repo: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    waits: list[float] = []
    with pytest.raises(TransientProposerError, match="connection failed"):
        _proposer(job, f"http://127.0.0.1:{port}/v1", waits).propose(_request(job, repo))
    assert len(waits) == 2


def test_slow_provider_times_out_then_succeeds(job: JobSpec, repo: Path) -> None:
    waits: list[float] = []
    script = [Reply(content=SEARCH_REPLACE, delay=1.5), Reply(content=SEARCH_REPLACE)]
    with ChatServer(script) as server:
        candidate = _proposer(job, server.url, waits, timeout_seconds=0.3).propose(
            _request(job, repo)
        )
    assert len(waits) == 1
    assert candidate.diff


def test_missing_api_key_variable_is_a_clear_error(
    job: JobSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input (exit 2), not a failed heal (exit 1): the spec names a key that is not set."""
    monkeypatch.delenv("LLM_KEY")
    with pytest.raises(BadInput, match="environment variable LLM_KEY is not set"):
        _proposer(job, "http://127.0.0.1:9/v1", [])


def test_a_base_url_without_scheme_is_a_spec_error(tmp_path: Path) -> None:
    from patchheal.config import build_spec
    from patchheal.errors import SpecError

    data = {
        "job": {"id": "x"},
        "steps": [{"name": "s", "command": "true"}],
        "proposer": {"kind": "llm", "base_url": "127.0.0.1:8000/v1", "model": "m"},
    }
    with pytest.raises(SpecError, match=r"proposer\.llm\.base_url: .*must start with http://"):
        build_spec(data, source="job.toml", base_dir=tmp_path)
