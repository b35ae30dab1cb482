"""Classification: the corpus table, each evidence rule, flaky verdicts and runbooks."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from patchheal.failure.analysis import analyze, analyze_file
from patchheal.failure.classify import classify, flaky, runbook
from patchheal.models import PATCHABLE_CLASSES, Classification, FailureClass

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))
from corpus_index import manifest, pass_counts, runs


def _classify_run(run) -> Classification:  # type: ignore[no-untyped-def]
    failure = analyze_file(run.log, junit_path=run.junit)
    if run.expected_class == "flaky":
        passes, total = pass_counts(run.bug)
        return flaky(failure, passes=passes, runs=total)
    return classify(failure, run.log.read_text(), exit_code=run.exit_code, timed_out=run.timed_out)


def test_classification_table_is_100_percent_on_the_corpus() -> None:
    rows = []
    for run in runs():
        got = _classify_run(run)
        rows.append(
            (
                run.log.relative_to(run.log.parents[1]).as_posix(),
                run.expected_class,
                got.failure_class.value,
                got.evidence[:2],
            )
        )
    wrong = [row for row in rows if row[1] != row[2]]
    table = "\n".join(
        f"{'ok ' if e == g else 'BAD'} {log:40} expected {e:17} got {g:17} {ev}"
        for log, e, g, ev in rows
    )
    assert not wrong, f"{len(wrong)}/{len(rows)} misclassified:\n{table}"
    assert len({row[0].split("/")[0] for row in rows}) == len(manifest())


def _one(line: str, **kwargs: object) -> Classification:
    return classify(analyze(line), line, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("log", "expected", "retryable"),
    [
        ("Error: container web was OOMKilled\n", "infra_issue", False),
        ("fatal error: runtime: out of memory\n", "infra_issue", False),
        ("OSError: [Errno 28] No space left on device\n", "infra_issue", False),
        ("curl: (6) Could not resolve host: registry.example.invalid\n", "infra_issue", True),
        ("getaddrinfo EAI_AGAIN registry.npmjs.example\n", "infra_issue", True),
        (
            "requests.exceptions.SSLError: certificate verify failed: self signed certificate\n",
            "infra_issue",
            True,
        ),
        (
            "requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: https://x/y\n",
            "infra_issue",
            True,
        ),
        ("ERROR: HTTP status code 429 from registry, Too Many Requests\n", "infra_issue", True),
        ("ConnectionResetError: [Errno 104] Connection reset by peer\n", "infra_issue", True),
        ("httpx.ReadTimeout: The read operation timed out\n", "infra_issue", True),
        (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n",
            "infra_issue",
            True,
        ),
        (
            "HTTPError: 403 Client Error: Forbidden for url: https://api.example.invalid\n",
            "env_mismatch",
            False,
        ),
        (
            "botocore.exceptions.NoCredentialsError: Unable to locate credentials\n",
            "env_mismatch",
            False,
        ),
        ("Error: environment variable DATABASE_URL is not set\n", "env_mismatch", False),
        ("/bin/sh: 1: terraform: not found\n", "env_mismatch", False),
        (
            "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n",
            "dependency_issue",
            False,
        ),
        ("ERROR: No matching distribution found for numpy==9.9\n", "dependency_issue", False),
        (
            'psycopg2.errors.NotNullViolation: null value in column "id" violates not-null '
            "constraint\n",
            "data_issue",
            False,
        ),
        (
            "jsonschema.exceptions.ValidationError: 'x' is not of type 'integer'\n"
            "Failed validating 'type' in schema['properties']['id']\n",
            "data_issue",
            False,
        ),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'exports/daily.parquet'\n",
            "data_issue",
            False,
        ),
        (
            "Error: Unable to download artifact(s): Artifact not found for name: wheels\n",
            "data_issue",
            True,
        ),
        (
            "PermissionError: [Errno 13] Permission denied: '/var/lib/app/cache'\n",
            "env_mismatch",
            False,
        ),
    ],
)
def test_evidence_rules(log: str, expected: str, retryable: bool) -> None:
    got = _one(log)
    assert (got.failure_class.value, got.retryable) == (expected, retryable), got.evidence
    assert got.evidence, "every class carries the lines that decided it"
    # The class's runbook, unless the failure names what to add to the job (setup_advice.py).
    specific = got.next_actions != runbook(got.failure_class)
    assert not specific or "under [job]" in got.next_actions[0], got.next_actions


def test_harness_signals_decide_when_the_log_says_nothing() -> None:
    quiet = "step 3/7: building\n"
    assert _one(quiet, oom_killed=True).failure_class is FailureClass.INFRA_ISSUE
    assert _one(quiet, exit_code=137).failure_class is FailureClass.INFRA_ISSUE
    assert _one(quiet, exit_code=127).failure_class is FailureClass.ENV_MISMATCH
    timed = _one(quiet, timed_out="idle")
    assert timed.failure_class is FailureClass.INFRA_ISSUE
    assert "idle" in timed.evidence[0]
    assert _one(quiet).failure_class is FailureClass.UNKNOWN


def test_a_code_bug_is_not_overruled_by_noise_elsewhere_in_the_log() -> None:
    log = (
        "WARNING: Retrying after connection broken by 'Connection refused'\n"
        "Traceback (most recent call last):\n"
        '  File "/w/app/stats.py", line 2, in mean\n'
        "ZeroDivisionError: division by zero\n"
    )
    failure = analyze(log)
    assert failure.project_frames
    # The refused connection is in the tail, but the failure itself is a code bug...
    assert classify(failure, log).failure_class is FailureClass.CODE_BUG
    # ...while resource exhaustion anywhere near the end outweighs it.
    killed = log + "bash: line 1: 4242 Killed  python -m app\n"
    assert classify(analyze(killed), killed).failure_class is FailureClass.INFRA_ISSUE


# pytest's report of a test that consumed an infinite iterator under a data limit
# (`ulimit -d`, as the sandbox's `process_memory` sets): a real run's output.
_RUNAWAY_TEST = """\
F.                                                                       [100%]
=================================== FAILURES ===================================
_____________________________ test_infinite_input ______________________________

    def test_infinite_input():
>       assert take_all(itertools.count())[:3] == [0, 1, 2]

test_runaway.py:9:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

iterable = count(6818908)

    def take_all(iterable):
>       return list(iterable)
E       MemoryError

test_runaway.py:5: MemoryError
=========================== short test summary info ============================
FAILED test_runaway.py::test_infinite_input - MemoryError
1 failed, 1 passed in 0.96s
"""


def test_a_memory_error_a_named_test_raised_is_the_codes() -> None:
    """The runner survived and names the test: the test's own allocation ran out."""
    got = _one(_RUNAWAY_TEST, exit_code=1)
    assert got.failure_class is FailureClass.CODE_BUG
    assert got.retryable
    assert "test_runaway.py::test_infinite_input" in got.evidence[0]
    assert _one(_RUNAWAY_TEST).failure_class is FailureClass.CODE_BUG  # a CI log: no exit code


@pytest.mark.parametrize(
    ("log", "signals"),
    [
        (_RUNAWAY_TEST, {"exit_code": 137}),  # the runner was killed after all
        (_RUNAWAY_TEST, {"exit_code": 1, "oom_killed": True}),
        (_RUNAWAY_TEST + "bash: line 1: 4242 Killed  python -m pytest\n", {"exit_code": 1}),
        (  # no test named: a script, a build step
            "Traceback (most recent call last):\n"
            '  File "/w/etl/load.py", line 8, in main\n'
            "    rows = list(reader)\n"
            "MemoryError\n",
            {"exit_code": 1},
        ),
        ("ERROR: Could not install packages: MemoryError\n", {"exit_code": 1}),
    ],
)
def test_a_memory_error_without_a_surviving_named_test_stays_a_resource_problem(
    log: str, signals: dict[str, object]
) -> None:
    assert _one(log, **signals).failure_class is FailureClass.INFRA_ISSUE


# A test that failed with a broken chunked response (requests bd100472443d, pytest 6 on
# 3.9): pytest's long traceback lists urllib3's source, whose `except SocketTimeout`
# branch raises ReadTimeoutError('Read timed out.'); that branch never ran.
_SOURCE_MENTIONS_A_TIMEOUT = """\
F                                                                        [100%]
=================================== FAILURES ===================================
___________________ test_response_content_retains_error ___________________

    def test_response_content_retains_error():
        try:
>           content = r.content

tests/test_lowlevel.py:44:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
requests/models.py:836: in content
    raise self._error
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

    @contextmanager
    def _error_catcher(self):
        try:
            try:
                yield

            except SocketTimeout:
                # FIXME: Ideally we'd like to include the url in the ReadTimeoutError but
                raise ReadTimeoutError(self._pool, None, 'Read timed out.')

            except BaseSSLError as e:
                if 'read operation timed out' not in str(e):  # Defensive:
                    raise
                raise ReadTimeoutError(self._pool, None, 'Read timed out.')

            except (HTTPException, SocketError) as e:
>               raise ProtocolError('Connection broken: %r' % e, e)
E               urllib3.exceptions.ProtocolError: ('Connection broken: IncompleteRead(5 bytes \
read, 3 more expected)', IncompleteRead(5 bytes read, 3 more expected))

venv/lib/python3.9/site-packages/urllib3/response.py:380: ProtocolError
=========================== short test summary info ============================
FAILED tests/test_lowlevel.py::test_response_content_retains_error - urllib3....
1 failed in 5.75s
"""


def test_source_code_a_traceback_lists_is_not_evidence_of_what_happened() -> None:
    got = _one(_SOURCE_MENTIONS_A_TIMEOUT, exit_code=1)
    assert got.failure_class is FailureClass.CODE_BUG, got.evidence
    assert "ProtocolError" in got.evidence[0]
    # The same words as the failure's own message still count.
    timed_out = re.sub(
        r"(?m)^E .*\n.*\n",
        "E               urllib3.exceptions.ReadTimeoutError: HTTPConnectionPool(host='x', "
        "port=80): Read timed out.\n",
        _SOURCE_MENTIONS_A_TIMEOUT,
    )
    assert timed_out != _SOURCE_MENTIONS_A_TIMEOUT
    assert _one(timed_out, exit_code=1).failure_class is FailureClass.INFRA_ISSUE


def test_evidence_keeps_whole_function_names() -> None:
    """Regression: evidence lines ended `in mea` for `mean` (a character-set strip)."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/w/app/stats.py", line 2, in mean\n'
        "ZeroDivisionError: division by zero\n"
    )
    evidence = classify(analyze(log), log).evidence
    frames = [line for line in evidence if line.startswith("in-project frame")]
    assert frames
    assert frames[-1].endswith(" in mean")


def test_missing_module_in_project_or_not(make_repo) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo({"billing/__init__.py": "", "billing/core.py": "x = 1\n"})
    for name, expected in (
        ("billing.invoices", FailureClass.CODE_BUG),
        ("requests", FailureClass.DEPENDENCY_ISSUE),
    ):
        log = (
            "Traceback (most recent call last):\n"
            f'  File "{repo}/main.py", line 1, in <module>\n'
            f"ModuleNotFoundError: No module named '{name}'\n"
        )
        got = classify(analyze(log, repo_root=str(repo)), log, repo_root=str(repo))
        assert got.failure_class is expected, got.evidence
    assert _one("Error: Cannot find module './lib/cart'\n").failure_class is FailureClass.CODE_BUG


def test_flaky_verdict_has_pass_rate_and_is_never_patched() -> None:
    failure = analyze("FAILED tests/test_x.py::test_y - AssertionError: boom\n")
    verdict = flaky(failure, passes=3, runs=5)
    assert verdict.failure_class is FailureClass.FLAKY
    assert verdict.pass_rate == 0.6
    assert verdict.failure_class not in PATCHABLE_CLASSES
    assert "3 of 5" in verdict.evidence[0]
    never = flaky(failure, passes=0, runs=4)
    assert never.failure_class is not FailureClass.FLAKY
    assert never.pass_rate == 0.0
    with pytest.raises(ValueError, match="passes"):
        flaky(failure, passes=6, runs=5)


def test_every_class_has_a_runbook_with_commands() -> None:
    for failure_class in FailureClass:
        actions = runbook(failure_class)
        assert len(actions) >= 2
        assert any("`" in action for action in actions), failure_class


def test_a_missing_test_tool_is_the_environment_not_the_code(make_repo) -> None:  # type: ignore[no-untyped-def]
    """`python -m pytest` without pytest installed prints the name unquoted; it is never patched,
    while a module of the project itself that cannot be imported stays a code bug."""
    repo = make_repo({"billing/__init__.py": "", "billing/core.py": "x = 1\n"})
    for log, expected in (
        ("/usr/local/bin/python3: No module named pytest\n", FailureClass.ENV_MISMATCH),
        ("ModuleNotFoundError: No module named 'pytest_cov'\n", FailureClass.ENV_MISMATCH),
        ("/usr/bin/python3: No module named billing.cli\n", FailureClass.CODE_BUG),
        ("ModuleNotFoundError: No module named 'billing.invoices'\n", FailureClass.CODE_BUG),
    ):
        got = classify(analyze(log, repo_root=str(repo)), log, repo_root=str(repo))
        assert got.failure_class is expected, (log, got.evidence)
    tool = classify(analyze("python: No module named pytest\n"), "python: No module named pytest")
    assert tool.failure_class not in PATCHABLE_CLASSES
    assert not tool.retryable


def test_a_model_providers_rate_limit_is_infrastructure_not_a_code_bug() -> None:
    """An OpenAI 429 raised inside a failing test is transient infrastructure (retry, no patch);
    an ordinary assertion about the number 429 is still a code bug."""
    log = (
        "tests/test_summarize.py::test_summary FAILED\n"
        "Traceback (most recent call last):\n"
        '  File "/app/summarize.py", line 12, in summarize\n'
        "    return client.chat.completions.create(model=MODEL, messages=msgs)\n"
        "openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached "
        "for gpt-4o in organization org-abc on tokens per min (TPM)', 'type': 'tokens', "
        "'code': 'rate_limit_exceeded'}}\n"
    )
    got = classify(analyze(log), log)
    assert got.failure_class is FailureClass.INFRA_ISSUE, got.evidence
    assert got.retryable
    assert got.failure_class not in PATCHABLE_CLASSES
    plain = (
        "Traceback (most recent call last):\n"
        '  File "/app/codes.py", line 3, in status\n'
        "AssertionError: assert 428 == 429\n"
    )
    assert classify(analyze(plain), plain).failure_class is FailureClass.CODE_BUG
